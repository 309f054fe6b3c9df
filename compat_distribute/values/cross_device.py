"""Cross-device reduction: two implementations behind one interface.

What a reduction computes (SUM, MEAN, ``IndexedSlices`` concatenated) and
its argument checks are ``reduction``'s; this module moves the values: to
one device and back out to the destinations, or by collective ops.

``reduce``, ``batch_reduce``, ``gather`` and ``broadcast`` take per-replica
values and *destinations* -- a device string, a variable or tensor (its
device), or a distributed value (the devices of its parts) -- and return a
tensor on the one destination device, or a ``Mirrored`` with one copy per
destination device.  ``all_reduce`` in replica context is a ``reduce`` whose
destinations are the per-replica value itself.

* ``ReduceToOneDevice`` (the default): ``add_n`` (or ``concat``) on one
  device -- the first destination unless one is given -- then a copy to each
  other destination device.
* ``CollectiveOps``: ``tf.raw_ops.CollectiveReduceV2`` /
  ``CollectiveGatherV2``, one op per replica device, for all-reduce and
  all-gather (other destinations and ``IndexedSlices`` use
  ``ReduceToOneDevice``).  Eagerly the per-device ops must run concurrently,
  so they are launched from a small thread pool.  See benchmarks/RESULTS.md
  for why it is not the default (on logical CPUs inside a ``tf.function``
  TensorFlow 2.21's function runtime never completes the collective).

Results match TensorFlow's: MEAN divides the sum with ``/`` (so integer
values give float64, as in TensorFlow), ``IndexedSlices`` are concatenated,
and a non-distributed value reduces to itself for MEAN and is rejected for
SUM when there are several replicas.

>>> import tensorflow as tf
>>> from compat_distribute.values.distributed import PerReplica
>>> ops = ReduceToOneDevice()
>>> ops
ReduceToOneDevice(reduce_to_device=None)
>>> x = PerReplica((tf.constant(1.0), tf.constant(3.0)))
>>> ops.reduce(tf.distribute.ReduceOp.MEAN, x, "/cpu:0")
<tf.Tensor: shape=(), dtype=float32, numpy=2.0>
"""
from __future__ import annotations

import concurrent.futures
import functools
import itertools
import threading
from typing import Any, Optional, Sequence

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.runtime import devices as devices_lib
from compat_distribute.values import distributed as values_lib
from compat_distribute.values.reduction import aggregate
from compat_distribute.runtime.types import Destinations
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReduceOpLike

ReduceOp = tf.distribute.ReduceOp
_eagerly_outside_functions = tf.compat.v1.executing_eagerly_outside_functions
_device = _tf_private.device  # tf.device, cheaper while tracing


def devices_of(destinations: Destinations) -> tuple[str, ...]:
  """The canonical device names ``destinations`` stands for.

  >>> devices_of("/cpu:1")
  ('/job:localhost/replica:0/task:0/device:CPU:1',)
  """
  # A name's canonical form depends on the mode and the device scope.
  context_key = (_eagerly_outside_functions(), _tf_private.current_device())
  if values_lib.is_distributed(destinations):
    return tuple(_canonicalize(getattr(v, "device", "") or devices_lib.HOST_CPU,
                               context_key) for v in destinations.values)
  if isinstance(destinations, str):
    if not destinations:
      raise ValueError(
          "destinations must name a device, got the empty string. Pass e.g. "
          "'/cpu:0', a variable, or a per-replica value.")
    return (_canonicalize(destinations, context_key),)
  device = getattr(destinations, "device", None)
  if device is None:
    raise ValueError(
        f"destinations must be a device string, a variable, a tensor or a "
        f"distributed value, got {destinations!r} of type "
        f"{type(destinations).__name__}.")
  return (_canonicalize(device or devices_lib.HOST_CPU, context_key),)


@functools.lru_cache(maxsize=512)
def _canonicalize(device: str, context_key: tuple[bool, str]) -> str:
  del context_key  # only keys the cache: canonicalize reads the context
  return devices_lib.canonicalize(device)


def copy_to(value: Nest, device: str) -> Nest:
  """``value`` (a tensor or IndexedSlices) copied onto ``device``."""
  with _device(device):
    if isinstance(value, tf.IndexedSlices):
      return tf.IndexedSlices(
          tf.identity(value.values), tf.identity(value.indices),
          None if value.dense_shape is None else tf.identity(value.dense_shape))
    return tf.identity(value)


def broadcast(value: Nest, devices: Sequence[str], reuse: bool = True) -> Nest:
  """``value`` on every device: one tensor for one device, else ``Mirrored``.

  With ``reuse``, ``value`` itself stands for the copy on its own device
  (once), saving a copy op.
  """
  copies = []
  used = set()
  for device in devices:
    if (reuse and device not in used and not isinstance(value, tf.IndexedSlices)
        and getattr(value, "device", None) == device):
      copies.append(value)
    else:
      copies.append(copy_to(value, device))
    used.add(device)
  return copies[0] if len(copies) == 1 else values_lib.Mirrored(copies)


def _single_in_place(value: Nest, devices: Sequence[str]) -> bool:
  """One replica value already where it should go: TensorFlow then returns
  a copy as it is (no MEAN division, so integers stay integers)."""
  return len(value.values) == 1 and devices_of(value) == tuple(devices)


class ReduceToOneDevice:
  """Reduces on one device and copies the result to the destinations.

  Args:
    reduce_to_device: where to sum; None means the first destination device
      (which saves a copy when it is one of the destinations).
  """

  name = "reduce_to_one_device"

  def __init__(self, reduce_to_device: Optional[str] = None) -> None:
    self._device = (devices_lib.canonicalize(reduce_to_device)
                    if reduce_to_device else None)

  def __repr__(self) -> str:
    return f"{type(self).__name__}(reduce_to_device={self._device!r})"

  def reduce(self, reduce_op: ReduceOpLike, value: Nest,
             destinations: Destinations) -> Nest:
    devices = devices_of(destinations)
    if _single_in_place(value, devices):
      return copy_to(value.values[0], devices[0])
    with _device(self._device or devices[0]):
      reduced = aggregate(value.values, reduce_op)
    return broadcast(reduced, devices)

  def batch_reduce(self, reduce_op: ReduceOpLike,
                   pairs: Sequence[Nest]) -> list[Nest]:
    return [self.reduce(reduce_op, v, d) for v, d in pairs]

  def gather(self, value: Nest, destinations: Destinations, axis: int) -> Nest:
    devices = devices_of(destinations)
    if _single_in_place(value, devices):
      return copy_to(value.values[0], devices[0])
    with _device(self._device or devices[0]):
      gathered = tf.concat(list(value.values), axis=axis)
    return broadcast(gathered, devices)


class CollectiveOps:
  """All-reduce / all-gather with TensorFlow's collective ops.

  Args:
    devices: the replicas' devices, in replica order (the collective group).
    timeout_seconds: how long a collective may wait for its peers
      (0: forever).
  """

  name = "collective_ops"
  _group_keys = itertools.count(1000)

  def __init__(self, devices: Sequence[str],
               timeout_seconds: float = 0) -> None:
    self._devices = tuple(devices_lib.canonicalize(d) for d in devices)
    self._group_key = next(CollectiveOps._group_keys)
    self._instance_keys = itertools.count(1)
    self._timeout = float(timeout_seconds)
    self._fallback = ReduceToOneDevice()
    self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
    self._lock = threading.Lock()

  def __repr__(self) -> str:
    return (f"{type(self).__name__}(devices={self._devices!r}, "
            f"group_key={self._group_key})")

  def _is_all_to_all(self, value: Nest, destinations: Destinations) -> bool:
    return (values_lib.is_distributed(value) and len(self._devices) > 1 and
            devices_of(value) == self._devices and
            devices_of(destinations) == self._devices and
            not any(isinstance(v, tf.IndexedSlices) for v in value.values))

  def reduce(self, reduce_op: ReduceOpLike, value: Nest,
             destinations: Destinations) -> Nest:
    if not self._is_all_to_all(value, destinations):
      return self._fallback.reduce(reduce_op, value, destinations)
    sums = self._launch("reduce", value.values)
    if reduce_op == ReduceOp.MEAN:
      n = len(sums)
      sums = [_on(s.device, lambda s=s: s / n) for s in sums]
    return values_lib.Mirrored(sums)

  def batch_reduce(self, reduce_op: ReduceOpLike,
                   pairs: Sequence[Nest]) -> list[Nest]:
    return [self.reduce(reduce_op, v, d) for v, d in pairs]

  def gather(self, value: Nest, destinations: Destinations, axis: int) -> Nest:
    if not self._is_all_to_all(value, destinations):
      return self._fallback.gather(value, destinations, axis)
    parts = value.values
    rank = parts[0].shape.rank
    if rank is None or axis == 0:
      return values_lib.Mirrored(self._launch("gather", parts))
    perm = [axis] + [d for d in range(rank) if d != axis]
    inverse = [perm.index(d) for d in range(rank)]
    moved = [_on(p.device, lambda p=p: tf.transpose(p, perm)) for p in parts]
    gathered = self._launch("gather", moved)
    return values_lib.Mirrored(
        [_on(g.device, lambda g=g: tf.transpose(g, inverse)) for g in gathered])

  def _launch(self, kind: str, parts: Sequence[Nest]) -> list[Nest]:
    with self._lock:
      instance_key = next(self._instance_keys)
    calls = [lambda i=i: self._one(kind, parts[i], i, instance_key)
             for i in range(len(parts))]
    if not tf.executing_eagerly():
      return [call() for call in calls]
    # Eagerly each op blocks until all peers have started: run them at once.
    if self._pool is None:
      self._pool = concurrent.futures.ThreadPoolExecutor(
          len(self._devices) - 1, thread_name_prefix="compat_distribute-coll")
    futures = [self._pool.submit(call) for call in calls[1:]]
    first = calls[0]()
    return [first] + [f.result() for f in futures]

  def _one(self, kind: str, part: Any, i: int, instance_key: int) -> Any:
    with _device(self._devices[i]):
      common = dict(group_size=len(self._devices), group_key=self._group_key,
                    instance_key=instance_key, ordering_token=[],
                    timeout_seconds=self._timeout)
      if kind == "reduce":
        return tf.raw_ops.CollectiveReduceV2(
            input=part, merge_op="Add", final_op="Id", **common)
      return tf.raw_ops.CollectiveGatherV2(input=part, **common)


def _on(device: str, fn: Any) -> Nest:
  with _device(device):
    return fn()
