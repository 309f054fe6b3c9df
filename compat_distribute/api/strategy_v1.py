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
    """
    return self._extended.experimental_make_numpy_dataset(numpy_input,
                                                          session=session)

  # -- reducing ----------------------------------------------------------------

  def reduce(self, reduce_op: ReduceOpLike, value: Nest,
             axis: Optional[int] = None) -> Nest:
    """``Strategy.reduce``; in the v1 API ``axis`` defaults to None (reduce
    across replicas only)."""
    return strategy_lib.StrategyMethods.reduce(self, reduce_op, value, axis)


class StrategyV1(StrategyV1Methods, strategy_iterators.IteratorMethods,
               strategy_lib.StrategyMethods,
               tf.compat.v1.distribute.Strategy):
  """Base class of the v1 (``compat_distribute.v1``) strategies.

  Concrete strategies pass their ``Extended`` to ``__init__``.
  """
