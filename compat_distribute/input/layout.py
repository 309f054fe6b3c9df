"""Where input comes from and goes to, and how a step's values are shaped.

A ``Layout`` is the static description shared by distributed datasets,
their iterators and the v1 input iterators:

* ``kind`` -- how one step is read from the host dataset:
  ``"whole"`` (one replica: one element is the step's input),
  ``"rounds"`` (several replicas: one element is an ``n``-tuple holding every
  replica's piece of a split global batch) or ``"stream"`` (several replicas:
  ``n`` consecutive elements, one per replica, as from a ``dataset_fn``).
* ``devices`` -- the replicas' compute devices, in replica order.
* ``host`` -- the input device the pipeline runs on.
* ``fetch_to_device`` -- copy each replica's value to its device (else it
  stays on ``host``).

It serialises to a tuple of primitives so that ``TypeSpec``\\ s can carry it.

>>> layout = Layout("rounds", ("/device:CPU:0", "/device:CPU:1"),
...                 "/device:CPU:0", True)
>>> layout.targets
(None, '/device:CPU:1')
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional, Sequence

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.values import distributed as values_lib
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.runtime.types import DeviceName

KINDS = ("whole", "rounds", "stream")

# The spec tf.data gives a ``None`` component of an element (every replica
# gets ``None`` for it, as in TensorFlow).
NONE_SPEC_TYPE = type(tf.type_spec_from_value(None))


@dataclasses.dataclass(frozen=True)
class Layout:
  """Static facts about how input reaches the replicas (see module doc)."""
  kind: str
  devices: tuple[str, ...]
  host: str
  fetch_to_device: bool

  def __post_init__(self) -> None:
    if self.kind not in KINDS:
      raise ValueError(f"Layout kind must be one of {KINDS}, got {self.kind!r}.")

  @property
  def num_replicas(self) -> int:
    return len(self.devices)

  @functools.cached_property
  def targets(self) -> tuple[Nest, ...]:
    """Per replica: the device to copy its value to, or None (stays put)."""
    if not self.fetch_to_device:
      return (None,) * len(self.devices)
    return tuple(None if d == self.host else d for d in self.devices)

  def as_tuple(self) -> tuple[Nest, ...]:
    return (self.kind, self.devices, self.host, self.fetch_to_device)

  @staticmethod
  @functools.lru_cache(maxsize=256)
  def from_tuple(serialized: tuple[Nest, ...]) -> "Layout":
    kind, devices, host, fetch = serialized
    return Layout(kind, tuple(devices), host, bool(fetch))

  def element_spec(self, host_spec: SpecNest) -> SpecNest:
    """The spec of one step's value, given the host dataset's element spec."""
    if self.kind == "whole":
      return host_spec
    if self.kind == "rounds":
      per_replica = host_spec
    else:
      per_replica = (host_spec,) * self.num_replicas
    return regroup_specs(per_replica)


def regroup_specs(per_replica: Sequence[SpecNest]) -> SpecNest:
  """One structure of ``PerReplicaSpec`` from ``n`` structures of specs."""
  flat = [tf.nest.flatten(s) for s in per_replica]
  return tf.nest.pack_sequence_as(
      per_replica[0], [values_lib.PerReplicaSpec(*leaves)
                       for leaves in zip(*flat)])


def wrap_per_replica(per_replica: Sequence[Nest]) -> Nest:
  """One structure of ``PerReplica`` from ``n`` same-structured values:
  every leaf is wrapped, even one that is the same object on every replica
  (unlike ``values.distributed.regroup``, which returns such a leaf as it
  is)."""
  first = per_replica[0]
  if not tf.nest.is_nested(first):
    return values_lib.PerReplica(per_replica)
  flat = [tf.nest.flatten(v) for v in per_replica]
  return tf.nest.pack_sequence_as(
      first, [values_lib.PerReplica(leaves) for leaves in zip(*flat)])


def _identity(x: Nest) -> Nest:
  if x is None:
    return None
  return tf.nest.map_structure(tf.identity, x, expand_composites=True)


def place(value: Nest, device: Optional[DeviceName]) -> Nest:
  """``value`` copied onto ``device``; unchanged when ``device`` is None."""
  if device is None:
    return value
  with tf.device(device):
    if isinstance(value, tf.Tensor):
      return tf.identity(value)
    return tf.nest.map_structure(_identity, value)


def dummy(spec: SpecNest) -> Nest:
  """An empty value for a replica that got no data, matching ``spec``.

  Unknown dimensions become 0; with a fully known shape the first dimension
  is taken for the batch dimension and set to 0.
  """
  def make(s: tf.TypeSpec) -> Nest:
    if isinstance(s, NONE_SPEC_TYPE):
      return None
    if s.shape.rank is None:
      dims = []
    else:
      dims = [d if d is not None else 0 for d in s.shape.as_list()]
    if dims and s.shape.is_fully_defined():
      dims[0] = 0
    if isinstance(s, tf.SparseTensorSpec):
      return tf.SparseTensor(tf.zeros([0, len(dims)], tf.int64),
                             tf.zeros([0], s.dtype), dims)
    if isinstance(s, tf.RaggedTensorSpec):
      flat_dims = [0] + dims[1 + s.ragged_rank:]
      splits = [tf.zeros([1], s.row_splits_dtype)] * s.ragged_rank
      return tf.RaggedTensor.from_nested_row_splits(
          tf.zeros(flat_dims, s.dtype), splits, validate=False)
    if isinstance(s, tf.TensorSpec):
      return tf.zeros(dims, s.dtype)
    raise TypeError(
        f"Cannot make an empty value for a replica with no data: unsupported "
        f"component spec {s!r}. Use tensors, ragged or sparse tensors.")
  return tf.nest.map_structure(make, spec)


def batch_relaxed(spec: SpecNest) -> SpecNest:
  """``spec`` with the batch dimension unknown wherever an empty value
  (``dummy``) would have a different one: the spec a value has after a
  graph-mode choice between a real element and an empty one.

  >>> batch_relaxed(tf.TensorSpec([8, 3], tf.float32))
  TensorSpec(shape=(None, 3), dtype=tf.float32, name=None)
  >>> batch_relaxed(tf.TensorSpec([8, None], tf.float32)).shape
  TensorShape([8, None])
  """
  def relax(s: tf.TypeSpec) -> tf.TypeSpec:
    shape = getattr(s, "shape", None)
    if shape is None or shape.rank is None or shape.rank == 0:
      return s
    if isinstance(s, tf.RaggedTensorSpec):
      dims = shape.as_list()
      if None in dims[:1] + dims[1 + s.ragged_rank:]:
        return s
      return tf.RaggedTensorSpec([None] + dims[1:], s.dtype, s.ragged_rank,
                                 s.row_splits_dtype)
    if not shape.is_fully_defined():
      return s
    relaxed = [None] + shape.as_list()[1:]
    if isinstance(s, tf.SparseTensorSpec):
      return tf.SparseTensorSpec(relaxed, s.dtype)
    if isinstance(s, tf.TensorSpec):
      return tf.TensorSpec(relaxed, s.dtype, s.name)
    return s
  return tf.nest.map_structure(relax, spec)


class HostBackedSpec(tf.TypeSpec):
  """Shared ``TypeSpec`` of distributed datasets and iterators.

  Both are described by their ``Layout`` (as a tuple) and the host element
  spec, and have one component: the host ``tf.data`` dataset or iterator
  (``value._host``).  Subclasses name the value type, the component's spec
  and how to rebuild the value.
  """

  __slots__ = ("_layout_tuple", "_host_spec", "_strategy")

  def __init__(self, layout_tuple: tuple[Nest, ...],
               host_spec: SpecNest) -> None:
    self._layout_tuple = tuple(layout_tuple)
    self._host_spec = host_spec
    # The strategy the value belongs to, handed to values rebuilt from
    # components; not part of the spec's identity (a spec TensorFlow
    # rebuilds from ``_serialize`` has none, and then nothing is checked).
    self._strategy = None

  def with_strategy(self, strategy: StrategyLike) -> "HostBackedSpec":
    self._strategy = strategy
    return self

  def _serialize(self) -> tuple[Nest, ...]:
    return (self._layout_tuple, self._host_spec)

  def _to_components(self, value: Nest) -> Any:
    # A single component, not a 1-tuple: packing a tuple costs Python time
    # on every tf.function call that takes this value as an argument.
    return value._host  # pylint: disable=protected-access

  def _layout(self) -> Layout:
    return Layout.from_tuple(self._layout_tuple)

  def __repr__(self) -> str:
    return (f"{type(self).__name__}(layout={self._layout_tuple!r}, "
            f"host_spec={self._host_spec!r})")


def forbid_enumerate_in_tf_function(cls: type) -> None:
  """Makes AutoGraph's ``enumerate`` over ``cls`` raise a clear error."""
  _tf_private.forbid_autograph_enumerate(
      cls,
      f"enumerate() over a {cls.__name__} is not supported inside a "
      "tf.function: AutoGraph would turn it into a Python loop that never "
      "ends while tracing. Loop with `for x in ...:` and keep your own "
      "counter (i = 0 before the loop, i += 1 inside).")
