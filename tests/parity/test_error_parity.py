"""Bad input and misuse, under TensorFlow 2.21's strategies and under ours.

Each case makes the same call on TensorFlow's strategy and on ours, in one
configuration: facade (``v2`` or ``v1``), strategy (``od``: OneDevice on
``/cpu:1``; ``cs1`` / ``cs2``: CentralStorage on one or two CPUs) and mode
(``eager``, ``function``: inside a ``tf.function``, ``graph``: a TF1 graph,
v1 facade only).  Where TensorFlow raises, ours must raise the same type or
a subclass of it (so an ``except`` written for TensorFlow still catches
ours), and ours must show the value it rejected; where TensorFlow succeeds,
ours must too, with the same values.  After either, no scope, strategy or
variable creator may be left entered (``conftest`` checks the main thread;
the graph mode check is here).

The cases are the ones the other test files do not cover.  Where ours
behaves differently on purpose the difference is documented in docs/ and
tested elsewhere (e.g. ``reduce`` with a list of axes, ``InputOptions``
under CentralStorage, methods one facade of TensorFlow lacks).
"""
import itertools

import numpy as np
import pytest
import tensorflow as tf
from fixtures import strategies

from compat_distribute import _tf_private

pytestmark = pytest.mark.parity

KINDS = {"od": "one_device", "cs": "central_storage"}


def configs(facades, kinds, modes):
  """Every (facade, kind, mode) of the space-separated choices."""
  return list(itertools.product(facades.split(), kinds.split(),
                                modes.split()))


# -- the cases ------------------------------------------------------------
# Each is (name, fn, configurations, shows): fn(strategy, impl) makes the
# call; `shows` is text our message must contain when TensorFlow raises
# (the rejected value), or None where the error is not ours (e.g. Python's
# own for a call with missing arguments).

STRATEGY_CASES = []
CONSTRUCTOR_CASES = []


def case(name, where, shows=None):
  def register(fn):
    STRATEGY_CASES.append((name, fn, where, shows))
    return fn
  return register


def constructor(name, kind, args, kwargs=None, shows=None):
  CONSTRUCTOR_CASES.append((name, kind, args, kwargs or {}, shows))


def replica_id():
  ctx = tf.distribute.get_replica_context()
  return tf.cast(ctx.replica_id_in_sync_group, tf.float32)


def per_replica(s, shape=(2,)):
  return s.run(lambda: replica_id() + tf.ones(shape))


def dataset():
  return tf.data.Dataset.range(8).batch(4)


def variable(s, **kwargs):
  with s.scope():
    return tf.Variable(1.0, **kwargs)


EAGER = configs("v2 v1", "od cs1 cs2", "eager")
EAGER_AND_TRACED = configs("v2 v1", "od cs1 cs2", "eager function")
V2_ONLY = configs("v2", "od cs1 cs2", "eager function")  # not in v1 of TF
CENTRAL = configs("v2 v1", "cs1 cs2", "eager function")
V1_GRAPH = configs("v1", "od cs1 cs2", "graph")

# -- constructors (v2 eagerly, v1 in a TF1 graph) --

constructor("no_device", "od", (None,))
constructor("empty_device", "od", ("",))
constructor("int_device", "od", (3,), shows="3 of type int")
constructor("float_device", "od", (1.5,), shows="1.5")
constructor("list_device", "od", (["/cpu:0"],), shows="['/cpu:0']")
constructor("bytes_device", "od", (b"/cpu:0",), shows="b'/cpu:0'")
constructor("device_spec", "od", (tf.DeviceSpec(device_type="CPU"),),
            shows="DeviceSpec")
constructor("unknown_device_type", "od", ("/foo:0",), shows="'/foo:0'")
constructor("device_index_not_int", "od", ("/cpu:abc",), shows="'/cpu:abc'")
constructor("device_type_not_capitals", "od", ("/device:foo:0",),
            shows="'/device:foo:0'")
constructor("mixed_case_device", "od", ("/Cpu:1",))
constructor("replica_and_device", "od", ("/replica:0/cpu:1",))
constructor("compute_devices_string", "cs", ("/cpu:0",), shows="'/cpu:0'")
constructor("compute_devices_int", "cs", (3,), shows="3 of type int")
constructor("int_compute_device", "cs", ([3],), shows="3 of type int")
constructor("none_compute_device", "cs", ([None],))
constructor("bytes_compute_device", "cs", (["/cpu:0", b"/cpu:1"],),
            shows="b'/cpu:1'")
constructor("device_spec_compute_device", "cs",
            ([tf.DeviceSpec(device_type="CPU")],), shows="DeviceSpec")
constructor("unknown_compute_device", "cs", (["/foo:0"],), shows="'/foo:0'")
constructor("compute_devices_tuple", "cs", (("/cpu:0", "/cpu:1"),))
constructor("compute_devices_set", "cs", ({"/cpu:1"},))
constructor("compute_devices_array", "cs", (np.array(["/cpu:0", "/cpu:1"]),))
constructor("parameter_device_spec", "cs", (["/cpu:0", "/cpu:1"],),
            {"parameter_device": tf.DeviceSpec(device_type="CPU",
                                               device_index=2)})

# -- run --


@case("run_not_callable", EAGER_AND_TRACED + V1_GRAPH, shows="3 of type int")
def _(s, _):
  return s.run(3)


@case("run_none", EAGER_AND_TRACED, shows="None")
def _(s, _):
  return s.run(None)


@case("run_args_not_a_sequence", EAGER_AND_TRACED, shows="5")
def _(s, _):
  return s.run(lambda x: x, args=5)


@case("run_kwargs_string", EAGER_AND_TRACED, shows="'x'")
def _(s, _):
  return s.run(lambda **k: tf.constant(1.0), kwargs="x")


@case("run_missing_argument", EAGER_AND_TRACED)
def _(s, _):
  return s.run(lambda x: x)


@case("run_inside_run", EAGER_AND_TRACED + V1_GRAPH, shows="replica context")
def _(s, _):
  return s.run(lambda: s.run(lambda: tf.constant(1.0)))


# -- reduce and gather --


@case("reduce_axis_out_of_range", EAGER + V1_GRAPH, shows="`axis`=5")
def _(s, _):
  return s.reduce("SUM", per_replica(s), axis=5)


@case("reduce_negative_axis_out_of_range", EAGER, shows="`axis`=-2")
def _(s, _):
  return s.reduce("SUM", per_replica(s), axis=-2)


@case("reduce_axis_string", EAGER_AND_TRACED, shows="'0'")
def _(s, _):
  return s.reduce("SUM", per_replica(s), axis="0")


@case("reduce_axis_float", EAGER_AND_TRACED, shows="1.5")
def _(s, _):
  return s.reduce("SUM", per_replica(s), axis=1.5)


@case("reduce_axis_float_tensor", EAGER, shows="float32")
def _(s, _):
  return s.reduce("SUM", per_replica(s), axis=tf.constant(0.0))


@case("reduce_axis_true_out_of_range", EAGER_AND_TRACED + V1_GRAPH,
      shows="`axis`=1")
def _(s, _):
  return s.reduce("SUM", per_replica(s), axis=True)


@case("reduce_axis_true_is_one", EAGER_AND_TRACED)
def _(s, _):
  return s.reduce("MEAN", per_replica(s, (2, 3)), axis=True)


@case("reduce_python_number_along_axis", EAGER_AND_TRACED,
      shows="`axis`=0 is out of range for a value of rank 0")
def _(s, _):
  return s.reduce("SUM", 1.0, axis=0)


@case("reduce_nest_of_tensors",
      configs("v2", "cs1", "eager function") + configs("v1", "cs1", "graph"))
def _(s, _):
  return s.reduce("MEAN", (per_replica(s), per_replica(s)), axis=None)


@case("reduce_in_replica_context", EAGER_AND_TRACED,
      shows="cross-replica context")
def _(s, _):
  return s.run(lambda: s.reduce("SUM", tf.constant(1.0), axis=None))


@case("gather_axis_out_of_range", configs("v2", "cs2", "eager function"))
def _(s, _):
  return s.gather(per_replica(s), axis=5)


@case("gather_in_replica_context", V2_ONLY,
      shows="cross-replica context")
def _(s, _):
  return s.run(lambda: s.gather(tf.constant([1.0]), axis=0))


# -- input --

INPUT = configs("v2 v1", "od cs1 cs2", "eager function") + V1_GRAPH


@case("distribute_int", INPUT, shows="3 of type int")
def _(s, _):
  return s.experimental_distribute_dataset(3)


@case("distribute_none", INPUT, shows="None")
def _(s, _):
  return s.experimental_distribute_dataset(None)


@case("distribute_list", EAGER_AND_TRACED, shows="[1, 2]")
def _(s, _):
  return s.experimental_distribute_dataset([1, 2])


@case("distribute_options_int", EAGER_AND_TRACED, shows="3")
def _(s, _):
  return s.experimental_distribute_dataset(dataset(), 3)


# Inside a tf.function TensorFlow's IndexError reaches the caller as
# AutoGraph's StagingError; ours stays an IndexError (and ValueError).
@case("distribute_unbatched_over_replicas",
      configs("v2 v1", "cs2", "eager") + configs("v1", "cs2", "graph"),
      shows="TensorSpec(shape=()")
def _(s, _):
  return s.experimental_distribute_dataset(tf.data.Dataset.range(4))


@case("dataset_fn_not_callable", INPUT, shows="3 of type int")
def _(s, _):
  return s.distribute_datasets_from_function(3)


@case("dataset_fn_is_a_dataset", EAGER_AND_TRACED, shows="Dataset")
def _(s, _):
  return s.distribute_datasets_from_function(dataset())


@case("dataset_fn_returns_int", INPUT, shows="3 of type int")
def _(s, _):
  return s.distribute_datasets_from_function(lambda _: 3)


@case("dataset_fn_returns_none", EAGER_AND_TRACED, shows="None")
def _(s, _):
  return s.distribute_datasets_from_function(lambda _: None)


@case("dataset_fn_takes_no_context", EAGER_AND_TRACED)
def _(s, _):
  return s.distribute_datasets_from_function(lambda: dataset())


@case("value_fn_not_callable", V2_ONLY, shows="3 of type int")
def _(s, _):
  return s.experimental_distribute_values_from_function(3)


@case("value_fn_structures_differ", configs("v2", "cs2", "eager function"),
      shows="same structure")
def _(s, _):
  return s.experimental_distribute_values_from_function(
      lambda ctx: [1.0] if ctx.replica_id_in_sync_group == 0 else [2.0, 3.0])


@case("dataset_iterator_of_int",
      configs("v1", "od cs2", "eager") + V1_GRAPH, shows="3 of type int")
def _(s, _):
  return s.make_dataset_iterator(3)


@case("dataset_iterator_of_distributed_dataset",
      configs("v1", "od cs2", "eager"), shows="DistributedDataset")
def _(s, _):
  return s.make_dataset_iterator(s.experimental_distribute_dataset(dataset()))


@case("input_fn_iterator_of_int", configs("v1", "od cs2", "eager") + V1_GRAPH,
      shows="3 of type int")
def _(s, _):
  return s.make_input_fn_iterator(3)


@case("input_fn_returns_none", configs("v1", "od cs2", "function") + V1_GRAPH,
      shows="None")
def _(s, _):
  return s.make_input_fn_iterator(lambda _: None)


@case("experimental_run_with_dataset",
      configs("v1", "od cs2", "eager function") + V1_GRAPH, shows="Dataset")
def _(s, _):
  return s.experimental_run(lambda x: x, dataset())


@case("experimental_run_with_int", configs("v1", "od cs2", "eager") + V1_GRAPH,
      shows="3 of type int")
def _(s, _):
  return s.experimental_run(lambda x: x, 3)


def _numpy_in_session(s, value, **kwargs):
  with tf.compat.v1.Session() as session:
    return s.experimental_make_numpy_dataset(value, session=session, **kwargs)


@case("numpy_dataset_of_int", V1_GRAPH, shows="3")
def _(s, _):
  return _numpy_in_session(s, 3)


@case("numpy_dataset_of_none", V1_GRAPH, shows="None")
def _(s, _):
  return _numpy_in_session(s, None)


@case("numpy_dataset_of_numpy_scalar", V1_GRAPH, shows="1.0")
def _(s, _):
  return _numpy_in_session(s, np.float32(1.0))


@case("numpy_dataset_of_int_without_session", V1_GRAPH, shows="3")
def _(s, _):
  return s.experimental_make_numpy_dataset(3)


@case("numpy_dataset_session_not_a_session", V1_GRAPH, shows="3 of type int")
def _(s, _):
  return s.experimental_make_numpy_dataset(np.ones([2], np.float32),
                                           session=3)


@case("numpy_dataset_of_scalar_eagerly", configs("v1", "od cs2", "eager"))
def _(s, _):
  return s.experimental_make_numpy_dataset(np.float32(1.0))


# -- strategy.extended --


@case("update_non_slot_colocate_with_none", CENTRAL + V1_GRAPH,
      shows="None of type NoneType")
def _(s, _):
  return s.extended.update_non_slot(None, lambda: tf.constant(1.0))


@case("update_non_slot_colocate_with_int", configs("v2", "cs1 cs2", "eager"),
      shows="3 of type int")
def _(s, _):
  return s.extended.update_non_slot(3, lambda: tf.constant(1.0))


@case("reduce_to_unknown_device", CENTRAL + V1_GRAPH, shows="'/foo:0'")
def _(s, _):
  return s.extended.reduce_to("SUM", per_replica(s), "/foo:0")


@case("broadcast_to_empty_string", CENTRAL + V1_GRAPH, shows="empty string")
def _(s, _):
  return s.extended.broadcast_to(tf.constant(1.0), "")


@case("broadcast_to_unknown_device", CENTRAL, shows="'/foo:0'")
def _(s, _):
  return s.extended.broadcast_to(tf.constant(1.0), "/foo:0")


@case("batch_reduce_to_element_not_a_pair",
      configs("v2", "cs1 cs2", "eager") + configs("v2", "od cs1", "function"),
      shows="one element is")
def _(s, _):
  return s.extended.batch_reduce_to("SUM", [per_replica(s)])


@case("batch_reduce_to_reduce_op_none",
      configs("v2", "cs2", "eager function") + configs("v1", "cs2", "graph"),
      shows="None of type NoneType")
def _(s, _):
  return s.extended.batch_reduce_to(None,
                                    [(per_replica(s), "/cpu:0")])


@case("all_reduce_reduce_op_none",
      configs("v2", "cs2", "eager function") + configs("v1", "cs2", "graph"),
      shows="None of type NoneType")
def _(s, _):
  return s.run(lambda: tf.distribute.get_replica_context().all_reduce(
      None, tf.constant(1.0)))


@case("all_reduce_unknown_op", EAGER_AND_TRACED, shows="'MAX'")
def _(s, _):
  return s.run(lambda: tf.distribute.get_replica_context().all_reduce(
      "MAX", tf.constant(1.0)))


@case("merge_call_not_callable", EAGER_AND_TRACED, shows="3 of type int")
def _(s, _):
  return s.run(lambda: tf.distribute.get_replica_context().merge_call(3))


@case("variable_created_in_scope_of_int", EAGER_AND_TRACED + V1_GRAPH,
      shows="3 of type int")
def _(s, _):
  return s.extended.variable_created_in_scope(3)


@case("variable_created_in_scope_of_none", EAGER_AND_TRACED,
      shows="None of type NoneType")
def _(s, _):
  return s.extended.variable_created_in_scope(None)


@case("variable_created_in_scope_of_plain_variable", EAGER)
def _(s, _):
  return s.extended.variable_created_in_scope(tf.Variable(1.0))


@case("colocate_vars_with_int", EAGER + V1_GRAPH, shows="got 3")
def _(s, _):
  with s.scope():
    with s.extended.colocate_vars_with(3):
      return tf.Variable(1.0)


# -- variables and scopes --


@case("aggregation_unknown_string",
      configs("v2", "cs2", "eager") + configs("v1", "cs2", "graph"),
      shows="'bogus'")
def _(s, _):
  return variable(s, aggregation="bogus")


@case("aggregation_reduce_op", configs("v2", "cs2", "eager"),
      shows="ReduceOp.SUM")
def _(s, _):
  return variable(s, aggregation=tf.distribute.ReduceOp.SUM)


@case("assign_in_replica_context_without_aggregation",
      configs("v2", "cs2", "eager"), shows="aggregation=NONE")
def _(s, _):
  v = variable(s)
  return s.run(lambda: v.assign(tf.constant(2.0)))


@case("scope_of_another_strategy_inside", EAGER + V1_GRAPH,
      shows="device:CPU:2")
def _(s, impl):
  other = make(impl, _facade_of(s), "od", device="/cpu:2")
  with s.scope():
    with other.scope():
      return tf.constant(1.0)


@case("run_of_another_strategy_inside_run", EAGER_AND_TRACED,
      shows="device:CPU:2")
def _(s, impl):
  other = make(impl, _facade_of(s), "od", device="/cpu:2")
  return s.run(lambda: other.run(lambda: tf.constant(1.0)))


# -- running a case ---------------------------------------------------------


def _facade_of(strategy):
  return "v2" if isinstance(strategy, tf.distribute.Strategy) else "v1"


def make(impl, facade, kind, device="/cpu:1"):
  """``impl``'s strategy for ``kind``, made by ``fixtures.strategies``.

  ``od`` runs on ``device``; ``cs<n>`` computes on /cpu:0../cpu:<n-1> with
  variables on /cpu:0.
  """
  if kind == "od":
    return strategies.strategy(impl, KINDS[kind], facade=facade,
                               device=device)
  return strategies.strategy(impl, KINDS[kind[:2]], int(kind[2:]),
                             facade=facade, parameter_device="/cpu:0")


def _plain(value):
  """A comparable form of a result: nested lists of numbers, else a type
  name."""
  if isinstance(value, (tf.Tensor, tf.Variable, np.ndarray, np.generic)):
    return np.asarray(value).tolist()
  if isinstance(value, (int, float, str, bool, type(None))):
    return value
  return type(value).__name__


def _outcome(call):
  try:
    return "ok", call()
  except Exception as e:  # pylint: disable=broad-except
    return "error", e


def _run(impl, config, fn):
  """``(kind, result)`` of fn in ``config``; results made comparable."""
  facade, kind, mode = config
  if mode == "graph":
    with tf.Graph().as_default() as graph:
      strategy = make(impl, facade, kind)
      before = (list(_tf_private.strategy_stack_of(graph)),
                _tf_private.variable_creator_stack(graph))
      result = _outcome(lambda: type(fn(strategy, impl)).__name__)
      after = (list(_tf_private.strategy_stack_of(graph)),
               _tf_private.variable_creator_stack(graph))
      assert before == after, f"{impl} left a scope entered in the graph"
      return result
  strategy = make(impl, facade, kind)
  if mode == "eager":
    kind_, value = _outcome(lambda: fn(strategy, impl))
    if kind_ == "ok":
      value = tf.nest.map_structure(
          _plain, list(strategy.experimental_local_results(value)))
    return kind_, value

  @tf.function
  def traced():
    fn(strategy, impl)
    return tf.constant(0)

  return _outcome(lambda: int(traced()))


def _assert_parity(native, ours, shows):
  (native_kind, native_result), (ours_kind, ours_result) = native, ours
  if native_kind == "ok":
    assert ours_kind == "ok", (
        f"TensorFlow succeeds ({native_result!r}) but ours raises "
        f"{type(ours_result).__name__}: {ours_result}")
    assert ours_result == native_result
    return
  assert ours_kind == "error", (
      f"TensorFlow raises {type(native_result).__name__}: {native_result}, "
      f"but ours succeeds ({ours_result!r})")
  assert isinstance(ours_result, type(native_result)), (
      f"TensorFlow raises {type(native_result).__name__} but ours raises "
      f"{type(ours_result).__name__} (not a subclass): {ours_result}")
  if shows is not None:
    assert shows in str(ours_result), (
        f"our message does not show {shows!r}: {ours_result}")


def _params(cases):
  return [pytest.param(fn, config, shows,
                       id=f"{name}-{'-'.join(config)}")
          for name, fn, where, shows in cases for config in where]


@pytest.mark.parametrize("fn, config, shows", _params(STRATEGY_CASES))
def test_same_outcome_as_tensorflow(fn, config, shows):
  _assert_parity(_run("native", config, fn), _run("ours", config, fn), shows)


def _constructed(impl, facade, kind, args, kwargs):
  strategy = strategies.strategy_class(impl, KINDS[kind], facade)(*args,
                                                                 **kwargs)
  with strategy.scope():
    v = tf.Variable(1.0)
  return list(strategy.extended.worker_devices), v.device


@pytest.mark.parametrize(
    "kind, args, kwargs, shows, facade",
    [pytest.param(kind, args, kwargs, shows, facade, id=f"{name}-{facade}")
     for name, kind, args, kwargs, shows in CONSTRUCTOR_CASES
     for facade in ("v2", "v1_graph")])
def test_constructor_same_outcome_as_tensorflow(kind, args, kwargs, shows,
                                                facade):
  results = []
  for impl in ("native", "ours"):
    if facade == "v1_graph":
      with tf.Graph().as_default():
        results.append(_outcome(
            lambda i=impl: _constructed(i, "v1", kind, args, kwargs)))
    else:
      results.append(_outcome(
          lambda i=impl: _constructed(i, "v2", kind, args, kwargs)))
  _assert_parity(*results, shows)
