"""End of input on a TF2 cluster is what it is on one machine.

``tests/fixtures/cluster_end_of_data.py`` iterates finite input to its end
every way a program does -- ``for`` over ``experimental_distribute_dataset``
and over ``distribute_datasets_from_function``, input of unknown
cardinality, ``next`` to ``StopIteration``, ``next`` inside a
``tf.function`` to ``OutOfRangeError``, one iterator read inside a
``tf.function`` and then eagerly, ``get_next_as_optional`` to an empty
Optional, Keras ``fit`` / ``evaluate`` / ``predict`` without ``steps`` --
each over two epochs with a partial last batch.  It runs once as the chief
of a loopback cluster (1 ps x 2 workers, under ``python -m compat_distribute
run``) and once natively: TensorFlow's own ``CentralStorageStrategy`` over
two logical CPUs of one machine (the same replicas and math; TensorFlow's
``MirroredStrategy`` trains the same weights but Keras reports its losses
differently).  Every shape must end as natively, after as many steps, with
the same losses and weights: the cluster runs the same ops on the same
values in the same order, only in other processes, so ``rtol=1e-5``.

One cluster and one native run serve every case (module fixture).
"""
import json
import os
import sys

import numpy as np
import pytest

from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import local_served
import support

pytestmark = [pytest.mark.cluster, pytest.mark.subprocess, pytest.mark.slow]

ROOT = str(support.ROOT)
PROGRAM = os.path.join(ROOT, "tests", "fixtures", "cluster_end_of_data.py")
ENV = {"PYTHONPATH": ROOT, "COMPAT_DISTRIBUTE_CLUSTER_WAIT": "60"}
TIMEOUT = 300
# Two epochs of ceil(92 / 16) = 6 steps.
STEPS = 12
LOOPS = ("for_distribute_dataset", "for_distribute_datasets_from_function",
         "for_unknown_cardinality", "next_to_stop_iteration",
         "next_in_tf_function", "tf_function_then_eager",
         "get_next_as_optional")


def _result(task_result):
  assert task_result.returncode == 0 and not task_result.timed_out, (
      f"{task_result.task}: exit {task_result.returncode} (timed out "
      f"{task_result.timed_out})\n{task_result.stdout[-2000:]}\n"
      f"{task_result.stderr[-5000:]}")
  for line in task_result.stdout.splitlines():
    if line.startswith("result: "):
      return json.loads(line[len("result: "):])
  raise AssertionError(f"no result in:\n{task_result.stdout[-2000:]}")


@pytest.fixture(scope="module")
def runs():
  """(cluster chief, its servers, native) results of the program."""
  with local_served.ServedCluster(2, 1, env=ENV) as cluster:
    chief = cluster.run_chief(PROGRAM, timeout=TIMEOUT)
    servers = cluster.wait_servers(timeout=30)
  logs = []
  try:
    process = local_cluster.start_process(
        [sys.executable, PROGRAM, "native"], {"TF_CONFIG": ""}, logs)
    process.task = "native"
    native = local_served.collect(process, TIMEOUT)
  finally:
    for log in logs:
      log.close()
  return chief, servers, native


def _case(runs, name):
  chief, _, native = runs
  ours, theirs = _result(chief)[name], _result(native)[name]
  assert "error" not in theirs, f"native TensorFlow failed: {theirs}"
  assert "error" not in ours, ours["error"]
  return ours, theirs


def _assert_close(ours, theirs):
  assert len(ours) == len(theirs)
  for a, b in zip(ours, theirs):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", LOOPS)
def test_loop_ends_as_natively(runs, name):
  ours, theirs = _case(runs, name)
  assert len(theirs["losses"]) == STEPS
  assert len(ours["losses"]) == STEPS
  _assert_close(ours["losses"], theirs["losses"])
  _assert_close(ours["weights"], theirs["weights"])


def test_keras_fit_evaluate_predict_without_steps(runs):
  ours, theirs = _case(runs, "keras")
  assert len(ours["losses"]) == 3  # two epochs' losses, evaluate's loss
  _assert_close(ours["losses"], theirs["losses"])
  assert np.asarray(ours["predict"]).shape == (92, 1)
  _assert_close(ours["predict"], theirs["predict"])
  _assert_close(ours["weights"], theirs["weights"])


def test_replicas_and_a_clean_end(runs):
  chief, servers, native = runs
  assert _result(chief)["replicas"] == _result(native)["replicas"] == 2
  # An end of input met on a remote worker left no error behind: nothing
  # TensorFlow reports later ("Exception ignored ... Executor.__del__") or
  # logs ("This should never happen").
  for text in ("Executor.__del__", "should never"):
    assert text not in chief.stderr, chief.stderr[-3000:]
  for task, result in servers.items():
    assert result.returncode == 0 and not result.timed_out, (
        f"{task}: exit {result.returncode}\n{result.stderr[-3000:]}")
    assert "the chief says its job is done" in result.stdout
