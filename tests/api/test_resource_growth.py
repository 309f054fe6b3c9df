"""What a long training job must not accumulate: objects, graphs, threads.

Every check counts objects (``gc``) or threads after repeating a pattern, or
tests that a dropped object is collected (a dead ``weakref`` after
``gc.collect()``); nothing here measures time or memory size.

Known growth that native TensorFlow shows as well, and so is not checked
here: every ``tf.custom_gradient`` traced into a graph (e.g. each replica's
``all_reduce`` in a newly traced ``tf.function``) stays in TensorFlow's
process-wide gradient registry together with its graph and replica context
(and so the strategy).  What ours must not add on top is the run's function
and arguments: ``test_traced_all_reduce_keeps_no_model_alive``.
"""
import collections
import gc
import threading
import warnings
import weakref

import pytest
import tensorflow as tf

from fixtures import strategies
import support

from compat_distribute.replicas import threads as replica_threads
from compat_distribute.replicas import workers as replica_workers

# slow: each test repeats a pattern to count what it leaves (~100 s of CPU in
# all); out of `tox -e quick`.
pytestmark = pytest.mark.slow

# Three compute devices are a case beyond two (tox -e more).
KINDS = ["one_device", "central_storage/2",
         pytest.param("central_storage/3", marks=support.MORE)]


def _make(kind, facade="v2"):
  """Our strategy for ``kind`` (one of ``KINDS``; ``central_storage/<n>`` is
  CentralStorage on ``n`` CPUs) through the ``facade`` (``v2`` or ``v1``)."""
  name, _, replicas = kind.partition("/")
  return strategies.strategy("ours", name, int(replicas or 1), facade=facade)


class Boom(Exception):
  pass


def _scaled(x):
  ctx = tf.distribute.get_replica_context()
  return x * tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)


def _sum(strategy, value):
  return strategy.reduce("SUM", value, axis=None)


def _merge(x):
  return tf.distribute.get_replica_context().merge_call(
      _sum, args=(_scaled(x),))


def _all_reduce(x):
  return tf.distribute.get_replica_context().all_reduce("SUM", _scaled(x))


def _fail_in_last_replica(x):
  ctx = tf.distribute.get_replica_context()
  if ctx.replica_id_in_sync_group == ctx.num_replicas_in_sync - 1:
    raise Boom("replica")
  return ctx.merge_call(_sum, args=(_scaled(x),))


def _fail_in_first_replica_after_merge(x):
  ctx = tf.distribute.get_replica_context()
  y = ctx.merge_call(_sum, args=(_scaled(x),))
  if ctx.replica_id_in_sync_group == 0:
    raise Boom("replica 0")
  return y


def _fail_in_merge_fn(x):
  def merge_fn(strategy, value):
    raise Boom("merge_fn")
  return tf.distribute.get_replica_context().merge_call(
      merge_fn, args=(_scaled(x),))


def _one_cycle(strategy, x):
  strategy.run(lambda v: v * 2.0, args=(x,))
  strategy.run(_all_reduce, args=(x,))
  strategy.run(_merge, args=(x,))
  for failing in (_fail_in_last_replica, _fail_in_first_replica_after_merge,
                  _fail_in_merge_fn):
    try:
      strategy.run(failing, args=(x,))
    except Boom:
      pass


# -- what is alive ------------------------------------------------------------

def _our_objects():
  """How many objects of each compat_distribute class are alive."""
  gc.collect()
  return collections.Counter(
      type(o).__qualname__ for o in gc.get_objects()
      if str(type(o).__module__).startswith("compat_distribute"))


def _graphs():
  gc.collect()
  return sum(1 for o in gc.get_objects() if isinstance(o, tf.Graph))


def _workers():
  return [t for t in threading.enumerate()
          if isinstance(t, replica_workers.Worker)]


def _assert_no_run_alive():
  """Every run finished, and no worker is left paused inside one.  A run
  still alive is one an eager run left for the strategy's next: idle in its
  pool, holding nothing of its call."""
  gc.collect()
  runs = [o for o in gc.get_objects() if isinstance(o, replica_threads._Run)]  # pylint: disable=protected-access
  assert [r for r in runs if not _idle(r)] == []
  # Replica contexts may outlive their run (a traced all_reduce's gradient
  # function keeps one), but detached from it.
  assert [o for o in gc.get_objects()
          if isinstance(o, replica_threads.MultiReplicaContext)
          and o._run is not None and not _idle(o._run)] == []  # pylint: disable=protected-access
  idle = {id(w) for w in replica_workers.idle()}
  assert all(id(w) in idle for w in _workers()), (
      "a replica worker is not back in the pool (still waiting in a run)")


def _idle(run):
  return (any(r is run for r in run.idle_runs) and
          (run.fn, run.args, run.kwargs, run.results, run.error, run.caller,
           run.shared) == (None,) * 7)


def _state():
  return _our_objects(), _graphs(), threading.active_count(), len(_workers())


# -- eager runs ---------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_eager_runs_reach_a_steady_state(kind):
  strategy = _make(kind)
  x = tf.constant([1.0, 2.0])
  for _ in range(3):
    _one_cycle(strategy, x)
  before = _state()
  for _ in range(15):
    _one_cycle(strategy, x)
  assert _state() == before
  _assert_no_run_alive()
  assert strategy.run(_merge, args=(x,)).numpy().tolist() == (
      [1.0, 2.0] if kind == "one_device" else
      [3.0, 6.0] if kind.endswith("/2") else [6.0, 12.0])


@pytest.mark.parametrize("fails", [False, True], ids=["returns", "raises"])
def test_an_eager_run_keeps_nothing_of_its_call(fails):
  # The run is kept for the next eager run; its function, arguments and
  # the error it raised are not.
  strategy = _make("central_storage/2")

  class Payload:
    pass

  def run_once():
    payload, argument = Payload(), Payload()

    def fn(x):
      del x
      if fails:
        raise Boom(payload)
      return tf.constant(float(id(payload) > 0))

    try:
      result = strategy.run(fn, args=(argument,))
      assert [v.numpy() for v in
              strategy.experimental_local_results(result)] == [1.0, 1.0]
    except Boom:
      assert fails
    return [weakref.ref(o) for o in (payload, argument, fn)]

  refs = run_once() + run_once()
  gc.collect()
  assert [r for r in refs if r() is not None] == []
  _assert_no_run_alive()


def test_worker_threads_are_bounded_by_concurrent_runs():
  strategy = _make("central_storage/3")
  x = tf.constant(1.0)
  strategy.run(_merge, args=(x,))
  workers = len(_workers())

  def loop():
    for _ in range(10):
      strategy.run(_all_reduce, args=(x,))

  for _ in range(3):
    threads = [threading.Thread(target=loop) for _ in range(2)]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
  # Two concurrent runs need at most 2 x 2 workers, whatever the count of
  # runs; none is lost.
  assert workers <= len(_workers()) <= max(workers, 4)
  _assert_no_run_alive()


# -- traced functions ---------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_dropped_functions_free_their_graphs(kind):
  strategy = _make(kind)
  x = tf.constant([1.0, 2.0])

  def trace_and_drop():
    @tf.function
    def outer(v):
      return strategy.run(_merge, args=(v,))

    inner = tf.function(_merge)
    outer(x)
    strategy.run(inner, args=(x,))
    try:
      tf.function(lambda v: strategy.run(_fail_in_merge_fn, args=(v,)))(x)
    except Boom:
      pass
    graph = outer.get_concrete_function(x).graph
    return [weakref.ref(o) for o in (outer, inner, graph)]

  trace_and_drop()
  before = _state()
  refs = [r for _ in range(4) for r in trace_and_drop()]
  gc.collect()
  assert [r for r in refs if r() is not None] == []
  assert _state() == before
  _assert_no_run_alive()


class _StepOwner:
  """Keeps its own tf.function, whose Python body (a bound method) refers
  back to the owner: a cycle only the garbage collector frees."""

  def __init__(self, strategy):
    self.strategy = strategy
    self.step = tf.function(self._step)

  def _step(self, x):
    return tf.distribute.get_replica_context().merge_call(
        lambda _, v: v, args=(x * 2.0,))

  def run(self, x):
    return self.strategy.run(self.step, args=(x,))


@pytest.mark.parametrize("kind", KINDS)
def test_function_referring_back_to_itself_is_collected(kind):
  # TensorFlow's own strategies keep such a function for ever (their cache
  # of replicated functions is keyed by it); ours let it go.
  strategy = _make(kind)
  x = tf.constant([1.0, 2.0])

  def use_and_drop():
    owner = _StepOwner(strategy)
    result = owner.run(x)
    assert [r.numpy().tolist() for r in
            strategy.experimental_local_results(result)] == (
                [[2.0, 4.0]] * strategy.num_replicas_in_sync)
    return weakref.ref(owner), weakref.ref(owner.step)

  use_and_drop()
  before = _state()
  refs = [r for _ in range(3) for r in use_and_drop()]
  gc.collect()
  assert [r for r in refs if r() is not None] == []
  assert _state() == before
  _assert_no_run_alive()


@pytest.mark.parametrize("kind", KINDS)
def test_one_traced_step_reaches_a_steady_state(kind):
  strategy = _make(kind)
  with strategy.scope():
    w = tf.Variable(tf.ones([2, 2]), aggregation=tf.VariableAggregation.SUM)

  def replica_step(x):
    with tf.GradientTape() as tape:
      y = tf.reduce_sum(tf.matmul(x[None, :], w))
    grad = tf.distribute.get_replica_context().all_reduce(
        "SUM", tape.gradient(y, w))
    w.assign_sub(0.01 * grad)
    return y

  @tf.function
  def step(x):
    return strategy.reduce("SUM", strategy.run(replica_step, args=(x,)),
                           axis=None)

  x = tf.constant([1.0, 2.0])
  step(x)
  before = _state()
  for _ in range(20):
    step(x)
  assert _state() == before


class _Trainer:
  """A stand-in for a model: owns a variable and the replica step."""

  def __init__(self, strategy):
    with strategy.scope():
      self.w = tf.Variable(2.0, aggregation=tf.VariableAggregation.MEAN)

  def replica_step(self, x):
    with tf.GradientTape() as tape:
      loss = self.w * _scaled(x)
    grad = tf.distribute.get_replica_context().all_reduce(
        "SUM", tape.gradient(loss, self.w))
    self.w.assign_sub(0.1 * grad)
    return loss


@pytest.mark.parametrize("impl", ["native", "ours"])
def test_traced_all_reduce_keeps_no_model_alive(impl):
  """The gradient function of a traced all_reduce outlives the trace (in
  TensorFlow's gradient registry) and holds the replica context; the
  context must not hold the run's function (here a bound method of a
  model-like object), as native TensorFlow's does not."""
  strategy = strategies.strategy(impl, "central_storage", 2)

  def train_and_drop():
    trainer = _Trainer(strategy)

    @tf.function
    def step(x):
      return strategy.run(trainer.replica_step, args=(x,))

    step(tf.constant(1.0))
    return weakref.ref(trainer), weakref.ref(step)

  refs = [train_and_drop() for _ in range(2)]
  gc.collect()
  assert [r() for pair in refs for r in pair] == [None] * 4
  if impl == "ours":
    _assert_no_run_alive()


def test_keras_model_fit_in_scope_is_collected():
  import keras  # pylint: disable=g-import-not-at-top
  strategy = _make("central_storage/2")

  def fit_and_drop():
    with strategy.scope():
      model = keras.Sequential([keras.layers.Input((2,)),
                                keras.layers.Dense(1)])
      model.compile(optimizer="sgd", loss="mse")
    model.fit(tf.ones([8, 2]), tf.ones([8, 1]), batch_size=4, epochs=1,
              verbose=0)
    return weakref.ref(model)

  ref = fit_and_drop()
  gc.collect()
  assert ref() is None
  _assert_no_run_alive()


# -- strategies, variables, input ---------------------------------------------

@pytest.mark.parametrize("facade", ["v2", "v1"])
@pytest.mark.parametrize("kind", KINDS)
def test_dropped_strategy_is_collected(kind, facade):
  x = tf.constant([1.0, 2.0])

  def use_and_drop():
    strategy = _make(kind, facade)
    strategy.run(_merge, args=(x,))
    with strategy.scope():
      v = tf.Variable(1.0)

    @tf.function
    def step(value):
      v.assign_add(1.0)
      return strategy.run(_merge, args=(value,))

    step(x)
    strategy.run(tf.function(_merge), args=(x,))
    dataset = tf.data.Dataset.range(16).map(
        lambda i: tf.cast(i, tf.float32)).batch(4)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    next(iterator)
    return [weakref.ref(o) for o in
            (strategy, strategy.extended, v, step, iterator)]

  use_and_drop()
  before = _state()
  refs = [r for _ in range(2) for r in use_and_drop()]
  gc.collect()
  assert [r for r in refs if r() is not None] == []
  assert _state() == before


@pytest.mark.parametrize("kind", KINDS)
def test_distributed_iterators_are_freed(kind):
  strategy = _make(kind)

  def dataset_fn(_):
    return tf.data.Dataset.range(64).map(
        lambda i: tf.cast(i, tf.float32)).batch(2)

  def iterate_and_drop():
    refs = []
    for distributed in (
        strategy.experimental_distribute_dataset(
            tf.data.Dataset.range(64).map(
                lambda i: tf.cast(i, tf.float32)).batch(6)),
        strategy.distribute_datasets_from_function(dataset_fn)):
      iterator = iter(distributed)
      next(iterator)
      next(iterator)
      refs += [weakref.ref(iterator), weakref.ref(distributed)]
    with strategy.scope():
      refs.append(weakref.ref(tf.Variable(tf.zeros([4]))))
    return refs

  iterate_and_drop()
  before = _state()
  refs = [r for _ in range(4) for r in iterate_and_drop()]
  gc.collect()
  assert [r for r in refs if r() is not None] == []
  assert _state() == before


@pytest.mark.parametrize("kind", KINDS)
def test_v1_graphs_and_strategies_are_freed(kind):
  def build_and_drop():
    graph = tf.Graph()
    with graph.as_default():
      strategy = _make(kind, "v1")
      dataset = tf.compat.v1.data.Dataset.range(36).map(
          lambda i: tf.cast(i, tf.float32)).batch(6)
      iterator = strategy.make_dataset_iterator(dataset)
      with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        out = strategy.experimental_run(
            lambda batch: _merge(tf.reduce_sum(batch)), iterator)
      mean = strategy.reduce("MEAN", out, axis=None)
      config = strategy.update_config_proto(tf.compat.v1.ConfigProto())
      with tf.compat.v1.Session(graph=graph, config=config) as session:
        session.run(iterator.initializer)
        session.run(mean)
    return weakref.ref(graph), weakref.ref(strategy)

  build_and_drop()
  before = _state()
  refs = [r for _ in range(3) for r in build_and_drop()]
  gc.collect()
  assert [r for r in refs if r() is not None] == []
  assert _state() == before
  _assert_no_run_alive()

