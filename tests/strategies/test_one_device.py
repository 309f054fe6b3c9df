"""OneDeviceStrategy (v2) against native tf.distribute.OneDeviceStrategy."""
import numpy as np
import pytest
import tensorflow as tf

from compat_distribute import v2 as distribute
from conftest import cpu, in_mode

DEVICE = "/cpu:1"


def assert_same(a, b):
  flat_a, flat_b = tf.nest.flatten(a), tf.nest.flatten(b)
  assert len(flat_a) == len(flat_b)
  for x, y in zip(flat_a, flat_b):
    assert type(x) is type(y) or (tf.is_tensor(x) and tf.is_tensor(y)), (x, y)
    if tf.is_tensor(x):
      assert x.dtype == y.dtype
      np.testing.assert_array_equal(x.numpy(), y.numpy())
    else:
      assert x == y


def test_types_and_repr():
  ours = distribute.OneDeviceStrategy(DEVICE)
  assert isinstance(ours, tf.distribute.Strategy)
  assert isinstance(ours.extended, tf.distribute.StrategyExtended)
  assert repr(ours) == f"OneDeviceStrategy(device='{cpu(1)}')"
  assert ours.num_replicas_in_sync == 1
  assert ours.cluster_resolver is None
  assert ours.extended.worker_devices == (cpu(1),)
  assert ours.extended.parameter_devices == (cpu(1),)
  assert ours.extended.experimental_require_static_shapes is False


def test_seed_example_loop_gives_90(compare):
  # The OneDeviceStrategy page's example: sum of x * 2 over range(10).
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(1.0)
    result = 0
    for i in range(10):
      result += strategy.reduce(
          tf.distribute.ReduceOp.SUM,
          strategy.run(lambda x: x * 2, args=(tf.constant(i),)), axis=None)
    return v.device, int(result)
  ours, native = compare.both(program)
  assert ours == native == (cpu(1), 90)


def test_scope_context_and_restore():
  ours = distribute.OneDeviceStrategy(DEVICE)
  assert not tf.distribute.has_strategy()
  with ours.scope() as entered:
    assert entered is ours
    assert tf.distribute.get_strategy() is ours
    assert tf.distribute.in_cross_replica_context()
    assert distribute.get_cross_replica_context() is ours
    assert tf.distribute.get_replica_context() is None
    with ours.scope():  # re-entering the same strategy is fine
      assert tf.distribute.get_strategy() is ours
    assert tf.distribute.get_strategy() is ours
  assert not tf.distribute.has_strategy()
  with pytest.raises(ZeroDivisionError):
    with ours.scope():
      raise ZeroDivisionError
  assert not tf.distribute.has_strategy()


def test_mixing_strategies_names_both():
  a = distribute.OneDeviceStrategy("/cpu:0")
  b = distribute.OneDeviceStrategy("/cpu:1")
  with a.scope():
    with pytest.raises(RuntimeError) as info:
      with b.scope():
        pass
    assert tf.distribute.get_strategy() is a
  assert repr(a) in str(info.value) and repr(b) in str(info.value)
  assert not tf.distribute.has_strategy()


def test_variables_placed_on_device(compare, mode):
  ours, native = compare.pair()
  for strategy in (ours, native):
    with strategy.scope():
      v = tf.Variable([1.0, 2.0])
      w = tf.compat.v1.get_variable("w_" + str(id(strategy)), shape=[2])
    assert v.device == w.device == cpu(1)
    assert strategy.extended.variable_created_in_scope(v)
  assert not ours.extended.variable_created_in_scope(tf.Variable(1.0))


def test_run_context_and_device(compare, mode):
  def program(strategy):
    def fn(x):
      ctx = tf.distribute.get_replica_context()
      return (x * 2, ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync,
              tf.identity(x).device, ctx.devices,
              tf.distribute.get_strategy() is strategy,
              tf.distribute.in_cross_replica_context())
    if mode == "eager":
      return strategy.run(fn, args=(tf.constant(3.0),))
    return tf.function(lambda: strategy.run(fn, args=(tf.constant(3.0),)))()
  ours, native = compare.both(program)
  assert_same(ours[:3], native[:3])
  assert ours[3:] == native[3:]
  assert ours[3] == cpu(1)


def test_run_nested_structures_and_python_values(compare):
  def program(strategy):
    return strategy.run(lambda a, b, c=None: {"a": a, "b": b, "c": c},
                        args=((tf.constant(1), 2.5), [np.float32(3)]),
                        kwargs={"c": "text"})
  ours, native = compare.both(program)
  assert_same(ours, native)


def test_run_accepts_tf_function_and_inside_tf_function(compare):
  @tf.function
  def double(x):
    return x * 2
  ours, native = compare.pair()
  for strategy in (ours, native):
    assert strategy.run(double, args=(tf.constant(4),)).numpy() == 8
    outer = tf.function(lambda x: strategy.run(double, args=(x,)))
    assert outer(tf.constant(5)).numpy() == 10


def test_run_autograph_control_flow_in_tf_function():
  ours = distribute.OneDeviceStrategy(DEVICE)
  def fn(x):
    if x > 0:
      return x
    return -x
  outer = tf.function(lambda x: ours.run(fn, args=(x,)))
  assert outer(tf.constant(-3)).numpy() == 3


@pytest.mark.parametrize("op", ["SUM", "MEAN", "sum", "mean",
                                tf.distribute.ReduceOp.SUM])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_reduce_matches_native(compare, op, axis, mode):
  value = tf.constant([[1.0, 2.0, 4.0], [3.0, 5.0, 8.0]])
  def program(strategy):
    per_replica = strategy.run(tf.identity, args=(value,))
    return in_mode(mode, lambda: strategy.reduce(op, per_replica, axis=axis))
  ours, native = compare.both(program)
  assert_same(ours, native)


def test_reduce_mean_of_integers_matches_native(compare):
  value = tf.constant([1, 2, 4])
  ours, native = compare.both(lambda s: s.reduce("MEAN", value, axis=0))
  assert_same(ours, native)


def test_reduce_bad_input():
  ours = distribute.OneDeviceStrategy(DEVICE)
  with pytest.raises(ValueError, match="Unknown reduce_op 'MAX'.*SUM.*MEAN"):
    ours.reduce("MAX", tf.constant(1.0), axis=None)
  with pytest.raises(ValueError, match=r"`axis`=2 is out of range.*rank 1"):
    ours.reduce("SUM", tf.constant([1.0]), axis=2)
  with pytest.raises(TypeError, match="`axis` must be None or an integer"):
    ours.reduce("SUM", tf.constant([1.0]), axis="0")
  from compat_distribute.values.distributed import PerReplica
  foreign = PerReplica((tf.constant(1.0), tf.constant(2.0)))
  with pytest.raises(ValueError, match="different strategy"):
    ours.reduce("SUM", foreign, axis=None)
  def in_replica():
    return ours.reduce("SUM", tf.constant(1.0), axis=None)
  with pytest.raises(RuntimeError, match="cross-replica context"):
    ours.run(in_replica)
  assert not tf.distribute.has_strategy()


def test_run_bad_input():
  ours = distribute.OneDeviceStrategy(DEVICE)
  with pytest.raises(TypeError, match="callable `fn`.*got 3"):
    ours.run(3)
  with pytest.raises(ValueError, match="list or tuple.*args=\\(x,\\)"):
    ours.run(lambda x: x, args=tf.constant(1.0))
  with pytest.raises(TypeError, match="`kwargs` as a dict"):
    ours.run(lambda x: x, kwargs=[1])
  assert not tf.distribute.has_strategy()




def test_merge_call_and_collectives(compare, mode):
  def program(strategy):
    def merge_fn(s, x, y=None):
      assert s is strategy
      assert tf.distribute.in_cross_replica_context()
      return x + y
    def fn():
      ctx = tf.distribute.get_replica_context()
      merged = ctx.merge_call(merge_fn, args=(tf.constant(1.0),),
                              kwargs={"y": tf.constant(2.0)})
      summed = ctx.all_reduce("SUM", {"a": tf.constant([1.0, 2.0])})
      meaned = ctx.all_reduce(tf.distribute.ReduceOp.MEAN, tf.constant(3))
      gathered = ctx.all_gather(tf.constant([[1.0, 2.0]]), axis=0)
      return merged, summed, meaned, gathered
    return in_mode(mode, lambda: strategy.run(fn))
  ours, native = compare.both(program)
  assert_same(ours, native)




def test_all_reduce_gradient_matches_native(compare):
  def program(strategy):
    x = tf.constant([1.0, 2.0])
    def fn():
      with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.distribute.get_replica_context().all_reduce("SUM", x * x)
        loss = tf.reduce_sum(y)
      return tape.gradient(loss, x)
    return strategy.run(fn)
  ours, native = compare.both(program)
  assert_same(ours, native)


def test_local_results_gather_group(compare):
  def program(strategy):
    value = strategy.run(lambda: tf.constant([[1, 2]]))
    return (strategy.experimental_local_results(value),
            strategy.experimental_local_results((1, {"a": 2})),
            strategy.gather(value, axis=0))
  ours, native = compare.both(program)
  assert_same(ours, native)
  ours_s = distribute.OneDeviceStrategy(DEVICE)
  assert isinstance(ours_s.experimental_local_results(3), tuple)
  one = tf.constant(1)
  assert ours_s.group(one) is one  # one value comes back itself, as in TF
  assert ours_s.group([one, one]) is None  # eager tf.group returns None


def test_extended_reduce_to_update_value_container(compare, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(1.0)
    def body():
      reduced = strategy.extended.reduce_to("SUM", tf.constant(2.0), v)
      batch = strategy.extended.batch_reduce_to(
          tf.distribute.ReduceOp.MEAN, [(tf.constant(3.0), v),
                                        (tf.constant(4.0), "/cpu:0")])
      updated = strategy.extended.update(
          v, lambda var, d: var.assign_add(d), args=(tf.constant(5.0),))
      in_replica = strategy.run(lambda: strategy.extended.update(
          v, lambda var, d: var.assign_add(d), args=(tf.constant(1.0),),
          group=False))
      return reduced, batch, tf.convert_to_tensor(updated), in_replica
    out = in_mode(mode, body)
    return out[0], out[1], out[2], tf.convert_to_tensor(
        strategy.experimental_local_results(out[3])[0]), v.read_value()
  ours, native = compare.both(program)
  assert_same(ours, native)
  ours_s = distribute.OneDeviceStrategy(DEVICE)
  with ours_s.scope():
    v = tf.Variable(1.0)
  assert ours_s.extended.value_container(v) is v


def test_colocate_vars_with(compare):
  ours, native = compare.pair()
  for strategy in (ours, native):
    with strategy.scope():
      with tf.device("/cpu:3"):
        anchor = tf.Variable(1.0)
      with strategy.extended.colocate_vars_with(anchor):
        slot = tf.Variable(2.0)
      assert slot.device == anchor.device
  with pytest.raises(RuntimeError, match="inside `with strategy.scope\\(\\):`"):
    ours.extended.colocate_vars_with(tf.Variable(1.0))


def test_logical_device_methods():
  ours = distribute.OneDeviceStrategy(DEVICE)
  t = tf.constant([[1.0, 2.0]])
  assert ours.experimental_assign_to_logical_device(t, 0) is t
  assert ours.experimental_replicate_to_logical_devices(t) is t
  assert ours.experimental_split_to_logical_devices(t, [1, 1]) is t
  with pytest.raises(ValueError, match="logical_device_id 1 is out of range"):
    ours.experimental_assign_to_logical_device(t, 1)
  with pytest.raises(ValueError, match="has 2 entries but the tensor has rank"):
    ours.experimental_split_to_logical_devices(tf.constant([1.0]), [1, 1])
  with pytest.raises(ValueError, match="product of partition_dimensions"):
    ours.experimental_split_to_logical_devices(t, [1, 2])


def test_deprecated_aliases_warn_once():
  import warnings
  from compat_distribute.runtime import logs
  logs._warned.discard("Strategy.experimental_run_v2")  # pylint: disable=protected-access
  ours = distribute.OneDeviceStrategy(DEVICE)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
      assert ours.experimental_run_v2(lambda: tf.constant(7)).numpy() == 7
  deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
  assert len(deprecations) == 1
  assert "use Strategy.run instead" in str(deprecations[0].message)


def test_missing_device_reported_once(caplog):
  from compat_distribute.runtime import devices
  devices._reported.discard(  # pylint: disable=protected-access
      "/job:localhost/replica:0/task:0/device:GPU:7")
  with caplog.at_level("WARNING", logger="compat_distribute"):
    s = distribute.OneDeviceStrategy("/gpu:7")
    distribute.OneDeviceStrategy("/gpu:7")
  messages = [r.getMessage() for r in caplog.records if "GPU:7" in r.getMessage()]
  assert len(messages) == 1
  assert "does not exist" in messages[0] and "device:CPU:0 instead" in messages[0]
  assert s.extended.worker_devices == (
      "/job:localhost/replica:0/task:0/device:GPU:7",)
  assert s.run(lambda: tf.constant(2) + 1).numpy() == 3


def test_per_replica_values_do_not_retrace():
  from compat_distribute.values.distributed import PerReplica
  traces = []
  @tf.function
  def f(v):
    traces.append(1)
    return v.values[0] + v.values[1]
  for i in range(3):
    f(PerReplica((tf.constant(float(i)), tf.constant(1.0))))
  assert len(traces) == 1


def test_checkpoint_interchange_with_native(compare, tmp_path):
  ours, native = compare.pair()
  with ours.scope():
    v = tf.Variable([1.0, 2.0])
  path = tf.train.Checkpoint(v=v).save(str(tmp_path / "ours"))
  with native.scope():
    w = tf.Variable([0.0, 0.0])
  tf.train.Checkpoint(v=w).restore(path).assert_consumed()
  np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])
  w.assign([5.0, 6.0])
  path2 = tf.train.Checkpoint(v=w).save(str(tmp_path / "native"))
  tf.train.Checkpoint(v=v).restore(path2).assert_consumed()
  np.testing.assert_array_equal(v.numpy(), [5.0, 6.0])


def test_v2_strategy_keeps_tf_input_iterator_methods(compare):
  # TF2 strategies still have make_dataset_iterator, make_input_fn_iterator
  # and experimental_run (TensorFlow's own strategy tests use them).
  def program(strategy):
    batches = strategy.make_dataset_iterator(tf.data.Dataset.range(4).batch(2))
    batches.initialize()
    first = strategy.experimental_run(lambda x: x * 10, batches)
    inputs = strategy.make_input_fn_iterator(
        lambda ctx: tf.data.Dataset.range(3).map(
            lambda x: x + ctx.num_replicas_in_sync))
    inputs.initialize()
    second = strategy.experimental_run(lambda x: x, inputs)
    return first, second
  ours, native = compare.both(program)
  assert_same(ours, native)
