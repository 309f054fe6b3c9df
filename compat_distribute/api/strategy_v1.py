"""The v1 (``tf.compat.v1.distribute``) strategy API, layered on the base.

TF1-style programs build a graph once and run it with a
``tf.compat.v1.Session``.  They feed a strategy through *input iterators*
(``make_dataset_iterator``, ``make_input_fn_iterator``) that must be
initialised, run a step with ``experimental_run(fn, iterator)``, and ask the
strategy for a session config with ``update_config_proto``.  This module adds
those methods to the shared ``StrategyMethods``; the v1 base class
``StrategyV1`` (exported as ``Strategy``, named as TensorFlow's) derives
from ``tf.compat.v1.distribute.Strategy`` (and, like TensorFlow's own v1
classes, not from ``tf.distribute.Strategy``).

>>> import tensorflow as tf
>>> from compat_distribute import v1 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> isinstance(strategy, tf.compat.v1.distribute.Strategy)
True
>>> strategy.reduce("SUM", tf.constant([1., 2.]))  # axis defaults to None
<tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>
"""
from __future__ import annotations

from typing import Optional

import tensorflow as tf

from compat_distribute.api import dataset_methods
from compat_distribute.api import strategy as strategy_lib
from compat_distribute.api import iterators as strategy_iterators
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReduceOpLike
from compat_distribute.runtime.types import Session


class StrategyV1Methods:
  """Methods that only the v1 API has, or that differ there (``reduce``'s
  default ``axis``).  Mixed in ahead of ``StrategyMethods``; the input
  iterator methods both generations share are in ``api.iterators``."""

  def experimental_make_numpy_dataset(self, numpy_input: Nest,
                                      session: Optional[Session] = None
                                      ) -> tf.data.Dataset:
    """A ``tf.data.Dataset`` of the slices of ``numpy_input`` (a nest of
    arrays), kept on the input host.

    In graph mode the arrays are fed into the graph through ``session`` (or
    the default session) when the dataset is made, instead of being embedded
    in the graph as constants.

    Args:
      numpy_input: a NumPy array or a nest of them with the same first
        dimension.
      session: graph mode only: the session that holds the arrays.

    Returns:
      A ``tf.data.Dataset`` with one element per row.

    Examples:
      >>> import numpy as np
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> strategy = distribute.OneDeviceStrategy("/cpu:0")
      >>> with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      ...   rows = strategy.experimental_make_numpy_dataset(
      ...       np.array([[1, 2], [3, 4]]), session=session)
      ...   iterator = tf.compat.v1.data.make_initializable_iterator(rows)
      ...   session.run(iterator.initializer)
      ...   row = iterator.get_next()
      ...   print(session.run(row).tolist(), session.run(row).tolist())
      [1, 2] [3, 4]
    """
    return self._extended.experimental_make_numpy_dataset(numpy_input,
                                                          session=session)

  # -- reducing ----------------------------------------------------------------

  def reduce(self, reduce_op: ReduceOpLike, value: Nest,
             axis: Optional[int] = None) -> Nest:
    """Combines per-replica ``value`` into one tensor on the current device;
    in the v1 API ``axis`` defaults to None (reduce across replicas only).

    Args:
      reduce_op: ``tf.distribute.ReduceOp.SUM`` or ``MEAN`` (or the
        strings ``"SUM"``, ``"MEAN"``).
      value: per-replica values (a nest of them); a plain value only with
        MEAN or with one replica.
      axis: also reduce each replica's tensor along this axis.

    Returns:
      The combined value, a tensor (a nest like ``value``).

    Raises:
      RuntimeError: called in replica context.
      ValueError: ``value`` comes from a strategy with another number of
        replicas, or is a plain value to SUM over several replicas.
      TypeError: ``axis`` is not None or an integer.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> ones = strategy.run(lambda: tf.ones([3]))
      >>> strategy.reduce("SUM", ones)
      <tf.Tensor: shape=(3,), dtype=float32, numpy=array([2., 2., 2.], dtype=float32)>
    """
    return strategy_lib.StrategyMethods.reduce(self, reduce_op, value, axis)


class StrategyV1(StrategyV1Methods, strategy_iterators.IteratorMethods,
               dataset_methods.DatasetMethods, strategy_lib.StrategyMethods,
               tf.compat.v1.distribute.Strategy):
  """Base class of the v1 (``compat_distribute.v1``) strategies.

  Concrete strategies pass their ``Extended`` to ``__init__``; every one is
  also a ``tf.compat.v1.distribute.Strategy``.

  Examples:
    >>> import tensorflow as tf
    >>> from compat_distribute import v1 as distribute
    >>> strategy = distribute.OneDeviceStrategy("/cpu:0")
    >>> isinstance(strategy, distribute.Strategy)
    True
    >>> isinstance(strategy, tf.compat.v1.distribute.Strategy)
    True
  """
