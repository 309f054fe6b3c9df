"""``MultiWorkerMirroredStrategy``'s cluster rules, in this process: which
task drives, which serve, what is refused (with the task and the fix), the
runner's decision, ``serve``'s task, ``install(multi_worker=True)``, and
the sync-on-read variables Keras 3's metrics use.  The strategy on real
clusters: tests/clients/cluster/test_multi_worker.py."""
import importlib
import json

import numpy as np
import pytest
import tensorflow as tf

import compat_distribute
from compat_distribute import v1
from compat_distribute import v2
from compat_distribute.cluster import multi_worker
from compat_distribute.cluster import multi_worker_config as config
from compat_distribute.runner import multi_worker as multi_worker_run
from compat_distribute.cluster import serve

# compat_distribute.install is the function; the module by its name.
install_lib = importlib.import_module("compat_distribute.install")

WORKERS = {"worker": ["a:1", "b:1"]}


def tf_config(cluster, job, index):
  return json.dumps({"cluster": cluster, "task": {"type": job, "index": index}})


@pytest.mark.parametrize("cluster,task,driver", [
    (WORKERS, ("worker", 0), "/job:worker/task:0"),
    (WORKERS, ("worker", 1), "/job:worker/task:0"),
    ({"chief": ["c:1"], **WORKERS}, ("worker", 0), "/job:chief/task:0"),
    ({"chief": ["c:1"], **WORKERS, "evaluator": ["e:1"]}, ("chief", 0),
     "/job:chief/task:0"),
])
def test_the_chief_else_worker_0_drives(cluster, task, driver):
  found = config.check_task(cluster, *task, "TF_CONFIG")
  assert found.driver_name == driver
  assert found.drives == (found.name == driver)
  assert "evaluator" not in found.cluster  # not part of training
  assert found.tasks[0] == found.driver  # its replicas come first


@pytest.mark.parametrize("cluster,task,words", [
    ({**WORKERS, "ps": ["p:1"]}, ("worker", 1),
     ["/job:worker/task:1 has a 'ps' job", 'Remove "ps"']),
    ({**WORKERS, "evaluator": ["e:1"]}, ("evaluator", 0),
     ["/job:evaluator/task:0, an evaluator", "without MultiWorkerMirrored"]),
    ({"ps": ["p:1"]}, ("ps", 0), ["no 'worker' (or 'chief') job"]),
    ({"chief": ["c:1", "d:1"], **WORKERS}, ("chief", 0), ["2 chief tasks"]),
])
def test_clusters_it_cannot_run_on_are_refused_naming_the_task(cluster, task,
                                                               words):
  with pytest.raises(config.MultiWorkerConfigError) as raised:
    config.check_task(cluster, *task, "TF_CONFIG")
  assert isinstance(raised.value, (compat_distribute.Error, ValueError))
  for word in words:
    assert word in str(raised.value)


def test_a_task_outside_the_cluster_is_refused_with_the_indexes():
  with pytest.raises(ValueError, match=r"Use an index in \[0, 1\]"):
    config.check_task(WORKERS, "worker", 2, "TF_CONFIG")


def test_the_strategy_on_a_serving_task_says_to_start_it_with_run(
    monkeypatch):
  monkeypatch.setenv("TF_CONFIG", tf_config(WORKERS, "worker", 1))
  with pytest.raises(config.MultiWorkerConfigError,
                     match=r"this task /job:worker/task:1, .* only, "
                     r"/job:worker/task:0 .* `python -m compat_distribute "
                     r"run train.py`"):
    v2.MultiWorkerMirroredStrategy()


def test_without_a_cluster_it_is_this_machines_strategy(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  for strategy in (v2.MultiWorkerMirroredStrategy(),
                   v2.experimental.MultiWorkerMirroredStrategy(),
                   v1.experimental.MultiWorkerMirroredStrategy()):
    assert strategy.cluster_resolver is None
    assert strategy.num_replicas_in_sync == 1
    assert isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or (
        isinstance(strategy,
                   tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy))
  assert isinstance(v2.experimental.MultiWorkerMirroredStrategy(),
                    tf.distribute.experimental.MultiWorkerMirroredStrategy)


def test_communication_hints_are_accepted_timeout_refused_by_name():
  options = tf.distribute.experimental.CommunicationOptions
  ring = tf.distribute.experimental.CommunicationImplementation.RING
  v2.MultiWorkerMirroredStrategy(communication_options=options(
      bytes_per_pack=1024, implementation=ring))
  v1.experimental.MultiWorkerMirroredStrategy(communication=ring)
  with pytest.raises(config.MultiWorkerConfigError,
                     match=r"timeout_seconds=5\.0\) is not supported"):
    v2.MultiWorkerMirroredStrategy(
        communication_options=options(timeout_seconds=5.0))
  with pytest.raises(TypeError, match="communication_options must be"):
    v2.MultiWorkerMirroredStrategy(communication_options="RING")
  with pytest.raises(TypeError, match="communication must be"):
    v1.experimental.MultiWorkerMirroredStrategy(communication="RING")
  with pytest.raises(TypeError, match="cluster_resolver must be"):
    v2.MultiWorkerMirroredStrategy(cluster_resolver={"worker": ["a:1"]})


def test_a_resolver_naming_a_serving_task_is_refused():
  resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec(WORKERS), task_type="worker", task_id=1)
  with pytest.raises(config.MultiWorkerConfigError,
                     match="The cluster resolver names this task "
                     "/job:worker/task:1"):
    multi_worker.client_for(resolver)


def test_the_client_serves_the_others_and_keeps_the_variables():
  client = multi_worker.MultiWorkerClient.of(
      {"chief": ["c:1"], **WORKERS}, "chief", 0)
  assert client.served_tasks == [("worker", 0), ("worker", 1)]
  assert client.parameter_devices == ("/job:chief/replica:0/task:0/device:CPU:0",)


def test_serve_runs_every_task_but_the_driving_one():
  task = serve.check_serve_config(tf_config(WORKERS, "worker", 1))
  assert (task.job, task.index, task.client, task.client_address) == (
      "worker", 1, ("worker", 0), "a:1")
  with_chief = {"chief": ["c:1"], **WORKERS}
  task = serve.check_serve_config(tf_config(with_chief, "worker", 0))
  assert (task.client, task.client_address) == (("chief", 0), "c:1")
  with pytest.raises(ValueError, match="runs the MultiWorkerMirroredStrategy "
                     "program itself"):
    serve.check_serve_config(tf_config(WORKERS, "worker", 0))


def test_run_flag_is_taken_from_the_options_only():
  environ = {}
  assert multi_worker_run.take_flag(
      ["--max-restarts", "2", "--multi-worker=native", "t.py", "--x"],
      environ) == ["--max-restarts", "2", "t.py", "--x"]
  assert environ == {multi_worker_run.VARIABLE: "native"}
  with pytest.raises(ValueError, match="must be one of auto, ours, native"):
    multi_worker_run.take_flag(["--multi-worker", "yes", "t.py"], {})


@pytest.fixture
def script(tmp_path):
  path = tmp_path / "train.py"
  path.write_text("import tensorflow as tf\n"
                  "s = tf.distribute.MultiWorkerMirroredStrategy()\n")
  return str(path)


@pytest.mark.parametrize("index,serves", [(0, False), (1, True)])
def test_with_keras_3_the_runner_gives_ours_and_serves_on_the_others(
    script, index, serves):
  environ = {"TF_CONFIG": tf_config(WORKERS, "worker", index)}
  if not multi_worker_run.keras_3(environ):
    pytest.skip("tf.keras is not Keras 3 here")
  decision = multi_worker_run.decide(script, environ)
  assert decision.ours and (decision.serves is not None) == serves
  assert len(decision.lines) == 2
  assert ("is compat_distribute's (the program makes it at "
          f"{script}:2: tf.distribute.MultiWorkerMirroredStrategy, and "
          "tf.keras is Keras 3") in decision.lines[0]
  word = "serves the program" if serves else "it runs train.py"
  assert f"/job:worker/task:{index} of (worker: 2): " in decision.lines[1]
  assert word in decision.lines[1]


def test_with_keras_2_the_runner_leaves_tensorflows_unless_asked(script):
  environ = {"TF_CONFIG": tf_config(WORKERS, "worker", 1),
             "TF_USE_LEGACY_KERAS": "1"}
  keras_2 = not multi_worker_run.keras_3(environ)
  decision = multi_worker_run.decide(script, environ)
  if keras_2:
    assert not decision.ours and decision.serves is None
    assert "stays TensorFlow's own" in decision.lines[0]
  environ[multi_worker_run.VARIABLE] = "ours"
  decision = multi_worker_run.decide(script, environ)
  assert decision.ours and decision.serves is not None
  assert "(--multi-worker ours;" in decision.lines[0]


def test_a_program_without_the_strategy_is_left_to_run(tmp_path):
  path = tmp_path / "other.py"
  path.write_text("import tensorflow as tf\n"
                  "s = tf.distribute.MirroredStrategy()\n")
  decision = multi_worker_run.decide(
      str(path), {"TF_CONFIG": tf_config(WORKERS, "worker", 1)})
  assert decision.serves is None and decision.lines == []


def test_install_replaces_multi_worker_names_only_when_asked():
  native = tf.distribute.MultiWorkerMirroredStrategy
  with compat_distribute.install():
    assert tf.distribute.MultiWorkerMirroredStrategy is native
  with compat_distribute.install(multi_worker=True):
    assert tf.distribute.MultiWorkerMirroredStrategy is (
        v2.MultiWorkerMirroredStrategy)
    assert tf.distribute.experimental.MultiWorkerMirroredStrategy is (
        v2.experimental.MultiWorkerMirroredStrategy)
    assert tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy is (
        v1.experimental.MultiWorkerMirroredStrategy)
    assert "tf.distribute.MultiWorkerMirroredStrategy" in (
        install_lib.installed_names())
  assert tf.distribute.MultiWorkerMirroredStrategy is native


def metric_results(strategy):
  import keras  # pylint: disable=g-import-not-at-top
  with strategy.scope():
    metric = keras.metrics.Mean()
  values = strategy.experimental_distribute_values_from_function(
      lambda context: tf.constant(float(context.replica_id_in_sync_group + 1)))

  @tf.function
  def step(values):
    def replica_fn(value):
      metric.update_state(value, sample_weight=32)
      return metric.result()
    return strategy.run(replica_fn, args=(values,))

  results = []
  for _ in range(3):
    local = strategy.experimental_local_results(step(values))
    results.append(float(np.mean([float(r) for r in local])))
  return results, float(metric.result())


def test_keras_metrics_read_as_under_mirrored_strategy():
  """Keras 3 updates a metric by assign(self + delta) from every replica;
  under ours the totals add each step once, as on TensorFlow's mirrored
  strategy (a plain central SUM variable would add the old value once per
  replica)."""
  ours = v2.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
  ours.extended._shares_on_read = True  # what MultiWorkerMirrored sets
  native = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
  got, want = metric_results(ours), metric_results(native)
  np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
  assert got[1] == pytest.approx(want[1]) == 1.5
