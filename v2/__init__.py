"""``compat_distribute.v2``: a drop-in for ``tf.distribute``.

Names the shim implements resolve to ours; any other ``tf.distribute`` name
(for example ``MirroredStrategy``) resolves to TensorFlow's own through the
module ``__getattr__``, so ``from compat_distribute import v2 as distribute``
can replace ``tf.distribute`` wholesale.

>>> from compat_distribute import v2 as distribute
>>> distribute.OneDeviceStrategy("/cpu:0").num_replicas_in_sync
1
"""
import tensorflow as _tf

from compat_distribute.runtime.errors import Error
from compat_distribute.api.extended import Extended as StrategyExtended
from compat_distribute.input import InputContext
from compat_distribute.strategies.one_device import OneDeviceStrategy
from compat_distribute.replicas.context import ReplicaContext
from compat_distribute.api.strategy import Strategy
from compat_distribute.cluster.multi_worker import MultiWorkerMirroredStrategy
from compat_distribute.v2 import experimental

ReduceOp = _tf.distribute.ReduceOp
RunOptions = _tf.distribute.RunOptions
InputOptions = _tf.distribute.InputOptions
InputReplicationMode = _tf.distribute.InputReplicationMode
DistributedValues = _tf.distribute.DistributedValues
DistributedDataset = _tf.distribute.DistributedDataset
DistributedIterator = _tf.distribute.DistributedIterator
get_strategy = _tf.distribute.get_strategy
has_strategy = _tf.distribute.has_strategy
get_replica_context = _tf.distribute.get_replica_context
from compat_distribute.runtime.context import get_cross_replica_context
in_cross_replica_context = _tf.distribute.in_cross_replica_context

__all__ = [
    "Error",
    "DistributedDataset", "DistributedIterator", "DistributedValues",
    "InputContext", "InputOptions", "InputReplicationMode",
    "MultiWorkerMirroredStrategy",
    "OneDeviceStrategy", "ReduceOp", "ReplicaContext", "RunOptions",
    "Strategy", "StrategyExtended", "experimental", "get_cross_replica_context",
    "get_replica_context", "get_strategy", "has_strategy",
    "in_cross_replica_context",
]


def __getattr__(name):
  return getattr(_tf.distribute, name)
