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

from v1_support import central_storage_available, input_available

SCRIPT = pathlib.Path(__file__).resolve().parent / "v1_session_script.py"
CASES = [("one_device", "constant"), ("one_device", "iterator"),
         ("one_device", "input_fn"), ("central_storage/1", "iterator"),
         ("central_storage/2", "iterator"), ("central_storage/2", "constant"),
         ("central_storage/4", "input_fn")]


def _flat(values):
  return np.concatenate([np.ravel(v) for v in values])


def _run(config, input_kind):
  done = subprocess.run(
      [sys.executable, str(SCRIPT), config, input_kind],
      capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("config,input_kind", CASES)
def test_tf1_script_matches_native(config, input_kind):
  if config != "one_device" and not central_storage_available():
    pytest.skip("v1 CentralStorageStrategy is not implemented yet")
  if input_kind != "constant" and not input_available():
    pytest.skip("compat_distribute.input has no v1 iterators yet")
  result = _run(config, input_kind)
  ours, native = result["ours"], result["native"]
  assert ours["type"].startswith("compat_distribute")
  assert native["type"].startswith("tensorflow")
  assert ours["losses"] == pytest.approx(native["losses"], rel=1e-6)
  np.testing.assert_allclose(_flat(ours["variables"]),
                             _flat(native["variables"]), rtol=1e-6)
  assert ours["ended"] == native["ended"]
  if input_kind != "constant":
    assert ours["ended"] and len(ours["losses"]) == 4  # 16 rows, batch 4
    assert ours["again"] == pytest.approx(native["again"], rel=1e-6)
