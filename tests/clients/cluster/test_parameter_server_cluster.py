"""ParameterServerStrategy (v1) on real TensorFlow servers, on loopback.

A module-scoped cluster (2 workers, 2 ps; each a ``tf.distribute.Server``
process on 127.0.0.1, ports picked free) runs the between-graph program in
fixtures/ps_train.py on every worker, under TensorFlow's strategy and under
ours.  Every subprocess wait has a timeout and every process started is
stopped in the fixture's teardown (LocalCluster.stop), also on failure.

Tolerance: the workers take turns through a counter on the ps (``--lockstep``),
so both runs apply the same updates in the same order on the same servers;
the only freedom left is inside one update (the ps applies a worker's
gradient with the same kernels either way), so values agree to float32
round-off (1e-6 relative).  Without lockstep the order of the two workers'
updates is a race and runs differ by more than any useful tolerance.
"""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from compat_distribute.cluster import addresses
from compat_distribute.cluster import local as local_cluster
import support

pytestmark = [pytest.mark.subprocess, pytest.mark.cluster]

SCRIPT = str(support.FIXTURES / "ps_train.py")
TIMEOUT = 90


@pytest.fixture(scope="module")
def cluster():
  with local_cluster.LocalCluster(num_workers=2, num_ps=2) as c:
    yield c


def run(cluster, impl, run_id, *args, timeout=TIMEOUT, env=None,
        launcher=()):
  return cluster.run_workers(
      SCRIPT, ["--impl", impl, "--run_id", run_id, *args], timeout=timeout,
      env=env, launcher=launcher)


def ok(results):
  for r in results:
    assert r.returncode == 0 and not r.timed_out, (
        f"{r.task} failed (exit {r.returncode}, timed out {r.timed_out}):\n"
        f"{r.stderr[-4000:]}")
  return [r.json() for r in results]


def strip(run_id, mapping):
  return {k.replace(run_id, "RUN"): v for k, v in mapping.items()}


@pytest.fixture(scope="module")
def trained(cluster, tmp_path_factory):
  """native and ours, 4 lockstep steps per worker, chief checkpoints."""
  out = {}
  ckpt = tmp_path_factory.mktemp("ckpt")
  for impl in ("native", "ours"):
    out[impl] = ok(run(cluster, impl, f"diff_{impl}", "--lockstep",
                       "--steps", "4", "--save", str(ckpt / impl / "model")))
  return out


def test_placement_matches_tensorflow(trained):
  for ours, native in zip(trained["ours"], trained["native"]):
    assert strip("diff_ours", ours["placement"]) == strip(
        "diff_native", native["placement"])
    assert strip("diff_ours", ours["slots"]) == strip("diff_native",
                                                      native["slots"])
    assert set(ours["placement"].values()) == {"/job:ps/task:0",
                                               "/job:ps/task:1"}


def test_task_view_matches_tensorflow(trained):
  for key in ("task_id", "num_replicas_in_sync", "is_chief",
              "should_checkpoint", "input_contexts", "device_filters"):
    assert [r[key] for r in trained["ours"]] == [r[key] for r in
                                                 trained["native"]], key
  assert [r["device_filters"] for r in trained["ours"]] == [
      ["/job:worker/task:0", "/job:ps"], ["/job:worker/task:1", "/job:ps"]]
  assert [r["input_contexts"] for r in trained["ours"]] == [[[2, 0]],
                                                            [[2, 1]]]


def test_trained_values_match_tensorflow(trained):
  for ours, native in zip(trained["ours"], trained["native"]):
    np.testing.assert_allclose(ours["losses"], native["losses"], rtol=1e-6)
    o = strip("diff_ours", ours["values"])
    n = strip("diff_native", native["values"])
    assert o.keys() == n.keys()
    for name in o:
      np.testing.assert_allclose(o[name], n[name], rtol=1e-6, atol=1e-7,
                                 err_msg=name)
  # Both workers read the same (final) values from the ps.
  assert trained["ours"][0]["values"] == trained["ours"][1]["values"]


def test_chief_checkpoint_restores_elsewhere(trained):
  chief, other = trained["ours"]
  assert chief["saved"] and not other["saved"]
  native_saved = trained["native"][0]["saved"]
  # Read back in this process (another task, no cluster): the chief saved
  # the values the workers ended with, under the same keys as TensorFlow's.
  ours_reader = tf.train.load_checkpoint(chief["saved"])
  native_reader = tf.train.load_checkpoint(native_saved)
  assert {k.replace("diff_ours", "RUN") for k in
          ours_reader.get_variable_to_shape_map()} == {
              k.replace("diff_native", "RUN") for k in
              native_reader.get_variable_to_shape_map()}
  for name, value in chief["values"].items():
    np.testing.assert_array_equal(ours_reader.get_tensor(name[:-2]), value)


def test_checkpoint_restores_into_a_fresh_cluster_program(cluster, trained):
  # Ours restores TensorFlow's checkpoint (and the reverse) on the workers,
  # then trains two more steps identically.
  native_saved = trained["native"][0]["saved"]
  ours_saved = trained["ours"][0]["saved"]
  after = {}
  for impl, saved, run_id in (("ours", native_saved, "diff_native"),
                              ("native", ours_saved, "diff_ours")):
    after[impl] = ok(run(cluster, impl, run_id, "--restore", saved,
                         "--steps", "0"))
  assert strip("diff_native", after["ours"][0]["values"]) == strip(
      "diff_native", trained["native"][0]["values"])
  assert after["native"][1]["values"] == trained["ours"][1]["values"]


@support.MORE  # the TF2 form: test_cluster_v2.py's task down at start
def test_ps_not_up_yet_is_waited_for_then_named():
  with local_cluster.LocalCluster(num_workers=1, num_ps=1,
                                  start_ps=False) as c:
    # Not up at all: a bounded wait, then an error naming the task.
    start = time.monotonic()
    (failed,) = c.run_workers(SCRIPT, ["--impl", "ours", "--steps", "1"],
                              timeout=TIMEOUT,
                              env={"COMPAT_DISTRIBUTE_CLUSTER_WAIT": "2"})
    assert failed.returncode != 0 and not failed.timed_out
    assert "TaskUnavailableError" in failed.stderr
    assert (f"/job:ps/task:0 at {c.cluster['ps'][0]}" in failed.stderr)
    assert time.monotonic() - start < 60
    # Up a moment after the worker starts: the worker waits and trains.
    processes = c.start_workers(SCRIPT, ["--impl", "ours", "--steps", "1"],
                                env={"COMPAT_DISTRIBUTE_CLUSTER_WAIT": "60"})
    time.sleep(1.0)
    c.start_server("ps", 0)
    (result,) = ok(c.collect(processes, timeout=TIMEOUT))
    assert len(result["losses"]) == 1


def test_runner_runs_an_unmodified_program_with_ours(cluster):
  # ps_train.py --impl native names TensorFlow's class; under
  # `python -m compat_distribute run` that name is ours.
  results = ok(run(cluster, "native", "runner", "--steps", "2",
                   "--lockstep", launcher=["-m", "compat_distribute", "run"]))
  assert {r["strategy_class"] for r in results} == {
      "compat_distribute.cluster.parameter_server.ParameterServerStrategyV1"}
  assert [len(r["losses"]) for r in results] == [2, 2]


def test_worker_killed_mid_training_is_reported_in_bounded_time(cluster):
  # The last test on the module's cluster: it kills worker 1's server.
  processes = cluster.start_workers(
      SCRIPT, ["--impl", "ours", "--run_id", "killed", "--lockstep",
               "--steps", "200", "--turn_timeout", "3", "--step_sleep",
               "0.02"])
  # Wait until training is under way, then kill worker 1 (its program and
  # its server).
  deadline = time.monotonic() + TIMEOUT
  while "step 3/" not in local_cluster.read_log(processes[0].err):
    assert time.monotonic() < deadline, "training never started"
    assert processes[0].poll() is None, local_cluster.read_log(
        processes[0].err)[-3000:]
    time.sleep(0.1)
  killed_at = time.monotonic()
  local_cluster.stop_process(processes[1], grace=0)
  cluster.kill_server("worker", 1)
  (survivor,) = cluster.collect(processes[:1], timeout=60)
  elapsed = time.monotonic() - killed_at
  assert not survivor.timed_out, "worker 0 hung"
  assert survivor.returncode != 0
  # Worker 0 stops waiting for worker 1's turn, and says whose.
  assert "worker 1 did not take its turn" in survivor.stderr
  assert elapsed < 45


@support.MORE  # the demo's v1 cluster; test_placement_matches_tensorflow
def test_demo_cluster_trains_both_and_stops_its_servers(tmp_path):
  out = tmp_path / "demo.json"
  result = subprocess.run(
      [sys.executable, "-m", "compat_distribute", "demo", "--cluster", "2x1",
       "--epochs", "1", "--samples", "256", "--batch_size", "32",
       "--json_out", str(out)],
      cwd=str(support.TESTS), capture_output=True, text=True,
      timeout=600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  assert result.returncode == 0, result.stderr[-4000:]
  stdout = result.stdout
  assert "epoch  loss ours   loss native" in stdout
  assert re.search(r"\[ours\] /job:worker/task:0 epoch 1 step \d+/4 loss "
                   r"\S+ \| /job:worker/task:1 epoch 1", stdout), stdout
  report = json.loads(out.read_text())
  assert report["cluster"] == [2, 1]
  assert report["ours"]["losses"] == report["native"]["losses"]
  # Every server it started is gone.
  spec = json.loads(re.search(r"cluster up: (\{.*\})", stdout).group(1)
                    .replace("'", '"'))
  for address in spec["worker"] + spec["ps"]:
    assert not addresses.accepts(address), address


def _demo_with_fake_workers(monkeypatch, programs):
  """The demo's ``run_cluster`` with no servers, its workers running the
  Python ``programs``; returns the worker processes it started."""
  from compat_distribute.demo import cluster as cluster_demo
  started = []

  def start_workers(self, script, args=(), env=None, launcher=()):
    for index, program in enumerate(programs):
      process = self._popen([sys.executable, "-c", program], {})
      process.task = f"/job:worker/task:{index}"
      self._clients.append(process)
      started.append(process)
    return started
  monkeypatch.setattr(local_cluster.LocalCluster, "start", lambda self: self)
  monkeypatch.setattr(local_cluster.LocalCluster, "start_workers",
                      start_workers)
  return cluster_demo, started


def test_demo_cluster_stops_at_the_first_failed_worker(monkeypatch):
  # Worker 1 fails at once; worker 0 would wait a minute for its turn.  The
  # demo stops worker 0 and reports worker 1's own error, not the stop.
  cluster_demo, started = _demo_with_fake_workers(monkeypatch, [
      "import time; time.sleep(60)",
      "import sys; sys.exit('worker 1: the chief did not initialise')"])
  with pytest.raises(RuntimeError) as raised:
    cluster_demo.run_cluster(2, 1, epochs=1, seed=0, batch_size=8,
                             samples=64)
  assert str(raised.value).startswith(
      "native TF: /job:worker/task:1 failed (exit 1):\n"
      "worker 1: the chief did not initialise"), raised.value
  assert [p.poll() is not None for p in started] == [True, True]


def test_demo_cluster_reports_workers_that_make_no_progress(monkeypatch):
  # Each stuck worker is asked for its stack before it is stopped.
  stuck = ("import faulthandler, signal, sys, time; "
           "faulthandler.register(signal.SIGUSR1); ")
  cluster_demo, started = _demo_with_fake_workers(monkeypatch, [
      stuck + "print('progress [1, 1, 4, 0.5]', file=sys.stderr); "
      "time.sleep(60)",
      stuck + "time.sleep(60)"])
  with pytest.raises(RuntimeError) as raised:
    cluster_demo.run_cluster(2, 1, epochs=1, seed=0, batch_size=8,
                             samples=64, stall_timeout=2)
  assert str(raised.value).startswith(
      "native TF: /job:worker/task:0 failed (no worker reported a step for "
      "2 s; stopped):\nprogress [1, 1, 4, 0.5]\n"), raised.value
  assert 'File "<string>", line 1 in <module>' in str(raised.value)
  assert [p.poll() is not None for p in started] == [True, True]


def test_demo_cluster_shape_is_checked():
  result = subprocess.run(
      [sys.executable, "-m", "compat_distribute", "demo", "--cluster", "2x0"],
      cwd=str(support.TESTS), capture_output=True, text=True,
      timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
  assert result.returncode == 2
  # No ps: the v1 cluster demo cannot run it; the message names the
  # MultiWorkerMirroredStrategy demo that can.
  assert ("--cluster 2x0 has no parameter servers: that is the "
          "MultiWorkerMirroredStrategy demo, --cluster Wx0 --api v2 "
          "--multi_worker") in result.stderr


def test_demo_names_the_ports_it_opens_before_starting_servers(
    monkeypatch, capsys):
  # TensorFlow's servers listen on every interface without authentication
  # (no supported version can bind one address): the demo says so first.
  from compat_distribute.demo import cluster as cluster_demo
  started = []

  def start(self):
    started.append(self.cluster)
    raise RuntimeError("no servers in this test")
  monkeypatch.setattr(local_cluster.LocalCluster, "start", start)
  with pytest.raises(RuntimeError, match="no servers in this test"):
    cluster_demo.run_cluster(2, 1, epochs=1, seed=0, batch_size=8,
                             samples=64)
  (cluster,) = started
  ports = [a.rsplit(":", 1)[1] for a in cluster["worker"] + cluster["ps"]]
  assert capsys.readouterr().out.splitlines() == [
      f"Opening TCP ports {', '.join(ports)} for 3 TensorFlow servers (gRPC, "
      "no authentication, listening on all interfaces); they close when the "
      "demo ends."]
