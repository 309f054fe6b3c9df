"""``MultiWorkerDataset`` / ``MultiWorkerIterator``: a step's input from
replicas' pipelines on several workers (built by ``input.per_worker``).

Each worker has its own ``DistributedDataset`` (its pipeline on its CPU, its
replicas' devices); a step is every worker's step, in worker order, as one
``PerReplica`` per leaf -- the structure one machine gives.  Both are
composite tensors whose components are the workers' ``tf.data`` datasets or
iterators, so they pass into a ``tf.function`` and Keras takes the dataset.

>>> spec = tf.TensorSpec([2], tf.float32)
>>> joined_spec([spec, spec], [1, 1])
PerReplicaSpec(TensorSpec(shape=(2,), dtype=tf.float32, name=None), TensorSpec(shape=(2,), dtype=tf.float32, name=None))
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence, Union

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute.input import dataset as dataset_lib
from compat_distribute.input import iterator as iterator_lib
from compat_distribute.input import layout as layout_lib
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.values import distributed as values_lib


def _wait_until_made(iterators: Sequence[iterator_lib.DistributedIterator]
                     ) -> None:
  """Returns once every worker has made its iterator.

  Eager ops on a remote worker go down one ordered stream, but a
  ``tf.function`` call reaches the worker another way: one that uses an
  iterator at once could run before the worker made it ("the iterator has
  not been initialized", measured with TensorFlow 2.21).  Reading a value
  that depends on each iterator, after those ops in their stream, waits for
  them.
  """
  for iterator in iterators:
    for handle in tf.nest.flatten(iterator._host, expand_composites=True):  # pylint: disable=protected-access
      if handle.dtype == tf.resource:
        tf.raw_ops.IteratorGetDevice(resource=handle).numpy()


def steps_held(parts: Sequence[dataset_lib.DistributedDataset]
               ) -> Optional[float]:
  """How many steps the workers' input holds (``math.inf``: endless), when
  every worker's cardinality says; else None.

  >>> steps_held([])
  inf
  """
  steps = math.inf
  for part in parts:
    # pylint: disable=protected-access
    count, layout = part._cardinality, part._layout
    if isinstance(count, tf.Tensor) or count == tf.data.INFINITE_CARDINALITY:
      continue
    if count < 0 or (layout.kind == "stream" and part._partial_rounds):
      return None
    if layout.kind == "stream":
      count //= layout.num_replicas
    steps = min(steps, int(count))
  return steps


def _shapes(value: Nest) -> list[tf.TensorShape]:
  return [leaf.shape for leaf in tf.nest.flatten(value, expand_composites=True)]


def _reading(part: iterator_lib.DistributedIterator,
             read: Callable[[], Nest]) -> Nest:
  """``read()``; an error of TensorFlow's runtime (a lost worker: its
  connection reset, refused) says which worker's input was being read."""
  try:
    return read()
  except tf.errors.OutOfRangeError:
    raise
  except tf.errors.OpError as e:
    if type(e) is tf.errors.OpError:  # pylint: disable=unidiomatic-typecheck
      raise
    host = part._layout.host  # pylint: disable=protected-access
    raise type(e)(e.node_def, e.op, f"{e.message} (while reading this "
                  f"step's input on {host})") from e


# -- joining the workers' steps ------------------------------------------------

def _replica_values(value: Nest, count: int) -> list[Nest]:
  if count == 1:
    return [value]
  return [values_lib.select_replica(i, value) for i in range(count)]


def _replica_specs(spec: SpecNest, count: int) -> list[SpecNest]:
  if count == 1:
    return [spec]
  return [tf.nest.map_structure(lambda s, i=i: s._value_specs[i], spec)  # pylint: disable=protected-access
          for i in range(count)]


def joined(values: Sequence[Nest], counts: Sequence[int]) -> Nest:
  """One step's input from each worker's step, as ``PerReplica`` leaves."""
  per_replica = []
  for value, count in zip(values, counts):
    per_replica += _replica_values(value, count)
  return layout_lib.wrap_per_replica(per_replica)


def joined_spec(specs: Sequence[SpecNest], counts: Sequence[int]) -> SpecNest:
  per_replica = []
  for spec, count in zip(specs, counts):
    per_replica += _replica_specs(spec, count)
  return layout_lib.regroup_specs(per_replica)


_CompositeTensor = _tf_compat.CompositeTensor


class MultiWorkerDataset(tf.distribute.DistributedDataset, _CompositeTensor,
                         _tf_private.KerasDistributedDatasetMarker):
  """Steps of input for replicas on several workers: one
  ``DistributedDataset`` per worker, read on that worker."""

  def __init__(self, parts: tuple[dataset_lib.DistributedDataset, ...],  # pylint: disable=super-init-not-called
               strategy: Optional[StrategyLike] = None) -> None:
    self._parts = tuple(parts)
    self._strategy = strategy

  def __repr__(self) -> str:
    hosts = [p._layout.host for p in self._parts]  # pylint: disable=protected-access
    return (f"MultiWorkerDataset(hosts={hosts!r}, "
            f"element_spec={self.element_spec!r})")

  @property
  def _counts(self) -> list[int]:
    return [p._layout.num_replicas for p in self._parts]  # pylint: disable=protected-access

  def __iter__(self) -> "MultiWorkerIterator":
    parts = tuple(iter(p) for p in self._parts)
    if not tf.executing_eagerly():
      return MultiWorkerIterator(parts, self._strategy)
    _wait_until_made(parts)
    return MultiWorkerIterator(parts, self._strategy,
                               steps=steps_held(self._parts))

  @property
  def element_spec(self) -> SpecNest:
    return joined_spec([p.element_spec for p in self._parts], self._counts)

  @property
  def cardinality(self) -> Union[int, tf.Tensor]:
    """The cardinality of the dataset each worker reads (see
    ``DistributedDataset.cardinality``)."""
    return self._parts[0].cardinality

  def reduce(self, initial_state: Nest,
             reduce_func: Callable[[Nest, Nest], Nest]) -> Nest:
    """Folds ``reduce_func(state, step_input)`` over every step."""
    iterator = iter(self)

    def body(optional, state):
      state = reduce_func(state, optional.get_value())
      return iterator.get_next_as_optional(), state

    _, state = tf.while_loop(
        lambda optional, state: optional.has_value(), body,
        (iterator.get_next_as_optional(), initial_state),
        parallel_iterations=1)
    return state

  @property
  def _type_spec(self) -> "MultiWorkerDatasetSpec":
    return MultiWorkerDatasetSpec(
        tuple(p._type_spec for p in self._parts)).with_strategy(self._strategy)  # pylint: disable=protected-access


class MultiWorkerIterator(iterator_lib.IterationProtocol,
                          tf.distribute.DistributedIterator, _CompositeTensor):
  """Iterates a ``MultiWorkerDataset``: each worker's iterator lives on
  that worker.

  The end of input, eagerly: a worker's read that fails at the end would
  fail only after it returned (a remote op reports its error late: at the
  next use of the value, building its type spec), and the error would stay
  on the client's executor.  So an eager read never runs past the end:
  while the steps left are known (from the workers' cardinalities, counted
  down here), the iterator ends when they are used up, for free; else
  (unknown cardinality, or the iterator was also passed into a
  ``tf.function``, which reads it where this count cannot see) every
  worker's read is an Optional whose ``has_value`` is awaited -- one more
  round trip per step.  A read that fails otherwise (a lost worker: its
  connection reset or refused) raises TensorFlow's error, of its class,
  with the worker whose input it was reading added to the message.
  """

  def __init__(self, parts: tuple[iterator_lib.DistributedIterator, ...],  # pylint: disable=super-init-not-called
               strategy: Optional[StrategyLike] = None,
               steps: Optional[float] = None) -> None:
    self._parts = tuple(parts)
    self._strategy = strategy
    # Eager steps left, or None when not known (see the class docstring).
    self._steps_left = steps

  def __repr__(self) -> str:
    hosts = [p._layout.host for p in self._parts]  # pylint: disable=protected-access
    return f"MultiWorkerIterator(hosts={hosts!r})"

  @property
  def _counts(self) -> list[int]:
    return [p._layout.num_replicas for p in self._parts]  # pylint: disable=protected-access

  def get_next(self, name: Optional[str] = None) -> Nest:
    """The next step's input from every worker.

    Raises:
      tf.errors.OutOfRangeError: the input is exhausted.
    """
    del name
    if tf.executing_eagerly():
      step = self._next_eagerly()
      if step is None:
        raise tf.errors.OutOfRangeError(None, None, "End of sequence")
      return step
    return joined([p.get_next() for p in self._parts], self._counts)

  def _next_eagerly(self) -> Optional[Nest]:
    """The next step's input, or None at the end of any worker's input
    (see the class docstring).

    Uncounted, every worker's reads start before any answer is awaited;
    they are Optionals, so the end of input reaches the client as a value,
    as one machine's iterator reports it, never as a remote op's error.
    """
    if self._steps_left is not None:
      if self._steps_left <= 0:
        return None
      self._steps_left -= 1
      values = [_reading(p, p.get_next) for p in self._parts]
      for part, value in zip(self._parts, values):
        # The step waits for these values anyway (its trace type needs
        # their shapes); waiting here names the worker whose read failed.
        _reading(part, lambda v=value: _shapes(v))
      return joined(values, self._counts)
    reads = [_reading(p, p.start_reads) for p in self._parts]
    flags = [[o.has_value() for o in read] for read in reads]
    for part, flag in zip(self._parts, flags):
      if not _reading(part, lambda f=flag: all(bool(x) for x in f)):
        return None
    return joined([p.step_from(r) for p, r in zip(self._parts, reads)],
                  self._counts)

  def get_next_as_optional(self) -> tf.experimental.Optional:
    """The next step's input as an Optional: empty when any worker's input
    is exhausted."""
    if tf.executing_eagerly():
      step = self._next_eagerly()
      if step is None:
        return tf.experimental.Optional.empty(self.element_spec)
      return tf.experimental.Optional.from_value(step)
    optionals = [p.get_next_as_optional() for p in self._parts]
    spec = joined_spec([o.element_spec for o in optionals], self._counts)
    counts = self._counts

    def value() -> Nest:
      return tf.experimental.Optional.from_value(
          joined([o.get_value() for o in optionals], counts))

    def empty() -> Nest:
      return tf.experimental.Optional.empty(spec)

    has_value = [o.has_value() for o in optionals]
    if tf.executing_eagerly():
      return value() if all(bool(h) for h in has_value) else empty()
    return tf.cond(tf.reduce_all(tf.stack(has_value)), value, empty)

  @property
  def element_spec(self) -> SpecNest:
    return joined_spec([p.element_spec for p in self._parts], self._counts)

  @property
  def _type_spec(self) -> "MultiWorkerIteratorSpec":
    return MultiWorkerIteratorSpec(
        tuple(p._type_spec for p in self._parts)).with_strategy(self._strategy)  # pylint: disable=protected-access


class _MultiWorkerSpec(tf.TypeSpec):
  """Shared ``TypeSpec`` of the multi-worker dataset and iterator: one spec
  per worker's part; the components are the parts' components."""

  __slots__ = ("_part_specs", "_strategy")

  def __init__(self, part_specs: tuple[tf.TypeSpec, ...]) -> None:
    self._part_specs = tuple(part_specs)
    self._strategy = None

  def with_strategy(self, strategy: Optional[StrategyLike]
                    ) -> "_MultiWorkerSpec":
    self._strategy = strategy
    return self

  def _serialize(self) -> tuple[tuple[tf.TypeSpec, ...]]:
    return (self._part_specs,)

  @property
  def _component_specs(self) -> tuple[tf.TypeSpec, ...]:
    return tuple(s._component_specs for s in self._part_specs)  # pylint: disable=protected-access

  def _to_components(self, value: Union["MultiWorkerDataset",
                                         "MultiWorkerIterator"]
                     ) -> tuple[Union[tf.data.Dataset, tf.data.Iterator], ...]:
    if isinstance(value, MultiWorkerIterator):
      # Read inside a tf.function from now on, maybe: stop counting.
      value._steps_left = None  # pylint: disable=protected-access
    return tuple(p._host for p in value._parts)  # pylint: disable=protected-access

  def _parts_from(self, components: Sequence[Nest]) -> tuple[Nest, ...]:
    return tuple(s.with_strategy(self._strategy)._from_components(c)  # pylint: disable=protected-access
                 for s, c in zip(self._part_specs, components))


class MultiWorkerDatasetSpec(_MultiWorkerSpec):
  """``TypeSpec`` of ``MultiWorkerDataset``."""

  __slots__ = ()

  @property
  def value_type(self) -> type:
    return MultiWorkerDataset

  def _from_components(self, components: Sequence[Nest]
                       ) -> MultiWorkerDataset:
    return MultiWorkerDataset(self._parts_from(components), self._strategy)


class MultiWorkerIteratorSpec(_MultiWorkerSpec):
  """``TypeSpec`` of ``MultiWorkerIterator``."""

  __slots__ = ()

  @property
  def value_type(self) -> type:
    return MultiWorkerIterator

  def _from_components(self, components: Sequence[Nest]
                       ) -> MultiWorkerIterator:
    return MultiWorkerIterator(self._parts_from(components), self._strategy)


layout_lib.forbid_enumerate_in_tf_function(MultiWorkerDataset)
layout_lib.forbid_enumerate_in_tf_function(MultiWorkerIterator)
