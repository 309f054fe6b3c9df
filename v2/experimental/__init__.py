"""``compat_distribute.v2.experimental``: a drop-in for
``tf.distribute.experimental``; other names resolve to TensorFlow's own.

``auto_strategy`` is ours on every supported TensorFlow (TensorFlow has it
from 2.23 on): our ``OneDeviceStrategy`` where TensorFlow's would choose
its ``OneDeviceStrategy``, TensorFlow's own strategy where it chooses one
that compat_distribute does not implement."""
import tensorflow as _tf

from compat_distribute.cluster.central_storage import CentralStorageStrategy
from compat_distribute.cluster.multi_worker import (
    MultiWorkerMirroredStrategyExperimental as MultiWorkerMirroredStrategy)
from compat_distribute.input import ValueContext
from compat_distribute.strategies.auto import auto_strategy

__all__ = ["CentralStorageStrategy", "MultiWorkerMirroredStrategy",
           "ValueContext", "auto_strategy"]


def __getattr__(name):
  return getattr(_tf.distribute.experimental, name)
