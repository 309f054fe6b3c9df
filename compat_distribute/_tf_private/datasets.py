"""TensorFlow's private names for a multi-worker input pipeline: how its
``MultiWorkerMirroredStrategy`` cuts a dataset for each worker (part of
``compat_distribute._tf_private``).

All four are in ``tensorflow.python.data.experimental.ops.distribute``, on
TensorFlow 2.12 to 2.22 with the signatures used here; there is no public
alias.  ``input.auto_shard`` builds each worker's pipeline with them, so
that every worker of ours reads what that worker of TensorFlow's strategy
reads (the graph rewrite of each auto-shard policy is TensorFlow's own op):

* ``_AutoShardDataset`` -- the dataset op that rewrites a pipeline for one
  worker by its ``auto_shard_policy`` (FILE: a shard of the files; DATA: a
  shard of the elements, the rebatch before it made the legacy one; AUTO:
  FILE, else DATA; it raises ``NotFoundError`` for FILE without files);
  the public ``tf.raw_ops.AutoShardDataset`` needs the flattened element
  structure, which only the private class computes.
* ``_LegacyRebatchDataset`` -- cuts each batch into ``num_replicas`` pieces
  of ``ceil(b / n)`` rows, used when the batch size is not known.
* ``compute_batch_size`` -- the batch size of a pipeline's last ``batch``
  (-1 when there is none or it cannot tell).
* ``batch_sizes_for_worker`` -- one worker's piece sizes of a global batch,
  rotated by worker so that every step adds up to the global batch.
"""
from __future__ import annotations

import tensorflow as tf
from tensorflow.python.data.experimental.ops import distribute as _distribute


def auto_shard_dataset(dataset: tf.data.Dataset, num_workers: int, index: int,
                       num_replicas: int) -> tf.data.Dataset:
  """``dataset`` rewritten for worker ``index`` of ``num_workers`` by the
  auto-shard policy of its options (not OFF)."""
  return _distribute._AutoShardDataset(dataset, num_workers, index,  # pylint: disable=protected-access
                                       num_replicas)


def legacy_rebatch(dataset: tf.data.Dataset,
                   num_replicas: int) -> tf.data.Dataset:
  """Each batch of ``dataset`` cut into ``num_replicas`` pieces."""
  return _distribute._LegacyRebatchDataset(dataset, num_replicas)  # pylint: disable=protected-access


def compute_batch_size(dataset: tf.data.Dataset) -> int:
  """The batch size of ``dataset``'s last ``batch``, or -1."""
  return int(_distribute.compute_batch_size(dataset))


def batch_sizes_for_worker(global_batch_size: int, num_workers: int,
                           per_worker: int, index: int) -> tf.Tensor:
  """Worker ``index``'s ``num_workers * per_worker`` piece sizes of a
  global batch."""
  return _distribute.batch_sizes_for_worker(global_batch_size, num_workers,
                                            per_worker, index)
