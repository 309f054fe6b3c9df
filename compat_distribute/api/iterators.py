"""Input-iterator methods that TensorFlow's strategies of both generations
have: ``make_dataset_iterator``, ``make_input_fn_iterator`` and
``experimental_run``.

The v1 API documents them; TF2 strategies keep them too (TensorFlow's own
strategy tests drive v2 strategies through them), so both base classes mix
this in.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> iterator = strategy.make_dataset_iterator(tf.data.Dataset.range(4).batch(2))
>>> iterator.initialize() is None  # eagerly: restarts the input
True
>>> iterator.get_next()
<tf.Tensor: shape=(2,), dtype=int64, numpy=array([0, 1])>
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

import tensorflow as tf

from compat_distribute.runtime.errors import Error

from compat_distribute import input as input_lib
from compat_distribute.runtime.logs import warn_deprecated_once
from compat_distribute.runtime.types import ReplicaFn
from compat_distribute.runtime.types import Nest

InputReplicationMode = tf.distribute.InputReplicationMode


class IteratorMethods:
  """``make_dataset_iterator``, ``make_input_fn_iterator`` and
  ``experimental_run``, on top of ``StrategyMethods``."""

  # -- input iterators --------------------------------------------------------

  def make_dataset_iterator(self, dataset: tf.data.Dataset) -> Any:
    """An input iterator that splits each global batch of ``dataset`` over
    the replicas.

    The iterator has ``initialize()`` (returns the initialisation ops to run
    in a session; nothing to run eagerly), an ``initializer`` property and
    ``get_next()``, which gives one batch per replica.

    Args:
      dataset: a ``tf.data.Dataset`` whose elements are global batches.

    Returns:
      The input iterator, for ``experimental_run`` or ``get_next()``.

    Raises:
      TypeError: ``dataset`` is not a ``tf.data.Dataset`` (the error is also
        the ``AttributeError`` TensorFlow raises).

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> iterator = strategy.make_dataset_iterator(
      ...     tf.data.Dataset.range(8).batch(4))
      >>> batch = iterator.get_next()
      >>> [t.numpy().tolist() for t in strategy.experimental_local_results(batch)]
      [[0, 1], [2, 3]]
    """
    if not isinstance(dataset, tf.data.Dataset):
      # TensorFlow fails with AttributeError; this error is also that.
      raise input_lib.build.NotADatasetError(
          "make_dataset_iterator expects a tf.data.Dataset of global batches, "
          f"got {dataset!r} of type {type(dataset).__name__}. Build one with "
          "tf.data (e.g. tf.data.Dataset.from_tensor_slices(x).batch(n)); "
          "for a function that builds the dataset use make_input_fn_iterator.")
    return input_lib.make_dataset_iterator(
        self._extended._input_workers(), dataset)

  def make_input_fn_iterator(
      self, input_fn: Callable[[Any], tf.data.Dataset],
      replication_mode: Any = InputReplicationMode.PER_WORKER) -> Any:
    """An input iterator over the dataset ``input_fn(input_context)``
    returns; that dataset yields per-replica batches.

    Only ``InputReplicationMode.PER_WORKER`` exists for these strategies:
    ``input_fn`` is called once, and the replicas take turns dequeuing from
    its dataset.

    Args:
      input_fn: a function of a ``tf.distribute.InputContext`` returning a
        ``tf.data.Dataset`` of per-replica batches.
      replication_mode: ``tf.distribute.InputReplicationMode.PER_WORKER``.

    Returns:
      The input iterator, for ``experimental_run`` or ``get_next()``.

    Raises:
      ValueError: another ``replication_mode``.
      TypeError: ``input_fn`` is not callable.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> def input_fn(context):
      ...   size = context.get_per_replica_batch_size(global_batch_size=4)
      ...   return tf.data.Dataset.range(100, 108).batch(size)
      >>> batch = strategy.make_input_fn_iterator(input_fn).get_next()
      >>> [t.numpy().tolist() for t in strategy.experimental_local_results(batch)]
      [[100, 101], [102, 103]]
    """
    if replication_mode != InputReplicationMode.PER_WORKER:
      raise ValueError(
          "make_input_fn_iterator supports only "
          "tf.distribute.InputReplicationMode.PER_WORKER (one input_fn call "
          f"whose dataset every replica reads), got {replication_mode!r}. "
          "Pass replication_mode=InputReplicationMode.PER_WORKER (the "
          "default) and batch with input_context.get_per_replica_batch_size.")
    if not callable(input_fn):
      raise TypeError(
          "make_input_fn_iterator expects a callable "
          f"input_fn(input_context) -> tf.data.Dataset, got {input_fn!r} of "
          f"type {type(input_fn).__name__}. For a dataset you already have, "
          "use make_dataset_iterator(dataset).")
    with self.scope():
      return input_lib.make_input_fn_iterator(
          self._extended._input_workers(), input_fn, replication_mode)

  # -- running ----------------------------------------------------------------

  def experimental_run(self, fn: ReplicaFn,
                       input_iterator: Optional[Any] = None) -> Nest:
    """Deprecated: runs ``fn(inputs)`` on every replica, each replica getting
    its own part of one ``input_iterator.get_next()``.

    Without ``input_iterator`` ``fn`` is called with no arguments.  Warns
    once per process; use ``run``.

    Args:
      fn: the function each replica runs.
      input_iterator: an iterator from ``make_dataset_iterator`` or
        ``make_input_fn_iterator``, or None.

    Returns:
      What ``run`` returns: per-replica results.

    Raises:
      TypeError: ``fn`` is not callable, needs arguments while there is no
        iterator, or ``input_iterator`` has no ``get_next`` (this error is
        also TensorFlow's ``AttributeError``).

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> iterator = strategy.make_dataset_iterator(
      ...     tf.data.Dataset.range(4).batch(4))
      >>> doubled = strategy.experimental_run(lambda x: x * 2, iterator)
      >>> strategy.reduce("SUM", doubled, axis=0)
      <tf.Tensor: shape=(), dtype=int64, numpy=12>
    """
    warn_deprecated_once("Strategy.experimental_run",
                         "Strategy.run")
    if not callable(fn):
      raise TypeError(
          f"experimental_run expects a callable `fn`, got {fn!r} of type "
          f"{type(fn).__name__}.")
    if input_iterator is None:
      _check_callable_without_args(fn)
      return self.run(fn)
    if not callable(getattr(input_iterator, "get_next", None)):
      raise NotAnIteratorError(
          "experimental_run expects `input_iterator` to be an input iterator "
          "(from make_dataset_iterator or make_input_fn_iterator), got "
          f"{input_iterator!r} of type {type(input_iterator).__name__}. "
          "Wrap a dataset first: strategy.make_dataset_iterator(dataset).")
    with self.scope():
      inputs = input_iterator.get_next()
    return self.run(fn, args=(inputs,))


class NotAnIteratorError(Error, TypeError, AttributeError):
  """``experimental_run`` got an input iterator without ``get_next``
  (TensorFlow: ``AttributeError``); this error is also a ``TypeError``."""


def _check_callable_without_args(fn: ReplicaFn) -> None:
  """Raises ``TypeError`` if ``fn`` has a required parameter."""
  target = getattr(fn, "python_function", fn)  # a tf.function's Python body
  try:
    signature = inspect.signature(target)
  except (TypeError, ValueError):
    return  # builtins and the like: let the call itself complain
  required = [
      p.name for p in signature.parameters.values()
      if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                             p.POSITIONAL_OR_KEYWORD,
                                             p.KEYWORD_ONLY)]
  if required:
    raise TypeError(
        "experimental_run was called without an input_iterator, so `fn` is "
        f"called with no arguments, but {getattr(fn, '__name__', fn)!r} "
        f"requires {', '.join(required)}. Pass an iterator, e.g. "
        "strategy.experimental_run(fn, strategy.make_dataset_iterator(ds)), "
        "or give those parameters defaults.")
