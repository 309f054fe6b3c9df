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
* ``options``   -- checking ``tf.distribute.InputOptions``.

``extended`` is the strategy's ``StrategyExtended``; these functions use its
``worker_devices`` (one compute device per replica), ``_input_device`` (the
host CPU running the pipeline), ``_num_replicas_in_sync`` and
``_container_strategy()`` (the strategy whose scope the input may be read
under, besides none).
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from compat_distribute.input import build
from compat_distribute.input import fetch
from compat_distribute.input import numpy_input as numpy_lib
from compat_distribute.input import options as options_lib
from compat_distribute.input.contexts import InputContext
from compat_distribute.input.contexts import ValueContext
from compat_distribute.input.dataset import DistributedDataset
from compat_distribute.input.iterator import DistributedIterator
from compat_distribute.input.iterator_v1 import InputIterator
from compat_distribute.input.value_fn import distribute_values_from_function

__all__ = [
    "DistributedDataset", "DistributedIterator", "InputContext",
    "InputIterator", "ValueContext", "distribute_dataset",
    "distribute_datasets_from_function", "distribute_values_from_function",
    "make_dataset_iterator", "make_input_fn_iterator", "make_numpy_dataset",
]


def distribute_dataset(extended: Any, dataset: tf.data.Dataset,
                       options: Any) -> DistributedDataset:
  """``experimental_distribute_dataset``: each global batch of ``dataset``
  is split over the replicas (one replica: passed through)."""
  method = "experimental_distribute_dataset"
  one_replica = extended._num_replicas_in_sync == 1  # pylint: disable=protected-access
  settings = options_lib.settings_from(options, method,
                                       may_ignore_placement=one_replica)
  layout, host = build.split_pipeline(extended, dataset, settings, method)
  return DistributedDataset(layout, host, build.cardinality(dataset),
                            strategy=extended._container_strategy())  # pylint: disable=protected-access


def distribute_datasets_from_function(extended: Any,
                                      dataset_fn: Callable[[Any], Any],
                                      options: Any) -> DistributedDataset:
  """``distribute_datasets_from_function``: ``dataset_fn`` is called once
  with ``InputContext(1, 0, num_replicas)``; its elements go to replicas
  0, 1, ..., n-1, 0, ... in turn."""
  method = "distribute_datasets_from_function"
  settings = options_lib.settings_from(
      options, method, per_replica_fetch_is_per_worker=getattr(
          extended, "_per_replica_input_is_per_worker", False))
  dataset = build.call_input_fn(extended, dataset_fn, method)
  layout, host = build.stream_pipeline(extended, dataset, settings)
  cardinality = build.cardinality(dataset)
  return DistributedDataset(
      layout, host, cardinality,
      partial_rounds=build.partial_rounds_wanted(extended, dataset,
                                                 cardinality),
      strategy=extended._container_strategy())  # pylint: disable=protected-access


def make_numpy_dataset(extended: Any, numpy_input: Any,
                       session: Any) -> tf.data.Dataset:
  """``experimental_make_numpy_dataset`` on the strategy's input device."""
  return numpy_lib.make_numpy_dataset(
      extended._input_device, numpy_input, session)  # pylint: disable=protected-access


def make_dataset_iterator(extended: Any,
                          dataset: tf.data.Dataset) -> InputIterator:
  """v1 ``make_dataset_iterator``: like ``distribute_dataset``, as an
  initializable input iterator."""
  method = "make_dataset_iterator"
  settings = options_lib.InputSettings()
  layout, host = build.split_pipeline(extended, dataset, settings, method)
  unsplit = None
  if layout.kind == "rounds" and fetch.building_tf1_graph():
    unsplit = build.host_pipeline(layout, dataset, settings)
  return InputIterator(layout, host, strategy=extended._container_strategy(),  # pylint: disable=protected-access
                       unsplit=unsplit)


def make_input_fn_iterator(extended: Any, input_fn: Callable[[Any], Any],
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
  source = build.call_input_fn(extended, input_fn, method, allow_callable=True)
  if isinstance(source, tf.data.Dataset):
    layout, source = build.stream_pipeline(extended, source,
                                           options_lib.InputSettings())
  else:
    layout = build.callable_layout(extended)
  return InputIterator(layout, source,
                       strategy=extended._container_strategy())  # pylint: disable=protected-access
