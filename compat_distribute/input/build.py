"""Building the host input pipeline and its ``Layout`` for a strategy.

Everything here runs once per distributed dataset or input iterator; the
per-step work is in ``fetch.py``.  The pipeline runs on the strategy's input
device (``workers.host``, see ``InputWorkers``) and ends in a ``prefetch`` of
``buffer_size`` steps (``InputOptions.experimental_per_replica_buffer_size``).
"""
from __future__ import annotations

from typing import Any, Callable, Union

import numpy as np
import tensorflow as tf

from compat_distribute.input import layout as layout_lib
from compat_distribute.input import options as options_lib
from compat_distribute.input import rebatch
from compat_distribute.input.workers import InputWorkers
from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import SpecNest

# A dataset's cardinality: a NumPy int64 eagerly, else a Python int.
Cardinality = Union[int, np.int64]


class NotADatasetError(Error, TypeError, ValueError, AttributeError):
  """A dataset argument, or what an input function returned, is not a
  ``tf.data.Dataset``.

  TensorFlow 2.21 raises ``ValueError`` for ``None`` and for
  ``make_input_fn_iterator``, and ``AttributeError`` (a missing dataset
  attribute) for other values; this error is all of ``TypeError``,
  ``ValueError`` and ``AttributeError`` so handlers for any of them work.
  """


class NotCallableError(Error, TypeError, ValueError):
  """An input function argument is not callable.

  TensorFlow raises ``TypeError``, or ``ValueError`` for ``None``; this
  error is both.
  """


def _layout(workers: InputWorkers, kind: str,
            settings: options_lib.InputSettings) -> layout_lib.Layout:
  devices = workers.devices
  return layout_lib.Layout(kind if len(devices) > 1 else "whole", devices,
                           workers.host, settings.fetch_to_device)


def prefetched(dataset: tf.data.Dataset, steps: int) -> tf.data.Dataset:
  """``dataset`` prefetching ``steps`` elements (AUTOTUNE if negative)."""
  if steps < 0:  # tf.data.AUTOTUNE (times the number of replicas)
    return dataset.prefetch(tf.data.AUTOTUNE)
  return dataset.prefetch(steps) if steps > 0 else dataset


def check_dataset(dataset: tf.data.Dataset, method: str) -> None:
  """Raises ``NotADatasetError`` unless ``dataset`` is a ``tf.data.Dataset``."""
  if not isinstance(dataset, tf.data.Dataset):
    raise NotADatasetError(
        f"{method} expects a tf.data.Dataset of global batches, got "
        f"{dataset!r} of type {type(dataset).__name__}. Build one with "
        "tf.data, e.g. tf.data.Dataset.from_tensor_slices(x).batch("
        "global_batch_size); to build it per input pipeline, use "
        "distribute_datasets_from_function(dataset_fn).")


def cardinality(dataset: tf.data.Dataset) -> Cardinality:
  """``dataset``'s cardinality as a NumPy int64 when executing eagerly,
  else ``tf.data.UNKNOWN_CARDINALITY`` (what TensorFlow's distributed
  datasets report).

  >>> int(cardinality(tf.data.Dataset.range(5).repeat()))
  -1
  """
  if not tf.executing_eagerly():
    return tf.data.UNKNOWN_CARDINALITY
  return dataset.cardinality().numpy()


def partial_rounds_wanted(workers: InputWorkers, dataset: tf.data.Dataset,
                          cardinality: Cardinality) -> bool:
  """Whether iterating eagerly gives a last incomplete round of a
  ``"stream"`` pipeline, with empty values for the replicas that got none,
  instead of ending before it.

  TensorFlow's rule: only when the strategy asks for it
  (``workers.partial_batches``: its extended's
  ``enable_partial_batch_handling`` or, if that is absent,
  ``experimental_enable_get_next_as_optional``), the input is not known to
  be infinite and its elements' shapes are not all static (for ragged and
  sparse parts, the batch dimension).

  >>> workers = InputWorkers(("/device:CPU:0",), "/device:CPU:0",
  ...                        partial_batches=True)
  >>> partial_rounds_wanted(workers, tf.data.Dataset.range(9).batch(2), 5)
  True
  """
  if not workers.partial_batches or cardinality == tf.data.INFINITE_CARDINALITY:
    return False
  return not _has_static_shapes(dataset.element_spec)


def _has_static_shapes(element_spec: SpecNest) -> bool:
  for spec in tf.nest.flatten(element_spec):
    if isinstance(spec, (tf.SparseTensorSpec, tf.RaggedTensorSpec)):
      if spec.shape.rank and spec.shape[0] is None:
        return False
    elif not all(part.shape.is_fully_defined() for part in
                 tf.nest.flatten(spec, expand_composites=True)):
      return False
  return True


def split_pipeline(workers: InputWorkers, dataset: tf.data.Dataset,
                   settings: options_lib.InputSettings,
                   method: str) -> tuple[layout_lib.Layout, tf.data.Dataset]:
  """The pipeline for a dataset of global batches (one element per step)."""
  check_dataset(dataset, method)
  layout = _layout(workers, "rounds", settings)
  with tf.device(layout.host):
    if layout.kind == "rounds":
      dataset = rebatch.split_dataset(dataset, layout.num_replicas, method)
    return layout, prefetched(dataset, settings.buffer_size)


def host_pipeline(layout: layout_lib.Layout, dataset: tf.data.Dataset,
                  settings: options_lib.InputSettings) -> tf.data.Dataset:
  """``dataset`` of global batches prefetched on the input host, not split
  (a v1 iterator in a TF1 graph splits each step in the graph)."""
  with tf.device(layout.host):
    return prefetched(dataset, settings.buffer_size)


def call_input_fn(workers: InputWorkers, fn: Callable[[Any], Any], method: str,
                  allow_callable: bool = False,
                  context: Any = None) -> Any:
  """Calls ``fn(InputContext)`` once on the input device and checks it
  returned a dataset (or, if allowed, a callable).  ``context``: the
  ``InputContext`` to pass (default ``workers.input_context()``)."""
  if not callable(fn):
    raise NotCallableError(
        f"{method} expects a function input_context -> tf.data.Dataset, got "
        f"{fn!r} of type {type(fn).__name__}.")
  with tf.device(workers.host):
    result = fn(workers.input_context() if context is None else context)
  if isinstance(result, tf.data.Dataset):
    return result
  if allow_callable and callable(result):
    return result
  also = " (or a callable returning the next element)" if allow_callable else ""
  raise NotADatasetError(
      f"{method}: the input function must return a tf.data.Dataset{also}, "
      f"but it returned {result!r} of type {type(result).__name__}. Return "
      "the dataset itself, batched per replica, e.g. tf.data.Dataset."
      "from_tensor_slices(x).batch(input_context.get_per_replica_batch_size("
      "global_batch_size)).")


def stream_pipeline(workers: InputWorkers, dataset: tf.data.Dataset,
                    settings: options_lib.InputSettings
                    ) -> tuple[layout_lib.Layout, tf.data.Dataset]:
  """The pipeline for a dataset of per-replica batches (one per replica
  per step, handed out in replica order)."""
  layout = _layout(workers, "stream", settings)
  with tf.device(layout.host):
    return layout, prefetched(dataset,
                             settings.buffer_size * layout.num_replicas)


def callable_layout(workers: InputWorkers) -> layout_lib.Layout:
  """The layout for an input function that returned a callable: it is
  called once per replica per step."""
  return _layout(workers, "stream", options_lib.InputSettings())
