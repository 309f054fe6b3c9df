"""Differential tests: corner cases of the public API against native TF.

Each test runs the same calls on our strategy and on TensorFlow's, and
compares values, devices and exception types.
"""
import numpy as np
import pytest
import tensorflow as tf

from compat_distribute import v2 as distribute
from conftest import cpu, in_mode  # pylint: disable=g-bad-import-order
from fixtures import strategies

pytestmark = pytest.mark.parity

KINDS = ["one_device", "central_1", "central_2"]


POINTS = {
    "one_device": strategies.Comparison("one_device", device="/cpu:0"),
    "central_1": strategies.Comparison("central_storage", 1),
    "central_2": strategies.Comparison("central_storage", 2),
}


def make(kind, native):
  return POINTS[kind].strategy("native" if native else "ours")


@pytest.fixture(params=KINDS)
def pair(request):
  return POINTS[request.param].pair()


def outcome(fn):
  """``("ok", value)`` or ``("error", exception)``."""
  try:
    return "ok", fn()
  except Exception as e:  # pylint: disable=broad-except
    return "error", e


def _replica_id_float():
  ctx = tf.distribute.get_replica_context()
  return tf.cast(ctx.replica_id_in_sync_group, tf.float32)


@pytest.mark.parametrize("reduce_op", [3, None])
@pytest.mark.parametrize("axis", [None, 0])
def test_reduce_op_of_wrong_type_raises_tf_exception_type(pair, mode,
                                                          reduce_op, axis):
  ours, native = pair
  value = tf.constant([1.0, 2.0])
  kind, theirs = outcome(
      lambda: in_mode(mode, lambda: native.reduce(reduce_op, value, axis)))
  assert kind == "error"
  with pytest.raises(type(theirs), match="reduce_op must be a"):
    in_mode(mode, lambda: ours.reduce(reduce_op, value, axis))


def test_reduce_to_with_wrong_op_type_raises_assertion_error(pair):
  ours, native = pair
  for strategy in (native, ours):
    kind, error = outcome(lambda s=strategy: s.extended.reduce_to(
        3, tf.constant(1.0), "/cpu:0"))
    assert kind == "error" and isinstance(error, AssertionError), error
  # Still a ValueError for an unknown name, as in TensorFlow.
  with pytest.raises(ValueError):
    native.reduce("MAX", tf.constant(1.0), axis=None)
  with pytest.raises(ValueError):
    ours.reduce("MAX", tf.constant(1.0), axis=None)


def test_all_reduce_with_wrong_op_type_one_device(mode):
  for native in (True, False):
    strategy = make("one_device", native)
    kind, error = outcome(lambda s=strategy: in_mode(
        mode, lambda: s.run(lambda: tf.distribute.get_replica_context()
                            .all_reduce(3, tf.constant(1.0)))))
    assert kind == "error" and isinstance(error, AssertionError), error


def _per_replica_pair(strategy):
  return strategy.experimental_distribute_values_from_function(
      lambda ctx: tf.constant([1.0, 2.0]) * tf.cast(
          ctx.replica_id_in_sync_group + 1, tf.float32))


_AGGREGATION_CALLS = {
    "reduce": lambda s, v, agg: s.reduce(agg, v, axis=None),
    "reduce_axis": lambda s, v, agg: s.reduce(agg, v, axis=0),
    "reduce_to": lambda s, v, agg: s.extended.reduce_to(agg, v, "/cpu:0"),
    "batch_reduce_to": lambda s, v, agg: s.extended.batch_reduce_to(
        agg, [(v, "/cpu:0")]),
}


@pytest.mark.parametrize("call", sorted(_AGGREGATION_CALLS))
@pytest.mark.parametrize("aggregation", [
    tf.VariableAggregation.SUM, tf.VariableAggregation.MEAN,
    tf.VariableAggregation.ONLY_FIRST_REPLICA])
def test_variable_aggregation_is_not_a_reduce_op(pair, call, aggregation):
  """TensorFlow rejects a VariableAggregation as reduce_op (AssertionError;
  TypeError for reduce with an axis; ValueError from CentralStorage's
  batch_reduce_to); ours raises an error of TensorFlow's type naming the
  ReduceOp to use.  The one exception: TensorFlow's single-device
  CentralStorage passes the values of batch_reduce_to through unchecked;
  ours rejects it there too (docs/differences.md)."""
  ours, native = pair
  fn = _AGGREGATION_CALLS[call]
  kind, theirs = outcome(lambda: fn(native, _per_replica_pair(native),
                                    aggregation))
  expected = type(theirs)
  if kind == "ok":
    assert call == "batch_reduce_to" and native.num_replicas_in_sync == 1
    expected = AssertionError
  with pytest.raises(expected, match="a variable's aggregation"):
    fn(ours, _per_replica_pair(ours), aggregation)


def test_all_reduce_with_variable_aggregation_one_device():
  for native in (True, False):
    strategy = make("one_device", native)
    kind, error = outcome(lambda s=strategy: s.run(
        lambda: tf.distribute.get_replica_context().all_reduce(
            tf.VariableAggregation.SUM, tf.constant(1.0))))
    assert kind == "error" and isinstance(error, AssertionError), error


@pytest.mark.parametrize("destinations", [["/cpu:0"], ("/cpu:0",)])
def test_reduce_to_several_destinations_rejected(pair, destinations):
  ours, native = pair
  kind, theirs = outcome(lambda: native.extended.reduce_to(
      "SUM", _per_replica_pair(native), destinations))
  assert kind == "error", theirs
  with pytest.raises(type(theirs), match="takes one destination"):
    ours.extended.reduce_to("SUM", _per_replica_pair(ours), destinations)
  kind, theirs = outcome(lambda: native.extended.batch_reduce_to(
      "SUM", [(_per_replica_pair(native), destinations)]))
  assert kind == "error", theirs
  with pytest.raises(type(theirs), match="takes one destination"):
    ours.extended.batch_reduce_to(
        "SUM", [(_per_replica_pair(ours), destinations)])


def test_batch_reduce_to_takes_a_generator_of_pairs(pair):
  """Ours reads the pairs once, so a generator gives what a list gives
  TensorFlow (TensorFlow's CentralStorage reads them twice and fails)."""
  ours, native = pair
  results = []
  for strategy, pairs in ((ours, lambda v: ((v, "/cpu:0") for _ in range(2))),
                          (native, lambda v: [(v, "/cpu:0")] * 2)):
    reduced = strategy.extended.batch_reduce_to(
        "SUM", pairs(_per_replica_pair(strategy)))
    results.append([strategy.experimental_local_results(r)[0].numpy()
                    for r in reduced])
  np.testing.assert_allclose(results[0], results[1])
  assert len(results[0]) == 2


@pytest.mark.parametrize("axis", [np.int64(0), np.int32(-1), "tensor"])
def test_reduce_axis_numpy_int_or_tensor_in_function(pair, axis):
  ours, native = pair

  def program(strategy):
    per_replica = strategy.run(
        lambda: tf.constant([1.0, 2.0, 4.0]) * (_replica_id_float() + 1.0))
    ax = tf.constant(0) if isinstance(axis, str) else axis
    # (TensorFlow's MEAN fails on these axes; ours accepts them.)
    return strategy.reduce("SUM", per_replica, axis=ax)

  expected = tf.function(lambda: program(native))()
  got = tf.function(lambda: program(ours))()
  np.testing.assert_allclose(got.numpy(), expected.numpy())


def test_reduce_dict_with_axis_raises_type_error(pair):
  ours, native = pair
  value = {"a": tf.constant([1.0])}
  with pytest.raises(TypeError):
    native.reduce("SUM", value, axis=0)
  with pytest.raises(TypeError, match="axis=None"):
    ours.reduce("SUM", value, axis=0)


def test_run_kwargs_not_a_dict_raises_type_error(pair):
  ours, native = pair
  with pytest.raises(TypeError):
    native.run(lambda: 1, kwargs=[1])
  with pytest.raises(TypeError, match="`kwargs` as a dict"):
    ours.run(lambda: 1, kwargs=[1])


def test_merge_call_args_not_a_sequence_raises_type_error(pair, mode):
  ours, native = pair

  def program(strategy):
    ctx = tf.distribute.get_replica_context
    return strategy.run(lambda: ctx().merge_call(
        lambda _, x: x, args=tf.constant(1.0)))

  with pytest.raises(TypeError):
    in_mode(mode, lambda: program(native))
  with pytest.raises(TypeError, match="list or tuple"):
    in_mode(mode, lambda: program(ours))


def test_all_gather_indexed_slices_not_implemented(pair, mode):
  ours, native = pair

  def program(strategy):
    slices = tf.IndexedSlices(tf.constant([[1.0]]), tf.constant([0]),
                              tf.constant([2, 1]))
    return strategy.run(
        lambda: tf.distribute.get_replica_context().all_gather(slices, 0))

  with pytest.raises(NotImplementedError):
    in_mode(mode, lambda: program(native))
  with pytest.raises(NotImplementedError, match="IndexedSlices"):
    in_mode(mode, lambda: program(ours))


@pytest.mark.parametrize("reduce_op", ["SUM", "MEAN"])
@pytest.mark.parametrize("value", [2.0, "tensor"])
def test_batch_reduce_to_plain_value(pair, reduce_op, value):
  ours, native = pair

  def program(strategy):
    v = tf.constant(2.0) if value == "tensor" else value
    return strategy.extended.batch_reduce_to(
        reduce_op, [(v, "/cpu:1"), (v, "/cpu:2")])

  expected, got = program(native), program(ours)
  assert len(got) == len(expected)
  for g, e in zip(got, expected):
    assert type(g) is type(e)  # pylint: disable=unidiomatic-typecheck
    assert float(g) == float(e)
    assert getattr(g, "device", None) == getattr(e, "device", None)


def test_batch_reduce_to_plain_value_devices_central():
  ours = make("central_2", False)
  got = ours.extended.batch_reduce_to("SUM", [(tf.constant(3.0), "/cpu:2")])
  assert got[0].device == cpu(2)
  assert float(got[0]) == 3.0


def _merge_fn_devices(strategy):
  """The device an op made in merge_fn gets, without and with a device
  scope around run, eagerly and in a TF1 graph."""
  def fn():
    return tf.distribute.get_replica_context().merge_call(
        lambda _: tf.constant(1.0).device)

  found = [strategy.run(fn)]
  with tf.device("/cpu:3"):
    found.append(strategy.run(fn))
  with tf.Graph().as_default():
    found.append(strategy.run(fn))
    with tf.device("/cpu:3"):
      found.append(strategy.run(fn))
  return found


def test_merge_fn_runs_under_the_callers_device(pair):
  # TensorFlow's CentralStorage runs merge_fn outside the replica's device
  # scope (under the caller's), its OneDevice inside it.
  ours, native = pair
  assert _merge_fn_devices(ours) == _merge_fn_devices(native)


def _concrete_pairs():
  from compat_distribute import v1  # pylint: disable=g-import-not-at-top
  return [
      (distribute.OneDeviceStrategy, tf.distribute.OneDeviceStrategy),
      (distribute.experimental.CentralStorageStrategy,
       tf.distribute.experimental.CentralStorageStrategy),
      (v1.OneDeviceStrategy, tf.compat.v1.distribute.OneDeviceStrategy),
      (v1.experimental.CentralStorageStrategy,
       tf.compat.v1.distribute.experimental.CentralStorageStrategy),
  ]


@pytest.mark.parametrize("index", range(4))
def test_instances_of_tensorflows_concrete_class_running_none_of_its_code(
    index):
  # Code that asks isinstance(s, tf.distribute.OneDeviceStrategy) (tf_keras'
  # loss scaling, clipping and SAM checks) must treat ours as TF's; yet no
  # method of TF's class may run: ours resolves every one it defines.
  ours_cls, native_cls = _concrete_pairs()[index]
  ours = (ours_cls("/cpu:0") if "OneDevice" in ours_cls.__name__ else
          ours_cls(["/cpu:0", "/cpu:1"]))
  assert isinstance(ours, native_cls)
  assert type(ours).__module__.startswith("compat_distribute")
  for name in vars(native_cls):
    if name.startswith("_tf_api_names") or name in (
        "__module__", "__doc__", "__dict__", "__weakref__", "__qualname__"):
      continue
    owner = next(c for c in type(ours).__mro__ if name in vars(c))
    assert owner.__module__.startswith("compat_distribute"), (name, owner)
  # Nor may any public method of TensorFlow's base classes (v2 strategies
  # have configure, update_config_proto, unwrap... from StrategyBase).
  for base in native_cls.__mro__:
    for name in vars(base):
      if not name.startswith("_"):
        owner = next(c for c in type(ours).__mro__ if name in vars(c))
        assert owner.__module__.startswith("compat_distribute"), (name, owner)


def test_from_num_gpus_as_tensorflows_tests_use_it():
  ours = distribute.experimental.CentralStorageStrategy._from_num_gpus(0)  # pylint: disable=protected-access
  native = tf.distribute.experimental.CentralStorageStrategy._from_num_gpus(0)  # pylint: disable=protected-access
  assert ours.extended.worker_devices == list(native.extended.worker_devices)
  assert ours.num_replicas_in_sync == native.num_replicas_in_sync == 1


_AXIS_VALUES = {
    "dense": lambda: tf.reshape(tf.range(12, dtype=tf.float32), [2, 3, 2]),
    "int": lambda: tf.constant([[1, 2], [3, 4]]),
    "ragged": lambda: tf.ragged.constant([[1.0], [2.0, 3.0], [], [4.0]]),
    "string": lambda: tf.constant(["a", "b"]),
    "bool": lambda: tf.constant([True, False]),
    "sparse": lambda: tf.sparse.from_dense(tf.constant([[1.0, 0.0],
                                                        [0.0, 2.0]])),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(_AXIS_VALUES))
@pytest.mark.parametrize("axis", [0, -1, (0, 1)])
def test_reduce_along_axes_matches_native(pair, mode, kind, axis):
  """reduce with an axis: ragged values (MEAN counts rows), tuples of axes,
  and TypeError for values that cannot be summed, as in TensorFlow."""
  outcomes = []
  for strategy in pair:
    value = strategy.experimental_distribute_values_from_function(
        lambda _, make=_AXIS_VALUES[kind]: make())
    for op in ("SUM", "MEAN"):
      kind_, result = outcome(lambda s=strategy, v=value, o=op: in_mode(
          mode, lambda: s.reduce(o, v, axis=axis)))
      outcomes.append((kind_, type(result).__name__ if kind_ == "error" else
                       (result.dtype.name, np.round(result.numpy(), 4).tolist())))
  half = len(outcomes) // 2
  assert outcomes[:half] == outcomes[half:]


def _misplaced_collectives(strategy):
  """Error types of collectives called outside the code their replica
  context runs: in merge_fn, after run returned, in the scope."""
  kept = []

  def keep():
    kept.append(tf.distribute.get_replica_context())
    return tf.distribute.get_replica_context().merge_call(
        lambda _: kept[0].all_reduce("SUM", tf.constant(1.0)))

  found = [outcome(lambda: strategy.run(keep))[0]]
  found.append(outcome(lambda: kept[0].all_reduce("SUM", tf.constant(1.0))))
  found.append(outcome(lambda: kept[0].all_gather(tf.constant([1.0]), 0)))
  with strategy.scope():
    found.append(outcome(lambda: kept[0].all_reduce("SUM", tf.constant(1.0))))
  return [f if isinstance(f, str) else (f[0], type(f[1]).__name__)
          for f in found]


@pytest.mark.parametrize("kind", ["one_device", "central_1"])
def test_collectives_outside_their_replica_function_raise(kind):
  ours = _misplaced_collectives(make(kind, native=False))
  native = _misplaced_collectives(make(kind, native=True))
  assert ours == native
  assert ours[1:] == [("error", "RuntimeError")] * 3


@pytest.mark.parametrize("returns", [
    lambda i: (1.0,) if i == 0 else [1.0],
    lambda i: {"a": 1.0} if i == 0 else {"b": 1.0},
    lambda i: (1.0,) * (i + 1),
])
def test_replicas_returning_different_structures_raise_assertion_error(
    returns):
  for native in (False, True):
    strategy = make("central_2", native)

    def fn():
      replica_id = tf.get_static_value(
          tf.distribute.get_replica_context().replica_id_in_sync_group)
      return returns(int(replica_id))

    with pytest.raises(AssertionError):
      strategy.run(fn)


def test_broadcast_to_needs_one_destination(pair):
  for strategy in pair:
    for destinations in (None, ["/cpu:0"]):
      with pytest.raises(AssertionError):
        strategy.extended.broadcast_to(tf.constant(1.0), destinations)


def _copies(strategy):
  import copy  # pylint: disable=g-import-not-at-top
  copied = copy.deepcopy(strategy)
  with strategy.scope():
    v = tf.Variable(1.0)
  found = [copied is strategy, type(copied) is type(strategy),
           copied.extended.worker_devices == strategy.extended.worker_devices,
           copied.extended.variable_created_in_scope(v)]
  with strategy.scope():
    found.append(outcome(lambda: copied.scope().__enter__())[0])
  found.append(outcome(lambda: copy.copy(strategy))[0])
  return found


def test_deepcopy_makes_a_new_strategy_copy_is_refused(pair):
  ours, native = pair
  assert _copies(ours) == _copies(native) == [False, True, True, False,
                                              "error", "error"]


def test_merge_fn_error_fails_run_even_if_the_replica_catches_it(pair):
  def fn():
    try:
      tf.distribute.get_replica_context().merge_call(lambda _: 1 / 0)
    except ZeroDivisionError:
      return tf.constant(0.0)
    return tf.constant(1.0)

  for strategy in pair:
    if isinstance(strategy, tf.distribute.OneDeviceStrategy):
      # merge_fn runs inline there, in TensorFlow too: the replica catches.
      assert float(strategy.run(fn)) == 0.0
      continue
    with pytest.raises(ZeroDivisionError):
      strategy.run(fn)
