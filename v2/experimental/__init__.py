"""``compat_distribute.v2.experimental``: a drop-in for
``tf.distribute.experimental``; other names resolve to TensorFlow's own."""
import tensorflow as _tf

from compat_distribute.cluster.central_storage import CentralStorageStrategy
from compat_distribute.input import ValueContext

__all__ = ["CentralStorageStrategy", "ValueContext"]


def __getattr__(name):
  return getattr(_tf.distribute.experimental, name)
