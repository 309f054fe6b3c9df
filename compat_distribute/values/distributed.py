"""Per-replica and mirrored containers, their TypeSpec, and (re)grouping.

A ``PerReplica`` holds one value per replica, in replica order; it is what
``strategy.run`` returns with several replicas and what distributed datasets
yield.  It is a ``tf.distribute.DistributedValues`` and a composite tensor,
so it passes into a ``tf.function`` by its ``TypeSpec`` without retracing.

>>> import tensorflow as tf
>>> v = PerReplica((tf.constant(1), tf.constant(2)))
>>> print(v)
PerReplica:{
  0: tf.Tensor(1, shape=(), dtype=int32),
  1: tf.Tensor(2, shape=(), dtype=int32)
}
>>> isinstance(v, tf.distribute.DistributedValues)
True
>>> isinstance(v, tf.types.experimental.distributed.PerReplica)
True

``PerReplicaSpec`` is registered by name (``compat_distribute.PerReplicaSpec``),
so a SavedModel whose functions take or return per-replica values can be
saved; loading it needs ``compat_distribute`` imported.
"""
from __future__ import annotations

from collections import abc
from typing import Any, Sequence

import tensorflow as tf

from compat_distribute.runtime.errors import Error

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute.runtime.types import Nest

_CompositeTensor = _tf_compat.CompositeTensor
_public_types = tf.types.experimental.distributed


class DistributedValues(tf.distribute.DistributedValues):
  """Shared behaviour: one value per replica, printed like TensorFlow's."""

  # isinstance() against TF's DistributedValues goes through a slow Protocol
  # check; hot paths test this class attribute instead (see is_distributed).
  _is_compat_distributed_values = True

  def __init__(self, values: Sequence[Nest]) -> None:
    self._values = tuple(values)

  @property
  def values(self) -> tuple[Nest, ...]:
    """The per-replica values, in replica order."""
    return self._values

  @property
  def _primary(self) -> Any:
    return self._values[0]

  @property
  def _devices(self) -> tuple[str, ...]:
    return tuple(getattr(v, "device", "") for v in self._values)

  def __str__(self) -> str:
    body = ",\n".join(f"  {i}: {v!s}" for i, v in enumerate(self._values))
    return f"{type(self).__name__}:{{\n{body}\n}}"

  def __repr__(self) -> str:
    body = ",\n".join(f"  {i}: {v!r}" for i, v in enumerate(self._values))
    return f"{type(self).__name__}:{{\n{body}\n}}"


@_tf_private.register_type_spec("compat_distribute.PerReplicaSpec")
class PerReplicaSpec(tf.TypeSpec):
  """The ``TypeSpec`` of a ``PerReplica``: one spec per replica value."""

  __slots__ = ("_value_specs",)

  def __init__(self, *value_specs: tf.TypeSpec) -> None:
    self._value_specs = tuple(value_specs)

  @property
  def value_type(self) -> type:
    return PerReplica

  def _serialize(self) -> tuple[tf.TypeSpec, ...]:
    return self._value_specs

  @property
  def _component_specs(self) -> tuple[tf.TypeSpec, ...]:
    return self._value_specs

  # Tracing compares the spec of each PerReplica argument with itself (the
  # args-mutation check, the function cache).  TypeSpec's generic versions
  # of these two methods rebuild the spec through its serialization; when
  # the answer is `self` (specs all equal / no tensor names), say so.

  def most_specific_common_supertype(self, others: Sequence[Nest]) -> Any:
    mine = self._value_specs
    if all(type(o) is type(self) and o._value_specs == mine for o in others):  # pylint: disable=protected-access,unidiomatic-typecheck
      return self
    return super().most_specific_common_supertype(others)

  def _without_tensor_names(self) -> "PerReplicaSpec":
    if all(type(s) is tf.TensorSpec and s.name is None  # pylint: disable=unidiomatic-typecheck
           for s in self._value_specs):
      return self
    return super()._without_tensor_names()

  def _to_components(self, value: "PerReplica") -> tuple[Nest, ...]:
    return value._values  # pylint: disable=protected-access

  def _from_components(self, components: Sequence[Nest]) -> "PerReplica":
    return PerReplica(components)

  def __repr__(self) -> str:
    return f"PerReplicaSpec{self._value_specs!r}"


class PerReplica(DistributedValues, _public_types.PerReplica,
                 _CompositeTensor):
  """Values that differ from replica to replica (one per replica)."""

  _spec: "PerReplicaSpec | None" = None  # computed on first use

  @property
  def _type_spec(self) -> PerReplicaSpec:
    # Tracing a tf.function asks for the spec of each PerReplica argument
    # and value many times (~34 times over 8 values for a two-replica
    # training step).  The values are a tuple nobody replaces, so the spec
    # is computed once.  (A graph tensor's set_shape afterwards can only
    # make its shape more specific, so the cached spec stays compatible.)
    spec = self._spec
    if spec is None:
      spec = self._spec = PerReplicaSpec(
          *(tf.type_spec_from_value(v) for v in self._values))
    return spec

  def _shape_invariant_to_type_spec(self,
                                    shape: tf.TensorShape) -> PerReplicaSpec:
    return PerReplicaSpec(*(tf.TensorSpec(shape, v.dtype) for v in self._values))


class Mirrored(DistributedValues, _public_types.Mirrored):
  """Values kept identical on every replica; reads return the first copy.

  Arithmetic and tensor conversion act on the first copy, as for TF's.
  """

  def __getattr__(self, name: str) -> Any:
    # ``__tf_tracing_type__`` goes to the first copy, as TensorFlow's
    # Mirrored delegates it: a tf.function argument traces like that copy.
    if (name.startswith("__") and name != "__tf_tracing_type__") or (
        name == "_values"):
      raise AttributeError(name)
    return getattr(self._values[0], name)


def _mirrored_to_tensor(value, dtype=None, name=None, as_ref=False):
  del as_ref
  return tf.convert_to_tensor(value._primary, dtype=dtype, name=name)  # pylint: disable=protected-access


tf.register_tensor_conversion_function(Mirrored, _mirrored_to_tensor)


def _delegate_operator(name: str) -> None:
  def operator(self, *args):
    return getattr(tf.convert_to_tensor(self._primary), name)(*args)  # pylint: disable=protected-access
  operator.__name__ = name
  setattr(Mirrored, name, operator)


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
            "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__",
            "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
            "__matmul__", "__rmatmul__", "__neg__", "__abs__", "__lt__",
            "__le__", "__gt__", "__ge__", "__getitem__", "__and__", "__or__",
            "__xor__", "__invert__"):
  _delegate_operator(_op)


def is_distributed(value: Nest) -> bool:
  """Whether ``value`` is a per-replica or mirrored value: ours (checked
  first, fast) or one TensorFlow's own code built (its
  ``tf.distribute.DistributedValues``, e.g. from TensorFlow's test
  utilities), which holds its parts in ``_values`` as ours do."""
  return (getattr(type(value), "_is_compat_distributed_values", False) or
          isinstance(value, tf.distribute.DistributedValues))


_EagerTensor = _tf_private.EagerTensor

# Leaf types that select_replica can pass through without a tf.nest walk.
_PLAIN_LEAVES = (tf.Tensor, tf.Variable, int, float, str, bool, type(None))


def select_replica(replica_id: int, structure: Nest) -> Nest:
  """Picks replica ``replica_id``'s part of every distributed value.

  Other leaves (tensors, variables, Python values) pass through unchanged.

  >>> select_replica(1, {"x": PerReplica(("a", "b")), "y": 3})
  {'x': 'b', 'y': 3}
  """
  kind = type(structure)
  if kind is tuple or kind is list:  # the common `args` case, kept cheap
    distributed = False
    for x in structure:
      if isinstance(x, _PLAIN_LEAVES):
        continue
      if getattr(type(x), "_is_compat_distributed_values", False):
        distributed = True
        continue
      break  # something nested: the general walk below
    else:
      if not distributed:
        return structure
      return kind([x._values[replica_id]  # pylint: disable=protected-access
                   if getattr(type(x), "_is_compat_distributed_values", False)
                   else x for x in structure])
  elif kind is dict:  # `kwargs`
    if not structure:
      return structure
  elif getattr(kind, "_is_compat_distributed_values", False):
    return structure._values[replica_id]  # pylint: disable=protected-access
  elif isinstance(structure, _PLAIN_LEAVES):
    return structure
  return tf.nest.map_structure(
      lambda x: x._values[replica_id] if is_distributed(x) else x,  # pylint: disable=protected-access
      structure)


class StructureMismatchError(Error, ValueError, AssertionError):
  """Replicas returned (or passed to ``merge_call``) different structures.

  TensorFlow asserts; this error is also a ``ValueError``.
  """


def select_replica_result(i: int, result: Nest) -> Nest:
  """``select_replica`` with a fast path for the common flat list of
  distributed values (e.g. what ``batch_reduce_to`` returns)."""
  if type(result) is list:  # pylint: disable=unidiomatic-typecheck
    picked = []
    for x in result:
      if is_distributed(x):
        picked.append(x._values[i])  # pylint: disable=protected-access
      elif x is None or tf.is_tensor(x):
        picked.append(x)
      else:
        return select_replica(i, result)
    return picked
  return select_replica(i, result)


def regroup(per_replica: Sequence[Nest], wrap: type = PerReplica) -> Nest:
  """Turns a list of per-replica structures into one structure of ``wrap``.

  Leaves that are the same object on every replica (a variable, ``None``, a
  Python constant) are returned unwrapped; others become ``wrap(values)``.

  >>> regroup([{"a": 1, "b": "x"}, {"a": 2, "b": "x"}])
  {'a': PerReplica:{
    0: 1,
    1: 2
  }, 'b': 'x'}
  """
  first = per_replica[0]
  if type(first) is _EagerTensor:  # an eager run's usual result, kept cheap
    for value in per_replica:
      if value is not first:
        return wrap(per_replica)
    return first
  if isinstance(first, (list, tuple)) and not isinstance(first, _CompositeTensor):
    # As TensorFlow: sequences come back as plain lists and tuples (a
    # subclass, a tracking ListWrapper or a wrapt proxy is not rebuilt),
    # namedtuples through their own _make.
    kind = list if isinstance(first, list) else tuple
    _check_same_kind(per_replica, kind)
    _check_same_length(per_replica)
    grouped = kind(regroup([v[i] for v in per_replica], wrap)
                   for i in range(len(first)))
    if kind is tuple and hasattr(first, "_fields"):  # namedtuple
      return first._make(grouped)
    return grouped
  if isinstance(first, abc.Mapping):
    keys = set(first)
    for other in per_replica[1:]:
      if set(other) != keys:
        raise StructureMismatchError(
            "Replicas returned dictionaries with different keys: "
            f"{sorted(map(str, keys))} and {sorted(map(str, other))}. Every "
            "replica must return the same structure.")
    return type(first)(
        {k: regroup([v[k] for v in per_replica], wrap) for k in first})
  if all(v is first for v in per_replica[1:]):
    return first
  return wrap(per_replica)


def _check_same_kind(per_replica: Sequence[Nest], kind: type) -> None:
  if not all(isinstance(v, kind) for v in per_replica[1:]):
    raise StructureMismatchError(
        "Replicas returned different kinds of sequence "
        f"{[type(v).__name__ for v in per_replica]}. Every replica must "
        "return the same structure (e.g. all tuples).")


def _check_same_length(per_replica: Sequence[Nest]) -> None:
  lengths = [len(v) for v in per_replica]
  if len(set(lengths)) > 1:
    raise StructureMismatchError(
        f"Replicas returned sequences of different lengths {lengths}. Every "
        "replica must return the same structure.")
