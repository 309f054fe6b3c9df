"""``compat_distribute.v1``: a drop-in for ``tf.compat.v1.distribute``.

Names the shim implements resolve to ours; any other
``tf.compat.v1.distribute`` name (for example ``MirroredStrategy`` or
``get_loss_reduction``) resolves to TensorFlow's own through the module
``__getattr__``, so ``from compat_distribute import v1 as distribute`` can
replace ``tf.compat.v1.distribute`` wholesale.  ``get_cross_replica_context``
is an addition (TensorFlow has it only in ``tf.distribute``).

>>> from compat_distribute import v1 as distribute
>>> distribute.OneDeviceStrategy("/cpu:0").num_replicas_in_sync
1
"""
import tensorflow as _tf

from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.context import get_cross_replica_context
from compat_distribute.api.extended import Extended as StrategyExtended
from compat_distribute.input import InputContext
from compat_distribute.replicas.context import ReplicaContext
from compat_distribute.strategies.one_device import OneDeviceStrategyV1 as OneDeviceStrategy
from compat_distribute.api.strategy_v1 import StrategyV1 as Strategy
from compat_distribute.v1 import experimental

InputReplicationMode = _tf.distribute.InputReplicationMode
ReduceOp = _tf.distribute.ReduceOp
RunOptions = _tf.distribute.RunOptions
get_strategy = _tf.distribute.get_strategy
has_strategy = _tf.distribute.has_strategy
get_replica_context = _tf.distribute.get_replica_context
in_cross_replica_context = _tf.distribute.in_cross_replica_context

__all__ = [
    "Error",
    "InputContext", "InputReplicationMode", "OneDeviceStrategy", "ReduceOp",
    "ReplicaContext", "RunOptions", "Strategy", "StrategyExtended",
    "experimental", "get_cross_replica_context", "get_replica_context",
    "get_strategy", "has_strategy", "in_cross_replica_context",
]


def __getattr__(name):
  return getattr(_tf.compat.v1.distribute, name)
