"""The base ``Strategy`` (TF2 API): scope, run, reduce, gather, input.

Concrete strategies pass an ``Extended`` to ``__init__``; the methods here
only validate arguments, pick the right context and delegate to it.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> with strategy.scope():
...   tf.distribute.get_strategy() is strategy
True
>>> strategy.reduce("SUM", tf.constant([1., 2., 3.]), axis=0)
<tf.Tensor: shape=(), dtype=float32, numpy=6.0>
"""
from __future__ import annotations

from typing import Callable, ContextManager, Optional, Sequence, Union

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute.runtime import context
from compat_distribute.runtime.logs import warn_deprecated_once
from compat_distribute.values import reduction
from compat_distribute.api import configuration
from compat_distribute.api import dataset_methods
from compat_distribute.api import iterators as strategy_iterators
from compat_distribute.values import distributed as values_lib
from compat_distribute.runtime.types import ExtendedLike
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReduceOpLike
from compat_distribute.runtime.types import ReplicaFn
from compat_distribute.runtime.types import RunOptions

_executing_eagerly = tf.executing_eagerly
class StrategyMethods(configuration.ConfigurationMethods):
  """The methods shared by the v1 and v2 strategies (their configuration
  -- sessions, ``configure``, copies -- in ``configuration``).

  Mixed in ahead of TensorFlow's ``Strategy`` classes so that every method
  TensorFlow documents is ours.
  """

  def __init__(self, extended: ExtendedLike) -> None:  # pylint: disable=super-init-not-called
    self._extended = extended
    self._scale_loss_for_estimator = False
    self._mean_reduce_helper_fns: dict[object, Callable[..., Nest]] = {}
    self._reduce_sum_fns: dict[object, Callable[..., Nest]] = {}
    self._should_use_with_coordinator = False

  def __repr__(self) -> str:
    return f"{type(self).__name__}()"

  def unwrap(self, value: Nest) -> tuple[Nest, ...]:
    """Deprecated name of ``experimental_local_results``."""
    warn_deprecated_once("Strategy.unwrap",
                         "Strategy.experimental_local_results")
    return self.experimental_local_results(value)

  def colocate_vars_with(self,
                         colocate_with_variable: tf.Variable
      ) -> ContextManager[None]:
    """Deprecated spelling of ``strategy.extended.colocate_vars_with``."""
    return self._extended.colocate_vars_with(colocate_with_variable)

  # -- basic properties -----------------------------------------------------

  @property
  def extended(self) -> ExtendedLike:
    """The strategy's ``StrategyExtended`` with lower-level methods."""
    return self._extended

  @property
  def num_replicas_in_sync(self) -> int:
    """How many replicas run each step together."""
    return self._extended._num_replicas_in_sync  # pylint: disable=protected-access

  @property
  def cluster_resolver(self) -> None:
    """Single-machine strategies have no cluster resolver: always None."""
    return None

  def scope(self) -> context.StrategyScope:
    """A context manager that makes this strategy current.

    Inside it, ``tf.distribute.get_strategy()`` returns this strategy, code
    runs in cross-replica context, and new variables are placed by the
    strategy.  Leaving it, also by an exception, restores the strategy that
    was current before.

    Returns:
      The context manager; ``with`` gives the strategy.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v2 as distribute
      >>> strategy = distribute.OneDeviceStrategy("/cpu:0")
      >>> with strategy.scope():
      ...   weight = tf.Variable(2.0)
      ...   print(tf.distribute.get_strategy() is strategy)
      True
      >>> weight.device
      '/job:localhost/replica:0/task:0/device:CPU:0'
      >>> tf.distribute.has_strategy()
      False
    """
    return context.StrategyScope(self, self._extended._scope_plan)  # pylint: disable=protected-access

  # -- running --------------------------------------------------------------

  def run(self, fn: ReplicaFn, args: Sequence[Nest] = (),
          kwargs: Optional[dict] = None, options: RunOptions = None) -> Nest:
    """Runs ``fn(*args, **kwargs)`` once per replica.

    Each call runs in replica context on that replica's device; a
    per-replica argument (from a distributed dataset or an earlier ``run``)
    gives each replica its own part, any other argument is passed to every
    replica as it is.

    Args:
      fn: the function to run; it may be a ``tf.function``.
      args: positional arguments of ``fn``, a tuple or list.
      kwargs: keyword arguments of ``fn``, a dict or None.
      options: accepted for TensorFlow's signature and ignored.

    Returns:
      What ``fn`` returns: per-replica values when there are several
      replicas, the plain value with one.

    Raises:
      TypeError: ``fn`` is not callable, or ``kwargs`` is not a dict.
      ValueError: ``args`` is not a list or tuple.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v2 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> def replica_id_plus(x):
      ...   context = tf.distribute.get_replica_context()
      ...   return context.replica_id_in_sync_group + x
      >>> results = strategy.run(replica_id_plus, args=(10,))
      >>> [int(t) for t in strategy.experimental_local_results(results)]
      [10, 11]
    """
    del options
    if not callable(fn):
      raise TypeError(
          f"run expects a callable `fn`, got {fn!r} of type "
          f"{type(fn).__name__}. Pass the function itself, e.g. "
          "strategy.run(step_fn, args=(x,)).")
    if type(args) is not tuple and not isinstance(args, (list, tuple)):  # pylint: disable=unidiomatic-typecheck
      raise ValueError(
          "run takes the positional arguments `args` as a list or tuple, got "
          f"{type(args).__name__}: {args!r}. Wrap a single argument: "
          "args=(x,).")
    if kwargs is not None and not isinstance(kwargs, dict):
      raise TypeError(
          f"run takes `kwargs` as a dict, got {type(kwargs).__name__}: "
          f"{kwargs!r}.")
    # strategy.scope() without its context-manager object (the hot path).
    # Eagerly, the partitioner-dropping variable getter is left out (it costs
    # several microseconds per step); `with strategy.scope():` installs it.
    eager = _executing_eagerly()
    token = context.enter_scope(self, self._extended._scope_plan,  # pylint: disable=protected-access
                                variable_getter=not eager)
    try:
      if not eager:
        # While tracing, let AutoGraph convert `fn` as the caller's setting
        # says; eager callers run `fn` as written.
        fn = _tf_compat.convert_as_caller(fn, convert_by_default=False)
      return self._extended._call_for_each_replica(  # pylint: disable=protected-access
          fn, args, kwargs or {})
    finally:
      # Left even if an interrupt (KeyboardInterrupt from a signal handler)
      # lands in the exit, so the calling thread never stays inside the
      # strategy: the exit resumes where it stopped (each step checks
      # whether it is still to do), then the interrupt is raised.  Written
      # here, not in a helper: an interrupt can land as a function starts,
      # before any try in it.
      interrupt = None
      while True:
        try:
          context.exit_scope(token)
          break
        except Exception:  # pylint: disable=broad-except
          if interrupt is None:
            raise
          break  # the interrupt comes first
        except BaseException as e:  # pylint: disable=broad-except
          if interrupt is not None:
            break  # a second one: stop trying
          interrupt = e
      if interrupt is not None:
        raise interrupt  # pylint: disable=raising-bad-type

  def experimental_run_v2(self, fn: ReplicaFn, args: Sequence[Nest] = (),
                          kwargs: Optional[dict] = None,
                          options: RunOptions = None) -> Nest:
    """Deprecated name of ``run``."""
    warn_deprecated_once("Strategy.experimental_run_v2", "Strategy.run")
    return self.run(fn, args=args, kwargs=kwargs, options=options)

  # -- reducing -------------------------------------------------------------

  def reduce(self, reduce_op: ReduceOpLike, value: Nest,
             axis: Optional[int]) -> Nest:
    """Combines per-replica ``value`` into one tensor on the current device.

    With ``axis``, each replica's tensor is also reduced along that axis;
    MEAN then divides by the total number of elements along ``axis`` over
    all replicas, so partial batches are weighed correctly.

    Args:
      reduce_op: ``tf.distribute.ReduceOp.SUM`` or ``MEAN`` (or the
        strings ``"SUM"``, ``"MEAN"``).
      value: per-replica values (a nest of them); a plain value only with
        MEAN or with one replica (summing one value over several replicas
        is not defined).
      axis: also reduce each replica's tensor along this axis; None reduces
        across replicas only.

    Returns:
      The combined value, a tensor (a nest like ``value``).

    Raises:
      RuntimeError: called in replica context (inside ``run``); use
        ``tf.distribute.get_replica_context().all_reduce`` there.
      ValueError: ``value`` was made by a strategy with another number of
        replicas, or is a plain value to SUM over several replicas.
      TypeError: ``axis`` is not None or an integer.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v2 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> dataset = tf.data.Dataset.from_tensor_slices([1.0, 2.0, 3.0, 6.0])
      >>> batch = next(iter(strategy.experimental_distribute_dataset(
      ...     dataset.batch(4))))
      >>> strategy.reduce("SUM", batch, axis=0)
      <tf.Tensor: shape=(), dtype=float32, numpy=12.0>
      >>> strategy.reduce("MEAN", batch, axis=0)
      <tf.Tensor: shape=(), dtype=float32, numpy=3.0>
    """
    context.require_cross_replica(self, "Strategy.reduce",
                                  "ReplicaContext.all_reduce")
    reduce_op = reduction.to_reduce_op(reduce_op)
    self._check_own_value(value, "reduce")
    if axis is None:
      return self._extended._reduce(reduce_op, value)  # pylint: disable=protected-access
    return reduction.reduce_along(
        reduce_op, value, axis,
        local_results=self._extended._local_results,  # pylint: disable=protected-access
        run=self.run, reduce=self._extended._reduce)  # pylint: disable=protected-access

  def _check_own_value(self, value: Nest, method: str) -> None:
    for leaf in tf.nest.flatten(value):
      if not values_lib.is_distributed(leaf):
        continue
      n = len(leaf.values)
      if n != self.num_replicas_in_sync:
        raise ValueError(
            f"{method} got a distributed value with {n} replica values, but "
            f"{self!r} has {self.num_replicas_in_sync} replicas; the value "
            "was made by a different strategy. Reduce it with the strategy "
            "whose `run` or dataset produced it.")

  def experimental_local_results(self, value: Nest) -> tuple[Nest, ...]:
    """The per-replica parts of ``value`` on this machine, as a tuple.

    Args:
      value: a per-replica value (a nest of them) or a plain value.

    Returns:
      One entry per replica, in replica order; ``(value,)`` for a plain
      value.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v2 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> parts = strategy.experimental_local_results(
      ...     strategy.run(lambda: tf.constant(7)))
      >>> [part.device for part in parts]  # doctest: +NORMALIZE_WHITESPACE
      ['/job:localhost/replica:0/task:0/device:CPU:0',
       '/job:localhost/replica:0/task:0/device:CPU:1']
      >>> strategy.experimental_local_results(5)
      (5,)
    """
    return self._extended._local_results(value)  # pylint: disable=protected-access

  def gather(self, value: Nest, axis: int) -> Nest:
    """Concatenates ``value``'s per-replica parts along ``axis`` onto the
    current device.

    Args:
      value: per-replica tensors (a nest of them), or a plain tensor.
      axis: the axis to concatenate along; the parts may differ in size
        along it.

    Returns:
      The concatenated tensor (a nest like ``value``).

    Raises:
      RuntimeError: called in replica context; use
        ``tf.distribute.get_replica_context().all_gather`` there.
      NotImplementedError: ``value`` is a ``tf.IndexedSlices``.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v2 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> dataset = tf.data.Dataset.range(6).batch(6)
      >>> batch = next(iter(strategy.experimental_distribute_dataset(dataset)))
      >>> strategy.gather(batch, axis=0)
      <tf.Tensor: shape=(6,), dtype=int64, numpy=array([0, 1, 2, 3, 4, 5])>
    """
    context.require_cross_replica(self, "Strategy.gather",
                                  "ReplicaContext.all_gather")
    if isinstance(value, tf.IndexedSlices):
      raise NotImplementedError(
          "gather does not support IndexedSlices (got a tf.IndexedSlices); "
          "convert it with tf.convert_to_tensor first.")
    self._check_own_value(value, "gather")
    return self._extended._gather(value, axis)  # pylint: disable=protected-access

  def group(self, value: Nest,
            name: Optional[str] = None) -> Union[tf.Operation, Nest]:
    """``tf.group`` of all per-replica parts of ``value``."""
    return self._extended._group(value, name)  # pylint: disable=protected-access


class Strategy(strategy_iterators.IteratorMethods,
               dataset_methods.DatasetMethods, StrategyMethods,
               tf.distribute.Strategy):
  """Base class of the TF2 (``compat_distribute.v2``) strategies.

  Make a concrete one (``OneDeviceStrategy``,
  ``experimental.CentralStorageStrategy``); every one is also a
  ``tf.distribute.Strategy``, so Keras and ``tf.train.Checkpoint`` accept it.

  Examples:
    >>> import tensorflow as tf
    >>> from compat_distribute import v2 as distribute
    >>> strategy = distribute.OneDeviceStrategy("/cpu:0")
    >>> isinstance(strategy, distribute.Strategy)
    True
    >>> isinstance(strategy, tf.distribute.Strategy)
    True
  """
