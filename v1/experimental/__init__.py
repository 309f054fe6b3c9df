"""``compat_distribute.v1.experimental``: a drop-in for
``tf.compat.v1.distribute.experimental``; names the shim does not implement
resolve to TensorFlow's own."""
import tensorflow as _tf

from compat_distribute.cluster.central_storage import (
    CentralStorageStrategyV1 as CentralStorageStrategy)
from compat_distribute.cluster.multi_worker import (
    MultiWorkerMirroredStrategyV1 as MultiWorkerMirroredStrategy)
from compat_distribute.cluster.parameter_server import (
    ParameterServerStrategyV1 as ParameterServerStrategy)

__all__ = ["CentralStorageStrategy", "MultiWorkerMirroredStrategy",
           "ParameterServerStrategy"]


def __getattr__(name):
  return getattr(_tf.compat.v1.distribute.experimental, name)
