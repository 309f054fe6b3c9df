"""Named types for the package's signatures.

Type aliases and small ``Protocol``\\ s that say what a parameter is: a
device name, the destinations of a reduction, a nest of values, the
strategy and its ``extended`` as the lower layers see them (they cannot
import the classes, which live above them).  ``Any`` is left where a value
really is arbitrary user data.

>>> from compat_distribute import v2 as distribute
>>> isinstance(distribute.OneDeviceStrategy("/cpu:0"), StrategyLike)
True
"""
from __future__ import annotations

from typing import (Any, Callable, ContextManager, Mapping, Optional,
                    Protocol, Sequence, Union, runtime_checkable)

import tensorflow as tf

# A device name such as "/cpu:0" or "/job:localhost/replica:0/task:0/device:GPU:1".
DeviceName = str
DeviceNames = Sequence[DeviceName]

# A tensor, a variable, or what converts to one (numbers, arrays, lists).
TensorLike = Union[tf.types.experimental.TensorLike, tf.Variable,
                   tf.IndexedSlices, tf.SparseTensor, tf.RaggedTensor]
# One value per replica, or the same value on each (ours or TensorFlow's).
DistributedValue = tf.distribute.DistributedValues
# A value a replica passes around: tensor-like, distributed, or None.
Value = Union[TensorLike, DistributedValue, None]
# A ``tf.nest`` structure of values (tuples, lists, dicts, namedtuples ...).
Nest = Union[Value, Sequence["Nest"], Mapping[Any, "Nest"]]
# Where a reduction puts its result: a device name, or an object whose
# device(s) stand for the destination (a variable, a tensor, a distributed
# value).
Destinations = Union[DeviceName, tf.Variable, tf.Tensor, DistributedValue]
# What ``tf.distribute.ReduceOp`` arguments accept: the enum or its name.
ReduceOpLike = Union[tf.distribute.ReduceOp, str]
# A nest of ``tf.TypeSpec``\ s (a dataset's ``element_spec``).
SpecNest = Union[tf.TypeSpec, Sequence["SpecNest"], Mapping[Any, "SpecNest"]]
# An ``axis`` argument: an int, several, or an integer tensor.
Axis = Union[int, Sequence[int], tf.Tensor]
# A variable creator (``tf.variable_creator_scope``'s function).
Creator = Callable[..., tf.Variable]
# A function run once per replica (user code), and a ``merge_call``'s
# ``merge_fn(strategy, *args, **kwargs)``.
ReplicaFn = Callable[..., Nest]
MergeFn = Callable[..., Nest]
# The options arguments of reductions, of input methods and of ``run``.
ReduceOptions = Optional[tf.distribute.experimental.CommunicationOptions]
InputOptions = Optional[tf.distribute.InputOptions]
RunOptions = Optional[tf.distribute.RunOptions]
# A v1 session (graph mode).
Session = tf.compat.v1.Session
# What a tf.group / tf.control_dependencies takes and gives: ops or tensors.
OpOrTensor = Union[tf.Operation, tf.Tensor]
# A ``tf.compat.v1.ConfigProto``.
ConfigProto = tf.compat.v1.ConfigProto
# A TensorFlow graph device function (op -> device name) or a device name.
DeviceOrFunction = Union[DeviceName, Callable[[tf.Operation], DeviceName]]


@runtime_checkable
class ExtendedLike(Protocol):
  """What the lower layers use of a strategy's ``extended``: its devices,
  and the strategy it belongs to for the variables it makes
  (``variables``).  Entering its scope takes a ``runtime.context.ScopePlan``
  and the replica layer a ``replicas.plan.ReplicaPlan``, both handed over
  by ``extended``."""

  @property
  def worker_devices(self) -> Sequence[DeviceName]: ...

  @property
  def parameter_devices(self) -> Sequence[DeviceName]: ...

  def _container_strategy(self) -> "StrategyLike": ...


@runtime_checkable
class StrategyLike(Protocol):
  """What the lower layers use of a strategy (v1 or v2, ours)."""

  @property
  def extended(self) -> ExtendedLike: ...

  @property
  def num_replicas_in_sync(self) -> int: ...

  def scope(self) -> ContextManager[Any]: ...

  def experimental_local_results(self, value: Nest) -> tuple[Nest, ...]: ...
