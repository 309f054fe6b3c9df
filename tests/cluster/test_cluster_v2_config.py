"""When CentralStorageStrategy uses a cluster, and ``serve``'s configuration.

Nothing here connects to a cluster: the rule (docs/cluster.md, "When
CentralStorageStrategy uses a cluster"), the errors for a malformed
``TF_CONFIG`` (one error with the value and the fix), and ``serve``'s
command line; one test runs ``serve`` processes to see them end by
themselves (no chief within the wait; SIGTERM).
"""
import json
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

import compat_distribute
from compat_distribute import __main__ as runner
from compat_distribute import v1
from compat_distribute import v2
from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import remote
from compat_distribute.cluster import serve
from compat_distribute.cluster import tasks

CLUSTER = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"],
           "ps": ["127.0.0.1:4"]}


def tf_config(task_type, index=0, cluster=None):
  return json.dumps({"cluster": CLUSTER if cluster is None else cluster,
                     "task": {"type": task_type, "index": index}})


@pytest.mark.parametrize("text", [
    None, "", tf_config("worker"), tf_config("ps"), tf_config("evaluator",
        cluster={**CLUSTER, "evaluator": ["127.0.0.1:5"]}),
    json.dumps({"cluster": {}, "task": {"type": "chief", "index": 0}}),
])
def test_tf_config_without_a_chief_task_keeps_this_machine(text):
  assert remote.from_environment(text) is None


def test_tf_config_naming_the_chief_gives_the_cluster():
  client = remote.from_environment(tf_config("chief"))
  assert (client.job, client.task) == ("chief", 0)
  assert client.served_tasks == [("worker", 0), ("worker", 1), ("ps", 0)]
  assert client.parameter_devices == ("/job:ps/replica:0/task:0/device:CPU:0",)
  assert repr(client) == "ClusterClient(task='/job:chief/task:0', workers=2, ps=1)"


@pytest.mark.parametrize("text,expected", [
    ("{not json", "TF_CONFIG is not valid JSON"),
    ("[1, 2]", "TF_CONFIG must be a JSON object"),
    (tf_config("chief", cluster={"chief": ["a:1"], "worker": ["b:1"]}),
     "lacks a 'worker' or a 'ps' job"),
    (tf_config("chief", cluster={"chief": ["a:1"], "ps": ["b:1"]}),
     "lacks a 'worker' or a 'ps' job"),
    (tf_config("chief", index=3), "names task index 3 of job 'chief'"),
])
def test_malformed_tf_config_for_a_chief_is_refused(monkeypatch, text,
                                                    expected):
  monkeypatch.setenv("TF_CONFIG", text)
  with pytest.raises(ValueError) as e:
    v2.experimental.CentralStorageStrategy()
  assert expected in str(e.value)
  assert isinstance(e.value, ValueError)


def test_v2_strategy_with_devices_or_a_worker_task_stays_local(monkeypatch):
  monkeypatch.setenv("TF_CONFIG", tf_config("chief"))
  # Devices given: this machine, TF_CONFIG not even read.
  strategy = v2.experimental.CentralStorageStrategy(["/cpu:0"])
  assert strategy.cluster_resolver is None
  assert strategy.extended.worker_devices == [
      "/job:localhost/replica:0/task:0/device:CPU:0"]
  monkeypatch.setenv("TF_CONFIG", tf_config("worker", 1))
  assert v2.experimental.CentralStorageStrategy().cluster_resolver is None


def test_v1_strategy_never_reads_tf_config(monkeypatch):
  monkeypatch.setenv("TF_CONFIG", "{not json")
  strategy = v1.experimental.CentralStorageStrategy()
  assert strategy.cluster_resolver is None
  assert type(strategy).__name__ == "CentralStorageStrategyV1"
  assert isinstance(strategy,
                    tf.compat.v1.distribute.experimental.CentralStorageStrategy)


def test_v2_strategy_in_a_tf1_graph_program_stays_local(monkeypatch):
  monkeypatch.setenv("TF_CONFIG", tf_config("chief"))
  with tf.Graph().as_default():
    strategy = v2.experimental.CentralStorageStrategy()
  assert strategy.cluster_resolver is None


def test_type_identity_of_the_cluster_aware_classes():
  strategy = v2.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
  assert type(strategy).__name__ == "CentralStorageStrategy"
  assert isinstance(strategy, tf.distribute.Strategy)
  assert isinstance(strategy, tf.distribute.experimental.CentralStorageStrategy)
  assert repr(strategy).startswith("CentralStorageStrategy(compute_devices=")


@pytest.mark.parametrize("resolver,error,expected", [
    ("chief", TypeError, "cluster_resolver must be a tf.distribute."),
    (tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": ["a:1"]})), ValueError,
     "lacks a 'worker' or a 'ps' job"),
    (tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(CLUSTER), task_type="worker", task_id=0),
     ValueError, "the worker and ps tasks run `python -m compat_distribute "
     "serve`"),
])
def test_bad_cluster_resolver_is_refused(resolver, error, expected):
  with pytest.raises(error) as e:
    v2.experimental.CentralStorageStrategy(cluster_resolver=resolver)
  assert expected in str(e.value)


def test_devices_and_a_resolver_together_are_refused():
  resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec(CLUSTER), task_type="chief", task_id=0)
  with pytest.raises(ValueError, match="either devices or a cluster_resolver"):
    v2.experimental.CentralStorageStrategy(["/cpu:0"],
                                           cluster_resolver=resolver)


def test_resolver_without_a_client_task_connects_as_localhost():
  resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec({"worker": ["a:1"], "ps": ["b:1"]}))
  client = remote.from_resolver(resolver)
  assert (client.job, client.task) == ("localhost", 0)
  assert client.resolver_or_new() is resolver


def test_missing_task_error_names_the_tasks_and_addresses():
  client = remote.from_environment(tf_config("chief"))
  start = time.monotonic()
  with pytest.raises(tasks.TaskUnavailableError) as e:
    remote.connect(client, timeout=0.3)
  assert time.monotonic() - start < 10
  message = str(e.value)
  assert isinstance(e.value, compat_distribute.Error)
  assert isinstance(e.value, TimeoutError)
  for job, index, address in (("worker", 0, "127.0.0.1:2"),
                              ("worker", 1, "127.0.0.1:3"),
                              ("ps", 0, "127.0.0.1:4")):
    assert f"/job:{job}/task:{index} at {address}" in message
  assert "python -m compat_distribute serve" in message
  assert remote.connected() is None


# -- serve ----------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    (None, "TF_CONFIG is not set"),
    ("{not json", "TF_CONFIG is not valid JSON"),
    (tf_config("worker", cluster={"worker": ["a:1"], "ps": ["b:1"]}),
     "cluster has no 'chief' job"),
    # Without ps: a MultiWorkerMirroredStrategy cluster, whose chief runs
    # the program.
    (tf_config("chief", cluster={"chief": ["a:1"], "worker": ["b:1"]}),
     "this task /job:chief/task:0, which runs the MultiWorkerMirroredStrategy"
     " program itself"),
    (tf_config("evaluator", cluster={"worker": ["b:1"], "evaluator": ["e:1"]}),
     "/job:evaluator/task:0, an evaluator, which takes no part"),
    (tf_config("chief"), "names this task 'chief', which serve does not run"),
    (tf_config("evaluator", cluster={**CLUSTER, "evaluator": ["e:1"]}),
     "names this task 'evaluator', which serve does not run"),
    (tf_config("worker", index=5), "names task index 5 of job 'worker'"),
])
def test_serve_refuses_a_malformed_tf_config_with_value_and_fix(
    monkeypatch, capsys, text, expected):
  if text is None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
  else:
    monkeypatch.setenv("TF_CONFIG", text)
  assert serve.main([]) == 2
  err = capsys.readouterr().err
  assert err.startswith("python -m compat_distribute serve: error: ")
  assert expected in err
  assert len(err.strip().splitlines()) == 1
  if text and "task index" not in expected:  # that one names the index
    assert text in err


@pytest.mark.parametrize("argv,expected", [
    (["--client-wait"], "--client-wait needs a number of seconds"),
    (["--client-wait", "soon"], "--client-wait must be a number of seconds "
     "above 0, got 'soon'"),
    (["--client-wait=0"], "above 0, got '0'"),
    (["--port", "1"], "unknown argument '--port'"),
])
def test_serve_command_line_errors(capsys, argv, expected):
  assert runner.main(["serve", *argv]) == 2
  err = capsys.readouterr().err
  assert err.startswith("usage: python -m compat_distribute serve")
  assert expected in err


def test_serve_help_says_who_can_reach_it(capsys):
  assert runner.main(["serve", "--help"]) == 0
  out = capsys.readouterr().out
  assert "answers anyone who can reach its port" in out
  assert "--client-wait SECONDS" in out
  assert "serve" in runner.USAGE


@pytest.mark.subprocess
@pytest.mark.cluster
def test_serve_ends_without_a_chief_and_on_sigterm():
  ports = local_cluster.free_ports(3)
  cluster = {"chief": [f"127.0.0.1:{ports[0]}"],
             "worker": [f"127.0.0.1:{ports[1]}"], "ps": [f"127.0.0.1:{ports[2]}"]}
  logs = []
  processes = []
  try:
    for task_type, wait in (("worker", "2"), ("ps", "300")):
      processes.append(local_cluster.start_process(
          [sys.executable, "-m", "compat_distribute", "serve",
           "--client-wait", wait],
          {"TF_CONFIG": local_cluster.tf_config(cluster, task_type, 0)}, logs))
    waiter, stopped = processes
    assert waiter.wait(timeout=120) == 3
    out = local_cluster.read_log(waiter.out)
    assert f"serving at {cluster['worker'][0]}" in out
    assert "no chief came" in out and "within 2 s" in out
    deadline = time.monotonic() + 60
    while f"serving at {cluster['ps'][0]}" not in local_cluster.read_log(
        stopped.out):
      assert time.monotonic() < deadline
      time.sleep(0.1)
    stopped.send_signal(signal.SIGTERM)
    assert stopped.wait(timeout=30) == 128 + signal.SIGTERM
    assert "stopped by signal" in local_cluster.read_log(stopped.out)
  finally:
    for process in processes:
      local_cluster.stop_process(process)
    for log in logs:
      log.close()


@pytest.mark.subprocess
def test_serve_usage_error_from_the_shell():
  result = subprocess.run(
      [sys.executable, "-m", "compat_distribute", "serve", "--bogus"],
      capture_output=True, text=True, timeout=60, check=False)
  assert result.returncode == 2
  assert "unknown argument '--bogus'" in result.stderr


def test_serve_connects_to_its_chief_at_most_once_a_second(monkeypatch,
                                                           tmp_path, capsys):
  monkeypatch.chdir(tmp_path)
  connections = []
  monkeypatch.setattr(serve.addresses, "accepts",
                      lambda address, timeout=0.5: connections.append(
                          time.monotonic()) and False)
  task = serve.check_serve_config(tf_config("worker", 1))
  start = time.monotonic()
  status = serve._watch(task, serve.ServeOptions(client_wait=3.5))
  took = time.monotonic() - start
  assert status == 3
  assert "no chief came to 127.0.0.1:1 within 3.5 s" in capsys.readouterr().out
  assert connections and all(c - start < took for c in connections)
  # One connection a second (at start, then each second), not 5 a second.
  assert len(connections) <= took + 1, (len(connections), took)
  gaps = [b - a for a, b in zip(connections, connections[1:])]
  assert gaps and min(gaps) >= serve.CHECK_SECONDS * 0.9, gaps


def test_telling_a_task_done_tries_again_while_its_channel_is_down(
    monkeypatch):
  # A channel the watchdog shut while the task was lost fails new ops with
  # UnavailableError until gRPC reconnects: the message is sent again until
  # the deadline, then the last error is raised (and logged by the caller).
  calls = []

  def tell_done(job, index, address):
    calls.append((job, index, address))
    if len(calls) < 3:
      raise tf.errors.UnavailableError(None, None, "channel down")

  monkeypatch.setattr(remote.folders, "tell_done", tell_done)
  monkeypatch.setattr(remote, "TELL_AGAIN_PAUSE", 0.01)
  remote._tell_until(time.monotonic() + 5, "worker", 1, "127.0.0.1:1")  # pylint: disable=protected-access
  assert calls == [("worker", 1, "127.0.0.1:1")] * 3
  calls.clear()
  with pytest.raises(tf.errors.UnavailableError):
    remote._tell_until(time.monotonic() + 0.005, "worker", 1, "127.0.0.1:1")  # pylint: disable=protected-access
  assert len(calls) == 1
