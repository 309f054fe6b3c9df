"""The eager per-step read, with as little Python as possible.

``tf.data``'s ``iterator.get_next()`` rebuilds the element's nested structure
on every call, which costs more Python time than the read itself when the
structure is a tuple of per-replica structures.  Eagerly, and when every
component is a dense tensor, ``EagerReader`` instead runs the
``IteratorGetNext`` op on the host iterator's resource (reached through the
public composite-tensor API), gets the flat list of tensors, copies each
replica's share to its device with one ``IdentityN`` op, and packs the
result once into the user's structure.  The values are identical to the
general path in ``fetch.py``, which handles everything else (graphs,
ragged and sparse components, optionals).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import tensorflow as tf

from compat_distribute.values import distributed as values_lib
from compat_distribute.input import layout as layout_lib
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest


def _packer(template: Any) -> Callable[[list[Nest]], Any]:
  """A function packing a flat list of leaves like ``template``."""
  if not tf.nest.is_nested(template):
    return lambda leaves: leaves[0]
  if type(template) is tuple and not any(  # pylint: disable=unidiomatic-typecheck
      tf.nest.is_nested(t) for t in template):
    return tuple
  return lambda leaves: tf.nest.pack_sequence_as(template, leaves)


class EagerReader:
  """Reads one step from an eager host iterator of dense components."""

  def __init__(self, layout: layout_lib.Layout, resource: tf.Tensor,
               replica_spec: SpecNest, flat_specs: list[tf.TensorSpec]) -> None:
    self._layout = layout
    self._resource = resource
    self._types = [s.dtype for s in flat_specs]
    self._shapes = [s.shape for s in flat_specs]
    self._width = len(tf.nest.flatten(replica_spec))
    self._pack = _packer(replica_spec)

  @staticmethod
  def create(layout: layout_lib.Layout, host_iterator: Any,
             host_spec: SpecNest) -> Optional["EagerReader"]:
    """An ``EagerReader``, or None when the general path must be used."""
    if not tf.executing_eagerly():
      return None
    flat_specs = tf.nest.flatten(host_spec)
    if not flat_specs or not all(
        type(s) is tf.TensorSpec for s in flat_specs):  # pylint: disable=unidiomatic-typecheck
      return None
    components = tf.nest.flatten(host_iterator, expand_composites=True)
    if len(components) != 1 or components[0].dtype != tf.resource:
      return None
    replica_spec = host_spec[0] if layout.kind == "rounds" else host_spec
    return EagerReader(layout, components[0], replica_spec, flat_specs)

  def _read(self) -> list[tf.Tensor]:
    return tf.raw_ops.IteratorGetNext(iterator=self._resource,
                                      output_types=self._types,
                                      output_shapes=self._shapes)

  def next_step(self) -> Nest:
    """The next step's input (raises ``OutOfRangeError`` at the end).

    Only valid with synchronous eager execution (the default), where the op
    raises at the end of input right away; callers check.
    """
    layout = self._layout
    targets = layout.targets
    if layout.kind == "whole":
      leaves = self._read()
      if targets[0] is not None:
        with tf.device(targets[0]):
          leaves = tf.identity_n(leaves)
      return self._pack(leaves)
    width = self._width
    if layout.kind == "rounds":
      flat = self._read()
      chunks = [flat[i * width:(i + 1) * width] for i in range(len(targets))]
    else:
      chunks = [self._read() for _ in targets]
    for i, target in enumerate(targets):
      if target is not None:
        with tf.device(target):
          chunks[i] = tf.identity_n(chunks[i])
    return self._pack([values_lib.PerReplica(leaves)
                       for leaves in zip(*chunks)])
