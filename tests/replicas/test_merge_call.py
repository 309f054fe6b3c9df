"""merge_call, and the rendezvous of several replicas it makes: merge_fn's
arguments and results against TensorFlow's CentralStorageStrategy and
OneDeviceStrategy, errors in a replica or in merge_fn, mismatched
merge_calls and misuse.  Every run leaves the replica threads idle and the
strategy usable.  Cases that could hang run under ``within`` (a helper
thread with a deadline) instead of a pytest timeout.

The merge_call cases that compare a whole program with native TensorFlow
sit in parity/ (``test_api_parity.py``, ``test_misc_parity.py``); the
replica runner's other behaviour in ``test_replicas.py``.
"""
import threading

import numpy as np
import pytest
import tensorflow as tf

from compat_distribute import v2 as distribute
from compat_distribute.replicas import workers as replica_workers
from support.central_storage import (REPLICAS, assert_same, both, pair,
                                     replica_float, run_in_mode, within)

DEADLINE = 120  # seconds; generous for a loaded 2-core machine
ONE_DEVICE = "/cpu:1"
ReduceOp = tf.distribute.ReduceOp


# -- merge_fn's arguments and results ----------------------------------------

@pytest.mark.parametrize("n", REPLICAS)
def test_merge_call_groups_args_and_splits_result(n, mode):
  def program(strategy):
    def merge_fn(s, x, scale=1.0):
      assert tf.distribute.in_cross_replica_context()
      total = s.reduce(ReduceOp.SUM, x, axis=None)
      return total * scale, x  # the same for all, and per replica

    def fn():
      ctx = tf.distribute.get_replica_context()
      return ctx.merge_call(merge_fn, args=(replica_float(),),
                            kwargs={"scale": 2.0})

    return strategy.run(fn)

  ours, native = both(n, mode, program)
  assert_same(ours, native)


@pytest.mark.parametrize("n", (2, 4))
def test_merge_fn_gets_per_replica_values(n):
  got = []

  def merge_fn(strategy, x, same):
    got.append((type(x).__name__, len(x.values), same))

  def fn():
    tf.distribute.get_replica_context().merge_call(
        merge_fn, args=(replica_float(), "same"))

  for strategy in pair(n):
    strategy.run(fn)
  assert got == [("PerReplica", n, "same")] * 2


@pytest.mark.parametrize("n", (2,))
def test_merge_call_result_is_not_differentiated(n):
  # TensorFlow runs merge_fn where no replica's tape sees it.
  def fn():
    ctx = tf.distribute.get_replica_context()
    x = tf.constant(2.0)
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = ctx.merge_call(lambda s, v: s.reduce("SUM", v, axis=None),
                         args=(x * x,))
    return tape.gradient(y, x)

  for strategy in pair(n):
    assert strategy.run(fn) is None


def test_reduce_of_numpy_values_in_merge_call():
  def fn():
    ctx = tf.distribute.get_replica_context()
    return ctx.merge_call(lambda s, v: s.reduce("SUM", v, axis=None),
                          args=(np.float32(1.0) * replica_float(),))

  ours, native = (s.run(fn) for s in pair(2))
  assert_same(ours, native)


# -- errors in a replica or in merge_fn; misuse --------------------------------

def _raise_on(replica, where):
  """A replica function raising KeyError on ``replica`` before / after a
  merge_call (``where``)."""
  def fn():
    ctx = tf.distribute.get_replica_context()
    failing = int(ctx.replica_id_in_sync_group) == replica
    if failing and where == "before":
      raise KeyError(f"boom {replica}")
    ctx.merge_call(lambda s: None)
    if failing:
      raise KeyError(f"boom {replica}")
    return ctx.replica_id_in_sync_group
  return fn


def _replica_threads():
  return [t for t in threading.enumerate()
          if t.name == "compat_distribute-replica"]


def _assert_clean_after_error(strategy, n):
  assert not tf.distribute.has_strategy()
  assert tf.distribute.get_replica_context() is not None  # the default one
  # No worker is left inside a replica: every one is back in the idle pool.
  assert len(_replica_threads()) == len(replica_workers.idle())
  result = strategy.run(
      lambda: tf.distribute.get_replica_context().all_reduce(
          "SUM", replica_float()))
  assert float(strategy.experimental_local_results(result)[0]) == (
      n * (n + 1) / 2.0)


@pytest.mark.parametrize("n", (2, 4))
@pytest.mark.parametrize("where", ["before", "after"])
def test_exception_in_a_replica_propagates(n, where):
  ours, native = pair(n)
  for replica in (0, 1, n - 1):
    for strategy in (ours, native):
      with pytest.raises(KeyError, match=f"boom {replica}"):
        within(DEADLINE, lambda s=strategy: s.run(_raise_on(replica, where)))
    within(DEADLINE, lambda: _assert_clean_after_error(ours, n))


@pytest.mark.parametrize("n", (2, 4))
def test_exception_in_merge_fn_propagates(n, mode):
  ours, native = pair(n)
  error = ZeroDivisionError("in merge_fn")

  def merge_fn(strategy):
    raise error

  def program(strategy):
    return strategy.run(
        lambda: tf.distribute.get_replica_context().merge_call(merge_fn))

  for strategy in (ours, native):
    with pytest.raises(ZeroDivisionError) as info:
      within(DEADLINE, lambda s=strategy: run_in_mode(mode, lambda: program(s)))
  assert info.value is error or mode == "tf_function"
  within(DEADLINE, lambda: _assert_clean_after_error(ours, n))


def test_exception_swallowed_by_user_code_still_fails_the_run():
  ours, _ = pair(2)

  def fn():
    ctx = tf.distribute.get_replica_context()
    if int(ctx.replica_id_in_sync_group) == 1:
      raise KeyError("replica 1")
    try:
      ctx.merge_call(lambda s: None)
    except KeyError:
      pass  # replica 0 swallows replica 1's error
    return 0

  with pytest.raises(KeyError, match="replica 1"):
    within(DEADLINE, lambda: ours.run(fn))
  within(DEADLINE, lambda: _assert_clean_after_error(ours, 2))


@pytest.mark.parametrize("n", (2, 4))
@pytest.mark.parametrize("merging", ["replica_0", "others"])
def test_different_numbers_of_merge_calls(n, merging, mode):
  def fn():
    ctx = tf.distribute.get_replica_context()
    on_zero = int(tf.get_static_value(ctx.replica_id_in_sync_group)) == 0
    if on_zero == (merging == "replica_0"):
      ctx.merge_call(lambda s: None)
    return 1

  for strategy in pair(n):
    with pytest.raises(RuntimeError, match="different number"):
      within(DEADLINE, lambda s=strategy: run_in_mode(mode, lambda: s.run(fn)))
  within(DEADLINE, lambda: _assert_clean_after_error(pair(n)[0], n))


def test_merge_call_from_cross_replica_context():
  ours, native = pair(2)
  for strategy in (ours, native):
    kept = []
    strategy.run(lambda: kept.append(tf.distribute.get_replica_context()))
    with pytest.raises(RuntimeError):
      kept[0].merge_call(lambda s: 1)
    with strategy.scope():
      with pytest.raises(RuntimeError):
        kept[0].merge_call(lambda s: 1)

    def nested():
      ctx = tf.distribute.get_replica_context()
      return ctx.merge_call(lambda s: ctx.merge_call(lambda s2: 1))

    with pytest.raises(RuntimeError):
      within(DEADLINE, lambda s=strategy: s.run(nested))
  within(DEADLINE, lambda: _assert_clean_after_error(ours, 2))


def test_merge_call_with_another_replicas_context_is_refused():
  ours, _ = pair(2)
  kept = []

  def fn():
    ctx = tf.distribute.get_replica_context()
    kept.append(ctx)
    if len(kept) == 2:
      return kept[0].merge_call(lambda s: 1)
    return ctx.merge_call(lambda s: 1)

  with pytest.raises(RuntimeError, match="not the replica context"):
    within(DEADLINE, lambda: ours.run(fn))


def test_merge_call_inside_a_nested_tf_function_is_refused():
  ours, native = pair(2)

  @tf.function
  def inner():
    return tf.distribute.get_replica_context().all_reduce("SUM", 1.0)

  for strategy in (ours, native):
    with pytest.raises(RuntimeError):
      within(DEADLINE, lambda s=strategy: s.run(lambda: inner()))
  within(DEADLINE, lambda: _assert_clean_after_error(ours, 2))


def test_one_replica_merge_call_inside_a_nested_tf_function_runs():
  # One replica runs on the calling thread: a merge_call inside a nested
  # tf.function gives TensorFlow's value; an all_reduce there, which TF
  # 2.21 fails with "destinations can not be empty", gives the value as is.
  ours, native = pair(1)

  @tf.function
  def merge(x):
    return tf.distribute.get_replica_context().merge_call(
        lambda strategy, v: v * 2.0, args=(x,))

  @tf.function
  def all_reduce(x):
    return tf.distribute.get_replica_context().all_reduce("SUM", x)

  x = tf.constant(2.0)
  for wrap in (lambda f: f, tf.function):
    assert float(wrap(lambda: ours.run(merge, args=(x,)))()) == float(
        wrap(lambda: native.run(merge, args=(x,)))()) == 4.0
    assert float(wrap(lambda: ours.run(all_reduce, args=(x,)))()) == 2.0
    with pytest.raises(ValueError, match="destinations"):
      wrap(lambda: native.run(all_reduce, args=(x,)))()


def test_merge_call_arguments_checked():
  ours, _ = pair(2)
  with pytest.raises(TypeError, match="callable"):
    ours.run(lambda: tf.distribute.get_replica_context().merge_call(3))


# -- one replica (OneDeviceStrategy) -------------------------------------------

def test_exception_in_fn_and_merge_fn_restores_contexts():
  ours = distribute.OneDeviceStrategy(ONE_DEVICE)
  class Boom(Exception):
    pass
  def fn():
    raise Boom("in fn")
  with pytest.raises(Boom, match="in fn"):
    ours.run(fn)
  def merge_fn(strategy):
    raise Boom("in merge")
  def fn2():
    tf.distribute.get_replica_context().merge_call(merge_fn)
  with ours.scope():
    with pytest.raises(Boom, match="in merge"):
      ours.run(fn2)
    assert tf.distribute.get_strategy() is ours
    assert tf.distribute.in_cross_replica_context()
  assert not tf.distribute.has_strategy()
  assert ours.run(lambda: tf.constant(1)).numpy() == 1


def test_merge_call_requires_replica_context():
  from compat_distribute.replicas.context import ReplicaContext  # pylint: disable=g-import-not-at-top
  ours = distribute.OneDeviceStrategy(ONE_DEVICE)
  ctx = ReplicaContext(ours, 0)
  with ours.scope():
    with pytest.raises(RuntimeError, match="replica context"):
      ctx.merge_call(lambda s: None)
