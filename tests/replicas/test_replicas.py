"""Several replicas: all_reduce / all_gather (values, devices, gradients)
against TensorFlow's CentralStorageStrategy, and the replica runner's
robustness -- threads, thread reuse, forks.  merge_call and its errors are in
``test_merge_call.py``.  Cases that could hang run under ``within`` (a
helper thread with a deadline) instead of a pytest timeout."""
import threading

import pytest
import tensorflow as tf

from support.central_storage import (REPLICAS, OursCentralStorage,
                                     assert_same, both, compute_devices,
                                     devices, norm, pair, replica_float,
                                     run_in_mode, within)
from compat_distribute.values import cross_device
from compat_distribute.variables import shared as replica_variables
from compat_distribute.replicas import workers as replica_workers
from compat_distribute.values import distributed as values_lib
from conftest import cpu

DEADLINE = 120  # seconds; generous for a loaded 2-core machine


# -- all_reduce / all_gather --------------------------------------------------

def _collectives():
  ctx = tf.distribute.get_replica_context()
  x = replica_float()
  row = tf.reshape(x, [1, 1]) * tf.ones([1, 2])
  return (ctx.all_reduce("SUM", x),
          ctx.all_reduce(tf.distribute.ReduceOp.MEAN,
                         {"a": x * 2.0, "b": [x, x * 3.0]}),
          ctx.all_reduce("mean", tf.cast(x, tf.int32)),
          ctx.all_gather(row, axis=0),
          ctx.all_gather({"r": row}, axis=1))


@pytest.mark.parametrize("n", REPLICAS)
def test_all_reduce_and_all_gather_match_native(n, mode):
  ours, native = both(n, mode, lambda s: s.run(_collectives))
  assert_same(ours, native)
  if mode == "eager" and n > 1:
    assert devices(ours[0]) == devices(native[0]) == tuple(
        cpu(i) for i in range(n))
    assert devices(ours[3]) == devices(native[3])


@pytest.mark.parametrize("n", (2, 4))
def test_all_reduce_indexed_slices(n, mode):
  def fn():
    ctx = tf.distribute.get_replica_context()
    rid = ctx.replica_id_in_sync_group
    slices = tf.IndexedSlices(tf.ones([1, 2]) * replica_float(),
                              tf.reshape(rid, [1]), tf.constant([n, 2]))
    return ctx.all_reduce("SUM", slices), ctx.all_reduce("MEAN", slices)

  ours, native = both(n, mode, lambda s: s.run(fn))
  assert_same(ours, native)
  assert isinstance(ours[0].values[0], tf.IndexedSlices)


def _gradients():
  ctx = tf.distribute.get_replica_context()
  x = tf.constant([1.0, 2.0]) * replica_float()
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    summed = ctx.all_reduce("SUM", x * x)
    mean = ctx.all_reduce("MEAN", x * 3.0)
    gathered = ctx.all_gather(x * x, axis=0)
    loss = (tf.reduce_sum(summed * [1.0, 3.0]) + tf.reduce_sum(mean) +
            tf.reduce_sum(gathered * tf.range(1.0, 2.0 * ctx.num_replicas_in_sync
                                              + 1.0)))
  return (tape.gradient(loss, x), tape.gradient(summed, x),
          tape.gradient(gathered, x))


@pytest.mark.slow
@pytest.mark.parametrize("n", REPLICAS)
def test_gradients_through_all_reduce_and_all_gather(n, mode):
  ours, native = both(n, mode, lambda s: s.run(_gradients))
  assert_same(ours, native)




def test_all_gather_rejects_indexed_slices():
  ours, _ = pair(2)

  def fn():
    ctx = tf.distribute.get_replica_context()
    return ctx.all_gather(tf.IndexedSlices(tf.ones([1]), tf.constant([0])), 0)

  with pytest.raises(NotImplementedError, match="IndexedSlices"):
    ours.run(fn)


@pytest.mark.parametrize("n", (1, 2))
def test_all_reduce_of_a_plain_argument_in_tf_function_reduces_as_eagerly(n):
  # The same tensor, passed to run as a plain argument, has no device inside
  # a tf.function; ours reduces it from the host and gives what TensorFlow
  # gives eagerly (one value shared by all replicas: its SUM is itself),
  # where TensorFlow's traced run fails (documented).
  ours, native = pair(n)

  def step(x):
    return tf.distribute.get_replica_context().all_reduce("SUM", x)

  def program(strategy):
    result = strategy.run(step, args=(tf.constant([1.0, 2.0]),))
    return strategy.experimental_local_results(result)

  expected = [[1.0, 2.0]] * n
  assert [v.numpy().tolist() for v in program(native)] == expected
  assert [v.numpy().tolist() for v in program(ours)] == expected
  traced = tf.function(lambda: program(ours))()
  assert [v.numpy().tolist() for v in traced] == expected
  with pytest.raises(ValueError, match="destinations"):
    tf.function(lambda: program(native))()


# -- the runner -----------------------------------------------------------------

@pytest.mark.parametrize("n", (2, 4))
def test_replica_contexts_and_name_scopes(n):
  def program(strategy):
    names = []

    @tf.function
    def f():
      def fn():
        ctx = tf.distribute.get_replica_context()
        names.append(tf.constant(1.0, name="c").name)
        ctx.merge_call(lambda s: None)
        names.append(tf.constant(1.0, name="d").name)
        assert tf.distribute.get_strategy() is strategy
        return ctx.replica_id_in_sync_group
      return strategy.run(fn)

    return f(), names

  (ours, ours_names), (native, native_names) = (program(s) for s in pair(n))
  assert_same(ours, native)
  assert sorted(ours_names) == sorted(native_names)


@pytest.mark.parametrize("n", (2, 4))
def test_run_a_tf_function_traces_replicas_together(n):
  def program(strategy):
    @tf.function
    def step(x):
      ctx = tf.distribute.get_replica_context()
      return ctx.all_reduce("SUM", x * replica_float())
    return strategy.run(step, args=(tf.constant(2.0),))

  ours, native = (program(s) for s in pair(n))
  assert_same(ours, native)


@pytest.mark.parametrize("n", (2, 4))
def test_variables_created_in_run_are_shared(n):
  for strategy in pair(n):
    created = strategy.run(lambda: tf.Variable(1.0, name="w"))
    assert isinstance(created, tf.Variable)  # one variable, unwrapped


def test_mismatched_shared_variables_explained():
  ours, _ = pair(2)

  def fn():
    if tf.distribute.get_replica_context().replica_id_in_sync_group == 1:
      return tf.Variable(1.0, name="only_on_replica_1")
    return None

  with pytest.raises(RuntimeError, match="same variables"):
    ours.run(fn)


def test_workers_are_reused():
  ours, _ = pair(4)

  def step():
    return tf.distribute.get_replica_context().all_reduce("SUM",
                                                          replica_float())

  ours.run(step)
  before = threading.active_count()
  for _ in range(5):
    assert float(ours.run(step).values[0]) == 10.0
  assert threading.active_count() == before


@pytest.mark.parametrize("n", (2, 4))
def test_runs_from_a_non_main_thread(n):
  ours, _ = pair(n)

  def step():
    ctx = tf.distribute.get_replica_context()
    return ctx.all_reduce("SUM", replica_float())

  result = within(DEADLINE, lambda: ours.run(step))
  assert norm(result) == norm(values_lib.PerReplica(
      [tf.constant(n * (n + 1) / 2.0)] * n))


@pytest.mark.parametrize("n", (2, 4))
def test_eager_runs_of_one_strategy_from_several_threads_at_once(n):
  """Eager runs reuse the runs and replica contexts of earlier ones; runs
  on several threads at once, with and without merge_call, must each get
  their own."""
  ours, native = pair(n)

  def step(offset):
    ctx = tf.distribute.get_replica_context()
    summed = ctx.all_reduce("SUM", replica_float() + offset)
    return ctx.replica_id_in_sync_group, summed, replica_float() + offset

  def plain_step(offset):
    ctx = tf.distribute.get_replica_context()
    return ctx.replica_id_in_sync_group, replica_float() + offset

  steps = {k: (step, plain_step)[k % 2] for k in range(4)}
  expected = {k: norm(native.run(steps[k], args=(tf.constant(float(k)),)))
              for k in range(4)}
  seen = {k: [] for k in range(4)}

  def caller(k):
    for _ in range(15):
      seen[k].append(
          norm(ours.run(steps[k], args=(tf.constant(float(k)),))))

  def all_callers():
    threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join()

  within(DEADLINE, all_callers)
  for k in range(4):
    assert seen[k] == [expected[k]] * 15


@pytest.mark.parametrize("n", (2, 4))
def test_a_device_scope_left_open_in_a_replica_fails_the_run_as_native(n):
  from tensorflow.python.eager import context as eager_context  # pylint: disable=g-import-not-at-top
  for strategy in pair(n):

    def leaves_a_device_open():
      tf.device("/cpu:0").__enter__()
      return tf.constant(1.0)

    with pytest.raises(RuntimeError, match="nesting"):
      strategy.run(leaves_a_device_open)
    assert eager_context.context().device_name in ("", None)
    assert devices(strategy.run(lambda: tf.constant(2.0))) == tuple(
        tf.constant(0.0).device.replace("CPU:0", f"CPU:{i}")
        for i in range(n))


def _scoped_variable_name():
  """Makes ``w`` in a variable scope with a default name, as tf.layers
  layers do, and returns the variable's name."""
  with tf.compat.v1.variable_scope(None, default_name="block"):
    return tf.compat.v1.get_variable(
        "w", [1], initializer=tf.compat.v1.zeros_initializer()).name


@pytest.mark.parametrize("n", REPLICAS)
def test_default_scope_names_are_shared_by_replicas_in_graphs(n):
  # TensorFlow enters the caller's variable scope again for every replica,
  # which restores the default-name counts on exit: each replica (and each
  # traced run) names the scope "block", so the replicas share one variable
  # and a second run in one tf.function reuses it as well.
  def graph_program(strategy):
    with tf.Graph().as_default():
      with strategy.scope():
        first = strategy.extended.call_for_each_replica(_scoped_variable_name)
        names = sorted(v.name for v in tf.compat.v1.global_variables())
        try:
          strategy.extended.call_for_each_replica(_scoped_variable_name)
          second = "made"
        except ValueError as e:
          second = "already exists" if "already exists" in str(e) else str(e)
      return norm(first), names, second

  def function_program(strategy):
    with strategy.scope():
      @tf.function
      def f():
        return (strategy.run(_scoped_variable_name),
                strategy.run(_scoped_variable_name))
      return norm(f())

  ours, native = pair(n)
  assert graph_program(ours) == graph_program(native)
  assert graph_program(ours)[1:] == (["block/w:0"], "already exists")
  assert function_program(ours) == function_program(native)


@pytest.mark.parametrize("n", REPLICAS)
def test_non_slot_devices_of_no_variables_is_a_clear_value_error(n):
  ours, native = pair(n)
  with pytest.raises(ValueError):
    native.extended.non_slot_devices([])
  with pytest.raises(ValueError, match="var_list is empty"):
    ours.extended.non_slot_devices([])
  # A v1 optimizer given nothing to train fails as without a strategy.
  optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.1)
  with ours.scope(), pytest.raises(ValueError, match="var_list is empty"):
    ours.run(lambda: optimizer.apply_gradients([]))


# -- cross-device implementations -----------------------------------------------

def test_collective_ops_match_reduce_to_one_device_eagerly():
  with tf.device(cpu(0)):
    a = tf.constant([[1.0, 2.0]])
  with tf.device(cpu(1)):
    b = tf.constant([[3.0, 5.0]])
  x = values_lib.PerReplica([a, b])
  collective = cross_device.CollectiveOps(compute_devices(2),
                                          timeout_seconds=60)
  one = cross_device.ReduceToOneDevice()
  for op in ("SUM", "MEAN"):
    op = tf.distribute.ReduceOp(op)
    got = within(DEADLINE, lambda op=op: collective.reduce(op, x, x))
    assert norm(got) == norm(one.reduce(op, x, x))
    assert devices(got) == (cpu(0), cpu(1))
  for axis in (0, 1):
    got = within(DEADLINE, lambda axis=axis: collective.gather(x, x, axis))
    assert norm(got) == norm(one.gather(x, x, axis))
  # Other destinations fall back to reducing on one device.
  assert norm(collective.reduce(tf.distribute.ReduceOp.SUM, x, "/cpu:2")) == (
      "float32", [[4.0, 7.0]])


def test_collective_ops_all_reduce_through_a_strategy_eagerly():
  ours = OursCentralStorage(compute_devices(2))
  ours.extended._cross_device_ops = cross_device.CollectiveOps(  # pylint: disable=protected-access
      compute_devices(2), timeout_seconds=60)
  result = within(DEADLINE, lambda: ours.run(_collectives))
  ours_one, _ = pair(2)
  assert norm(result) == norm(ours_one.run(_collectives))


def test_destinations_validated():
  with pytest.raises(ValueError, match="empty string"):
    cross_device.devices_of("")
  with pytest.raises(ValueError, match="destinations must be"):
    cross_device.devices_of(3)


def test_shared_variable_outside_run_just_creates():
  assert replica_variables.shared_variable("x", lambda: 42) == 42




def test_init_scope_in_a_replica_while_tracing_matches_native():
  # Replica 1 runs on a worker thread (replica 0 calls merge_call); its
  # tf.init_scope must lift to the same context, with the same variable
  # creators, as on the calling thread.
  def program(strategy):
    made, cache = [], {}

    @tf.function
    def f():
      def fn():
        ctx = tf.distribute.get_replica_context()
        rid = int(tf.get_static_value(ctx.replica_id_in_sync_group))
        if rid not in cache:
          with tf.init_scope():
            cache[rid] = tf.Variable(1.0)
            made.append((tf.executing_eagerly(), tf.distribute.has_strategy(),
                         type(cache[rid]).__name__, cache[rid].device))
        ctx.merge_call(lambda s: None)
        return cache[rid].read_value()
      return strategy.run(fn)

    with strategy.scope():
      result = f()
    return result, made, cache[0] is cache[1]

  ours, native = (program(s) for s in pair(2))
  assert_same(ours[0], native[0])
  assert ours[1] == native[1]
  assert ours[2] and native[2]  # one variable, shared by both replicas


# -- regrouping what replicas return -------------------------------------------

class _Pair(tuple):
  """A tuple subclass whose constructor takes two arguments."""

  def __new__(cls, a, b):
    return super().__new__(cls, (a, b))


class _MyList(list):
  pass


def _returned_structures(strategy, kinds):
  """Runs replica functions returning sequence subclasses and proxies;
  records the type names ``run`` gives back (and ``merge_fn`` receives) in
  ``kinds`` and returns the values."""
  import collections  # pylint: disable=g-import-not-at-top
  import wrapt  # pylint: disable=g-import-not-at-top  (a TensorFlow dependency)
  point = collections.namedtuple("Point", "x y")
  module = tf.Module()
  module.tracked = [1.0]  # becomes a tracking ListWrapper
  values = []
  for fn in (lambda x: _Pair(x, x + 1.0), lambda x: _MyList([x]),
             lambda x: wrapt.ObjectProxy(point(x, x * 2.0)),
             lambda x: module.tracked):
    out = strategy.run(lambda fn=fn: fn(replica_float()))
    kinds.append(type(out).__name__)
    values.append(list(out))

  def merge_fn(unused_strategy, arg):
    kinds.append(type(arg).__name__)

  strategy.run(lambda: tf.distribute.get_replica_context().merge_call(
      merge_fn, args=(_MyList([replica_float()]),)))
  return values


@pytest.mark.parametrize("n", REPLICAS)
def test_sequences_come_back_as_native_rebuilds_them(n, mode):
  # TensorFlow regroups lists and tuples into plain ones (subclasses and
  # proxies are not rebuilt); namedtuples through their _make.
  ours_kinds, native_kinds = [], []
  ours, native = pair(n)
  ours_values = run_in_mode(mode,
                            lambda: _returned_structures(ours, ours_kinds))
  native_values = run_in_mode(
      mode, lambda: _returned_structures(native, native_kinds))
  assert norm(ours_values) == norm(native_values)
  assert ours_kinds == native_kinds
  # run's results, then what merge_fn received
  assert ours_kinds == ["tuple", "list", "Point", "list", "list"]


def _child_exit_code(strategy):
  """Runs an eager all_reduce in a forked child; its exit status (0: the
  right values, 1: wrong values or an error, signal 14: it hung)."""
  import os, signal  # pylint: disable=g-import-not-at-top,multiple-imports
  pid = os.fork()
  if pid == 0:  # the child: never return into pytest
    code = 1
    try:
      signal.alarm(60)
      out = strategy.run(lambda: tf.distribute.get_replica_context()
                         .all_reduce("SUM", tf.constant(1.0)))
      values = [float(v) for v in strategy.experimental_local_results(out)]
      code = 0 if values == [2.0, 2.0] else 1
    finally:
      os._exit(code)
  _, status = os.waitpid(pid, 0)
  return status


def test_a_forked_child_gets_fresh_workers():
  # Fork keeps only the forking thread: pooled workers from the parent
  # must not be handed out in the child (its run would wait for ever).
  # Native TF starts new threads per run, so its child works too.
  ours, native = pair(2)
  merge = lambda: tf.distribute.get_replica_context().all_reduce(  # pylint: disable=g-long-lambda
      "SUM", tf.constant(1.0))
  ours.run(merge)  # the parent's worker is now pooled
  assert replica_workers.idle()
  assert _child_exit_code(native) == 0
  assert _child_exit_code(ours) == 0
