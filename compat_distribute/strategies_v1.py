"""The concrete v1 strategies: the shared constructors and extended objects,
on the v1 base class.

>>> import tensorflow as tf
>>> from compat_distribute import v1 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> strategy
OneDeviceStrategy(device='/job:localhost/replica:0/task:0/device:CPU:0')
>>> isinstance(strategy, tf.distribute.Strategy)  # v1 only, as in TF
False
"""
from __future__ import annotations

from compat_distribute import one_device
from compat_distribute import strategy_v1


class OneDeviceStrategy(one_device.OneDeviceMethods, strategy_v1.Strategy):
  """``tf.compat.v1.distribute.OneDeviceStrategy``: variables, computation
  and input all on ``device``.

  Args:
    device: where everything runs, e.g. ``"/cpu:0"`` or ``"/gpu:0"``.
  """
