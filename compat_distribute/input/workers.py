"""``InputWorkers``: what a strategy tells its input pipeline.

A strategy hands the functions of ``compat_distribute.input`` this small,
immutable description of where input goes (as TensorFlow's strategies hand
theirs an ``InputWorkers``), built from its configuration when an input
method is called; the input package reads nothing else of the strategy.

>>> workers = InputWorkers(devices=("/device:CPU:0", "/device:CPU:1"),
...                        host="/device:CPU:0")
>>> workers.num_replicas_in_sync
2
>>> workers.input_context()
InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=2)
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from compat_distribute.input import contexts
from compat_distribute.runtime.types import DeviceName
from compat_distribute.runtime.types import StrategyLike


@dataclasses.dataclass(frozen=True)
class InputWorkers:
  """Where a strategy's input goes, and the choices that shape it.

  Attributes:
    devices: the replicas' compute devices, one per replica, in order.
    host: the input device: the host CPU the ``tf.data`` pipeline runs on.
    strategy: the strategy whose scope (besides none) the input may be read
      under; None accepts any.
    input_pipelines: ``(count, index)``: how many input pipelines feed the
      replicas (one per worker of a cluster) and which one this is.
    per_replica_input_is_per_worker: ``distribute_datasets_from_function``
      with ``PER_REPLICA`` and fetching to the devices builds the one
      per-worker pipeline (TensorFlow's CentralStorage).
    wrap_single_replica_values: ``experimental_distribute_values_from_function``
      wraps even one replica's value in a ``PerReplica`` (TensorFlow's
      CentralStorage).
    partial_batches: eager iteration of a ``dataset_fn``'s dataset yields a
      last incomplete round (the extended's
      ``enable_partial_batch_handling``).
    per_worker: replicas on several workers of a cluster, each reading its
      input from a pipeline on its own worker (``input.per_worker``): one
      ``(input host, the worker's replica devices)`` pair per worker, in
      replica order.  Empty: one pipeline on ``host`` feeds every replica.
    auto_shard: with ``per_worker``, each worker reads its share of a
      dataset of global batches as TensorFlow's
      ``MultiWorkerMirroredStrategy`` gives it (by the dataset's
      auto-shard policy, ``input.auto_shard``), and, as there, a worker
      whose share ended gives empty batches until every share has ended
      (``input.shares``); False: each worker keeps its replicas' pieces of
      every global batch, as one machine cuts it.
  """
  devices: tuple[DeviceName, ...]
  host: DeviceName
  strategy: Optional[StrategyLike] = None
  input_pipelines: tuple[int, int] = (1, 0)
  per_replica_input_is_per_worker: bool = False
  wrap_single_replica_values: bool = False
  partial_batches: bool = False
  per_worker: tuple[tuple[DeviceName, tuple[DeviceName, ...]], ...] = ()
  auto_shard: bool = False

  @property
  def num_replicas_in_sync(self) -> int:
    """How many replicas consume input each step."""
    return len(self.devices)

  def input_context(self) -> contexts.InputContext:
    """The context an input function is called with: this worker's
    pipeline, for all its replicas."""
    count, index = self.input_pipelines
    return contexts.InputContext(num_input_pipelines=count,
                                 input_pipeline_id=index,
                                 num_replicas_in_sync=self.num_replicas_in_sync)
