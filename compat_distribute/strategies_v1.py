"""The concrete v1 strategies: the shared constructors and extended objects,
on the v1 base class.

>>> import tensorflow as tf
>>> from compat_distribute import v1 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> strategy
OneDeviceStrategyV1(device='/job:localhost/replica:0/task:0/device:CPU:0')
>>> isinstance(strategy, tf.distribute.Strategy)  # v1 only, as in TF
False
>>> type(strategy).__name__ == type(
...     tf.compat.v1.distribute.OneDeviceStrategy("/cpu:0")).__name__
True
>>> distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"],
...                                              parameter_device="/cpu:0")
CentralStorageStrategyV1(compute_devices=['/job:localhost/replica:0/task:0/device:CPU:0', '/job:localhost/replica:0/task:0/device:CPU:1'], parameter_device='/cpu:0')
"""
from __future__ import annotations

import tensorflow as tf

from compat_distribute import central_storage
from compat_distribute import one_device
from compat_distribute import strategy_v1


# TensorFlow's classes come last, for type identity only (see one_device.py).
# The class names end in V1, as TensorFlow's v1 classes do (tf_keras puts
# ``type(strategy).__name__`` into messages); the facade exports them under
# the public names.
class OneDeviceStrategyV1(one_device.OneDeviceMethods, strategy_v1.StrategyV1,
                          tf.compat.v1.distribute.OneDeviceStrategy):
  """``tf.compat.v1.distribute.OneDeviceStrategy``: variables, computation
  and input all on ``device``.

  Args:
    device: where everything runs, e.g. ``"/cpu:0"`` or ``"/gpu:0"``.
  """


class CentralStorageStrategyV1(
    central_storage.CentralStorageMethods, strategy_v1.StrategyV1,
    tf.compat.v1.distribute.experimental.CentralStorageStrategy):
  """``tf.compat.v1.distribute.experimental.CentralStorageStrategy``: one
  copy of every variable on ``parameter_device``, compute replicated over
  ``compute_devices``.

  Args:
    compute_devices: the devices replicas run on; None means all local GPUs,
      else the CPU.
    parameter_device: where variables live; None means the CPU (or the only
      compute device).
  """
