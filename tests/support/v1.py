"""Shared by the v1 tests: our v1 strategies next to TensorFlow's.

A configuration is ``"one_device"`` (on ``/cpu:1``) or ``"central_storage/N"``
(compute on ``/cpu:0`` .. ``/cpu:N-1``, variables on ``/cpu:0``).  Native
classes are captured at import time, before anything could install the shim
in TensorFlow's place.
"""

import numpy as np
import tensorflow as tf

from fixtures import strategies

NATIVE_ONE_DEVICE = tf.compat.v1.distribute.OneDeviceStrategy
NATIVE_CENTRAL_STORAGE = tf.compat.v1.distribute.experimental.CentralStorageStrategy
assert NATIVE_ONE_DEVICE.__module__.startswith("tensorflow")

ONE_DEVICE = "/cpu:1"
CONFIGS = ["one_device", "central_storage/1", "central_storage/2",
           "central_storage/4"]


def replicas(config):
  return int(config.split("/")[1]) if "/" in config else 1


def make_ours(config):
  """Our v1 strategy for ``config`` (fixtures/strategies.py's ``ours_v1``)."""
  return strategies.make(f"ours_v1/{config}")


def make_native(config):
  """TensorFlow's v1 strategy for ``config`` (``native_v1``)."""
  return strategies.make(f"native_v1/{config}")


def native_session_config(strategy):
  """Native's config plus the ``device_count`` native forgets to set."""
  config = strategy.update_config_proto(tf.compat.v1.ConfigProto())
  config.device_count["CPU"] = 4
  return config


def to_numpy(structure, strategy):
  """Every leaf as a list of per-replica numpy arrays (eager)."""
  return tf.nest.map_structure(
      lambda x: [np.asarray(v) for v in strategy.experimental_local_results(x)],
      structure)


def assert_nested_equal(a, b):
  flat_a, flat_b = tf.nest.flatten(a), tf.nest.flatten(b)
  assert len(flat_a) == len(flat_b), (a, b)
  for x, y in zip(flat_a, flat_b):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)
