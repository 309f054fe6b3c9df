"""The only door to TensorFlow names that are not public API.

Every other module reaches TensorFlow through public ``tf.*`` or through the
helpers here, so that a TensorFlow upgrade that moves one of these names
breaks exactly one file.

Private names used (checked against TensorFlow 2.21.0):

* ``Graph._distribution_strategy_stack`` -- the per-graph, per-thread stack
  whose top entry ``tf.distribute.get_strategy()``,
  ``tf.distribute.get_replica_context()`` and ``in_cross_replica_context()``
  read.  Entering a strategy scope or a replica context has to push onto it;
  there is no public way to do so.  Each entry only needs the attributes
  ``strategy``, ``cross_replica_context`` and ``replica_context``.
* ``tensorflow.python.distribute.device_util.current`` -- the device named by
  the innermost ``tf.device`` scope (eager or graph), which is where
  ``Strategy.reduce`` and ``gather`` put their result.  TensorFlow has no
  public query for the current device scope.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.distribute import device_util as _device_util


_get_default_graph = tf.compat.v1.get_default_graph  # bound once: hot path


def strategy_stack() -> list[Any]:
  """Returns the current thread's strategy stack of the default graph.

  >>> isinstance(strategy_stack(), list)
  True
  """
  return _get_default_graph()._distribution_strategy_stack  # pylint: disable=protected-access


def set_strategy_stack(graph: tf.Graph, stack: list[Any]) -> None:
  """Replaces ``graph``'s strategy stack for the calling thread.

  Replica worker threads start with an empty stack and need the caller's.
  """
  graph._distribution_strategy_stack = stack  # pylint: disable=protected-access


def current_device() -> str:
  """The device of the innermost ``tf.device`` scope, or ``''``.

  >>> with tf.device("/cpu:0"):
  ...   current_device()
  '/job:localhost/replica:0/task:0/device:CPU:0'
  """
  return _device_util.current() or ""
