"""A TF1 script (eager execution disabled process-wide) trains the same model
under compat_distribute.v1 and native tf.compat.v1.distribute, in a
subprocess: the same losses, variables, end of input and re-initialisation.
A second run disables all of TF2's behaviour, where TensorFlow's distributed
datasets are its v1 classes: tf.compat.v1.data's iterator functions take
them, and the inputs sit on the same devices.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import support

pytestmark = [pytest.mark.parity, pytest.mark.subprocess]

SCRIPT = support.FIXTURES / "v1_session_script.py"
CASES = ["one_device:constant", "one_device:iterator", "one_device:input_fn",
         "central_storage/1:iterator", "central_storage/2:iterator",
         "central_storage/2:constant", "central_storage/4:input_fn"]
V1_BEHAVIOR_CASES = ["one_device:dataset", "one_device:dataset_fn",
                     "central_storage/1:dataset_fn",
                     "central_storage/2:dataset",
                     "central_storage/4:dataset_fn",
                     "central_storage/2:iterator",
                     # The TF1 tutorials' idiom: the step built from next().
                     "one_device:dataset+next",
                     "central_storage/2:dataset+next"]


def _flat(values):
  return np.concatenate([np.ravel(v) for v in values])


def _run_script(cases, v1_behavior):
  env = dict(os.environ, V1_BEHAVIOR="1" if v1_behavior else "0")
  done = subprocess.run([sys.executable, str(SCRIPT), *cases],
                        capture_output=True, text=True, timeout=600,
                        check=False, env=env)
  assert done.returncode == 0, done.stderr[-3000:]
  return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results():
  """Every case, run once in one subprocess."""
  return _run_script(CASES, v1_behavior=False)


@pytest.fixture(scope="module")
def v1_behavior_results():
  return _run_script(V1_BEHAVIOR_CASES, v1_behavior=True)


@pytest.mark.parametrize("case", CASES)
def test_tf1_script_matches_native(results, case):
  _assert_same_training(results, case)


@pytest.mark.parametrize("case", V1_BEHAVIOR_CASES)
def test_tf1_script_with_v1_behavior_matches_native(v1_behavior_results,
                                                     case):
  _assert_same_training(v1_behavior_results, case)
  ours, native = (v1_behavior_results[case]["ours"],
                  v1_behavior_results[case]["native"])
  n = 1 if case.startswith("one_device") else int(case.split(":")[0][-1])
  # Each replica's (x, y) pair, on the replica's device.
  assert len(ours["input_devices"]) == 2 * n
  assert ours["input_devices"] == native["input_devices"]
  if case.endswith("iterator"):
    return
  # A one-shot iterator needs no initializer, so a graph refuses it.
  assert ours["one_shot"] == native["one_shot"] == "ValueError"
  # Not fetched to the devices, every replica's input stays on the host.
  assert ours["host_input_devices"] == native["host_input_devices"] == (
      ["/replica:0/task:0/device:CPU:0"] * 2 * n)


def _assert_same_training(results, case):
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
