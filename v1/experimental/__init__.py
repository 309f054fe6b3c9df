"""``compat_distribute.v1.experimental``: a drop-in for
``tf.compat.v1.distribute.experimental``; names the shim does not implement
resolve to TensorFlow's own."""
import tensorflow as _tf

from compat_distribute.strategies_v1 import (
    CentralStorageStrategyV1 as CentralStorageStrategy)

__all__ = ["CentralStorageStrategy"]


def __getattr__(name):
  return getattr(_tf.compat.v1.distribute.experimental, name)
