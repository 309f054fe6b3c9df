"""``CentralStorageStrategy``: variables on one device, compute replicated.

Each compute device runs one replica of ``strategy.run``; every variable
created in ``scope()`` lives once, on the parameter device, and with several
replicas it is wrapped so that replica-context updates are combined across
replicas first (see ``compat_distribute.variables``).  Reductions go
through ``compat_distribute.values.cross_device``.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.experimental.CentralStorageStrategy(
...     compute_devices=["/cpu:0", "/cpu:1"])
>>> strategy
CentralStorageStrategy(compute_devices=['/job:localhost/replica:0/task:0/device:CPU:0', '/job:localhost/replica:0/task:0/device:CPU:1'], parameter_device='/device:CPU:0')
>>> with strategy.scope():
...   v = tf.Variable(1.0, aggregation=tf.VariableAggregation.SUM)
>>> def step():
...   v.assign_add(tf.constant(1.0))  # one 1.0 per replica; SUM adds 2
...   return tf.distribute.get_replica_context().replica_id_in_sync_group
>>> strategy.run(step)
PerReplica:{
  0: <tf.Tensor: shape=(), dtype=int32, numpy=0>,
  1: <tf.Tensor: shape=(), dtype=int32, numpy=1>
}
>>> float(v)
3.0
"""
from __future__ import annotations

import collections.abc
from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf

from compat_distribute.runtime.errors import Error

from compat_distribute import _tf_private
from compat_distribute.values import cross_device
from compat_distribute.values import reduction
from compat_distribute.runtime import devices as devices_lib
from compat_distribute.api import extended as extended_lib
from compat_distribute.variables import shared as replica_variables
from compat_distribute.api import strategy as strategy_lib
from compat_distribute.api import strategy_v1
from compat_distribute.values import distributed as values_lib
from compat_distribute.variables import central as variables_lib
from compat_distribute.variables.aggregating import AggregatingVariable
from compat_distribute.runtime.types import Creator
from compat_distribute.runtime.types import Destinations
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReduceOpLike
from compat_distribute.runtime.types import ReduceOptions
from compat_distribute.runtime.types import ReplicaFn
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.runtime.types import TensorLike

class ComputeDevicesTypeError(Error, TypeError, ValueError):
  """``compute_devices`` is a string or not iterable.

  TensorFlow iterates a string's characters and fails with ``ValueError``
  (and with ``TypeError`` on a number); this error is both.
  """


def _check_compute_devices(compute_devices: Any) -> list[str]:
  if isinstance(compute_devices, str) or not isinstance(
      compute_devices, collections.abc.Iterable):
    raise ComputeDevicesTypeError(
        "compute_devices must be a list of device names, got "
        f"{compute_devices!r} of type {type(compute_devices).__name__}. Pass "
        "e.g. compute_devices=['/gpu:0', '/gpu:1'], or None for all local "
        "GPUs (else the CPU).")
  # Any other iterable (a tuple, set, generator or NumPy array) is taken as
  # TensorFlow takes it.
  compute_devices = list(compute_devices)
  if not compute_devices:
    raise ValueError(
        "compute_devices is empty: CentralStorageStrategy needs at least one "
        "device to run replicas on. Pass e.g. compute_devices=['/cpu:0'], or "
        "None for all local GPUs (else the CPU).")
  canonical = [devices_lib.canonicalize(d) for d in compute_devices]
  seen: dict[str, Any] = {}
  duplicates = []
  for given, name in zip(compute_devices, canonical):
    if name in seen:
      duplicates.append(f"{seen[name]!r} and {given!r} (both {name})")
    seen.setdefault(name, given)
  if duplicates:
    raise ValueError(
        f"compute_devices {list(compute_devices)!r} names the same device "
        f"more than once: {'; '.join(duplicates)}. Each replica needs its own "
        "device; list each device once.")
  return canonical


def _plain_value_as_tensor(value: Nest) -> Nest:
  """A value that is not per-replica, as the tensor ``batch_reduce_to``
  copies to its destinations; a ValueError (TensorFlow's type) for one
  that is not convertible."""
  if not isinstance(value, (tf.RaggedTensor, tf.SparseTensor)):
    try:
      return tf.convert_to_tensor(value)
    except (TypeError, ValueError):
      pass
  raise ValueError(
      "batch_reduce_to (and all_reduce, which uses it) treats a value that "
      "is not per-replica -- the same object in every replica, such as one "
      "made outside `strategy.run` -- as one tensor to copy, but got "
      f"{type(value).__name__} {value!r}, which is not convertible to a "
      "tensor. Make the value inside the replica function, so that each "
      "replica passes its own, or pass a dense tensor (e.g. "
      "RaggedTensor.to_tensor()).")


class CentralStorageExtended(extended_lib.Extended):
  """``strategy.extended`` of ``CentralStorageStrategy``."""

  _between_graph = True  # what TensorFlow's reports for this strategy
  _isolates_session_state = True  # TensorFlow's does, on one machine
  _per_replica_input_is_per_worker = True  # as TensorFlow's
  # experimental_distribute_values_from_function wraps even one replica's
  # value in a PerReplica, as TensorFlow's CentralStorageStrategy does.
  _wrap_single_replica_values = True
  # One replica runs as several do (replicas.runner), as in TensorFlow.
  _one_replica_like_many = True

  def __init__(self, container_strategy: StrategyLike,
               compute_devices: Optional[Sequence[str]] = None,
               parameter_device: Optional[str] = None) -> None:
    compute = (devices_lib.default_compute_devices()
               if compute_devices is None else
               _check_compute_devices(compute_devices))
    # Whether the strategy chose its compute devices (no compute_devices
    # given): only then can ``configure`` move it onto a cluster task's own
    # devices (cluster.central_storage), as in TensorFlow.
    self._picks_devices = compute_devices is None
    if isinstance(parameter_device, tf.DeviceSpec):
      parameter_device = parameter_device.to_string()  # TF accepts it too
    if parameter_device is None:
      parameter_device = (compute[0] if len(compute) == 1 else
                          devices_lib.HOST_CPU)
    elif not isinstance(parameter_device, str) or not parameter_device:
      raise ValueError(
          "parameter_device must be a device name such as '/cpu:0', got "
          f"{parameter_device!r}. Pass None to use the CPU (the only compute "
          "device when there is one).")
    devices_lib.report_missing(
        compute + [devices_lib.canonicalize(parameter_device)],
        "CentralStorageStrategy",
        session_creates_cpus=isinstance(container_strategy,
                                        tf.compat.v1.distribute.Strategy))
    super().__init__(container_strategy, compute, (parameter_device,))
    self._variable_device = parameter_device
    self._input_device = devices_lib.canonicalize(devices_lib.HOST_CPU)
    self._cross_device_ops: Any = cross_device.ReduceToOneDevice()
    # The cluster attributes TensorFlow's extended has on one machine (no
    # cluster, the chief); tf_keras reads them (``_task_id``, ``_task_type``)
    # in its file and checkpoint helpers.
    self._cluster_spec = None
    self._task_type = None
    self._task_id = None
    self._is_chief = True
    self._worker_device = self._input_device

  # -- devices --------------------------------------------------------------

  @property
  def worker_devices(self) -> list[str]:  # type: ignore[override]
    """The compute devices, one per replica, as a list (TensorFlow's type)."""
    return list(self._compute_devices)

  @property
  def worker_devices_by_replica(self) -> list[list[str]]:
    """One single-device list per replica."""
    return [[d] for d in self._compute_devices]

  def non_slot_devices(self, var_list: Any) -> Any:
    """Where non-slot variables go: with the first of ``var_list`` by name,
    as in TensorFlow."""
    var_list = list(var_list)
    if not var_list:
      # TensorFlow fails the same way (ValueError), from min().
      raise ValueError(
          "non_slot_devices needs at least one variable to place non-slot "
          "variables with, but var_list is empty. A v1 optimizer's "
          "apply_gradients/minimize reaches this when given no "
          "(gradient, variable) pairs: pass the variables to train.")
    return min(var_list, key=lambda v: v.name)

  # -- variables ------------------------------------------------------------

  def _allows_partitioned_variables(self) -> bool:
    """Partitioners are honoured while building a graph, not eagerly (as in
    TensorFlow)."""
    return not tf.executing_eagerly()

  def _create_variable(self, next_creator: Creator,
                       **kwargs: Any) -> tf.Variable:
    def create():
      return variables_lib.create_central_variable(self, next_creator,
                                                   **kwargs)
    if len(self._compute_devices) == 1:
      return create()
    return replica_variables.shared_variable(kwargs.get("name"), create)

  # -- reduction ------------------------------------------------------------

  def _reduce_to(self, reduce_op: ReduceOpLike, value: Nest,
                 destinations: Destinations,
                 options: ReduceOptions) -> Nest:
    del options
    if destinations is None or (isinstance(destinations, str) and
                                not destinations):
      raise ValueError(
          f"reduce_to needs destinations, got {destinations!r}. Pass a "
          "device string, a variable, or a per-replica value (all-reduce).")
    if not values_lib.is_distributed(value):
      if (not tf.is_tensor(value) and not tf.nest.is_nested(value) and
          np.all(np.asarray(value) == 0)):
        # Zeros sum to zeros.  (A nest may hold symbolic tensors, which
        # NumPy cannot read; TensorFlow does not look inside it either.)
        return np.zeros_like(np.asarray(value))
      reduction.check_reducible(reduce_op, value,
                                   self._num_replicas_in_sync)
      if reduce_op == tf.distribute.ReduceOp.MEAN:
        return value
      return cross_device.broadcast(
          value, cross_device.devices_of(destinations), reuse=False)
    return self._cross_device_ops.reduce(reduce_op, value, destinations)

  def _batch_reduce_to(self, reduce_op: ReduceOpLike,
                       value_destination_pairs: Sequence[tuple[Nest,
                       Destinations]],
                       options: ReduceOptions) -> list[Nest]:
    """As TensorFlow's: a plain (not per-replica) value counts as one
    replica's value, so SUM and MEAN both give it back, as a tensor copied to
    the destinations (``reduce_to`` instead refuses SUM and keeps MEAN's
    value where it is)."""
    results = []
    for value, destinations in value_destination_pairs:
      if values_lib.is_distributed(value) or isinstance(value,
                                                        tf.IndexedSlices):
        results.append(self._reduce_to(reduce_op, value, destinations,
                                       options))
        continue
      if destinations is None or (isinstance(destinations, str) and
                                  not destinations):
        raise ValueError(
            f"batch_reduce_to needs destinations, got {destinations!r}. Pass "
            "a device string, a variable, or a per-replica value.")
      results.append(cross_device.broadcast(
          _plain_value_as_tensor(value),
          cross_device.devices_of(destinations), reuse=False))
    return results

  def _gather_to_implementation(self, value: Nest, destinations: Destinations,
                                axis: int, options: ReduceOptions) -> Nest:
    del options
    if not values_lib.is_distributed(value):
      return value
    return self._cross_device_ops.gather(value, destinations, axis)

  def _gather(self, value: Nest, axis: int) -> Nest:
    destination = _tf_private.current_device() or devices_lib.HOST_CPU
    return self._local_results(
        self._gather_to_implementation(value, destination, axis, None))[0]

  def _broadcast_to(self, tensor: TensorLike,
                    destinations: Destinations) -> Nest:
    if isinstance(tensor, (int, float)):
      # Python numbers stay unconverted so their dtype follows their use.
      return tensor
    if isinstance(destinations, str) and not destinations:
      raise ValueError(
          "broadcast_to needs a destination, got the empty string. Pass a "
          "device string such as '/cpu:0', a variable or a per-replica "
          "value.")
    if not destinations:
      destinations = self._compute_devices[0]
    return cross_device.broadcast(
        tensor, cross_device.devices_of(destinations), reuse=False)

  # -- updates --------------------------------------------------------------

  def _update(self, var: tf.Variable, fn: ReplicaFn, args: tuple,
              kwargs: dict, group: bool) -> Nest:
    if isinstance(var, AggregatingVariable):
      var = var.get()
    if not isinstance(var, tf.Variable):
      raise ValueError(
          f"extended.update needs a tf.Variable to update, got {var!r} of "
          f"type {type(var).__name__}. Pass a variable created in this "
          "strategy's scope.")
    with _tf_private.device(var.device or None):
      result = fn(var, *values_lib.select_replica(0, args),
                  **values_lib.select_replica(0, kwargs))
    if group:
      return result
    return tf.nest.map_structure(self._local_results, result)


class CentralStorageMethods:
  """Constructor and repr shared by the v1 and v2 ``CentralStorageStrategy``.
  """

  def __init__(self, compute_devices: Optional[Sequence[str]] = None,
               parameter_device: Optional[str] = None) -> None:
    super().__init__(CentralStorageExtended(self, compute_devices,
                                            parameter_device))

  def _with_same_configuration(self) -> StrategyLike:
    extended = self.extended
    copied = type(self)(list(extended.worker_devices),
                        extended._variable_device)  # pylint: disable=protected-access
    copied.extended._picks_devices = extended._picks_devices  # pylint: disable=protected-access
    return copied

  @classmethod
  def _from_num_gpus(cls, num_gpus: int) -> StrategyLike:
    """Computes on GPUs 0..num_gpus-1, or on the CPU if ``num_gpus`` is 0
    (the constructor TensorFlow's own strategy tests use)."""
    return cls([f"/device:GPU:{i}" for i in range(num_gpus)] or [devices_lib.HOST_CPU])

  def __repr__(self) -> str:
    extended = self.extended
    return (f"{type(self).__name__}("
            f"compute_devices={extended.worker_devices!r}, "
            f"parameter_device={extended._variable_device!r})")  # pylint: disable=protected-access


# TensorFlow's class last, for type identity only (see one_device.py).
class CentralStorageStrategy(CentralStorageMethods, strategy_lib.Strategy,
                             tf.distribute.experimental.CentralStorageStrategy):
  """Puts every variable on one device and replicates compute.

  Variables live on ``parameter_device``; ``run`` calls the function once
  per compute device, and in replica context updates of a variable are
  combined across replicas by its ``aggregation`` before being applied once.

  Args:
    compute_devices: the devices replicas run on; None means all local
      GPUs, else the CPU.
    parameter_device: where variables live; None means the CPU when there
      are several compute devices, else the single compute device.

  Raises:
    ValueError: ``compute_devices`` is empty or names a device twice.
  """


# The v1 class, beside its v2 twin.  Its name ends in V1, as TensorFlow's v1
# classes do (tf_keras puts ``type(strategy).__name__`` into messages); the
# facade exports it under the public name.  TensorFlow's class last, as above.
class CentralStorageStrategyV1(
    CentralStorageMethods, strategy_v1.StrategyV1,
    tf.compat.v1.distribute.experimental.CentralStorageStrategy):
  """``tf.compat.v1.distribute.experimental.CentralStorageStrategy``: one
  copy of every variable on ``parameter_device``, compute replicated over
  ``compute_devices``.

  Args:
    compute_devices: the devices replicas run on; None means all local GPUs,
      else the CPU.
    parameter_device: where variables live; None means the CPU (or the only
      compute device).
  """
