"""Input for a cluster: a pipeline on each worker feeds that worker's replicas.

When a strategy's replicas live on several workers (``InputWorkers.per_worker``
lists each worker's input host and replica devices), reading every batch on
the client and sending it over the network makes the input the bottleneck.
Here each worker runs its own ``tf.data`` pipeline, on its own CPU:

* ``distribute_dataset`` (``experimental_distribute_dataset``): the dataset's
  pipeline is serialised once (TensorFlow's ``DatasetToGraphV2``) and rebuilt
  on every worker (``DatasetFromGraph``); each worker cuts every global batch
  exactly as one machine would cut it for all the replicas and keeps its own
  replicas' pieces.  So the replicas get the same values as on one machine
  with as many replicas.  A pipeline that cannot be rebuilt elsewhere (it
  holds an unseeded random op, a ``py_function`` or other state of this
  process) stays on the client, as on one machine, with a warning naming
  why: ``distribute_dataset`` then returns None.
* ``distribute_datasets_from_function``: ``dataset_fn`` is called once per
  worker, under that worker's CPU, with that worker's ``InputContext``
  (``num_input_pipelines`` = the number of workers).

A step's input is the workers' values in worker order, as one ``PerReplica``
per leaf: the same structure as one machine gives.

>>> ds = tf.data.Dataset.range(8).batch(4)
>>> graph = serialized(ds)
>>> [x.numpy().tolist() for x in rebuilt(graph, ds.element_spec, "/cpu:0")]
[[0, 1, 2, 3], [4, 5, 6, 7]]
>>> serialized(ds.map(lambda x: x + tf.random.uniform([], 0, 2, tf.int64)))
Traceback (most recent call last):
...
compat_distribute.input.per_worker.NotPortableError: the pipeline holds state of this process: ...
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute.input import build
from compat_distribute.input import contexts
from compat_distribute.input import dataset as dataset_lib
from compat_distribute.input import iterator as iterator_lib
from compat_distribute.input import layout as layout_lib
from compat_distribute.input import options as options_lib
from compat_distribute.input import rebatch
from compat_distribute.input.workers import InputWorkers
from compat_distribute.runtime import logs
from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.values import distributed as values_lib

# DatasetToGraphV2's external_state_policy: fail on state of this process.
_FAIL_ON_EXTERNAL_STATE = 2
# What distribute_datasets_from_function calls, once per worker.
DatasetFn = Callable[[contexts.InputContext], tf.data.Dataset]
_warned: set[str] = set()


class NotPortableError(Error, ValueError):
  """A ``tf.data`` pipeline that cannot be rebuilt on another task."""


def serialized(dataset: tf.data.Dataset) -> tf.Tensor:
  """``dataset``'s pipeline as a serialised graph, to rebuild elsewhere.

  Raises:
    NotPortableError: the pipeline uses state of this process.
  """
  try:
    return tf.raw_ops.DatasetToGraphV2(
        input_dataset=tf.data.experimental.to_variant(dataset),
        external_state_policy=_FAIL_ON_EXTERNAL_STATE,
        strip_device_assignment=True)
  except (tf.errors.FailedPreconditionError, tf.errors.InvalidArgumentError,
          tf.errors.UnimplementedError) as e:
    reason = e.message.split("Failed to serialize the input pipeline graph:"
                             )[-1].split("[Op:")[0].strip()
    raise NotPortableError(
        f"the pipeline holds state of this process: {reason}") from None


def rebuilt(graph: tf.Tensor, element_spec: SpecNest,
            host: str) -> tf.data.Dataset:
  """The pipeline ``serialized`` returned, rebuilt to run on ``host``."""
  with tf.device(host):
    variant = tf.raw_ops.DatasetFromGraph(graph_def=graph)
    return tf.data.experimental.from_variant(variant, element_spec)


def _warn_once(reason: str) -> None:
  if reason not in _warned:
    _warned.add(reason)
    logs.logger().warning(
        "experimental_distribute_dataset: the input pipeline stays on the "
        "client and every batch is sent to the workers, because %s. To read "
        "input on the workers, seed random ops (e.g. shuffle(n, seed=1)) and "
        "keep Python functions out of the pipeline, or build it per worker "
        "with distribute_datasets_from_function.", reason)


def distribute_dataset(workers: InputWorkers, dataset: tf.data.Dataset,
                       settings: options_lib.InputSettings,
                       method: str) -> Optional["MultiWorkerDataset"]:
  """Each worker reads ``dataset`` and keeps its replicas' pieces of every
  global batch; None (with a warning) when the pipeline cannot leave the
  client."""
  build.check_dataset(dataset, method)
  n = workers.num_replicas_in_sync
  rebatch.check_splittable(dataset.element_spec, n, method)
  try:
    graph = serialized(dataset)
  except NotPortableError as e:
    _warn_once(str(e))
    return None
  cardinality = build.cardinality(dataset)
  parts, first = [], 0
  for host, devices in workers.per_worker:
    k = len(devices)
    local = rebuilt(graph, dataset.element_spec, host)
    with tf.device(host):
      if n > 1:
        local = rebatch.split_dataset(local, n, method).map(
            _pieces(first, k), num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True)
      layout = layout_lib.Layout("whole" if k == 1 else "rounds", devices,
                                 host, settings.fetch_to_device)
      local = build.prefetched(local, settings.buffer_size)
    parts.append(dataset_lib.DistributedDataset(
        layout, local, cardinality, strategy=workers.strategy))
    first += k
  return MultiWorkerDataset(tuple(parts), workers.strategy)


def _pieces(first: int, count: int) -> Callable[..., Nest]:
  @tf.autograph.experimental.do_not_convert
  def select(*pieces):
    return pieces[first] if count == 1 else tuple(pieces[first:first + count])
  return select


def distribute_datasets_from_function(workers: InputWorkers,
                                      dataset_fn: DatasetFn,
                                      settings: options_lib.InputSettings,
                                      method: str) -> "MultiWorkerDataset":
  """``dataset_fn`` called once per worker, on that worker's CPU, with
  ``InputContext(num_workers, worker, num_replicas)``."""
  parts = []
  count = len(workers.per_worker)
  for index, (host, devices) in enumerate(workers.per_worker):
    local = InputWorkers(
        devices=tuple(devices), host=host, strategy=workers.strategy,
        input_pipelines=(count, index),
        per_replica_input_is_per_worker=workers.per_replica_input_is_per_worker,
        partial_batches=workers.partial_batches)
    context = contexts.InputContext(count, index,
                                    workers.num_replicas_in_sync)
    dataset = build.call_input_fn(local, dataset_fn, method, context=context)
    layout, pipeline = build.stream_pipeline(local, dataset, settings)
    with tf.device(host):  # where the dataset is
      cardinality = build.cardinality(dataset)
    parts.append(dataset_lib.DistributedDataset(
        layout, pipeline, cardinality,
        partial_rounds=build.partial_rounds_wanted(local, dataset,
                                                   cardinality),
        strategy=workers.strategy))
  return MultiWorkerDataset(tuple(parts), workers.strategy)


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
    if tf.executing_eagerly():
      _wait_until_made(parts)
    return MultiWorkerIterator(parts, self._strategy)

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


class MultiWorkerIterator(tf.distribute.DistributedIterator, _CompositeTensor):
  """Iterates a ``MultiWorkerDataset``: each worker's iterator lives on
  that worker."""

  def __init__(self, parts: tuple[iterator_lib.DistributedIterator, ...],  # pylint: disable=super-init-not-called
               strategy: Optional[StrategyLike] = None) -> None:
    self._parts = tuple(parts)
    self._strategy = strategy

  def __repr__(self) -> str:
    hosts = [p._layout.host for p in self._parts]  # pylint: disable=protected-access
    return f"MultiWorkerIterator(hosts={hosts!r})"

  @property
  def _counts(self) -> list[int]:
    return [p._layout.num_replicas for p in self._parts]  # pylint: disable=protected-access

  def __iter__(self) -> "MultiWorkerIterator":
    return self

  def __next__(self) -> Nest:
    try:
      return self.get_next()
    except tf.errors.OutOfRangeError:
      raise StopIteration from None

  def next(self) -> Nest:
    """Same as ``next(iterator)``."""
    return self.__next__()

  def get_next(self, name: Optional[str] = None) -> Nest:
    """The next step's input from every worker.

    Raises:
      tf.errors.OutOfRangeError: the input is exhausted.
    """
    del name
    return joined([p.get_next() for p in self._parts], self._counts)

  def get_next_as_optional(self) -> tf.experimental.Optional:
    """The next step's input as an Optional: empty when any worker's input
    is exhausted."""
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
