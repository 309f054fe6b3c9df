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
per leaf: the same structure as one machine gives (``input.multi_worker``).

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

from typing import Callable, Optional

import tensorflow as tf

from compat_distribute.input import auto_shard
from compat_distribute.input import build
from compat_distribute.input import contexts
from compat_distribute.input import dataset as dataset_lib
from compat_distribute.input import layout as layout_lib
from compat_distribute.input.multi_worker import MultiWorkerDataset
from compat_distribute.input import options as options_lib
from compat_distribute.input import rebatch
from compat_distribute.input.workers import InputWorkers
from compat_distribute.runtime import logs
from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest

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
                       method: str) -> Optional[MultiWorkerDataset]:
  """Each worker reads ``dataset`` and keeps its replicas' pieces of every
  global batch (``workers.auto_shard``: its share as TensorFlow's
  ``MultiWorkerMirroredStrategy`` cuts it, ``input.auto_shard``); None
  (with a warning) when the pipeline cannot leave the client."""
  build.check_dataset(dataset, method)
  n = workers.num_replicas_in_sync
  rebatch.check_splittable(dataset.element_spec, n, method)
  if workers.auto_shard:
    return _auto_sharded(workers, dataset, settings)
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
  return MultiWorkerDataset(tuple(parts), workers.strategy,
                            _pads(workers, dataset, cardinality))


def _auto_sharded(workers: InputWorkers, dataset: tf.data.Dataset,
                  settings: options_lib.InputSettings
                  ) -> Optional[MultiWorkerDataset]:
  """Each worker's pipeline of per-replica batches, made here (so that a
  FILE policy without files fails here, as on TensorFlow's every worker)
  and rebuilt on that worker; its replicas take one each per step."""
  count = len(workers.per_worker)
  k = auto_shard.replicas_per_worker([len(d) for _, d in workers.per_worker])
  made = [auto_shard.worker_pipeline(dataset, count, index,
                                     workers.num_replicas_in_sync)
          for index in range(count)]
  try:
    graphs = [serialized(local) for local in made]
  except NotPortableError as e:
    _warn_once(str(e))
    return None
  parts = []
  for (host, devices), local, graph in zip(workers.per_worker, made, graphs):
    pipeline = rebuilt(graph, local.element_spec, host)
    layout = layout_lib.Layout("whole" if k == 1 else "stream", devices, host,
                               settings.fetch_to_device)
    with tf.device(host):
      pipeline = build.prefetched(pipeline, settings.buffer_size * k)
    parts.append(dataset_lib.DistributedDataset(
        layout, pipeline, build.cardinality(local), strategy=workers.strategy))
  # (The shares' cardinalities cannot tell endless input; the dataset's can.)
  return MultiWorkerDataset(tuple(parts), workers.strategy,
                            _pads(workers, dataset, build.cardinality(dataset)))


def _pads(workers: InputWorkers, dataset: tf.data.Dataset,
          cardinality: build.Cardinality) -> bool:
  """Whether a worker whose share ended gives its replicas empty batches
  until every share has ended (``input.shares``), and a worker's last
  round that only some of its replicas get gives the others empty ones:
  TensorFlow's rule (its ``enable_get_next_as_optional``).  Under
  ``MultiWorkerMirroredStrategy`` (``workers.auto_shard``), for input not
  known to be endless; else where the strategy asks for partial batches
  and the shapes are not all static (``build.partial_rounds_wanted``)."""
  if workers.auto_shard:
    return cardinality != tf.data.INFINITE_CARDINALITY
  return build.partial_rounds_wanted(workers, dataset, cardinality)


def _pieces(first: int, count: int) -> Callable[..., Nest]:
  @tf.autograph.experimental.do_not_convert
  def select(*pieces):
    return pieces[first] if count == 1 else tuple(pieces[first:first + count])
  return select


def distribute_datasets_from_function(workers: InputWorkers,
                                      dataset_fn: DatasetFn,
                                      settings: options_lib.InputSettings,
                                      method: str) -> MultiWorkerDataset:
  """``dataset_fn`` called once per worker, on that worker's CPU, with
  ``InputContext(num_workers, worker, num_replicas)``."""
  parts, pads = [], False
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
    padded = _pads(workers, dataset, cardinality)
    pads = pads or padded
    parts.append(dataset_lib.DistributedDataset(
        layout, pipeline, cardinality, partial_rounds=padded,
        strategy=workers.strategy))
  return MultiWorkerDataset(tuple(parts), workers.strategy, pads)
