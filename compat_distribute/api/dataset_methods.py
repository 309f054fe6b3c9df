"""The input methods every strategy shares (v1 and v2): distributed
datasets, values from a function, numpy datasets, and the logical-device
methods (one logical device per replica here).

Mixed into ``api.strategy.Strategy`` and ``api.strategy_v1.StrategyV1``
beside ``StrategyMethods``; each hands the strategy's ``InputWorkers``
(``extended._input_workers()``) to ``compat_distribute.input``.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> dataset = strategy.experimental_distribute_dataset(
...     tf.data.Dataset.range(4).batch(2))
>>> [int(tf.reduce_sum(batch)) for batch in dataset]
[1, 5]
"""
from __future__ import annotations

from typing import Callable, Sequence

import tensorflow as tf

from compat_distribute import input as input_lib
from compat_distribute.runtime.logs import warn_deprecated_once
from compat_distribute.runtime.types import InputOptions
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import TensorLike

# What distribute_datasets_from_function calls: one dataset per pipeline.
DatasetFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]


class DatasetMethods:
  """``Strategy``'s input and logical-device methods (a mixin)."""

  # -- input ----------------------------------------------------------------

  def experimental_distribute_dataset(self, dataset: tf.data.Dataset,
                                      options: InputOptions = None
                                        ) -> tf.distribute.DistributedDataset:
    """Distributes a dataset of global batches over the replicas.

    Each element of ``dataset`` is one global batch; every step, each
    replica gets an equal share of it (the first replicas one more element
    when the batch does not split evenly).

    Args:
      dataset: a ``tf.data.Dataset`` whose elements are global batches.
      options: a ``tf.distribute.InputOptions``, or None for the defaults.

    Returns:
      A ``tf.distribute.DistributedDataset``: iterate over it (in Python or
      in a ``tf.function``) to get per-replica batches for ``run``.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v2 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> global_batches = tf.data.Dataset.range(8).batch(4)
      >>> for batch in strategy.experimental_distribute_dataset(global_batches):
      ...   print([t.numpy().tolist()
      ...          for t in strategy.experimental_local_results(batch)])
      [[0, 1], [2, 3]]
      [[4, 5], [6, 7]]
    """
    return input_lib.distribute_dataset(self._extended._input_workers(),
                                        dataset, options)

  def distribute_datasets_from_function(self,
                                        dataset_fn: DatasetFn,
                                        options: InputOptions = None
                                        ) -> tf.distribute.DistributedDataset:
    """Distributes the dataset(s) ``dataset_fn(input_context)`` returns;
    they yield per-replica batches.

    ``dataset_fn`` is called once per input pipeline (once on one machine)
    with a ``tf.distribute.InputContext``; use its
    ``get_per_replica_batch_size`` to batch.  The replicas take the batches
    in turn.

    Args:
      dataset_fn: a function of an ``InputContext`` returning a
        ``tf.data.Dataset`` of per-replica batches.
      options: a ``tf.distribute.InputOptions``, or None for the defaults.

    Returns:
      A ``tf.distribute.DistributedDataset`` of per-replica batches.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v2 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> def dataset_fn(context):
      ...   size = context.get_per_replica_batch_size(global_batch_size=4)
      ...   return tf.data.Dataset.range(8).batch(size)
      >>> batch = next(iter(strategy.distribute_datasets_from_function(
      ...     dataset_fn)))
      >>> [t.numpy().tolist() for t in strategy.experimental_local_results(batch)]
      [[0, 1], [2, 3]]
    """
    return input_lib.distribute_datasets_from_function(
        self._extended._input_workers(), dataset_fn, options)

  def experimental_distribute_datasets_from_function(
      self, dataset_fn: DatasetFn, options: InputOptions = None
  ) -> tf.distribute.DistributedDataset:
    """Deprecated name of ``distribute_datasets_from_function``."""
    warn_deprecated_once(
        "Strategy.experimental_distribute_datasets_from_function",
        "Strategy.distribute_datasets_from_function")
    return self.distribute_datasets_from_function(dataset_fn, options)

  def experimental_distribute_values_from_function(
      self, value_fn: Callable[[tf.distribute.experimental.ValueContext], Nest]
  ) -> Nest:
    """One value per replica: ``value_fn(ValueContext)`` for each.

    Args:
      value_fn: a function of a ``tf.distribute.experimental.ValueContext``
        returning that replica's value.

    Returns:
      Per-replica values (the plain value with one replica).

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v2 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:1"])
      >>> values = strategy.experimental_distribute_values_from_function(
      ...     lambda context: context.replica_id_in_sync_group * 100)
      >>> strategy.experimental_local_results(values)
      (0, 100)
    """
    return input_lib.distribute_values_from_function(
        self._extended._input_workers(), value_fn)

  def experimental_make_numpy_dataset(self,
                                      numpy_input: Nest) -> tf.data.Dataset:
    """A ``tf.data.Dataset`` of the slices of ``numpy_input``, kept on the
    input host.

    Args:
      numpy_input: a NumPy array or a nest of them with the same first
        dimension.

    Returns:
      A ``tf.data.Dataset`` with one element per row.

    Examples:
      >>> import numpy as np
      >>> import tensorflow as tf
      >>> from compat_distribute import v2 as distribute
      >>> strategy = distribute.OneDeviceStrategy("/cpu:0")
      >>> rows = strategy.experimental_make_numpy_dataset(np.arange(6).reshape(3, 2))
      >>> [row.tolist() for row in rows.as_numpy_iterator()]
      [[0, 1], [2, 3], [4, 5]]
    """
    return input_lib.make_numpy_dataset(self._extended._input_workers(),
                                        numpy_input, None)

  # -- logical devices (one per replica here) -------------------------------

  def experimental_assign_to_logical_device(self, tensor: TensorLike,
                                            logical_device_id: int
                                            ) -> TensorLike:
    """Annotates ``tensor`` for logical device ``logical_device_id``.

    These strategies have one logical device per replica, so the only valid
    id is 0 and the tensor is returned as it is.
    """
    if isinstance(logical_device_id, bool) or logical_device_id != 0:
      raise ValueError(
          f"logical_device_id {logical_device_id!r} is out of range: "
          f"{self!r} has 1 logical device per replica, so the only valid id "
          "is 0.")
    return tensor

  def experimental_replicate_to_logical_devices(self,
                                                tensor: TensorLike
      ) -> TensorLike:
    """Annotates ``tensor`` as replicated over the replica's logical devices
    (just one here, so ``tensor`` is returned as it is)."""
    return tensor

  def experimental_split_to_logical_devices(self, tensor: TensorLike,
                                            partition_dimensions: Sequence[int]
                                            ) -> TensorLike:
    """Annotates ``tensor`` as split over logical devices.

    With one logical device per replica, ``partition_dimensions`` must have
    one entry per dimension of ``tensor`` and all entries must be 1.
    """
    dims = list(partition_dimensions)
    rank = tensor.shape.rank
    if rank is not None and len(dims) != rank:
      raise ValueError(
          f"partition_dimensions {dims} has {len(dims)} entries but the "
          f"tensor has rank {rank} (shape {tensor.shape}); give one entry "
          "per dimension.")
    product = 1
    for d in dims:
      product *= d
    if product != 1:
      raise ValueError(
          f"The product of partition_dimensions {dims} is {product}, but "
          f"{self!r} has 1 logical device per replica; use all ones, e.g. "
          f"{[1] * len(dims)}.")
    return tensor
