"""One step of a multi-worker input from the workers' parts, and what a
worker gives once its share of the input has ended.

A ``MultiWorkerIterator`` (``input.multi_worker``) reads one part per
worker, each a ``DistributedIterator`` of that worker's share.  Shares can
hold different numbers of steps: under ``FILE`` auto-sharding of three files
on two workers, say, one worker reads two files and the other one.
TensorFlow's ``MultiWorkerMirroredStrategy`` (2.21, measured) then goes on
until every share has ended: a worker whose share ended gives each of its
replicas an empty batch -- batch dimension 0, the element's other
dimensions (``layout.dummy`` of its element spec) -- and the input ends only
when no worker has anything left.  Where the shares may end apart, the
step's element spec has an unknown batch dimension (``layout.batch_relaxed``).
Endless input, and shares known to hold as many steps each, are read
without that (``may_end_apart``).  Our other multi-worker input (the
cluster form of ``CentralStorageStrategy`` without partial batch handling,
whose native form is one machine's) ends at the end of the shortest share
instead: ``pads`` says which (``input.per_worker`` decides).

>>> spec = tf.TensorSpec([2], tf.float32)
>>> joined_spec([spec, spec], [1, 1])
PerReplicaSpec(TensorSpec(shape=(2,), dtype=tf.float32, name=None), TensorSpec(shape=(2,), dtype=tf.float32, name=None))
>>> joined_spec([spec, spec], [1, 1], relax=True)
PerReplicaSpec(TensorSpec(shape=(None,), dtype=tf.float32, name=None), TensorSpec(shape=(None,), dtype=tf.float32, name=None))
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import tensorflow as tf

from compat_distribute.input import dataset as dataset_lib
from compat_distribute.input import iterator as iterator_lib
from compat_distribute.input import layout as layout_lib
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest
from compat_distribute.values import distributed as values_lib


# -- joining the workers' steps ------------------------------------------------

def replica_values(value: Nest, count: int) -> list[Nest]:
  """A worker's step value, one entry per replica of that worker."""
  if count == 1:
    return [value]
  return [values_lib.select_replica(i, value) for i in range(count)]


def replica_specs(spec: SpecNest, count: int) -> list[SpecNest]:
  """A worker's step spec, one entry per replica of that worker."""
  if count == 1:
    return [spec]
  return [tf.nest.map_structure(lambda s, i=i: s._value_specs[i], spec)  # pylint: disable=protected-access
          for i in range(count)]


def joined(per_replica: Sequence[Nest]) -> Nest:
  """One step's input from every replica's value, in replica order, as
  ``PerReplica`` leaves."""
  return layout_lib.wrap_per_replica(list(per_replica))


def joined_spec(specs: Sequence[SpecNest], counts: Sequence[int],
                relax: bool = False) -> SpecNest:
  """The spec of a step joined from the workers' step specs; ``relax``:
  with an unknown batch dimension (``layout.batch_relaxed``), for shares
  that may end apart."""
  per_replica = []
  for spec, count in zip(specs, counts):
    per_replica += replica_specs(spec, count)
  if relax:
    per_replica = [layout_lib.batch_relaxed(s) for s in per_replica]
  return layout_lib.regroup_specs(per_replica)


# -- shares that end apart -----------------------------------------------------

def steps_held(parts: Sequence[dataset_lib.DistributedDataset], pads: bool
               ) -> Optional[list[float]]:
  """Per worker, how many steps of the input it reads (``math.inf``:
  endless), when every worker's cardinality says; else None.  Without
  ``pads`` every worker reads as many as the shortest share holds.

  >>> steps_held([], True)
  []
  """
  steps = []
  for part in parts:
    # pylint: disable=protected-access
    count, layout = part._cardinality, part._layout
    if isinstance(count, tf.Tensor):
      return None
    if count == tf.data.INFINITE_CARDINALITY:
      steps.append(math.inf)
      continue
    if count < 0 or (layout.kind == "stream" and part._partial_rounds):
      return None
    if layout.kind == "stream":
      count //= layout.num_replicas
    steps.append(int(count))
  if not pads and steps:
    return [min(steps)] * len(steps)
  return steps


def may_end_apart(parts: Sequence[dataset_lib.DistributedDataset],
                  pads: bool) -> bool:
  """Whether a worker may give empty batches: ``pads`` (ended shares are
  padded), and the shares are not known to hold as many steps each."""
  if not pads or len(parts) < 2:
    return False
  steps = steps_held(parts, pads)
  return steps is None or len(set(steps)) > 1


def empty_values(part: iterator_lib.DistributedIterator,
                 spec: Optional[SpecNest] = None) -> list[Nest]:
  """Per replica of ``part``'s worker, its empty batch (``layout.dummy``
  of ``spec``, by default the part's element spec), where that replica's
  input goes."""
  layout = part._layout  # pylint: disable=protected-access
  if spec is None:
    spec = part.element_spec
  values = []
  for replica_spec, target in zip(replica_specs(spec, layout.num_replicas),
                                  layout.targets):
    with tf.device(target or layout.host):
      values.append(layout_lib.dummy(replica_spec))
  return values


def value_or_empty(part: iterator_lib.DistributedIterator,
                   optional: tf.experimental.Optional) -> list[Nest]:
  """In a graph: per replica of ``part``'s worker, its value from
  ``optional`` (the part's ``get_next_as_optional``), or its empty batch
  when the worker's share has ended."""
  layout = part._layout  # pylint: disable=protected-access
  count = layout.num_replicas
  with tf.device(layout.host):
    return tf.cond(optional.has_value(),
                   lambda: replica_values(optional.get_value(), count),
                   lambda: empty_values(part, optional.element_spec))
