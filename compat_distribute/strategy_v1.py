"""The v1 (``tf.compat.v1.distribute``) strategy API, layered on the base.

TF1-style programs build a graph once and run it with a
``tf.compat.v1.Session``.  They feed a strategy through *input iterators*
(``make_dataset_iterator``, ``make_input_fn_iterator``) that must be
initialised, run a step with ``experimental_run(fn, iterator)``, and ask the
strategy for a session config with ``update_config_proto``.  This module adds
those methods to the shared ``StrategyMethods``; the v1 base class
``Strategy`` derives from ``tf.compat.v1.distribute.Strategy`` (and, like
TensorFlow's own v1 classes, not from ``tf.distribute.Strategy``).

>>> import tensorflow as tf
>>> from compat_distribute import v1 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> isinstance(strategy, tf.compat.v1.distribute.Strategy)
True
>>> strategy.reduce("SUM", tf.constant([1., 2.]))  # axis defaults to None
<tf.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable, Optional

import tensorflow as tf

from compat_distribute import context
from compat_distribute import input as input_lib
from compat_distribute import strategy as strategy_lib

InputReplicationMode = tf.distribute.InputReplicationMode


class StrategyV1Methods:
  """Methods that only the v1 API has, or that differ there (``reduce``'s
  default ``axis``).  Mixed in ahead of ``StrategyMethods``."""

  # -- input iterators --------------------------------------------------------

  def make_dataset_iterator(self, dataset: tf.data.Dataset) -> Any:
    """An input iterator that splits each global batch of ``dataset`` over
    the replicas.

    The iterator has ``initialize()`` (returns the initialisation ops to run
    in a session; nothing to run eagerly), an ``initializer`` property and
    ``get_next()``, which gives one batch per replica.
    """
    if not isinstance(dataset, tf.data.Dataset):
      raise TypeError(
          "make_dataset_iterator expects a tf.data.Dataset of global batches, "
          f"got {dataset!r} of type {type(dataset).__name__}. Build one with "
          "tf.data (e.g. tf.data.Dataset.from_tensor_slices(x).batch(n)); "
          "for a function that builds the dataset use make_input_fn_iterator.")
    return input_lib.make_dataset_iterator(self._extended, dataset)

  def make_input_fn_iterator(
      self, input_fn: Callable[[Any], tf.data.Dataset],
      replication_mode: Any = InputReplicationMode.PER_WORKER) -> Any:
    """An input iterator over the dataset ``input_fn(input_context)``
    returns; that dataset yields per-replica batches.

    Only ``InputReplicationMode.PER_WORKER`` exists for these strategies:
    ``input_fn`` is called once, and the replicas take turns dequeuing from
    its dataset.
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
      return input_lib.make_input_fn_iterator(self._extended, input_fn,
                                              replication_mode)

  def experimental_make_numpy_dataset(self, numpy_input: Any,
                                      session: Optional[Any] = None) -> Any:
    """A ``tf.data.Dataset`` of the slices of ``numpy_input`` (a nest of
    arrays), kept on the input host.

    In graph mode the arrays are fed into the graph through ``session`` (or
    the default session) when the dataset is made, instead of being embedded
    in the graph as constants.
    """
    return self._extended.experimental_make_numpy_dataset(numpy_input,
                                                          session=session)

  # -- running ----------------------------------------------------------------

  def experimental_run(self, fn: Callable[..., Any],
                       input_iterator: Optional[Any] = None) -> Any:
    """Deprecated: runs ``fn(inputs)`` on every replica, each replica getting
    its own part of one ``input_iterator.get_next()``.

    Without ``input_iterator`` ``fn`` is called with no arguments.  Returns
    what ``run`` returns.  Warns once per process; use ``run``.
    """
    strategy_lib.warn_deprecated_once("Strategy.experimental_run",
                                      "Strategy.run")
    if not callable(fn):
      raise TypeError(
          f"experimental_run expects a callable `fn`, got {fn!r} of type "
          f"{type(fn).__name__}.")
    if input_iterator is None:
      _check_callable_without_args(fn)
      return self.run(fn)
    if not callable(getattr(input_iterator, "get_next", None)):
      raise TypeError(
          "experimental_run expects `input_iterator` to be an input iterator "
          "(from make_dataset_iterator or make_input_fn_iterator), got "
          f"{input_iterator!r} of type {type(input_iterator).__name__}. "
          "Wrap a dataset first: strategy.make_dataset_iterator(dataset).")
    with self.scope():
      inputs = input_iterator.get_next()
    return self.run(fn, args=(inputs,))

  # -- reducing and results ---------------------------------------------------

  def reduce(self, reduce_op: Any, value: Any,
             axis: Optional[int] = None) -> Any:
    """``Strategy.reduce``; in the v1 API ``axis`` defaults to None (reduce
    across replicas only)."""
    return strategy_lib.StrategyMethods.reduce(self, reduce_op, value, axis)

  def unwrap(self, value: Any) -> tuple[Any, ...]:
    """Deprecated name of ``experimental_local_results``."""
    strategy_lib.warn_deprecated_once("Strategy.unwrap",
                                      "Strategy.experimental_local_results")
    return self.experimental_local_results(value)

  def colocate_vars_with(self, colocate_with_variable: Any) -> Any:
    """Deprecated spelling of ``strategy.extended.colocate_vars_with``."""
    return self._extended.colocate_vars_with(colocate_with_variable)

  # -- session configuration --------------------------------------------------

  def update_config_proto(self, config_proto: Any) -> Any:
    """A modified copy of ``config_proto`` for running this strategy in a
    ``tf.compat.v1.Session``; ``config_proto`` itself is left unchanged.

    Unlike TensorFlow's, the copy's ``device_count`` makes the session create
    every device the strategy uses (e.g. ``{"CPU": 4}`` for ``/cpu:3``).
    """
    if not isinstance(config_proto, tf.compat.v1.ConfigProto):
      raise TypeError(
          "update_config_proto expects a tf.compat.v1.ConfigProto, got "
          f"{config_proto!r} of type {type(config_proto).__name__}. Pass "
          "tf.compat.v1.ConfigProto() (or your session's config) and give "
          "the returned copy to tf.compat.v1.Session(config=...).")
    updated = tf.compat.v1.ConfigProto()
    updated.CopyFrom(config_proto)
    extended = self._extended
    used = list(extended.worker_devices) + list(extended.parameter_devices)
    input_device = getattr(extended, "_input_device", None)
    if input_device:
      used.append(input_device)
    _count_devices(updated, used)
    return updated

  def configure(self, session_config: Optional[Any] = None,
                cluster_spec: Any = None, task_type: Optional[str] = None,
                task_id: Optional[int] = None) -> None:
    """Deprecated: updates ``session_config`` in place with
    ``update_config_proto``.  These strategies run on one machine, so a
    cluster cannot be given."""
    strategy_lib.warn_deprecated_once("Strategy.configure",
                                      "Strategy.update_config_proto")
    if cluster_spec or task_type is not None or task_id is not None:
      raise ValueError(
          f"{self!r} runs on one machine and takes no cluster, got "
          f"cluster_spec={cluster_spec!r}, task_type={task_type!r}, "
          f"task_id={task_id!r}. Call configure(session_config=...) only, or "
          "use a multi-worker strategy for a cluster.")
    if session_config is not None:
      session_config.CopyFrom(self.update_config_proto(session_config))


def _check_callable_without_args(fn: Callable[..., Any]) -> None:
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


def _count_devices(config: Any, devices: Iterable[str]) -> None:
  """Raises ``config.device_count`` so that every local device in
  ``devices`` exists in a session; never lowers a count."""
  needed: dict[str, int] = {}
  for device in devices:
    spec = tf.DeviceSpec.from_string(device)
    if spec.job not in (None, "localhost") or not spec.device_type:
      continue
    kind = spec.device_type.upper()
    needed[kind] = max(needed.get(kind, 0), (spec.device_index or 0) + 1)
  for kind, count in needed.items():
    configured = len(tf.config.list_logical_devices(kind))
    current = config.device_count.get(kind, 0)
    config.device_count[kind] = max(count, configured, current)


class Strategy(StrategyV1Methods, strategy_lib.StrategyMethods,
               tf.compat.v1.distribute.Strategy):
  """Base class of the v1 (``compat_distribute.v1``) strategies.

  Concrete strategies pass their ``Extended`` to ``__init__``.
  """
