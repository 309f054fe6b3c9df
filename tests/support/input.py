"""Shared by the input tests (no tests here).

``fake_workers(n)`` is what a strategy hands ``compat_distribute.input``
(an ``InputWorkers``) for ``n`` replicas on logical CPUs 0..n-1 with the
pipeline on CPU:0, and no strategy.  It lets the multi-replica input logic
be tested without a multi-replica strategy;
``ours(n)`` uses our CentralStorageStrategy's extended instead once it
exists.  ``native(n)`` is TensorFlow's CentralStorageStrategy, the oracle.
"""
import numpy as np
import tensorflow as tf

from compat_distribute.input import InputWorkers
from conftest import cpu
from fixtures import strategies



def fake_workers(n, host=0, **choices):
  """The ``InputWorkers`` of ``n`` replicas (no strategy: input is read
  under any scope); ``choices`` sets its other fields."""
  return InputWorkers(devices=tuple(cpu(i) for i in range(n)),
                      host=cpu(host), **choices)


def native(n):
  """TensorFlow's CentralStorageStrategy over logical CPUs 0..n-1."""
  return strategies.strategy("native", "central_storage", n)


def central_storage_class():
  """Our v2 CentralStorageStrategy (never TensorFlow's, which the facade
  would fall back to)."""
  from compat_distribute.strategies.central_storage import CentralStorageStrategy  # pylint: disable=g-import-not-at-top
  return CentralStorageStrategy


def local_values(value, n):
  """A step's value as a list (one entry per replica) of nested lists."""
  if n == 1:
    parts = [value]
  else:
    parts = [tf.nest.map_structure(lambda v, i=i: v.values[i], value)
             for i in range(n)]
  return [tf.nest.map_structure(to_list, p) for p in parts]


def native_local_values(strategy, value):
  """The same for a value produced under a native strategy."""
  parts = list(strategy.experimental_local_results(value))
  return [tf.nest.map_structure(to_list, p) for p in parts]


def to_list(v):
  if isinstance(v, tf.SparseTensor):
    v = tf.sparse.to_dense(v)
  if isinstance(v, tf.RaggedTensor):
    return v.to_list()
  return np.asarray(v).tolist()


def devices_of(value, n):
  """Per replica, the set of devices its leaves live on."""
  if n == 1:
    return [{t.device for t in tf.nest.flatten(value)}]
  return [{v.values[i].device for v in tf.nest.flatten(value)}
          for i in range(n)]
