"""Faults and interrupts: no exit path of a run leaves anything behind.

A ``KeyboardInterrupt`` -- here raised by a ``SIGALRM`` handler, as Python's
default ``SIGINT`` handler raises it -- reaches the calling thread while it
waits for a replica on a worker (the signal is sent from a seeded point of
a seeded replica, after a seeded delay), in eager runs, while a
``tf.function`` is traced and while a TF1 graph is built, with 2-4
replicas.  Exceptions are also injected into the waiting thread, and raised
by replicas on workers.  After every trial the tests check: no thread or
paused replica is left (the thread count is back to its steady state, every
worker is idle, no replica's objects are alive), no strategy scope or
variable creator is left entered, and the next run gives native's result.
Exceptions raised by replicas reach the caller with native's type.  With
``FAULTS_AT_RANDOM_DELAYS=1``, eager runs are also interrupted by a timer at
random points, TensorFlow's own code included (a stress test: interrupted
inside its own Python code, TensorFlow's per-thread state can break).

Also pinned here: thread-local state in replicas (not per run, unlike
native: docs/differences.md), the error for a RaggedTensor all_reduce, and
that no test module keeps TensorFlow iterators alive past its end
(``tests/conftest.py``).

No duration is asserted; delays only spread where an interrupt lands.
"""
import ctypes
import gc
import os
import random
import signal
import threading
import time
import weakref

import numpy as np
import pytest
import tensorflow as tf

from support.central_storage import NativeCentralStorage
from support.central_storage import OursCentralStorage
from support.central_storage import compute_devices
from compat_distribute import _tf_private
from compat_distribute.runtime import context
from compat_distribute.replicas import workers as replica_workers
from compat_distribute import v1 as ours_v1


class _Held:
  """One per replica per run; alive while the replica's frame is."""


_HELD = weakref.WeakSet()


def _hold():
  held = _Held()
  _HELD.add(held)
  return held


def _nap(rid, phase, n):
  """A short sleep in one replica per phase, so that interrupts land
  while the caller waits for a worker as well as in its own code."""
  if rid == (phase + 1) % n:
    time.sleep(0.0005)


def _sum(strategy, value):
  return strategy.reduce("SUM", value, axis=None)


def _step(n, eager_sleeps=True):
  """A replica function with two synchronisation points."""

  def fn(x):
    ctx = tf.distribute.get_replica_context()
    rid = int(tf.get_static_value(ctx.replica_id_in_sync_group))
    held = _hold()
    y = x * float(rid + 1)
    if eager_sleeps:
      _nap(rid, 0, n)
    total = ctx.all_reduce("SUM", y)
    if eager_sleeps:
      _nap(rid, 1, n)
    mean = ctx.merge_call(_sum, args=(total * y,))
    if eager_sleeps:
      _nap(rid, 2, n)
    assert held is not None
    return mean + y

  return fn


def _local(results):
  return [np.asarray(v) for v in results]


def _expected(n):
  """Native TensorFlow's per-replica results of ``_step(n)``."""
  native = NativeCentralStorage(compute_devices(n))
  x = tf.constant([1.0, 2.0])
  out = native.run(_step(n, eager_sleeps=False), args=(x,))
  return _local(native.experimental_local_results(out))


class _Alarm:
  """Raises KeyboardInterrupt in the main thread ``delay`` seconds after
  entering (a one-shot ITIMER_REAL; with None, on a SIGALRM sent by the
  test); a late signal after exit is ignored."""

  def __init__(self, delay):
    self.delay = delay
    self.armed = False
    self.fired = False

  def handler(self, signum, frame):
    del signum, frame
    if self.armed:
      self.armed = False
      self.fired = True
      raise KeyboardInterrupt("test alarm")

  def __enter__(self):
    self.armed = True
    if self.delay is not None:
      signal.setitimer(signal.ITIMER_REAL, self.delay)
    return self

  def __exit__(self, *exc):
    self.armed = False
    if self.delay is not None:
      signal.setitimer(signal.ITIMER_REAL, 0)


@pytest.fixture
def alarms():
  """Installs the SIGALRM handler of the test's alarms; restores the old
  one and cancels the timer afterwards."""
  current = {"alarm": None}

  def handler(signum, frame):
    if current["alarm"] is not None:
      current["alarm"].handler(signum, frame)

  def make(delay):
    current["alarm"] = _Alarm(delay)
    return current["alarm"]

  old = signal.signal(signal.SIGALRM, handler)
  try:
    yield make
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    current["alarm"] = None
    signal.signal(signal.SIGALRM, old)


def _workers():
  return [t for t in threading.enumerate()
          if isinstance(t, replica_workers.Worker)]


class _Steady:
  """The main thread's strategy state and the process's threads before the
  trials; ``check`` asserts both are back after one."""

  def __init__(self):
    gc.collect()
    self.threads = threading.active_count()
    graph = tf.compat.v1.get_default_graph()
    self.creators = _tf_private.variable_creator_stack(graph)

  def check(self, collect=False):
    assert not tf.distribute.has_strategy()
    graph = tf.compat.v1.get_default_graph()
    assert _tf_private.variable_creator_stack(graph) == self.creators
    assert [w for w in _workers() if w.lease is not None] == [], (
        "a replica worker is still lent to a finished run")
    assert threading.active_count() == self.threads
    if collect:
      gc.collect()
      assert len(_HELD) == 0, "a replica's frame is still alive"


def _warm_up(strategy, fn, x):
  for _ in range(2):
    strategy.run(fn, args=(x,))


REPLICAS = (2, 3, 4)


@pytest.mark.skipif(
    not os.environ.get("FAULTS_AT_RANDOM_DELAYS"),
    reason="stress test, FAULTS_AT_RANDOM_DELAYS=1 runs it: an interrupt "
    "landing inside TensorFlow's own code on the calling thread can break "
    "TensorFlow's per-thread state (or, rarely, crash it), natively too")
@pytest.mark.parametrize("n", REPLICAS)
def test_sigint_during_eager_runs_leaves_nothing(n, alarms):
  expected = _expected(n)
  strategy = OursCentralStorage(compute_devices(n))
  fn = _step(n)
  x = tf.constant([1.0, 2.0])
  _warm_up(strategy, fn, x)
  started = time.perf_counter()
  strategy.run(fn, args=(x,))
  span = time.perf_counter() - started  # spreads the delays; not asserted
  steady = _Steady()
  rng = random.Random(1600 + n)
  interrupted = 0
  for trial in range(50):
    try:
      with alarms(rng.uniform(0.0, 1.3 * span)):
        strategy.run(fn, args=(x,))
    except KeyboardInterrupt:
      interrupted += 1
    steady.check(collect=trial == 24)  # gc.collect is slow: now and at the end
    after = strategy.run(fn, args=(x,))
    np.testing.assert_allclose(
        _local(strategy.experimental_local_results(after)), expected)
  steady.check(collect=True)
  assert interrupted >= 5  # the delays do reach into the runs


def _signalling_step(n, where, delay, main_id):
  """``_step`` whose replica ``where[0]`` (on a worker) at phase
  ``where[1]`` sends SIGALRM to the calling thread after ``delay`` seconds
  and keeps working, so the interrupt reaches the caller while it waits for
  that replica (the case of a Ctrl-C during a long replica step)."""
  target_rid, target_phase = where

  def fn(x):
    ctx = tf.distribute.get_replica_context()
    rid = int(tf.get_static_value(ctx.replica_id_in_sync_group))
    held = _hold()

    def point(phase):
      if (rid, phase) == (target_rid, target_phase):
        time.sleep(delay)
        signal.pthread_kill(main_id, signal.SIGALRM)
        time.sleep(0.002)

    y = x * float(rid + 1)
    point(0)
    total = ctx.all_reduce("SUM", y)
    point(1)
    mean = ctx.merge_call(_sum, args=(total * y,))
    point(2)
    assert held is not None
    return mean + y

  return fn


def _eager_program(n):
  strategy = OursCentralStorage(compute_devices(n))
  x = tf.constant([1.0, 2.0])

  def run(fn):
    return _local(strategy.experimental_local_results(
        strategy.run(fn, args=(x,))))

  return run


def _traced_program(n):
  strategy = OursCentralStorage(compute_devices(n))
  x = tf.constant([1.0, 2.0])

  def run(fn):  # a new tf.function: every call traces
    result = tf.function(lambda: strategy.run(fn, args=(x,)))()
    return _local(strategy.experimental_local_results(result))

  return run


def _tf1_program(n):
  def run(fn):
    with tf.Graph().as_default():
      strategy = ours_v1.experimental.CentralStorageStrategy(
          compute_devices(n))
      with strategy.scope():
        out = strategy.run(fn, args=(tf.constant([1.0, 2.0]),))
      results = list(strategy.experimental_local_results(out))
      with tf.compat.v1.Session() as session:
        return _local(session.run(results))

  return run


PROGRAMS = {"eager": (_eager_program, 60), "traced": (_traced_program, 6),
            "tf1_graph": (_tf1_program, 6)}


@pytest.mark.slow
@pytest.mark.parametrize("n", REPLICAS)
@pytest.mark.parametrize("mode", sorted(PROGRAMS))
def test_sigint_while_waiting_for_a_replica_leaves_nothing(mode, n, alarms):
  make, trials = PROGRAMS[mode]
  expected = _expected(n)
  run = make(n)
  np.testing.assert_allclose(run(_step(n, eager_sleeps=False)), expected)
  steady = _Steady()
  main_id = threading.get_ident()
  rng = random.Random(f"{mode}/{n}")
  for trial in range(trials):
    where = (rng.randrange(1, n), rng.randrange(3))
    fn = _signalling_step(n, where, rng.uniform(0.0, 0.002), main_id)
    with pytest.raises(KeyboardInterrupt):
      with alarms(None):
        run(fn)
    del fn
    steady.check(collect=trial == trials - 1)
    np.testing.assert_allclose(run(_step(n, eager_sleeps=False)), expected)


# -- exceptions injected into the waiting thread, raised in any thread ------

def _inject(thread_id, exc_type):
  """Makes ``exc_type`` be raised in thread ``thread_id`` as soon as it runs
  Python code again (as an interrupt delivered to it would)."""
  count = ctypes.pythonapi.PyThreadState_SetAsyncExc(
      ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))
  assert count == 1


def _faulty_step(n, where, exc_type, main_id):
  """``_step`` whose replica ``where[0]`` at phase ``where[1]`` either
  injects ``exc_type`` into the calling (main) thread -- which then is
  waiting for that replica -- or raises it itself (``where[2]``)."""
  target_rid, target_phase, inject = where

  def fault(rid, phase):
    if rid == target_rid and phase == target_phase:
      if inject:
        _inject(main_id, exc_type)
      else:
        raise exc_type("replica fault")

  def fn(x):
    ctx = tf.distribute.get_replica_context()
    rid = int(tf.get_static_value(ctx.replica_id_in_sync_group))
    held = _hold()
    y = x * float(rid + 1)
    fault(rid, 0)
    total = ctx.all_reduce("SUM", y)
    fault(rid, 1)
    mean = ctx.merge_call(_sum, args=(total * y,))
    fault(rid, 2)
    assert held is not None
    return mean + y

  return fn


def _outcome(strategy, fn, x):
  try:
    strategy.run(fn, args=(x,))
  except (KeyboardInterrupt, SystemExit) as e:
    return type(e).__name__
  return "returned"


_FAULTS = [(rid, phase, inject) for rid in range(1, 4) for phase in range(3)
           for inject in (True, False)]


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_exceptions_in_any_thread_leave_nothing(exc_type):
  n = 4
  expected = _expected(n)
  strategy = OursCentralStorage(compute_devices(n))
  x = tf.constant([1.0, 2.0])
  _warm_up(strategy, _step(n, eager_sleeps=False), x)
  steady = _Steady()
  main_id = threading.get_ident()
  for where in _FAULTS:
    outcome = _outcome(strategy, _faulty_step(n, where, exc_type, main_id), x)
    # An injected exception is delivered once the main thread runs Python
    # code again; a raised one reaches the caller as it does natively.
    assert outcome == exc_type.__name__, where
    steady.check()
    after = strategy.run(_step(n, eager_sleeps=False), args=(x,))
    np.testing.assert_allclose(
        _local(strategy.experimental_local_results(after)), expected)
  steady.check(collect=True)


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_replica_raising_base_exceptions_matches_native(exc_type):
  n = 3
  x = tf.constant([1.0, 2.0])
  main_id = threading.get_ident()
  for where in [(rid, phase, False) for rid in range(n) for phase in range(3)]:
    fn = _faulty_step(n, where, exc_type, main_id)
    outcomes = [_outcome(make(compute_devices(n)), fn, x)
                for make in (OursCentralStorage, NativeCentralStorage)]
    assert outcomes[0] == outcomes[1] == exc_type.__name__, where


def _scaled_by_replica(v):
  ctx = tf.distribute.get_replica_context()
  return v * tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)


@pytest.mark.slow
@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit,
                                      ValueError])
def test_a_replica_raising_in_an_eager_run_without_merge_leaves_nothing(
    exc_type):
  # The eager hot path: no merge_call, every replica on the calling thread,
  # the finished run kept for the strategy's next one.  Whichever replica
  # raises, the caller gets the exception, its thread is as it was, and the
  # runs after it (reusing the kept run) compute the right values.
  n = 3
  strategy = OursCentralStorage(compute_devices(n))
  x = tf.constant([1.0, 2.0])
  strategy.run(_scaled_by_replica, args=(x,))
  steady = _Steady()
  summary = _tf_private.summary_state()
  flag = summary.is_recording_distribution_strategy
  device = _tf_private.eager_device_state()
  for failing in range(n):

    def fn(v, failing=failing):
      ctx = tf.distribute.get_replica_context()
      if int(tf.get_static_value(ctx.replica_id_in_sync_group)) == failing:
        raise exc_type(f"replica {failing} fails")
      return _scaled_by_replica(v)

    with pytest.raises(exc_type, match=f"replica {failing} fails"):
      strategy.run(fn, args=(x,))
    steady.check()
    assert summary.is_recording_distribution_strategy is flag
    assert _tf_private.eager_device_state() == device
    after = strategy.run(_scaled_by_replica, args=(x,))
    assert [t.numpy().tolist() for t in
            strategy.experimental_local_results(after)] == [
                [1.0, 2.0], [2.0, 4.0], [3.0, 6.0]]
  steady.check(collect=True)


def _interrupting_once(real, fired, before, when):
  """``real``, but its first call for which ``when(*args)`` holds raises
  KeyboardInterrupt, before or after doing its work: a Ctrl-C landing
  there."""

  def wrapper(*args, **kwargs):
    if fired or not when(*args):
      return real(*args, **kwargs)
    fired.append(real.__name__)
    if before:
      raise KeyboardInterrupt
    real(*args, **kwargs)
    raise KeyboardInterrupt

  return wrapper


def _is_cross_replica_mode(stack, mode):
  del stack
  return mode.replica_context is None


def _any_call(*args):
  del args
  return True


_SCOPE_EXIT_POINTS = {
    "as the exit starts": (context, "exit_scope", True, _any_call),
    "before the creator is popped": (
        _tf_private, "pop_variable_creator", True, _any_call),
    "after the creator is popped": (
        _tf_private, "pop_variable_creator", False, _any_call),
    "after the strategy is popped": (
        context, "pop_from", False, _is_cross_replica_mode),
}


@pytest.mark.parametrize("where", sorted(_SCOPE_EXIT_POINTS))
def test_an_interrupt_as_run_leaves_its_scope_still_leaves_it(
    where, monkeypatch):
  # strategy.run enters the strategy's scope around the replicas; a Ctrl-C
  # landing while it leaves it reaches the caller, and the calling thread is
  # outside the strategy all the same (no strategy current, its variable
  # creators as before), so the next run and the next scope work.
  strategy = OursCentralStorage(compute_devices(2))
  x = tf.constant([1.0, 2.0])
  strategy.run(_scaled_by_replica, args=(x,))
  steady = _Steady()
  module, name, before, when = _SCOPE_EXIT_POINTS[where]
  fired = []
  monkeypatch.setattr(module, name, _interrupting_once(
      getattr(module, name), fired, before, when))
  with pytest.raises(KeyboardInterrupt):
    strategy.run(_scaled_by_replica, args=(x,))
  monkeypatch.undo()
  assert fired == [name]
  steady.check()
  after = strategy.run(_scaled_by_replica, args=(x,))
  assert [t.numpy().tolist() for t in
          strategy.experimental_local_results(after)] == [[1.0, 2.0],
                                                          [2.0, 4.0]]
  with strategy.scope():
    assert tf.distribute.get_strategy() is strategy
  steady.check()


# -- Python thread state, documented in docs/differences.md -------------------

def _thread_local_counts(strategy, merge, runs=3):
  """What each replica's count of calls in one threading.local reads, per
  run (replica 0 is first)."""
  calls = threading.local()

  def fn():
    calls.n = getattr(calls, "n", 0) + 1
    seen = calls.n
    ctx = tf.distribute.get_replica_context()
    if merge:
      ctx.merge_call(lambda s: None)
    return tf.constant(seen)

  out = []
  for _ in range(runs):
    result = strategy.run(fn)
    out.append([int(v) for v in strategy.experimental_local_results(result)])
  return out


def test_thread_local_state_is_the_callers_and_the_pooled_workers():
  # Native starts fresh threads for every replica of every run: each reads
  # 1.  Ours runs replica 0 (and, without merge_call, every replica) on the
  # calling thread, and replicas 1..N-1 after a merge_call on pooled
  # workers, whose thread-local values carry over between runs.
  native = NativeCentralStorage(compute_devices(2))
  assert _thread_local_counts(native, merge=True) == [[1, 1]] * 3
  assert _thread_local_counts(native, merge=False) == [[1, 1]] * 3
  ours = OursCentralStorage(compute_devices(2))
  assert _thread_local_counts(ours, merge=False) == [[1, 2], [3, 4], [5, 6]]
  assert _thread_local_counts(ours, merge=True) == [[1, 1], [2, 2], [3, 3]]


def _replicas_see_callers_thread_local(strategy, graph):
  """Whether each replica of one run, in a graph or eagerly, reads what
  the calling thread set in a threading.local."""
  state = threading.local()
  state.callers = True
  seen = []

  def fn():
    seen.append(getattr(state, "callers", False))
    return tf.constant(1.0)

  if graph:
    with tf.Graph().as_default():
      strategy.run(fn)
  else:
    strategy.run(fn)
  return seen


@pytest.mark.parametrize("replicas", [1, 2])
def test_while_building_a_graph_replicas_do_not_run_on_the_callers_thread(
    replicas):
  # Issue 42's root cause: tf-keras' seed generator (set_random_seed) is a
  # threading.local, and model_to_estimator clones its Keras model inside
  # the replica, so a replica run on the caller's thread drew other initial
  # weights than TensorFlow's, whose replicas run on threads of their own.
  native = NativeCentralStorage(compute_devices(replicas))
  ours = OursCentralStorage(compute_devices(replicas))
  assert _replicas_see_callers_thread_local(native, graph=True) == (
      [False] * replicas)
  assert _replicas_see_callers_thread_local(ours, graph=True) == (
      [False] * replicas)
  # Eagerly, ours keeps the calling thread (docs/differences.md).
  assert _replicas_see_callers_thread_local(native, graph=False) == (
      [False] * replicas)
  assert _replicas_see_callers_thread_local(ours, graph=False) == (
      [True] * replicas)


# -- errors -------------------------------------------------------------------

def test_all_reduce_of_a_shared_ragged_tensor_names_the_rule():
  ragged = tf.ragged.constant([[1.0], [2.0, 3.0]])

  def fn():
    return tf.distribute.get_replica_context().all_reduce("SUM", ragged)

  errors = []
  for make in (OursCentralStorage, NativeCentralStorage):
    with pytest.raises(ValueError) as info:
      make(compute_devices(2)).run(fn)
    errors.append(str(info.value))
  ours, _ = errors
  assert "not per-replica" in ours and "RaggedTensor" in ours
  assert "inside the replica function" in ours
  assert "has no len" not in ours and "TypeError" not in ours


def test_all_reduce_of_per_replica_ragged_tensors_is_reduced():
  # Better than native, which fails with AttributeError ('RaggedTensor'
  # object has no attribute 'device'): each replica's own ragged value.
  def fn():
    rid = tf.distribute.get_replica_context().replica_id_in_sync_group
    value = tf.ragged.constant([[1.0], [2.0, 3.0]]) * tf.cast(rid + 1,
                                                             tf.float32)
    return tf.distribute.get_replica_context().all_reduce("SUM", value)

  ours = OursCentralStorage(compute_devices(2))
  for result in ours.experimental_local_results(ours.run(fn)):
    assert result.to_list() == [[3.0], [6.0, 9.0]]
