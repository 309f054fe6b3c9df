"""Helpers shared by the central-storage, replica and fault tests
(strategies/test_central_storage.py, replicas/).

Each differential test builds the same program under our
``CentralStorageStrategy`` and TensorFlow's, runs it eagerly or in a
``tf.function``, and compares a normalised form of the results.
"""
import threading

import numpy as np
import pytest
import tensorflow as tf

from compat_distribute import v2 as distribute
from fixtures import strategies

REPLICAS = (1, 2, 4)
NativeCentralStorage = tf.distribute.experimental.CentralStorageStrategy
OursCentralStorage = distribute.experimental.CentralStorageStrategy


compute_devices = strategies.devices


def pair(n, **kwargs):
  """(ours, native) CentralStorageStrategy over logical CPUs 0..n-1."""
  return strategies.pair("central_storage", n, **kwargs)


def run_in_mode(mode, fn):
  """``fn()`` eagerly or in a ``tf.function`` traced without autograph."""
  return strategies.run_in(mode, fn, autograph=False)


def both(n, mode, program, **kwargs):
  """``program(strategy)`` (in ``mode``) under ours and native."""
  return strategies.both("central_storage", program, n, mode=mode,
                         autograph=False, **kwargs)


def norm(x):
  """A comparable, plain-Python form of a (nested) result."""
  if isinstance(x, tf.distribute.DistributedValues):
    return (type(x).__name__, tuple(norm(v) for v in x.values))
  if isinstance(x, tf.IndexedSlices):
    return ("IndexedSlices", norm(tf.convert_to_tensor(x)))
  if isinstance(x, tf.Variable):
    return ("Variable", norm(tf.convert_to_tensor(x)))
  if tf.is_tensor(x):
    return (x.dtype.name, np.asarray(x).tolist())
  if isinstance(x, dict):
    return {k: norm(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return (type(x).__name__, tuple(norm(v) for v in x))
  return x


def assert_same(ours, native):
  assert norm(ours) == norm(native)


def devices(x):
  """Devices of a distributed value's parts (or of one tensor)."""
  if isinstance(x, tf.distribute.DistributedValues):
    return tuple(v.device for v in x.values)
  return x.device


def replica_float():
  """This replica's id + 1, as a float32 scalar."""
  ctx = tf.distribute.get_replica_context()
  return tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 1.0


def per_replica(strategy, fn):
  """A per-replica value: ``fn(replica_id)`` on each replica's device."""
  return strategy.experimental_distribute_values_from_function(
      lambda ctx: fn(ctx.replica_id_in_sync_group))


def within(seconds, fn):
  """Runs ``fn()`` on a helper thread; fails the test if it has not ended
  after ``seconds`` (a deadlock), else returns its result or re-raises."""
  box = {}

  def target():
    try:
      box["result"] = fn()
    except BaseException as e:  # pylint: disable=broad-except
      box["error"] = e

  thread = threading.Thread(target=target, daemon=True)
  thread.start()
  thread.join(seconds)
  if thread.is_alive():
    pytest.fail(f"still running after {seconds}s: deadlock")
  if "error" in box:
    raise box["error"]
  return box.get("result")
