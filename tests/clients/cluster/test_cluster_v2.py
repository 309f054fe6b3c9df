"""The TF2 cluster form of CentralStorageStrategy on real TensorFlow servers.

The two programs of docs/cluster.md (a Keras ``fit`` program and a custom
loop) run as written: the chief under ``python -m compat_distribute run``
with its ``TF_CONFIG``, every worker and ps task under ``python -m
compat_distribute serve`` (loopback ports picked free; every wait bounded;
every process stopped at the end, also on failure).  The reference is
native TensorFlow (tests/support/native_cluster.py): the same program run by ``python`` alone on one machine,
its ``tf.distribute.experimental.CentralStorageStrategy`` TensorFlow's own,
given two logical CPUs as compute devices (two replicas, as on the
cluster).  Tolerance: the cluster runs the same ops on the same values in
the same order as the native two-replica run; only where the ops run
differs, so the weights agree to float32 round-off (``rtol=1e-5``).

Slow (each cluster is 4 TensorFlow processes): marked ``cluster``.
"""
import re
import time

import numpy as np
import pytest

from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import local_served
import support
from support import native_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.subprocess]

ROOT = str(support.ROOT)
TIMEOUT = 240
ENV = {"PYTHONPATH": ROOT, "COMPAT_DISTRIBUTE_CLUSTER_WAIT": "60"}


def doc_program(name):
  """The ```python block of docs/cluster.md whose first line is ``# name``."""
  return support.doc_program("cluster.md", name)


def write_programs(tmp_path, name):
  """The program as written, and its native two-replica reference."""
  program = doc_program(name)
  cluster_path = tmp_path / name
  cluster_path.write_text(program)
  local_path = tmp_path / f"local_{name}"
  local_path.write_text(native_cluster.native_source(program))
  return str(cluster_path), str(local_path)


def final_weights(result):
  assert result.returncode == 0 and not result.timed_out, (
      f"{result.task} failed (exit {result.returncode}, timed out "
      f"{result.timed_out}):\n{result.stdout[-2000:]}\n{result.stderr[-5000:]}")
  return native_cluster.final_weights(result.stdout, result.task)


def run_native(script, args):
  """``python script args`` alone: TensorFlow's own strategy."""
  return native_cluster.run_native(script, args, TIMEOUT)


def run_cluster(script, args, num_workers=2, num_ps=1):
  with local_served.ServedCluster(num_workers, num_ps, env=ENV) as cluster:
    chief = cluster.run_chief(script, args, timeout=TIMEOUT)
    servers = cluster.wait_servers(timeout=30)
  return chief, servers


def assert_servers_ended_told(servers):
  for task, result in servers.items():
    assert result.returncode == 0 and not result.timed_out, (
        f"{task}: exit {result.returncode}\n{result.stdout}\n"
        f"{result.stderr[-3000:]}")
    assert "the chief says its job is done" in result.stdout
    assert "answers anyone who reaches its port" in result.stdout


assert_same = native_cluster.assert_same


def test_custom_loop_matches_native_two_replicas(tmp_path):
  on_cluster, on_one_machine = write_programs(tmp_path, "train_loop.py")
  chief, servers = run_cluster(on_cluster, ["2"])
  reference = run_native(on_one_machine, ["2"])
  assert "epoch 1: loss" in chief.stdout
  assert_same(final_weights(chief), final_weights(reference))
  assert_servers_ended_told(servers)


def test_keras_fit_matches_native_two_replicas_and_restores_after_restart(
    tmp_path):
  on_cluster, on_one_machine = write_programs(tmp_path, "train_fit.py")
  model_dir = str(tmp_path / "model")
  chief, servers = run_cluster(on_cluster, [model_dir, "2"])
  assert "replicas: 2" in chief.stdout
  trained = final_weights(chief)
  assert_servers_ended_told(servers)
  reference = run_native(on_one_machine, [str(tmp_path / "local_model"), "2"])
  assert_same(trained, final_weights(reference))
  # The whole cluster started anew: the chief's checkpoint restores.
  restarted, servers = run_cluster(on_cluster, [model_dir, "0"])
  for a, b in zip(final_weights(restarted), trained):
    np.testing.assert_array_equal(a, b)
  assert_servers_ended_told(servers)


# The killed worker stays in the default run in test_cluster_failures.py.
@pytest.mark.parametrize("job,index,survivors", [
    pytest.param("worker", 1, ("/job:worker/task:0", "/job:ps/task:0"),
                 marks=support.MORE),
    pytest.param("ps", 0, ("/job:worker/task:0", "/job:worker/task:1"),
                 marks=support.MORE),
])
def test_killed_task_is_named_within_seconds(tmp_path, job, index,
                                             survivors):
  on_cluster, _ = write_programs(tmp_path, "train_loop.py")
  with local_served.ServedCluster(2, 1, env=ENV) as cluster:
    chief = cluster.start_chief(on_cluster, ["1000000"])
    deadline = time.monotonic() + TIMEOUT
    while "step 10:" not in local_cluster.read_log(chief.out):
      assert chief.poll() is None and time.monotonic() < deadline, (
          local_cluster.read_log(chief.err)[-3000:])
      time.sleep(0.1)
    cluster.kill_server(job, index)
    killed = time.monotonic()
    result = cluster.collect(chief, 60)
    took = time.monotonic() - killed
    others = cluster.wait_servers(timeout=30)
  assert result.returncode == 1 and not result.timed_out
  assert took < 20, took
  assert "UnavailableError" in result.stderr
  # Named by TensorFlow's error (its device name) or by ours (the task and
  # its address); which comes first depends on the run (TF 2.12 under load).
  assert re.search(rf"/job:{job}/(replica:0/)?task:{index}\b",
                   result.stderr), result.stderr[-3000:]
  for task in survivors:
    assert others[task].returncode == 0, others[task].stdout


def test_task_down_at_start_is_named_after_the_wait(tmp_path):
  on_cluster, _ = write_programs(tmp_path, "train_loop.py")
  cluster = local_served.ServedCluster(
      2, 1, env={**ENV, "COMPAT_DISTRIBUTE_CLUSTER_WAIT": "2"})
  try:
    cluster.start(skip=[("ps", 0), ("worker", 1)])
    start = time.monotonic()
    result = cluster.run_chief(on_cluster, ["5"], timeout=120)
    took = time.monotonic() - start
  finally:
    cluster.stop()
  assert result.returncode == 1 and not result.timed_out
  assert "TaskUnavailableError" in result.stderr
  for job, index in (("worker", 1), ("ps", 0)):
    assert (f"/job:{job}/task:{index} at {cluster.cluster[job][index]}"
            in result.stderr), result.stderr[-2000:]
  assert "/job:worker/task:0 at" not in result.stderr.split(
      "TaskUnavailableError")[-1]
  assert took < 60
