"""The base ``StrategyExtended``: device policy, variables, reduce, update.

Concrete strategies subclass ``Extended`` and fill in the abstract hooks;
everything else here is shared.  Both API generations use the same extended
object, as in TensorFlow, so it derives from the v1 class (which is itself a
``tf.distribute.StrategyExtended``).
"""
from __future__ import annotations

import weakref
from typing import Any, ContextManager, Optional, Sequence, Union

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute import input as input_lib
from compat_distribute.runtime import context
from compat_distribute.runtime import devices
from compat_distribute.api import extended_v1
from compat_distribute.values import reduction as reduce_lib
from compat_distribute.api import session_config
from compat_distribute.values import distributed as values_lib
from compat_distribute.api.errors import NotAPairError
from compat_distribute.api.errors import NotAVariableError
from compat_distribute.api.errors import check_destinations
from compat_distribute.replicas import runner
from compat_distribute.replicas.plan import ReplicaPlan
from compat_distribute.replicas.plan import Replicas
from compat_distribute.runtime.types import ConfigProto
from compat_distribute.runtime.types import Creator
from compat_distribute.runtime.types import Destinations
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReduceOpLike
from compat_distribute.runtime.types import ReduceOptions
from compat_distribute.runtime.types import ReplicaFn
from compat_distribute.runtime.types import StrategyLike


_partitioner_warned = False


def _warn_partitioner_dropped() -> None:
  global _partitioner_warned
  if not _partitioner_warned:
    _partitioner_warned = True
    tf.get_logger().warning(
        "Partitioned variables are disabled when using the current "
        "tf.distribute.Strategy: the partitioner is ignored and one whole "
        "variable is created.")


class Extended(extended_v1.ExtendedV1Methods,
               tf.compat.v1.distribute.StrategyExtended):
  """Shared machinery of our strategies' ``strategy.extended``: where the
  replicas and the variables are, and the lower-level reduce, broadcast and
  update methods.

  Examples:
    >>> import tensorflow as tf
    >>> from compat_distribute import v2 as distribute
    >>> strategy = distribute.experimental.CentralStorageStrategy(
    ...     ["/cpu:0", "/cpu:1"])
    >>> extended = strategy.extended
    >>> isinstance(extended, distribute.StrategyExtended)
    True
    >>> len(extended.worker_devices), extended.parameter_devices
    (2, ('/device:CPU:0',))
    >>> with strategy.scope():
    ...   step = tf.Variable(0)
    >>> extended.variable_created_in_scope(step)
    True
  """

  # One replica runs on the calling thread in a kept ReplicaContext, or (if
  # set) as several do: see ``replicas.runner``.
  _one_replica_like_many = False
  # Input (see ``_input_workers``): the host the pipeline runs on, this
  # worker's (count, index) of input pipelines, and whether
  # experimental_distribute_values_from_function wraps one replica's value.
  _input_device: Optional[str] = None
  _input_pipelines = (1, 0)
  _wrap_single_replica_values = False

  def __init__(self, container_strategy: StrategyLike,  # pylint: disable=super-init-not-called
               compute_devices: Sequence[str],
               parameter_devices: Sequence[str]) -> None:
    self._container_strategy_weakref = weakref.ref(container_strategy)
    self._compute_devices = tuple(compute_devices)
    self._parameter_devices = tuple(parameter_devices)
    self._default_device = None
    self._require_static_shapes = False
    self._retrace_functions_for_each_device = len(self._compute_devices) > 1
    self._global_batch_size = True
    # The replica layer's plan and caches, made once: the devices are fixed.
    self._replicas = Replicas(self._replica_plan())

  def __repr__(self) -> str:
    return (f"{type(self).__name__}(worker_devices={self.worker_devices!r}, "
            f"parameter_devices={self.parameter_devices!r})")

  # -- abstract hooks (each strategy implements these) ----------------------

  def _create_variable(self, next_creator: Creator,
                       **kwargs: Any) -> tf.Variable:
    """Creates a variable where the strategy wants it; handles
    ``colocate_with``."""
    raise NotImplementedError

  def _reduce_to(self, reduce_op: ReduceOpLike, value: Nest,
                 destinations: Destinations,
                 options: ReduceOptions) -> Nest:
    raise NotImplementedError

  def _update(self, var: tf.Variable, fn: ReplicaFn, args: tuple,
              kwargs: dict, group: bool) -> Nest:
    raise NotImplementedError

  # -- shared defaults ------------------------------------------------------

  def _allows_partitioned_variables(self) -> bool:
    """Whether ``tf.compat.v1.get_variable`` may split a variable with its
    ``partitioner`` in this strategy's scope (TensorFlow: never for
    ``OneDeviceStrategy``)."""
    return False

  def _partition_getter(self, getter: Creator, *args: Any,
                        **kwargs: Any) -> tf.Variable:
    """The custom getter of the strategy's variable scope: drops the
    ``partitioner`` (with a warning, once) where partitioning is not
    allowed, so one whole variable is made, as in TensorFlow."""
    if (kwargs.get("partitioner") is not None and
        not self._allows_partitioned_variables()):
      kwargs["partitioner"] = None
      _warn_partitioner_dropped()
    return getter(*args, **kwargs)

  def _container_strategy(self) -> StrategyLike:
    return self._container_strategy_weakref()

  def _input_workers(self) -> input_lib.InputWorkers:
    """What this strategy tells its input pipeline (``input.InputWorkers``),
    as configured now (``enable_partial_batch_handling`` may be set at any
    time)."""
    partial = getattr(self, "enable_partial_batch_handling",
                      getattr(self, "experimental_enable_get_next_as_optional",
                              False))
    return input_lib.InputWorkers(
        devices=tuple(self.worker_devices), host=self._input_device,
        strategy=self._container_strategy(),
        input_pipelines=self._input_pipelines,
        per_replica_input_is_per_worker=self._per_replica_input_is_per_worker,
        wrap_single_replica_values=self._wrap_single_replica_values,
        partial_batches=bool(partial))

  def _replica_plan(self) -> ReplicaPlan:
    """What this strategy tells its replica layer (``replicas.plan``): the
    replicas' devices, the strategy, its variable creator, its gather, and
    whether one replica runs as several do."""
    return ReplicaPlan(devices=self._compute_devices,
                       strategy=self._container_strategy(),
                       variable_creator=self._variable_creator,
                       gather_to=self._gather_to,
                       one_replica_like_many=self._one_replica_like_many)

  @property
  def _default_device(self) -> Optional[str]:
    """The device ops made in the strategy's scope default to (None: no
    device scope)."""
    return self._scope_plan.default_device

  @_default_device.setter
  def _default_device(self, device: Optional[str]) -> None:
    # What entering the scope installs (``runtime.context.ScopePlan``),
    # remade whenever the default device is set, so it is always current.
    self._scope_plan = context.ScopePlan(
        variable_creator=self._variable_creator, default_device=device,
        partition_getter=self._partition_getter)

  def _update_config_proto(self, config_proto: ConfigProto) -> ConfigProto:
    """What ``strategy.update_config_proto`` returns: a copy of
    ``config_proto`` whose ``device_count`` lets a ``tf.compat.v1.Session``
    create every device the strategy uses, and with
    ``isolate_session_state`` set where TensorFlow's strategy sets it."""
    used = list(self.worker_devices) + list(self.parameter_devices)
    if self._input_device:
      used.append(self._input_device)
    return session_config.updated(config_proto, used,
                                  self._isolates_session_state)

  @property
  def worker_devices(self) -> tuple[str, ...]:
    """The devices replicas run on, one per replica."""
    return self._compute_devices

  @property
  def parameter_devices(self) -> tuple[str, ...]:
    """The devices variables are placed on."""
    return self._parameter_devices

  @property
  def experimental_require_static_shapes(self) -> bool:
    """Whether input batches must have static shapes (never, here)."""
    return self._require_static_shapes

  @property
  def _num_replicas_in_sync(self) -> int:
    return len(self._compute_devices)

  def _in_multi_worker_mode(self) -> bool:
    return False

  def _use_merge_call(self) -> bool:
    return True

  def _get_local_replica_id(self, replica_id_in_sync_group: Union[int,
                            tf.Tensor]) -> Union[int, tf.Tensor]:
    return replica_id_in_sync_group

  def _get_replica_id_in_sync_group(self, replica_id: Union[int,
                                    tf.Tensor]) -> Union[int, tf.Tensor]:
    return replica_id

  def _variable_creator(self, next_creator: Creator,
                        **kwargs: Any) -> tf.Variable:
    """The creator ``strategy.scope()`` installs (``context.enter_scope``,
    which also enters ``_default_device`` when set)."""
    kwargs["use_resource"] = True
    kwargs["distribute_strategy"] = self._container_strategy()
    return self._create_variable(next_creator, **kwargs)

  def variable_created_in_scope(self, v: tf.Variable) -> bool:
    """True when ``v`` was created inside this strategy's ``scope()``.

    Raises:
      NotAVariableError: ``v`` is not a variable (TensorFlow fails with
        ``AttributeError``).
    """
    if not hasattr(v, "_distribute_strategy"):
      raise NotAVariableError(
          "variable_created_in_scope takes a variable, got "
          f"{v!r} of type {type(v).__name__}. Pass a tf.Variable (e.g. one "
          "of model.variables).")
    return self._created_in_scope(v)

  def _created_in_scope(self, v: tf.Variable) -> bool:
    return (getattr(v, "_distribute_strategy", None) is
            self._container_strategy())

  def colocate_vars_with(self,
                         colocate_with_variable: tf.Variable
      ) -> ContextManager[None]:
    """A scope in which new variables are placed like
    ``colocate_with_variable``.

    Raises:
      ValueError: ``colocate_with_variable`` was not created in this
        strategy's ``scope()`` (TensorFlow's rule).
    """
    context.require_scope(self._container_strategy(), "colocate_vars_with")
    if not self._created_in_scope(colocate_with_variable):
      raise ValueError(
          "`colocate_vars_with` must only be passed a variable created in "
          f"this strategy's scope(), got {colocate_with_variable!r} (created "
          "in the scope of "
          f"{getattr(colocate_with_variable, '_distribute_strategy', None)!r})."
          " Create that variable inside `strategy.scope()` first, or create "
          "the new variable without colocate_vars_with.")

    def creator(next_creator, **kwargs):
      kwargs["colocate_with"] = colocate_with_variable
      return next_creator(**kwargs)

    return tf.variable_creator_scope(creator)

  def value_container(self, value: Nest) -> Nest:
    """The distributed container holding ``value``, or ``value`` itself."""
    container = getattr(value, "_distributed_container", None)
    return container() if callable(container) else value

  def _local_results(self, value: Nest) -> tuple[Nest, ...]:
    if values_lib.is_distributed(value):
      return value.values
    local = getattr(value, "_local_results_for_strategy", None)
    if local is not None:
      return local(self._num_replicas_in_sync)
    if tf.nest.is_nested(value):
      return tuple(values_lib.select_replica(i, value)
                   for i in range(self._num_replicas_in_sync))
    return (value,)

  def _group(self, value: Nest,
             name: Optional[str] = None) -> Union[tf.Operation, Nest]:
    flat = tf.nest.flatten(self._local_results(value))
    if len(flat) == 1 and name is None:
      # TensorFlow's shortcut: a single op (or the op of a single tensor or
      # variable in a graph) comes back as it is; eagerly, the value.
      only = flat[0]
      return only.op if hasattr(only, "op") else only
    return tf.group(*[x for x in flat if x is not None], name=name)

  # -- reduction ------------------------------------------------------------

  def reduce_to(self, reduce_op: ReduceOpLike, value: Nest,
                destinations: Destinations,
                options: ReduceOptions = None) -> Nest:
    """Combines ``value`` across replicas onto ``destinations``."""
    context.require_cross_replica(self._container_strategy(), "reduce_to",
                                  "ReplicaContext.all_reduce")
    reduce_op = reduce_lib.to_reduce_op(reduce_op)
    check_destinations(destinations, "reduce_to")
    return self._reduce_to(reduce_op, value, destinations, options)

  def batch_reduce_to(self, reduce_op: ReduceOpLike,
                      value_destination_pairs: Sequence[tuple[Nest,
                      Destinations]],
                      options: ReduceOptions = None) -> list[Nest]:
    """``reduce_to`` for a list of ``(value, destinations)`` pairs."""
    context.require_cross_replica(self._container_strategy(),
                                  "batch_reduce_to",
                                  "ReplicaContext.all_reduce")
    reduce_op = reduce_lib.to_reduce_op(reduce_op)
    pairs = list(value_destination_pairs)
    for pair in pairs:
      if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise NotAPairError(
            "batch_reduce_to takes a list of (value, destinations) pairs, "
            f"but one element is {pair!r}. Pass e.g. [(value, '/cpu:0')], "
            "or call reduce_to for a single value.")
      check_destinations(pair[1], "batch_reduce_to")
    return self._batch_reduce_to(reduce_op, pairs, options)

  def _batch_reduce_to(self, reduce_op: ReduceOpLike,
                       value_destination_pairs: Sequence[tuple[Nest,
                       Destinations]],
                       options: ReduceOptions) -> list[Nest]:
    return [self._reduce_to(reduce_op, v, d, options)
            for v, d in value_destination_pairs]

  def _reduce(self, reduce_op: ReduceOpLike, value: Nest) -> Nest:
    destination = _current_device() or self._default_device or devices.HOST_CPU
    result = self._reduce_to(reduce_op, value, destination, None)
    return self._local_results(result)[0]

  def _gather(self, value: Nest, axis: int) -> Nest:
    parts = self._local_results(value)
    if len(parts) == 1:
      return parts[0]
    destination = _current_device() or self._default_device or devices.HOST_CPU
    with tf.device(destination):
      return tf.nest.map_structure(
          lambda *xs: tf.concat(xs, axis=axis), *parts)

  # -- updates --------------------------------------------------------------

  def update(self, var: tf.Variable, fn: ReplicaFn, args: Sequence[Nest] = (),
             kwargs: Optional[dict] = None, group: bool = True) -> Nest:
    """Runs ``fn(var, *args, **kwargs)`` where ``var`` lives; in replica
    context this goes through ``merge_call`` first."""
    kwargs = dict(kwargs or {})
    args = tuple(args)
    strategy = self._container_strategy()
    if context.in_replica_context_of(strategy):
      ctx = tf.distribute.get_replica_context()

      def merge_fn(_, *merged_args, **merged_kwargs):
        return self.update(var, fn, merged_args, merged_kwargs, group)

      return ctx.merge_call(merge_fn, args=args, kwargs=kwargs)
    context.require_cross_replica(strategy, "update")
    if not tf.executing_eagerly():
      # Inside a tf.function AutoGraph converts ``fn`` when the caller's code
      # is converted, as TensorFlow does for update and update_non_slot.
      fn = _tf_compat.convert_as_caller(fn, convert_by_default=False)
    with strategy.scope():
      return self._update(var, fn, args, kwargs, group)

  # -- replicas -------------------------------------------------------------

  def _call_for_each_replica(self, fn: ReplicaFn, args: tuple,
                             kwargs: dict) -> Nest:
    """How replicas run is decided in one place: ``replicas.runner``."""
    return runner.call_for_each_replica(self._replicas, fn, args, kwargs)

  def call_for_each_replica(self, fn: ReplicaFn, args: Sequence[Nest] = (),
                            kwargs: Optional[dict] = None) -> Nest:
    """Runs ``fn`` once per replica (the v1 spelling of ``run``)."""
    context.require_cross_replica(self._container_strategy(),
                                  "call_for_each_replica")
    with self._container_strategy().scope():
      return self._call_for_each_replica(fn, tuple(args), dict(kwargs or {}))


def _current_device() -> str:
  """The device of the innermost ``tf.device`` scope, or ``''``."""
  return _tf_private.current_device()
