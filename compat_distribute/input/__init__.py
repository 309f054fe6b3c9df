"""Distributed input: what the strategies' input methods call.

The strategies call only the functions below; each validates its arguments
and hands the work to one module:

* ``build``     -- the host ``tf.data`` pipeline and its ``Layout``;
* ``rebatch``   -- splitting each global batch into per-replica pieces;
* ``layout`` / ``fetch`` -- reading one step and placing it on the devices;
* ``dataset`` / ``iterator`` -- ``DistributedDataset`` / ``DistributedIterator``
  and their ``TypeSpec``\\ s (TF2 API);
* ``iterator_v1`` -- the initializable input iterator of the v1 API;
* ``numpy_input`` -- ``experimental_make_numpy_dataset``;
* ``value_fn``  -- ``experimental_distribute_values_from_function``;
* ``contexts``  -- ``InputContext`` and ``ValueContext``;
* ``options``   -- checking ``tf.distribute.InputOptions``;
* ``workers``   -- ``InputWorkers``, what the strategy tells the input;
* ``per_worker`` / ``multi_worker`` -- replicas on several workers of a
  cluster: a pipeline on each worker, and the dataset and iterator that
  join their steps.

``workers`` is the ``InputWorkers`` the strategy hands in (``workers``):
its replicas' devices, the input host, the strategy whose scope the input
may be read under, and the per-strategy choices; nothing else of the
strategy is read here.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import tensorflow as tf

from compat_distribute.input import build
from compat_distribute.input import fetch
from compat_distribute.input import numpy_input as numpy_lib
from compat_distribute.input import options as options_lib
from compat_distribute.input import per_worker
from compat_distribute.input.contexts import InputContext
from compat_distribute.input.contexts import ValueContext
from compat_distribute.input.dataset import DistributedDataset
from compat_distribute.input.iterator import DistributedIterator
from compat_distribute.input.iterator_v1 import InputIterator
from compat_distribute.input.value_fn import distribute_values_from_function
from compat_distribute.input.workers import InputWorkers
from compat_distribute.runtime.types import InputOptions
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import Session

__all__ = [
    "DistributedDataset", "DistributedIterator", "InputContext",
    "InputIterator", "InputWorkers", "ValueContext", "distribute_dataset",
    "distribute_datasets_from_function", "distribute_values_from_function",
    "make_dataset_iterator", "make_input_fn_iterator", "make_numpy_dataset",
]


def distribute_dataset(workers: InputWorkers, dataset: tf.data.Dataset,
                       options: InputOptions) -> DistributedDataset:
  """``experimental_distribute_dataset``: each global batch of ``dataset``
  is split over the replicas (one replica: passed through)."""
  method = "experimental_distribute_dataset"
  one_replica = workers.num_replicas_in_sync == 1
  settings = options_lib.settings_from(options, method,
                                       may_ignore_placement=one_replica)
  if workers.per_worker:
    distributed = per_worker.distribute_dataset(workers, dataset, settings,
                                                method)
    if distributed is not None:
      return distributed
  layout, host = build.split_pipeline(workers, dataset, settings, method)
  return DistributedDataset(layout, host, build.cardinality(dataset),
                            strategy=workers.strategy)


def distribute_datasets_from_function(workers: InputWorkers,
                                      dataset_fn: Callable[[Any], Any],
                                      options: InputOptions
                                      ) -> DistributedDataset:
  """``distribute_datasets_from_function``: ``dataset_fn`` is called once
  with ``InputContext(1, 0, num_replicas)``; its elements go to replicas
  0, 1, ..., n-1, 0, ... in turn."""
  method = "distribute_datasets_from_function"
  settings = options_lib.settings_from(
      options, method, per_replica_fetch_is_per_worker=(
          workers.per_replica_input_is_per_worker))
  if workers.per_worker:
    return per_worker.distribute_datasets_from_function(
        workers, dataset_fn, settings, method)
  dataset = build.call_input_fn(workers, dataset_fn, method)
  layout, host = build.stream_pipeline(workers, dataset, settings)
  cardinality = build.cardinality(dataset)
  return DistributedDataset(
      layout, host, cardinality,
      partial_rounds=build.partial_rounds_wanted(workers, dataset,
                                                 cardinality),
      strategy=workers.strategy)


def make_numpy_dataset(workers: InputWorkers, numpy_input: Nest,
                       session: Optional[Session]) -> tf.data.Dataset:
  """``experimental_make_numpy_dataset`` on the strategy's input device."""
  return numpy_lib.make_numpy_dataset(
      workers.host, numpy_input, session)


def make_dataset_iterator(workers: InputWorkers,
                          dataset: tf.data.Dataset) -> InputIterator:
  """v1 ``make_dataset_iterator``: like ``distribute_dataset``, as an
  initializable input iterator."""
  method = "make_dataset_iterator"
  settings = options_lib.InputSettings()
  layout, host = build.split_pipeline(workers, dataset, settings, method)
  unsplit = None
  if layout.kind == "rounds" and fetch.building_tf1_graph():
    unsplit = build.host_pipeline(layout, dataset, settings)
  return InputIterator(layout, host, strategy=workers.strategy,
                       unsplit=unsplit)


def make_input_fn_iterator(workers: InputWorkers, input_fn: Callable[[Any],
                           Any],
                           replication_mode: Any = None) -> InputIterator:
  """v1 ``make_input_fn_iterator``: ``input_fn`` is called once with
  ``InputContext(1, 0, num_replicas)`` (PER_WORKER, the only mode)."""
  method = "make_input_fn_iterator"
  per_worker = tf.distribute.InputReplicationMode.PER_WORKER
  if replication_mode is not None and replication_mode != per_worker:
    raise ValueError(
        f"{method} supports only tf.distribute.InputReplicationMode."
        f"PER_WORKER (one input_fn call for all replicas), got "
        f"{replication_mode!r}. Pass replication_mode=InputReplicationMode."
        "PER_WORKER (the default).")
  source = build.call_input_fn(workers, input_fn, method, allow_callable=True)
  if isinstance(source, tf.data.Dataset):
    layout, source = build.stream_pipeline(workers, source,
                                           options_lib.InputSettings())
  else:
    layout = build.callable_layout(workers)
  return InputIterator(layout, source,
                       strategy=workers.strategy)
