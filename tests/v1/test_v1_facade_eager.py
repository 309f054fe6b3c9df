"""The v1 facade (``compat_distribute.v1``) eagerly, against native
``tf.compat.v1.distribute``: names, types, v1-only methods, bad input.
Input methods are in test_v1_input.py.

Graph-mode (Session) behaviour is in test_v1_graph.py and
test_v1_session_script.py.
"""
import inspect
import warnings

import pytest
import tensorflow as tf

from compat_distribute.runtime import logs
from compat_distribute import v1
from conftest import cpu
from fixtures import strategies
from support import v1 as sup
from support.v1 import CONFIGS, make_native, make_ours


# -- names and types ----------------------------------------------------------

def test_facade_names_are_tf_compat_v1_names():
  # Ours only: TF has get_cross_replica_context in tf.distribute alone, and
  # Error is the package's error base.
  extra = {"get_cross_replica_context", "Error"}
  missing = [n for n in v1.__all__
             if n not in extra and not hasattr(tf.compat.v1.distribute, n)]
  assert not missing
  for name in ("Strategy", "StrategyExtended", "OneDeviceStrategy",
               "ReplicaContext", "InputContext", "InputReplicationMode",
               "ReduceOp", "get_strategy", "has_strategy",
               "get_replica_context", "get_cross_replica_context",
               "in_cross_replica_context"):
    assert name in v1.__all__, name
  assert v1.Strategy.__module__ == "compat_distribute.api.strategy_v1"
  assert v1.OneDeviceStrategy.__module__ == "compat_distribute.strategies.one_device"
  assert v1.ReduceOp is tf.distribute.ReduceOp


def test_v1_class_names_are_tensorflows():
  # TensorFlow's v1 classes are named ...V1 behind their public names;
  # tf_keras puts type(strategy).__name__ into its messages.
  native = (tf.compat.v1.distribute.Strategy,
            tf.compat.v1.distribute.OneDeviceStrategy,
            tf.compat.v1.distribute.experimental.CentralStorageStrategy)
  ours = (v1.Strategy, v1.OneDeviceStrategy,
          v1.experimental.CentralStorageStrategy)
  assert [c.__name__ for c in ours] == [c.__name__ for c in native] == [
      "StrategyV1", "OneDeviceStrategyV1", "CentralStorageStrategyV1"]
  assert [c.__qualname__ for c in ours] == [c.__name__ for c in ours]
  assert (type(v1.OneDeviceStrategy("/cpu:0")).__name__ ==
          type(tf.compat.v1.distribute.OneDeviceStrategy("/cpu:0")).__name__)


def test_facade_falls_back_to_tf():
  assert v1.MirroredStrategy is tf.compat.v1.distribute.MirroredStrategy
  assert v1.get_loss_reduction is tf.compat.v1.distribute.get_loss_reduction
  # ParameterServerStrategy and MultiWorkerMirroredStrategy are ours
  # (docs/cluster.md), not fall-throughs.
  assert issubclass(
      v1.experimental.MultiWorkerMirroredStrategy,
      tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy)
  assert (v1.experimental.MultiWorkerMirroredStrategy is not
          tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy)
  assert (v1.experimental.ParameterServerStrategy is not
          tf.compat.v1.distribute.experimental.ParameterServerStrategy)
  with pytest.raises(AttributeError):
    v1.NoSuchName  # pylint: disable=pointless-statement


@pytest.mark.parametrize("config", CONFIGS)
def test_type_identity_like_native(config):
  ours, native = make_ours(config), make_native(config)
  for s in (ours, native):
    assert isinstance(s, tf.compat.v1.distribute.Strategy)
    assert not isinstance(s, tf.distribute.Strategy)
    assert isinstance(s.extended, tf.compat.v1.distribute.StrategyExtended)
    assert isinstance(s.extended, tf.distribute.StrategyExtended)
  assert isinstance(ours, v1.Strategy)
  assert ours.num_replicas_in_sync == native.num_replicas_in_sync
  assert ours.cluster_resolver is None


@pytest.mark.parametrize("config", CONFIGS)
def test_every_native_method_exists_and_is_ours(config):
  ours, native = make_ours(config), make_native(config)
  names = [n for n in dir(native) if not n.startswith("_")]
  missing = [n for n in names if not hasattr(ours, n)]
  assert not missing
  for name in names:
    for klass in type(ours).__mro__:
      if name in vars(klass):
        assert klass.__module__.startswith("compat_distribute"), (
            f"{name} is inherited from {klass}")
        break
  ext_names = [n for n in dir(native.extended) if not n.startswith("_")]
  assert not [n for n in ext_names if not hasattr(ours.extended, n)]


def test_scope_makes_strategy_current():
  s = v1.OneDeviceStrategy("/cpu:1")
  assert not v1.has_strategy()
  with s.scope():
    assert v1.get_strategy() is s
    assert v1.in_cross_replica_context()
    assert v1.get_cross_replica_context() is s
    assert v1.get_replica_context() is None
    ctx = s.run(v1.get_replica_context)
    assert isinstance(ctx, tf.compat.v1.distribute.ReplicaContext)
    assert isinstance(ctx, v1.ReplicaContext)
  assert not v1.has_strategy()


# -- experimental_run ---------------------------------------------------------

def _replica_value():
  ctx = tf.distribute.get_replica_context()
  return tf.constant(10.0) + tf.cast(ctx.replica_id_in_sync_group, tf.float32)


@pytest.mark.parametrize("config", CONFIGS)
def test_experimental_run_without_iterator_matches_native(config):
  results = []
  for s in (make_ours(config), make_native(config)):
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      out = s.experimental_run(_replica_value)
    results.append(sup.to_numpy(out, s))
    if sup.replicas(config) == 1:
      assert tf.is_tensor(out)
  sup.assert_nested_equal(*results)
  assert results[0] == [10.0 + i for i in range(sup.replicas(config))]


def test_experimental_run_warns_once_per_process():
  s = v1.OneDeviceStrategy("/cpu:0")
  had = "Strategy.experimental_run" in logs._warned  # pylint: disable=protected-access
  logs._warned.discard("Strategy.experimental_run")  # pylint: disable=protected-access
  try:
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      for _ in range(3):
        s.experimental_run(_replica_value)
    messages = [str(w.message) for w in caught
                if "experimental_run" in str(w.message)]
    assert messages == [
        "Strategy.experimental_run is deprecated; use Strategy.run instead."]
    assert caught[0].category is DeprecationWarning
  finally:
    if had:
      logs._warned.add("Strategy.experimental_run")  # pylint: disable=protected-access


def test_experimental_run_fn_needing_args_without_iterator():
  s = v1.OneDeviceStrategy("/cpu:0")

  def step(features, labels):
    return features + labels

  with pytest.raises(TypeError, match=r"'step' requires features, labels.*"
                     r"make_dataset_iterator"):
    s.experimental_run(step)
  with pytest.raises(TypeError, match="requires x"):
    s.experimental_run(tf.function(lambda x: x))
  # Parameters with defaults are fine.
  assert float(s.experimental_run(lambda x=2.0: tf.constant(x))) == 2.0


def test_experimental_run_bad_arguments():
  s = v1.OneDeviceStrategy("/cpu:0")
  with pytest.raises(TypeError, match="callable"):
    s.experimental_run(3)
  with pytest.raises(TypeError, match=r"input iterator.*Dataset.*"
                     r"make_dataset_iterator\(dataset\)"):
    s.experimental_run(lambda x: x, tf.data.Dataset.range(3))


# -- reduce, unwrap, colocate -------------------------------------------------

@pytest.mark.parametrize("config", CONFIGS)
def test_reduce_axis_defaults_to_none(config):
  assert inspect.signature(v1.Strategy.reduce).parameters["axis"].default is None
  results = []
  for s in (make_ours(config), make_native(config)):
    per_replica = s.run(lambda: _replica_value() * tf.ones([3]))
    results.append([s.reduce("SUM", per_replica).numpy(),
                    s.reduce(tf.distribute.ReduceOp.MEAN, per_replica).numpy(),
                    s.reduce("SUM", per_replica, axis=0).numpy()])
  sup.assert_nested_equal(*results)


def test_unwrap_is_deprecated_local_results():
  s = v1.OneDeviceStrategy("/cpu:0")
  value = tf.constant(1.0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    assert s.unwrap(value) == (value,)


def test_colocate_vars_with():
  s = v1.OneDeviceStrategy("/cpu:1")
  with s.scope():
    v = tf.Variable(1.0)
    with s.colocate_vars_with(v):
      w = tf.Variable(2.0)
  assert w.device == v.device == cpu(1)


# -- update_config_proto and configure ----------------------------------------

@pytest.mark.parametrize("config", CONFIGS)
def test_update_config_proto_returns_modified_copy(config):
  ours, native = make_ours(config), make_native(config)
  original = tf.compat.v1.ConfigProto(allow_soft_placement=True,
                                      device_count={"GPU": 0})
  before = original.SerializeToString()
  updated = ours.update_config_proto(original)
  assert original.SerializeToString() == before  # a copy, not in place
  assert updated is not original
  assert updated.allow_soft_placement
  assert updated.device_count["GPU"] == 0
  assert updated.device_count["CPU"] == 4  # the 4 logical CPUs, never fewer
  # Everything native sets is set the same way; only device_count differs.
  expected = native.update_config_proto(original)
  expected.device_count["CPU"] = updated.device_count["CPU"]
  assert updated == expected


# The v2 classes beside TensorFlow's: (kind, replicas) of each config.
V2_PAIRS = {"one_device": ("one_device", 1),
            "central_storage/2": ("central_storage", 2)}


@pytest.mark.parametrize("config", sorted(V2_PAIRS))
def test_v2_update_config_proto_matches_native(config):
  # The v2 classes have update_config_proto too (TF's StrategyBase):
  # CentralStorage isolates session state there as well.
  ours_v2, native_v2 = strategies.pair(*V2_PAIRS[config])
  original = tf.compat.v1.ConfigProto(allow_soft_placement=True)
  updated = ours_v2.update_config_proto(original)
  expected = native_v2.update_config_proto(original)
  assert updated.isolate_session_state == (config != "one_device")
  expected.device_count["CPU"] = updated.device_count["CPU"]
  assert updated == expected


@pytest.mark.parametrize("config", sorted(V2_PAIRS))
def test_v2_configure_updates_in_place_as_native(config):
  ours_v2, native_v2 = strategies.pair(*V2_PAIRS[config])
  ours, native = tf.compat.v1.ConfigProto(), tf.compat.v1.ConfigProto()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    ours_v2.configure(ours)
  native_v2.configure(native)
  assert ours.isolate_session_state == native.isolate_session_state


def test_update_config_proto_counts_devices_the_strategy_uses():
  s = v1.OneDeviceStrategy("/cpu:3")
  assert dict(s.update_config_proto(
      tf.compat.v1.ConfigProto()).device_count) == {"CPU": 4}
  # A larger count the user chose is kept.
  big = tf.compat.v1.ConfigProto(device_count={"CPU": 8})
  assert s.update_config_proto(big).device_count["CPU"] == 8


def test_update_config_proto_counts_devices_beyond_logical_ones():
  s = v1.OneDeviceStrategy("/cpu:5")  # does not exist: reported, still counted
  assert s.update_config_proto(
      tf.compat.v1.ConfigProto()).device_count["CPU"] == 6


@pytest.mark.parametrize("bad", [None, {"device_count": {"CPU": 2}},
                                 "allow_soft_placement: true"])
def test_update_config_proto_rejects_non_config_proto(bad):
  s = v1.OneDeviceStrategy("/cpu:0")
  with pytest.raises(TypeError, match=r"expects a tf.compat.v1.ConfigProto, "
                     r"got .* Pass tf.compat.v1.ConfigProto\(\)"):
    s.update_config_proto(bad)


def test_configure_updates_session_config_in_place():
  s = v1.OneDeviceStrategy("/cpu:2")
  config = tf.compat.v1.ConfigProto()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    assert s.configure(session_config=config) is None
    assert config.device_count["CPU"] == 4
    s.configure()  # nothing to do
    # A cluster is ignored, as by TensorFlow's (tests/parity/
    # test_configure_parity.py compares the rest).
    s.configure(cluster_spec={"worker": ["localhost:2222"]},
                task_type="worker", task_id=0)
    assert s.extended.worker_devices == (
        "/job:localhost/replica:0/task:0/device:CPU:2",)


# -- the v1 StrategyExtended methods ------------------------------------------

@pytest.mark.parametrize("config", CONFIGS)
def test_extended_flags_match_native(config):
  ours, native = make_ours(config).extended, make_native(config).extended
  for name in ("experimental_should_init", "should_checkpoint",
               "should_save_summary", "experimental_between_graph"):
    assert getattr(ours, name) == getattr(native, name), name


@pytest.mark.parametrize("config", CONFIGS)
def test_read_var_and_broadcast_to(config):
  results = []
  for s in (make_ours(config), make_native(config)):
    with s.scope():
      v = tf.Variable([1.0, 2.0])
      read = s.extended.read_var(v)
      assert tf.is_tensor(read) and not isinstance(read, tf.Variable)
      assert s.extended.broadcast_to(3, "/cpu:0") == 3  # Python stays Python
      sent = s.extended.broadcast_to(tf.constant([4.0]), v)
      results.append([read.numpy(), tf.convert_to_tensor(sent).numpy()])
  sup.assert_nested_equal(*results)


def test_broadcast_to_needs_one_destination():
  s = v1.OneDeviceStrategy("/cpu:0")
  with pytest.raises(ValueError, match="one destination"):
    s.extended.broadcast_to(tf.constant(1.0), ["/cpu:0", "/cpu:1"])


@pytest.mark.parametrize("config", CONFIGS)
def test_update_non_slot(config):
  s = make_ours(config)
  with s.scope():
    v = tf.Variable(1.0)
  devices = s.extended.non_slot_devices([v])
  native = make_native(config)
  with native.scope():
    native_v = tf.Variable(1.0)
  expected = native.extended.non_slot_devices([native_v])
  if config == "one_device":  # a tuple of device names
    assert tf.DeviceSpec.from_string(devices[0]).device_index == 1
    assert len(devices) == len(expected) == 1
  else:  # the first variable by name, as native
    assert devices is v and expected is native_v
  grouped = s.extended.update_non_slot(devices, lambda d: v.assign_add(d),
                                       args=(2.0,))
  assert float(v) == 3.0
  ungrouped = s.extended.update_non_slot(
      devices, lambda: tf.constant(5.0), group=False)
  native_ungrouped = native.extended.update_non_slot(
      expected, lambda: tf.constant(5.0), group=False)
  assert [float(x) for x in ungrouped] == [
      float(x) for x in native_ungrouped] == [5.0]
  del grouped
  with s.scope():
    with pytest.raises(RuntimeError, match="cross-replica"):
      s.run(lambda: s.extended.update_non_slot(devices, lambda: 1.0))


def _run_steps(strategy, graph_mode):
  """A three-step loop through experimental_run_steps_on_iterator: the
  variable after it and the last step's outputs."""
  graph = tf.Graph()
  with (graph.as_default() if graph_mode else tf.init_scope()):
    with strategy.scope():
      v = tf.Variable(0.0)
      iterator = strategy.make_input_fn_iterator(
          lambda _: tf.data.Dataset.range(1, 10).map(
              lambda x: tf.cast(x, tf.float32)))

      def replica_step(context, x):
        context.set_last_step_output("sum", x, reduce_op="sum")
        context.set_non_tensor_output("note", "ran")
        return v.assign_add(x)

      def step(context, x):
        context.set_last_step_output("x", x)
        return strategy.extended.call_for_each_replica(
            replica_step, args=(context, x))

      context = strategy.extended.experimental_run_steps_on_iterator(
          step, iterator, iterations=3,
          initial_loop_values={"x": 0.0, "sum": 0.0})
    if not graph_mode:
      return (float(v.numpy()), float(context.last_step_outputs["x"]),
              float(context.last_step_outputs["sum"]),
              context.non_tensor_outputs["note"])
    with tf.compat.v1.Session(config=sup.native_session_config(strategy)) as s:
      s.run([iterator.initializer, tf.compat.v1.global_variables_initializer()])
      # Fetching the last step's outputs runs the loop (once).
      outputs = s.run(context.last_step_outputs)
      return (float(s.run(v)), float(outputs["x"]), float(outputs["sum"]),
              context.non_tensor_outputs["note"])


@pytest.mark.parametrize("graph_mode", [True, False], ids=["graph", "eager"])
def test_run_steps_on_iterator_as_native_one_device(graph_mode):
  # TensorFlow's OneDeviceStrategy keeps this deprecated API (TF's
  # minimize_loss and step_fn tests use it).
  ours_v1, native_v1 = strategies.pair("one_device", facade="v1",
                                       device="/cpu:0")
  ours = _run_steps(ours_v1, graph_mode)
  native = _run_steps(native_v1, graph_mode)
  assert ours == native
  assert ours == (6.0, 3.0, 3.0, ("ran",))


def test_run_steps_on_iterator_not_in_central_storage_as_native():
  for strategy in strategies.pair("central_storage", 2, facade="v1"):
    with pytest.raises(NotImplementedError):
      strategy.extended.experimental_run_steps_on_iterator(lambda *a: a, None)
