"""ParameterServerStrategy (v1), in-process: cluster parsing, placement,
configuration, compared with TensorFlow's ParameterServerStrategyV1.

Nothing here talks to a server: building a between-graph program needs only
the cluster's description.  test_parameter_server_cluster.py runs real
servers.
"""
import copy
import json
import time

import numpy as np
import pytest
import tensorflow as tf

import compat_distribute
from compat_distribute.cluster import tasks as cluster_lib
from compat_distribute import v1

pytestmark = pytest.mark.parity

V1 = tf.compat.v1
CLUSTER = {"worker": ["127.0.0.1:9001", "127.0.0.1:9002"],
           "ps": ["127.0.0.1:9003", "127.0.0.1:9004"]}


def resolver(task_type="worker", task_id=0, cluster=None, gpus=0):
  return tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec(cluster or CLUSTER), task_type=task_type,
      task_id=task_id, num_accelerators={"GPU": gpus})


def both(task_type="worker", task_id=0, cluster=None, gpus=0):
  return {"native": lambda: V1.distribute.experimental.ParameterServerStrategy(
              resolver(task_type, task_id, cluster, gpus)),
          "ours": lambda: v1.experimental.ParameterServerStrategy(
              resolver(task_type, task_id, cluster, gpus))}


def build(make_strategy):
  """A small v1 program; returns what placement and configuration say."""
  with tf.Graph().as_default():
    strategy = make_strategy()
    with strategy.scope():
      a = V1.get_variable("a", initializer=np.ones((2, 2), np.float32))
      b = V1.get_variable("b", initializer=1.0)
      c = tf.Variable(2.0, name="c")
      with strategy.extended.colocate_vars_with(a):
        d = tf.Variable(3.0, name="d")
      e = V1.get_variable("e", shape=(4, 2), partitioner=(
          V1.fixed_size_partitioner(2)))
      step = V1.train.get_or_create_global_step()
      optimizer = V1.train.AdamOptimizer(0.1)
      loss = (tf.reduce_sum(a) + b * c + d + tf.reduce_sum(
          tf.concat(list(e), 0)))
      train = strategy.extended.call_for_each_replica(
          lambda: optimizer.minimize(loss, global_step=step))
      op = tf.constant(1.0)
      placements = {v.name: v.device for v in V1.global_variables()}
    config = strategy.update_config_proto(V1.ConfigProto())
    extended = strategy.extended
    return {
        "placements": placements,
        "train_op": type(train).__name__,
        "op_device": op.device,
        "num_replicas": strategy.num_replicas_in_sync,
        "worker_devices": list(extended.worker_devices),
        "parameter_devices": list(extended.parameter_devices),
        "filters": list(config.device_filters),
        "isolate": config.isolate_session_state,
        "task": (extended._task_type, extended._task_id, extended._is_chief),
        "worker_device": extended._worker_device,
        "flags": (extended.should_checkpoint, extended.should_save_summary,
                  extended.experimental_should_init,
                  extended.experimental_between_graph,
                  extended._in_multi_worker_mode()),
        "cluster": extended._cluster_spec.as_dict(),
        "resolver": type(strategy.cluster_resolver).__name__,
    }


@pytest.mark.slow
@pytest.mark.parametrize("task", [("worker", 0), ("worker", 1), ("chief", 0)])
def test_same_placement_and_configuration_as_tensorflow(task):
  cluster = dict(CLUSTER, chief=["127.0.0.1:9000"]) if task[0] == "chief" \
      else CLUSTER
  makers = both(*task, cluster=cluster)
  ours, native = build(makers["ours"]), build(makers["native"])
  # Deliberate difference: TensorFlow's v1 strategy reports no resolver.
  assert (ours.pop("resolver"), native.pop("resolver")) == (
      "SimpleClusterResolver", "NoneType")
  assert ours == native
  # Round robin over the ps tasks in creation order; slots with their
  # primaries; partitions each take a turn.
  assert ours["placements"]["a:0"] == "/job:ps/task:0"
  assert ours["placements"]["b:0"] == "/job:ps/task:1"
  assert ours["placements"]["d:0"] == ours["placements"]["a:0"]


def test_replicas_over_the_workers_gpus_as_tensorflow():
  # The resolver says 2 GPUs per worker: 2 replicas, variables wrapped to
  # aggregate replica updates; the graph is built, never run.
  ours, native = (build(both(task_id=1, gpus=2)[k]) for k in ("ours",
                                                              "native"))
  ours.pop("resolver"), native.pop("resolver")
  assert ours == native
  assert ours["num_replicas"] == 2
  assert ours["worker_devices"] == [
      "/job:worker/replica:0/task:1/device:GPU:0",
      "/job:worker/replica:0/task:1/device:GPU:1"]


def test_training_on_a_ps_task_is_refused_as_tensorflow_does():
  # Reducing gradients onto another ps task's variable is "another task".
  for make in both("ps", 1).values():
    with pytest.raises(ValueError, match="(?i)reduce to .*another"):
      build(make)


def test_one_ps_is_central_storage_on_a_cluster():
  cluster = {"worker": CLUSTER["worker"], "ps": CLUSTER["ps"][:1]}
  ours = build(both(cluster=cluster)["ours"])
  assert set(ours["placements"].values()) == {"/job:ps/task:0"}
  native = build(both(cluster=cluster)["native"])
  ours.pop("resolver"), native.pop("resolver")
  assert ours == native


def test_configure_with_a_cluster_as_tensorflow(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)

  def configured(cls):
    def make():
      strategy = cls()
      strategy.configure(cluster_spec=CLUSTER, task_type="worker", task_id=1)
      return strategy
    return make
  ours = build(configured(v1.experimental.ParameterServerStrategy))
  native = build(configured(V1.distribute.experimental.ParameterServerStrategy))
  assert ours.pop("resolver") == "SimpleClusterResolver"
  native.pop("resolver")
  assert ours == native
  assert ours["task"] == ("worker", 1, False)


def test_configure_without_task_is_refused():
  with tf.Graph().as_default():
    strategy = v1.experimental.ParameterServerStrategy(
        tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec({})))
    with pytest.raises(ValueError, match="task type None"):
      strategy.configure(cluster_spec=CLUSTER)


def test_types_and_facade():
  with tf.Graph().as_default():
    strategy = v1.experimental.ParameterServerStrategy(resolver())
  assert isinstance(strategy,
                    V1.distribute.experimental.ParameterServerStrategy)
  assert isinstance(strategy, V1.distribute.Strategy)
  assert type(strategy).__name__ == "ParameterServerStrategyV1"
  assert "task='/job:worker/task:0'" in repr(strategy)


def test_install_resolves_it():
  with compat_distribute.install():
    assert (V1.distribute.experimental.ParameterServerStrategy is
            v1.experimental.ParameterServerStrategy)
  assert (V1.distribute.experimental.ParameterServerStrategy is not
          v1.experimental.ParameterServerStrategy)


def test_tf_config_is_read(monkeypatch):
  monkeypatch.setenv("TF_CONFIG", json.dumps(
      {"cluster": CLUSTER, "task": {"type": "worker", "index": 1}}))
  with tf.Graph().as_default():
    strategy = v1.experimental.ParameterServerStrategy()
  assert isinstance(strategy.cluster_resolver,
                    tf.distribute.cluster_resolver.TFConfigClusterResolver)
  assert strategy.extended._task_id == 1
  assert not strategy.extended.should_checkpoint


@pytest.mark.parametrize("tf_config, message", [
    ("{not json", "TF_CONFIG is not valid JSON"),
    (json.dumps({"cluster": CLUSTER, "task": {"type": "master",
                                              "index": 0}}),
     "task type 'master'; it must be one of chief, worker, ps, evaluator"),
    (json.dumps({"cluster": CLUSTER, "task": {"type": "worker",
                                              "index": 2}}),
     "task index 2 of job 'worker', which has 2 tasks"),
    (json.dumps({"cluster": {"worker": CLUSTER["worker"]},
                 "task": {"type": "worker", "index": 0}}),
     "TF_CONFIG has no 'ps' job"),
])
def test_malformed_tf_config_is_refused(monkeypatch, tf_config, message):
  monkeypatch.setenv("TF_CONFIG", tf_config)
  with tf.Graph().as_default():
    with pytest.raises(ValueError) as raised:
      v1.experimental.ParameterServerStrategy()
  text = str(raised.value)
  assert message in text
  assert "TF_CONFIG" in text


def test_no_cluster_runs_locally(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  with tf.Graph().as_default():
    strategy = v1.experimental.ParameterServerStrategy()
    config = strategy.update_config_proto(V1.ConfigProto())
  assert not strategy.extended._in_multi_worker_mode()
  assert strategy.extended.should_checkpoint
  assert config.isolate_session_state
  assert not config.device_filters


@pytest.mark.parametrize("call", [
    lambda s: s.scope(),
    lambda s: s.run(lambda: 1.0),
    lambda s: s.experimental_distribute_dataset(tf.data.Dataset.range(4)),
    lambda s: s.distribute_datasets_from_function(
        lambda ctx: tf.data.Dataset.range(4)),
], ids=["scope", "run", "experimental_distribute_dataset",
        "distribute_datasets_from_function"])
def test_eager_is_refused_as_tensorflow_does(call):
  for cls in (v1.experimental.ParameterServerStrategy,
              V1.distribute.experimental.ParameterServerStrategy):
    strategy = cls(resolver())
    with pytest.raises(NotImplementedError) as raised:
      call(strategy)
  # Ours says what to do.
  with pytest.raises(NotImplementedError, match="disable_eager_execution"):
    call(v1.experimental.ParameterServerStrategy(resolver()))


def test_input_fn_context_names_this_workers_pipeline():
  contexts = {}
  for name, make in both(task_id=1).items():
    with tf.Graph().as_default():
      strategy = make()
      seen = []

      def input_fn(ctx):
        seen.append((ctx.num_input_pipelines, ctx.input_pipeline_id,
                     ctx.num_replicas_in_sync))
        return tf.data.Dataset.range(8).batch(2)
      with strategy.scope():
        strategy.make_input_fn_iterator(input_fn)
        strategy.distribute_datasets_from_function(input_fn)
      contexts[name] = seen
  assert contexts["ours"] == contexts["native"] == [(2, 1, 1)] * 2


def test_reduce_to_another_worker_is_refused():
  with tf.Graph().as_default():
    strategy = v1.experimental.ParameterServerStrategy(resolver())
    with strategy.scope():
      with pytest.raises(ValueError, match="on another worker"):
        strategy.extended.reduce_to(
            tf.distribute.ReduceOp.MEAN, tf.constant(1.0),
            "/job:worker/task:1/device:CPU:0")


def test_unreachable_ps_is_named():
  with tf.Graph().as_default():
    strategy = v1.experimental.ParameterServerStrategy(resolver())
  strategy.extended.cluster_wait_timeout = 0.3
  with pytest.raises(cluster_lib.TaskUnavailableError) as raised:
    strategy.extended.wait_for_cluster()
  assert "/job:ps/task:0 at 127.0.0.1:9003" in str(raised.value)
  assert "/job:ps/task:1 at 127.0.0.1:9004" in str(raised.value)


def _nothing_listening_cluster():
  from compat_distribute.cluster import local
  ports = [f"127.0.0.1:{p}" for p in local.free_ports(4)]
  return {"chief": ports[:1], "worker": ports[1:2], "ps": ports[2:3],
          "evaluator": ports[3:]}


@pytest.mark.parametrize("task_type", ["chief", "worker", "ps", "evaluator"])
def test_configure_and_update_config_proto_return_at_once_as_native(
    task_type, monkeypatch):
  """Issue 20's reproduction: TensorFlow's distribute coordinator calls
  configure (on a deep copy) before it starts the task's server; native
  returns at once and so must ours, with the same session config."""
  monkeypatch.delenv("COMPAT_DISTRIBUTE_CLUSTER_WAIT", raising=False)
  monkeypatch.delenv("TF_CONFIG", raising=False)
  cluster = _nothing_listening_cluster()
  configs = {}
  for name, cls in (
      ("native", V1.distribute.experimental.ParameterServerStrategy),
      ("ours", v1.experimental.ParameterServerStrategy)):
    with tf.Graph().as_default():
      strategy = copy.deepcopy(cls())
      config = V1.ConfigProto(allow_soft_placement=True)
      start = time.monotonic()
      strategy.configure(session_config=config, cluster_spec=cluster,
                         task_type=task_type, task_id=0)
      updated = strategy.update_config_proto(config)
      # No servers: a wait here would take the default 300 s.
      assert time.monotonic() - start < 60, name
      configs[name] = (list(updated.device_filters),
                       updated.isolate_session_state,
                       strategy.extended.should_checkpoint)
  assert configs["ours"] == configs["native"]


def test_cluster_wait_setting_survives_deepcopy_and_configure(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  with tf.Graph().as_default():
    strategy = v1.experimental.ParameterServerStrategy()
    for setting in (None, 12.5):
      strategy.extended.cluster_wait_timeout = setting
      copied = copy.deepcopy(strategy)
      assert copied.extended.cluster_wait_timeout == setting
      copied.configure(cluster_spec=CLUSTER, task_type="worker", task_id=1)
      assert copied.extended.cluster_wait_timeout == setting
      assert copy.deepcopy(copied).extended.cluster_wait_timeout == setting


@pytest.mark.parametrize("text,expected", [
    ("none", None), ("OFF", None), ("no", None), (" 7 ", 7.0), ("0", 0.0),
    ("", 300.0)])
def test_cluster_wait_environment_variable(text, expected, monkeypatch):
  monkeypatch.setenv("COMPAT_DISTRIBUTE_CLUSTER_WAIT", text)
  with tf.Graph().as_default():
    strategy = v1.experimental.ParameterServerStrategy(resolver())
  assert strategy.extended.cluster_wait_timeout == expected
  if expected is None:  # no wait: returns although nothing listens
    strategy.extended.wait_for_cluster()


@pytest.mark.parametrize("text", ["soon", "-1", "nan"])
def test_bad_cluster_wait_environment_variable_is_named(text, monkeypatch):
  monkeypatch.setenv("COMPAT_DISTRIBUTE_CLUSTER_WAIT", text)
  with pytest.raises(ValueError, match=(
      f"COMPAT_DISTRIBUTE_CLUSTER_WAIT .* got '{text}'. Set it to e.g. 60 or "
      "none")):
    v1.experimental.ParameterServerStrategy(resolver())


def test_wait_for_cluster_says_what_it_waits_for(caplog):
  with tf.Graph().as_default():
    strategy = v1.experimental.ParameterServerStrategy(resolver())
  spec = strategy.extended._cluster_spec  # pylint: disable=protected-access
  caplog.set_level("WARNING", logger="compat_distribute")
  with pytest.raises(cluster_lib.TaskUnavailableError):
    cluster_lib.wait_for_tasks(spec, [("worker", 0), ("ps", 0)], 0.6,
                               progress_every=0.2)
  lines = [r.getMessage() for r in caplog.records
           if r.name == "compat_distribute"]
  assert "waiting up to 0.6 s for cluster tasks to accept connections: " \
      "/job:worker/task:0 at 127.0.0.1:9001, /job:ps/task:0 at " \
      "127.0.0.1:9003" in lines[0]
  assert len([m for m in lines if "waiting up to" in m]) == 1
  assert any("still waiting" in m and "/job:ps/task:0 at 127.0.0.1:9003" in m
             for m in lines[1:])
