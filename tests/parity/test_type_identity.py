"""Type identity, differentially: every object the API hands a user is an
instance of every public class TensorFlow's own object of that kind is.

For each strategy (OneDevice on /cpu:1, CentralStorage on 1 and 2 compute
devices), each facade (v2, v1) and each mode (eager, inside a
``tf.function``, in a TF1 graph), the same program runs under TensorFlow's
strategy and under ours and records, for each kind of object it gets back,
the set of public classes the object is an instance of.  The classes come
from walking TensorFlow's public namespaces (and ``collections.abc``, Keras
and tf_keras' top level) at test time, so the test tracks TensorFlow.  Ours
must be an instance of every class native's is (it may be of more), and
behave alike for ``callable``, ``iter``, ``len``, ``bool``, ``hash``,
``tf.is_tensor``, ``tf.nest.flatten`` and ``tf.nest.assert_same_structure``.
Objects are inspected where they are made: inside the trace for
``tf.function``, inside the graph for TF1.
"""
import collections.abc
import functools
import inspect
import types

import numpy as np
import pytest
import tensorflow as tf

from fixtures import strategies
from support import keras as keras_support

from compat_distribute import v2 as ours_v2

# slow: 1,192 cases (about 12 s); out of `tox -e quick`.
pytestmark = [pytest.mark.parity, pytest.mark.slow]

# The Keras the running TensorFlow brings, and Keras 2 beside it (tf-keras,
# or the bundled tf.keras on TensorFlow 2.12-2.15).
keras = keras_support.keras
tf_keras = keras_support.keras_2()
FACADES = ["v2", "v1"]
CONFIGS = ["one_device", "central_storage/1", "central_storage/2"]
MODES = ["eager", "tf_function", "graph"]

# -- the public classes -------------------------------------------------------


def _walk(module, prefix, out, seen):
  if id(module) in seen:
    return
  seen.add(id(module))
  for name in dir(module):
    if name.startswith("_") and name != "__internal__":
      continue
    try:
      obj = getattr(module, name)
    except Exception:  # pylint: disable=broad-except
      continue
    if inspect.isclass(obj):
      out.setdefault(obj, f"{prefix}.{name}")
    elif isinstance(obj, types.ModuleType) and obj.__name__.startswith(
        "tensorflow._api"):
      _walk(obj, f"{prefix}.{name}", out, seen)


@functools.lru_cache(maxsize=None)
def public_classes():
  """{class: public path} for the public types a user's code may test."""
  out, seen = {}, set()
  for module, prefix in [
      (tf.distribute, "tf.distribute"),
      (tf.compat.v1.distribute, "tf.compat.v1.distribute"),
      (tf.types, "tf.types"), (tf.__internal__, "tf.__internal__"),
      (tf.data, "tf.data"), (tf.compat.v1.data, "tf.compat.v1.data"),
      (tf.train, "tf.train"), (tf.experimental, "tf.experimental")]:
    _walk(module, prefix, out, seen)
  for module, prefix in [(tf, "tf"), (tf.compat.v1, "tf.compat.v1"),
                         (collections.abc, "collections.abc"),
                         (keras, "keras"), (tf_keras, "tf_keras")]:
    if module is None:
      continue
    for name in dir(module):
      obj = getattr(module, name, None)
      if inspect.isclass(obj):
        out.setdefault(obj, f"{prefix}.{name}")
  return {c: p for c, p in out.items()
          if not issubclass(c, BaseException) and c.__module__ != "builtins"}


def _classes_of(x):
  found = set()
  for cls, path in public_classes().items():
    try:
      if isinstance(x, cls):
        found.add(path)
    except Exception:  # pylint: disable=broad-except
      pass
  return frozenset(found)


def _outcome(fn):
  try:
    return fn()
  except Exception as e:  # pylint: disable=broad-except
    return f"raises {type(e).__name__}"


def _protocols(x):
  return {
      "callable": callable(x),
      "iter": _outcome(lambda: (iter(x), True)[1]),
      "len": _outcome(lambda: len(x) if isinstance(len(x), int) else "tensor"),
      "bool": _outcome(lambda: type(bool(x)).__name__),
      "hash": _outcome(lambda: (hash(x), True)[1]),
      "is_tensor": tf.is_tensor(x),
      "flatten": _outcome(lambda: len(tf.nest.flatten(x))),
      "flatten_composites": _outcome(
          lambda: len(tf.nest.flatten(x, expand_composites=True))),
  }


class Seen:
  """What the test keeps of one object: its public classes, its protocol
  behaviour, (for Python containers) its leaves' classes, and its nest
  structure with every leaf None, for ``tf.nest.assert_same_structure``.
  Not the object: live eager iterators held across the module made each
  one's deletion wait for the others' tf.data threads (minutes in a full
  run)."""

  def __init__(self, x):
    self.structure = tf.nest.map_structure(lambda _: None, x)
    self.type_name = f"{type(x).__module__}.{type(x).__qualname__}"
    self.classes = _classes_of(x)
    self.protocols = _protocols(x)
    self.leaves = None
    if isinstance(x, (tuple, list, dict)):
      self.leaves = [_classes_of(leaf) for leaf in tf.nest.flatten(x)]


# -- the programs ---------------------------------------------------------------


def make_strategy(side, facade, config):
  """``side``'s (``native`` or ``ours``) strategy for ``config``, made by
  ``fixtures.strategies``: OneDevice on /cpu:1, or CentralStorage on
  ``central_storage/<n>`` CPUs with variables on /cpu:0."""
  if config == "one_device":
    return strategies.strategy(side, config, facade=facade, device="/cpu:1")
  kind, n = config.split("/")
  return strategies.strategy(side, kind, int(n), facade=facade,
                             parameter_device="/cpu:0")


def _batches(n=16, batch=4):
  return tf.data.Dataset.range(n).map(
      lambda x: tf.cast(x, tf.float32)).batch(batch)


def _cross_replica_context():
  return ours_v2.get_cross_replica_context()  # TF's is not public


def collect(side, facade, config, mode):
  """Runs the program under one side; returns {kind: Seen or error str}."""
  seen = {}
  held = {}

  def put(kind, thunk):
    try:
      seen[kind] = Seen(thunk())
    except Exception as e:  # pylint: disable=broad-except
      seen[kind] = f"{type(e).__name__}: {str(e)[:200]}"

  s = make_strategy(side, facade, config)
  put("strategy", lambda: s)
  put("extended", lambda: s.extended)
  put("scope", s.scope)
  put("worker_devices", lambda: s.extended.worker_devices)
  put("reduce_op", lambda: tf.distribute.ReduceOp.SUM)
  put("run_options", tf.distribute.RunOptions)
  put("input_options", tf.distribute.InputOptions)

  def variables_and_run():
    with s.scope():
      put("get_strategy_in_scope", tf.distribute.get_strategy)
      put("cross_replica_context", _cross_replica_context)
      v = tf.Variable(1.0)
      held["mean"] = tf.Variable(1.0, aggregation=tf.VariableAggregation.MEAN)
      put("variable", lambda: v)
      put("variable_mean", lambda: held["mean"])
      put("variable_on_read", lambda: tf.Variable(
          1.0, synchronization=tf.VariableSynchronization.ON_READ,
          aggregation=tf.VariableAggregation.SUM))
      put("value_container", lambda: s.extended.value_container(v))
      put("colocate_vars_with", lambda: s.extended.colocate_vars_with(v))
      with s.extended.colocate_vars_with(v):
        put("variable_colocated", lambda: tf.Variable(2.0))
      put("read_var", lambda: s.extended.read_var(v))
      put("variable_assign", lambda: v.assign(2.0))

    def replica_fn():
      ctx = tf.distribute.get_replica_context()
      held.setdefault("replica_context", ctx)
      held.setdefault("get_strategy_in_run", tf.distribute.get_strategy())

      def merge_fn(strategy_arg, x):
        held.setdefault("merge_fn_strategy", strategy_arg)
        held.setdefault("merge_fn_cross_replica_context",
                        _cross_replica_context())
        held.setdefault("merge_fn_value", x)
        return x

      rid = tf.cast(ctx.replica_id_in_sync_group, tf.float32)
      ctx.merge_call(merge_fn, args=(rid,))
      held.setdefault("all_reduce", ctx.all_reduce("SUM", rid))
      held.setdefault("all_gather", ctx.all_gather(tf.reshape(rid, [1]), 0))
      held.setdefault("variable_in_run", held["mean"])
      held.setdefault("assign_in_run", held["mean"].assign_add(1.0))
      held.setdefault("variable_made_in_run", tf.Variable(5.0))
      return rid

    per_replica = s.run(replica_fn)
    for kind in ("replica_context", "get_strategy_in_run", "merge_fn_strategy",
                 "merge_fn_cross_replica_context", "merge_fn_value",
                 "all_reduce", "all_gather", "variable_in_run",
                 "assign_in_run", "variable_made_in_run"):
      put(kind, lambda kind=kind: held[kind])
    put("run_per_replica", lambda: per_replica)
    put("run_same_value", lambda: s.run(lambda: tf.constant(3.0)))
    put("run_python_value", lambda: s.run(lambda: 3))
    put("run_nest", lambda: s.run(lambda: {"a": (tf.constant(1.0),)}))
    put("run_returns_variable", lambda: s.run(lambda: v))
    put("run_sparse", lambda: s.run(lambda: tf.sparse.from_dense(tf.eye(2))))
    put("run_ragged", lambda: s.run(lambda: tf.ragged.constant([[1], [2, 3]])))
    put("per_replica_spec", lambda: tf.type_spec_from_value(per_replica))
    put("local_results", lambda: s.experimental_local_results(per_replica))
    put("local_results_variable", lambda: s.experimental_local_results(v))
    put("reduce", lambda: s.reduce("SUM", per_replica, axis=None))
    put("gather", lambda: s.gather(s.run(lambda: tf.ones([2])), axis=0))
    put("values_from_function",
        lambda: s.experimental_distribute_values_from_function(
            lambda ctx: (held.setdefault("value_context", ctx), 1.0)[1]))
    put("value_context", lambda: held["value_context"])
    with s.scope():
      add = lambda var, x: var.assign_add(x)  # pylint: disable=unnecessary-lambda-assignment
      put("update", lambda: s.extended.update(v, add, args=(1.0,)))
      put("update_ungrouped",
          lambda: s.extended.update(v, add, args=(1.0,), group=False))
      put("reduce_to", lambda: s.extended.reduce_to("SUM", per_replica, v))
      put("reduce_to_per_replica",
          lambda: s.extended.reduce_to("SUM", per_replica, per_replica))
      put("batch_reduce_to", lambda: s.extended.batch_reduce_to(
          "SUM", [(per_replica, v), (per_replica, v)]))
      put("broadcast_to", lambda: s.extended.broadcast_to(tf.constant(1.0), v))
      put("broadcast_to_per_replica",
          lambda: s.extended.broadcast_to(tf.constant(1.0), per_replica))
      put("non_slot_devices", lambda: s.extended.non_slot_devices([v]))

  def datasets():
    if mode == "graph":
      put("dataset", lambda: s.experimental_distribute_dataset(_batches()))
      return
    dist = s.experimental_distribute_dataset(_batches())
    put("dataset", lambda: dist)
    put("dataset_element_spec", lambda: dist.element_spec)
    put("dataset_spec", lambda: tf.type_spec_from_value(dist))
    iterator = iter(dist)
    put("iterator", lambda: iterator)
    put("iterator_element_spec", lambda: iterator.element_spec)
    put("iterator_spec", lambda: tf.type_spec_from_value(iterator))
    put("element", lambda: next(iterator))
    put("element_spec", lambda: tf.type_spec_from_value(next(iterator)))
    put("optional", iterator.get_next_as_optional)
    put("optional_value", lambda: iterator.get_next_as_optional().get_value())

    def dataset_fn(input_context):
      held["input_context"] = input_context
      return _batches(16, 2)

    from_fn = s.distribute_datasets_from_function(dataset_fn)
    put("dataset_from_function", lambda: from_fn)
    put("input_context", lambda: held["input_context"])
    put("iterator_from_function", lambda: iter(from_fn))
    put("element_from_function", lambda: next(iter(from_fn)))
    put("element_dict", lambda: next(iter(s.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(
            {"a": np.arange(8.0), "b": np.arange(8)}).batch(4)))))
    put("element_sparse", lambda: next(iter(s.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(
            tf.sparse.from_dense(tf.eye(8))).batch(4)))))

  def v1_iterators():
    if facade != "v1":
      return
    iterator = s.make_dataset_iterator(_batches())
    put("dataset_iterator", lambda: iterator)
    put("dataset_iterator_initialize", iterator.initialize)
    put("dataset_iterator_initializer", lambda: iterator.initializer)
    put("dataset_iterator_get_next", iterator.get_next)
    put("dataset_iterator_element_spec", lambda: iterator.element_spec)

    def input_fn(input_context):
      held["input_context_v1"] = input_context
      return _batches(16, 2)

    from_fn = s.make_input_fn_iterator(input_fn)
    put("input_fn_iterator", lambda: from_fn)
    put("input_context_v1", lambda: held["input_context_v1"])
    put("input_fn_iterator_initialize", from_fn.initialize)
    put("input_fn_iterator_get_next", from_fn.get_next)
    if mode == "graph":
      put("experimental_run", lambda: s.experimental_run(lambda x: x, iterator))

  def numpy_dataset():
    if mode == "graph":
      with tf.compat.v1.Session() as session:
        put("numpy_dataset", lambda: s.experimental_make_numpy_dataset(
            np.arange(4.0), session=session))
    elif mode == "eager":
      put("numpy_dataset",
          lambda: s.experimental_make_numpy_dataset(np.arange(4.0)))

  def multi_step():
    if config != "one_device" or mode == "tf_function":
      return
    scalars = tf.data.Dataset.range(16).map(lambda x: tf.cast(x, tf.float32))
    iterator = (iter(scalars) if mode == "eager" else
                tf.compat.v1.data.make_one_shot_iterator(scalars))

    def step(context, x):
      context.set_last_step_output("x", x)
      return tf.no_op()

    with s.scope():
      put("multi_step_context",
          lambda: s.extended.experimental_run_steps_on_iterator(
              step, iterator, iterations=2,
              initial_loop_values={"x": tf.zeros([])}))

  def keras_variables():
    if mode != "eager":
      return
    with s.scope():
      layer = keras.layers.Dense(2)
      layer.build((None, 3))
      optimizer = keras.optimizers.SGD(momentum=0.9)
      optimizer.build([layer.kernel])
      put("keras_weight", lambda: layer.kernel)
      put("keras_weight_value", lambda: layer.kernel.value)
      put("keras_optimizer_variable_value",
          lambda: optimizer.variables[-1].value)
      legacy_layer = tf_keras.layers.Dense(2)
      legacy_layer.build((None, 3))
      put("tf_keras_weight", lambda: legacy_layer.kernel)
      legacy_optimizer = tf_keras.optimizers.legacy.SGD(momentum=0.9)
    s.run(lambda: legacy_optimizer.apply_gradients(
        [(tf.ones([3, 2]), legacy_layer.kernel)]))
    put("tf_keras_slot",
        lambda: legacy_optimizer.get_slot(legacy_layer.kernel, "momentum"))

  def v1_graph_training():
    if mode != "graph":
      return
    with s.scope():
      w = tf.compat.v1.get_variable("w", shape=[2],
                                    initializer=tf.compat.v1.zeros_initializer())
      optimizer = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9)
      train_op = s.extended.call_for_each_replica(
          lambda: optimizer.apply_gradients([(tf.ones([2]), w)]))
      put("get_variable", lambda: w)
      put("call_for_each_replica", lambda: train_op)
      put("v1_optimizer_slot", lambda: optimizer.get_slot(w, "momentum"))
      put("group", lambda: s.group(train_op))
      put("unwrap", lambda: s.unwrap(w))

  for part in (variables_and_run, datasets, v1_iterators, numpy_dataset,
               multi_step, keras_variables, v1_graph_training):
    try:
      if mode == "tf_function":
        # Traced only: inspecting happens while tracing (running some
        # native programs, e.g. a v1 iterator on /cpu:1, fails in TF).
        tf.function(part, autograph=False).get_concrete_function()
      else:
        part()
    except Exception as e:  # pylint: disable=broad-except
      seen[f"<{part.__name__}>"] = f"{type(e).__name__}: {e}"
  return seen


_OBSERVED = {}


@pytest.fixture(scope="module", autouse=True)
def _forget_observed():
  """What the programs recorded lives only as long as this module's tests."""
  yield
  _OBSERVED.clear()


def observed(side, facade, config, mode):
  key = (side, facade, config, mode)
  if key not in _OBSERVED:
    if mode == "graph":
      with tf.Graph().as_default():
        _OBSERVED[key] = collect(side, facade, config, mode)
    else:
      _OBSERVED[key] = collect(side, facade, config, mode)
  return _OBSERVED[key]


# -- which kinds each combination has ------------------------------------------

_EVERYWHERE = (
    "strategy extended scope worker_devices reduce_op run_options "
    "input_options get_strategy_in_scope cross_replica_context variable "
    "variable_mean variable_on_read value_container colocate_vars_with "
    "variable_colocated read_var variable_assign replica_context "
    "get_strategy_in_run merge_fn_strategy merge_fn_cross_replica_context "
    "merge_fn_value all_reduce all_gather variable_in_run assign_in_run "
    "variable_made_in_run run_per_replica run_same_value run_python_value "
    "run_nest run_returns_variable run_sparse run_ragged local_results "
    "local_results_variable reduce update update_ungrouped reduce_to "
    "reduce_to_per_replica batch_reduce_to broadcast_to "
    "broadcast_to_per_replica non_slot_devices dataset").split()
_V2_ONLY = "gather values_from_function value_context".split()
_NOT_IN_GRAPH = (
    "dataset_element_spec dataset_spec iterator iterator_element_spec "
    "iterator_spec element element_spec optional optional_value "
    "dataset_from_function input_context iterator_from_function "
    "element_from_function element_dict element_sparse").split()
_V1_ITERATORS = (
    "dataset_iterator dataset_iterator_initialize dataset_iterator_initializer "
    "dataset_iterator_get_next dataset_iterator_element_spec input_fn_iterator "
    "input_context_v1 input_fn_iterator_initialize "
    "input_fn_iterator_get_next").split()
_GRAPH_ONLY = ("get_variable call_for_each_replica v1_optimizer_slot group "
               "unwrap").split()
_KERAS = ("keras_weight keras_weight_value keras_optimizer_variable_value "
          "tf_keras_weight tf_keras_slot").split()


def kinds(facade, config, mode):
  """The kinds the program records for this combination under both sides
  (native TF has no numpy datasets on v2 strategies, no gather or values
  from a function on v1 ones: documented extras of ours, not compared)."""
  names = list(_EVERYWHERE)
  if facade == "v2":
    names += _V2_ONLY
  if mode != "graph":
    names += _NOT_IN_GRAPH
  if facade == "v1":
    names += _V1_ITERATORS
    if mode == "graph":
      names.append("experimental_run")
    if mode != "tf_function":
      names.append("numpy_dataset")
  if config == "one_device" and mode != "tf_function":
    names.append("multi_step_context")
  if mode == "eager":
    names += _KERAS
  if mode == "graph":
    names += _GRAPH_ONLY
  return names


CASES = [pytest.param(f, c, m, k, id=f"{f}-{c}-{m}-{k}")
         for f in FACADES for c in CONFIGS for m in MODES
         for k in kinds(f, c, m)]

# The component tensors of a distributed iterator are an implementation
# detail: TensorFlow's hold a MultiDeviceIterator's resources (2 with one
# device, 3 with two), ours the one host iterator.
_COMPONENT_COUNT_DIFFERS = {"iterator", "iterator_spec",
                            "iterator_from_function"}


@pytest.mark.parametrize("facade,config,mode,kind", CASES)
def test_instance_of_every_public_class_natives_is(facade, config, mode, kind):
  native = observed("native", facade, config, mode).get(kind)
  ours = observed("ours", facade, config, mode).get(kind)
  if not isinstance(native, Seen):
    pytest.skip(f"TensorFlow's program does not produce it: {native}")
  assert isinstance(ours, Seen), f"ours fails where TF's works: {ours}"
  missing = native.classes - ours.classes
  assert not missing, (
      f"{kind}: ours ({ours.type_name}) is not an instance of "
      f"{sorted(missing)}, as TensorFlow's ({native.type_name}) is")
  if native.leaves is not None:
    assert ours.leaves is not None and len(ours.leaves) == len(native.leaves)
    for i, (theirs, mine) in enumerate(zip(native.leaves, ours.leaves)):
      assert theirs <= mine, (kind, i, sorted(theirs - mine))
  native_protocols, our_protocols = dict(native.protocols), dict(ours.protocols)
  if kind in _COMPONENT_COUNT_DIFFERS:
    del native_protocols["flatten_composites"], our_protocols["flatten_composites"]
  assert our_protocols == native_protocols
  # Composites compare by TypeSpec class (TensorFlow's private ones), so the
  # structures are compared as Python nests; their component counts are in
  # the protocols above.
  tf.nest.assert_same_structure(native.structure, ours.structure)


def test_the_walk_finds_the_classes_that_matter():
  found = set(public_classes().values())
  assert {"tf.distribute.Strategy", "tf.distribute.DistributedValues",
          "tf.distribute.DistributedIterator", "tf.Variable", "tf.Operation",
          "tf.types.experimental.distributed.PerReplica",
          "tf.__internal__.CompositeTensor", "collections.abc.Iterator",
          "tf.compat.v1.distribute.Strategy"} <= found


def _restart_inside_tf_function(strategy):
  """A tf.function that reads a step of a v1 iterator, restarts it and
  reads again; returns it and the list initialize()'s result lands in."""
  results = []

  @tf.function(autograph=False)
  def step():
    iterator = strategy.make_dataset_iterator(_batches(8, 2))
    first = iterator.get_next()
    results.append(iterator.initialize())
    with tf.control_dependencies([results[-1], first.values[0]]):
      again = iterator.get_next()
    return strategy.experimental_local_results(again)

  return step, results


@pytest.mark.parametrize("side", ["native", "ours"])
def test_v1_iterator_initialize_in_tf_function_is_an_operation(side):
  # TensorFlow's v1 iterators return an op from initialize() while a
  # tf.function is traced (None eagerly); ours returned None there too, so
  # `tf.control_dependencies([iterator.initialize()])` failed.
  strategy = make_strategy(side, "v1", "central_storage/2")
  step, results = _restart_inside_tf_function(strategy)
  step.get_concrete_function()
  assert isinstance(results[0], tf.Operation)
  assert strategy.make_dataset_iterator(_batches()).initialize() is None
  if side == "ours":  # TensorFlow's fails to run it ("Invalid incarnation id")
    assert [v.numpy().tolist() for v in step()] == [[0.0], [1.0]]
