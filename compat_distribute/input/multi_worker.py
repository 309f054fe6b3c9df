"""``MultiWorkerDataset`` / ``MultiWorkerIterator``: a step's input from
replicas' pipelines on several workers (built by ``input.per_worker``).

Each worker has its own ``DistributedDataset`` (its pipeline on its CPU, its
replicas' devices); a step is every worker's step, in worker order, as one
``PerReplica`` per leaf -- the structure one machine gives.  Both are
composite tensors whose components are the workers' ``tf.data`` datasets or
iterators, so they pass into a ``tf.function`` and Keras takes the dataset.
Where the workers' shares hold different numbers of steps, a worker whose
share ended gives empty batches until every share has ended, as in
TensorFlow's ``MultiWorkerMirroredStrategy`` (``input.shares``).

>>> from compat_distribute.input import dataset, layout
>>> def share(rows):  # a worker's share: 2-row batches of range(rows)
...   where = layout.Layout("whole", ("/cpu:0",), "/cpu:0", False)
...   return dataset.DistributedDataset(
...       where, tf.data.Dataset.range(rows).batch(2), (rows + 1) // 2)
>>> data = MultiWorkerDataset((share(4), share(2)), pads=True)
>>> [[v.numpy().tolist() for v in step.values] for step in data]
[[[0, 1], [0, 1]], [[2, 3], []]]
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute.input import dataset as dataset_lib
from compat_distribute.input import iterator as iterator_lib
from compat_distribute.input import layout as layout_lib
from compat_distribute.input import shares
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest
from compat_distribute.runtime.types import StrategyLike


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


_CompositeTensor = _tf_compat.CompositeTensor
TFOptional = tf.experimental.Optional


class MultiWorkerDataset(tf.distribute.DistributedDataset, _CompositeTensor,
                         _tf_private.KerasDistributedDatasetMarker):
  """Steps of input for replicas on several workers: one
  ``DistributedDataset`` per worker, read on that worker.  ``pads``: a
  worker whose share ended gives empty batches until every share has ended
  (TensorFlow's ``MultiWorkerMirroredStrategy``); else the input ends with
  the shortest share."""

  def __init__(self, parts: tuple[dataset_lib.DistributedDataset, ...],  # pylint: disable=super-init-not-called
               strategy: Optional[StrategyLike] = None,
               pads: bool = False) -> None:
    self._parts = tuple(parts)
    self._strategy = strategy
    # Only where the shares may end apart: shares known to hold as many
    # steps each are read without the per-step question (and their
    # element spec keeps its batch dimension).
    self._pads = shares.may_end_apart(self._parts, pads)

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
      return MultiWorkerIterator(parts, self._strategy, pads=self._pads)
    _wait_until_made(parts)
    return MultiWorkerIterator(parts, self._strategy,
                               steps=shares.steps_held(self._parts, self._pads),
                               pads=self._pads)

  @property
  def element_spec(self) -> SpecNest:
    """The spec of a step: its batch dimension unknown where the workers'
    shares may end apart."""
    return shares.joined_spec([p.element_spec for p in self._parts],
                              self._counts, self._pads)

  @property
  def cardinality(self) -> Union[int, tf.Tensor]:
    """The cardinality of the dataset the first worker reads (see
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
        tuple(p._type_spec for p in self._parts), self._pads  # pylint: disable=protected-access
    ).with_strategy(self._strategy)


class MultiWorkerIterator(iterator_lib.IterationProtocol,
                          tf.distribute.DistributedIterator, _CompositeTensor):
  """Iterates a ``MultiWorkerDataset``: each worker's iterator lives on
  that worker.

  The end of input, eagerly: a worker's read that fails at the end would
  fail only after it returned (a remote op reports its error late: at the
  next use of the value, building its type spec), and the error would stay
  on the client's executor.  So an eager read never runs past the end:
  while each worker's steps left are known (from the workers'
  cardinalities, counted down here), a worker whose share ended is not
  read (its replicas get empty batches, ``input.shares``) and the input
  ends when every share has ended, for free; else (unknown cardinality, or
  the iterator was also passed into a ``tf.function``, which reads it where
  this count cannot see) every worker's read is an Optional whose
  ``has_value`` is awaited -- one more round trip per step.  A read that
  fails otherwise (a lost worker: its connection reset or refused) raises
  TensorFlow's error, of its class, with the worker whose input it was
  reading added to the message.
  """

  def __init__(self, parts: tuple[iterator_lib.DistributedIterator, ...],  # pylint: disable=super-init-not-called
               strategy: Optional[StrategyLike] = None,
               steps: Optional[list[float]] = None,
               pads: bool = False) -> None:
    self._parts = tuple(parts)
    self._strategy = strategy
    # Per worker, the eager steps left, or None when not known (see the
    # class docstring).
    self._steps_left = steps
    # A worker whose share ended gives empty batches (input.shares).
    self._pads = bool(pads)
    # The workers whose share ended, found by uncounted eager reads.
    self._ended: set[int] = set()

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
    if not self._pads:
      return self._joined([p.get_next() for p in self._parts])
    optionals = [p.get_next_as_optional() for p in self._parts]
    more = tf.reduce_any(tf.stack([o.has_value() for o in optionals]))
    # Every share ended: reading one more element raises OutOfRangeError.
    go_on = tf.cond(more, lambda: tf.constant(True),
                    self._parts[0]._end_of_input)  # pylint: disable=protected-access
    with tf.control_dependencies([go_on]):
      return self._padded_in_graph(optionals)

  def _padded_in_graph(self, optionals: list[TFOptional]) -> Nest:
    per_replica = []
    for part, optional in zip(self._parts, optionals):
      per_replica += shares.value_or_empty(part, optional)
    return shares.joined(per_replica)

  def _next_eagerly(self) -> Optional[Nest]:
    """The next step's input, or None at the end of input (see the class
    docstring).

    Uncounted, every worker's reads start before any answer is awaited;
    they are Optionals, so the end of input reaches the client as a value,
    as one machine's iterator reports it, never as a remote op's error.
    """
    left = self._steps_left
    if left is not None:
      if not any(n > 0 for n in left):
        return None
      self._steps_left = [n - 1 for n in left]
      values = [_reading(p, p.get_next) if n > 0 else None
                for p, n in zip(self._parts, left)]
      for part, value in zip(self._parts, values):
        # The step waits for these values anyway (its trace type needs
        # their shapes); waiting here names the worker whose read failed.
        if value is not None:
          _reading(part, lambda v=value: _shapes(v))
      return self._joined(values)
    if self._ended and (not self._pads or
                        len(self._ended) == len(self._parts)):
      return None
    reads = {i: _reading(p, p.start_reads) for i, p in enumerate(self._parts)
             if i not in self._ended}
    flags = {i: [o.has_value() for o in read] for i, read in reads.items()}
    values = [None] * len(self._parts)
    for i, flag in flags.items():
      part = self._parts[i]
      flag = _reading(part, lambda f=flag: [bool(x) for x in f])
      if all(flag) or (any(flag) and part._partial_rounds):  # pylint: disable=protected-access
        values[i] = part.step_from(reads[i], flag)
        continue
      self._ended.add(i)
      if not self._pads:
        return None
    if len(self._ended) == len(self._parts):
      return None
    return self._joined(values)

  def _joined(self, values: list[Optional[Nest]]) -> Nest:
    """The step from each worker's value; None (eagerly): its share
    ended, its replicas get empty batches."""
    per_replica = []
    for part, value, count in zip(self._parts, values, self._counts):
      per_replica += (shares.empty_values(part) if value is None else
                      shares.replica_values(value, count))
    return shares.joined(per_replica)

  def get_next_as_optional(self) -> tf.experimental.Optional:
    """The next step's input as an Optional: empty at the end of input."""
    if tf.executing_eagerly():
      step = self._next_eagerly()
      if step is None:
        return TFOptional.empty(self.element_spec)
      return TFOptional.from_value(step)
    optionals = [p.get_next_as_optional() for p in self._parts]
    has_value = tf.stack([o.has_value() for o in optionals])
    if self._pads:
      step = self._padded_in_graph(optionals)
      spec = tf.nest.map_structure(tf.type_spec_from_value, step)
      return tf.cond(tf.reduce_any(has_value),
                     lambda: TFOptional.from_value(step),
                     lambda: TFOptional.empty(spec))
    spec = shares.joined_spec([o.element_spec for o in optionals],
                              self._counts)
    return tf.cond(
        tf.reduce_all(has_value),
        lambda: TFOptional.from_value(self._joined(
            [o.get_value() for o in optionals])),
        lambda: TFOptional.empty(spec))

  @property
  def element_spec(self) -> SpecNest:
    """The spec of a step: its batch dimension unknown where the workers'
    shares may end apart."""
    return shares.joined_spec([p.element_spec for p in self._parts],
                              self._counts, self._pads)

  @property
  def _type_spec(self) -> "MultiWorkerIteratorSpec":
    return MultiWorkerIteratorSpec(
        tuple(p._type_spec for p in self._parts), self._pads  # pylint: disable=protected-access
    ).with_strategy(self._strategy)


class _MultiWorkerSpec(tf.TypeSpec):
  """Shared ``TypeSpec`` of the multi-worker dataset and iterator: one spec
  per worker's part, and whether ended shares are padded; the components
  are the parts' components."""

  __slots__ = ("_part_specs", "_pads", "_strategy")

  def __init__(self, part_specs: tuple[tf.TypeSpec, ...],
               pads: bool = False) -> None:
    self._part_specs = tuple(part_specs)
    self._pads = bool(pads)
    self._strategy = None

  def with_strategy(self, strategy: Optional[StrategyLike]
                    ) -> "_MultiWorkerSpec":
    self._strategy = strategy
    return self

  def _serialize(self) -> tuple[tuple[tf.TypeSpec, ...], bool]:
    return (self._part_specs, self._pads)

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
    return MultiWorkerDataset(self._parts_from(components), self._strategy,
                              self._pads)


class MultiWorkerIteratorSpec(_MultiWorkerSpec):
  """``TypeSpec`` of ``MultiWorkerIterator``."""

  __slots__ = ()

  @property
  def value_type(self) -> type:
    return MultiWorkerIterator

  def _from_components(self, components: Sequence[Nest]
                       ) -> MultiWorkerIterator:
    return MultiWorkerIterator(self._parts_from(components), self._strategy,
                               pads=self._pads)


layout_lib.forbid_enumerate_in_tf_function(MultiWorkerDataset)
layout_lib.forbid_enumerate_in_tf_function(MultiWorkerIterator)
