"""Each worker's share of a dataset, as TensorFlow's
``MultiWorkerMirroredStrategy`` cuts it (``experimental_distribute_dataset``
on a cluster of ``W`` workers, ``R`` replicas each, ``n = W * R``).

TensorFlow's strategy runs the program on every worker; each worker builds
the same pipeline of global batches and then, on its own:

1. cuts every global batch into ``n`` pieces (its piece sizes rotated by
   worker, so that each step adds up to the global batch; when the batch
   size cannot be told, ``ceil(b / n)`` rows each in turn);
2. rewrites the pipeline by the dataset's
   ``tf.data.Options().experimental_distribute.auto_shard_policy``:

   * ``DATA`` -- it keeps every ``W``-th piece, from its own index (each
     batch cut into ``ceil(b / n)`` rows each, whatever step 1 chose);
   * ``FILE`` -- it reads every ``W``-th of the files the pipeline's reader
     reads, from its own index, and every piece of what it reads; a
     pipeline without a file reader fails with ``NotFoundError`` ("Found an
     unshardable source dataset");
   * ``AUTO`` (the default) -- ``FILE`` when the pipeline reads files, else
     ``DATA``;
   * ``OFF`` -- nothing: every worker reads every piece;

3. hands its replicas ``R`` consecutive pieces per step.

This module builds that pipeline for one worker, with TensorFlow's own ops
(``_tf_private.datasets``), so each worker of ours reads exactly what it
would read under TensorFlow's strategy.  With 2 workers of 1 replica, 16
numbers in batches of 4:

>>> dataset = tf.data.Dataset.range(16).batch(4)
>>> [[x.numpy().tolist() for x in worker_pipeline(dataset, 2, w, 2)]
...  for w in range(2)]
[[[0, 1], [4, 5], [8, 9], [12, 13]], [[2, 3], [6, 7], [10, 11], [14, 15]]]
>>> off = tf.data.Options()
>>> off.experimental_distribute.auto_shard_policy = (
...     tf.data.experimental.AutoShardPolicy.OFF)
>>> [x.numpy().tolist() for x in
...  worker_pipeline(dataset.with_options(off), 2, 1, 2)][:3]
[[0, 1], [2, 3], [4, 5]]
"""
from __future__ import annotations

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.runtime.errors import Error

OFF = tf.data.experimental.AutoShardPolicy.OFF


class UnevenWorkersError(Error, ValueError):
  """Workers with different numbers of replicas (TensorFlow's strategy
  refuses them too: each worker cuts every batch alike)."""


def replicas_per_worker(counts: list[int]) -> int:
  """The replicas every worker has (``counts``: each worker's).

  Raises:
    UnevenWorkersError: the workers do not all have as many.
  """
  if len(set(counts)) != 1:
    raise UnevenWorkersError(
        "MultiWorkerMirroredStrategy's input is cut alike on every worker, "
        "so every worker needs as many replicas, got "
        f"{counts} replicas per worker. Give every task the same devices "
        "(e.g. as many GPUs each, or CUDA_VISIBLE_DEVICES=\"\" for CPUs), or "
        "set the dataset's auto_shard_policy and build the input per worker "
        "with distribute_datasets_from_function.")
  return counts[0]


def worker_pipeline(dataset: tf.data.Dataset, num_workers: int, index: int,
                    num_replicas: int) -> tf.data.Dataset:
  """Worker ``index``'s pipeline of per-replica batches (see the module
  docstring): its replicas take consecutive elements, one each per step.

  Raises:
    tf.errors.NotFoundError: the policy is FILE and the pipeline reads no
      files (TensorFlow's error).
  """
  if num_replicas > 1:
    batch_size = _tf_private.compute_batch_size(dataset)
    if batch_size == -1:
      dataset = _tf_private.legacy_rebatch(dataset, num_replicas)
    else:
      dataset = dataset.rebatch(_tf_private.batch_sizes_for_worker(
          batch_size, num_workers, num_replicas // num_workers, index))
  if dataset.options().experimental_distribute.auto_shard_policy == OFF:
    return dataset
  return _tf_private.auto_shard_dataset(dataset, num_workers, index,
                                        num_replicas)
