"""A TF1 script (eager execution disabled process-wide) trains the same model
under compat_distribute.v1 and native tf.compat.v1.distribute, in a
subprocess: the same losses, variables, end of input and re-initialisation.
"""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).resolve().parent / "v1_session_script.py"
CASES = ["one_device:constant", "one_device:iterator", "one_device:input_fn",
         "central_storage/1:iterator", "central_storage/2:iterator",
         "central_storage/2:constant", "central_storage/4:input_fn"]


def _flat(values):
  return np.concatenate([np.ravel(v) for v in values])


@pytest.fixture(scope="module")
def results():
  """Every case, run once in one subprocess."""
  done = subprocess.run([sys.executable, str(SCRIPT), *CASES],
                        capture_output=True, text=True, timeout=600,
                        check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", CASES)
def test_tf1_script_matches_native(results, case):
  ours, native = results[case]["ours"], results[case]["native"]
  assert ours["type"].startswith("compat_distribute")
  assert native["type"].startswith("tensorflow")
  assert ours["losses"] == pytest.approx(native["losses"], rel=1e-6)
  np.testing.assert_allclose(_flat(ours["variables"]),
                             _flat(native["variables"]), rtol=1e-6)
  assert ours["ended"] == native["ended"]
  if not case.endswith(":constant"):
    assert ours["ended"] and len(ours["losses"]) == 4  # 16 rows, batch 4
    assert ours["again"] == pytest.approx(native["again"], rel=1e-6)
  else:
    assert not ours["ended"] and len(ours["losses"]) == 5
