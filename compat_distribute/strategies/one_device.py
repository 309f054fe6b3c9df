"""``OneDeviceStrategy``: everything -- variables, compute, input -- on one
device.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> strategy
OneDeviceStrategy(device='/job:localhost/replica:0/task:0/device:CPU:0')
>>> with strategy.scope():
...   v = tf.Variable(1.0)
>>> v.device
'/job:localhost/replica:0/task:0/device:CPU:0'
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf

from compat_distribute.runtime import devices as devices_lib
from compat_distribute.api import extended as extended_lib
from compat_distribute.strategies import multi_step
from compat_distribute.api import strategy as strategy_lib
from compat_distribute.api import strategy_v1
from compat_distribute.runtime.types import Creator
from compat_distribute.runtime.types import Destinations
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReduceOpLike
from compat_distribute.runtime.types import ReduceOptions
from compat_distribute.runtime.types import ReplicaFn
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.variables import placement


class OneDeviceExtended(extended_lib.Extended):
  """``strategy.extended`` of ``OneDeviceStrategy``."""

  def __init__(self, container_strategy: StrategyLike, device: str) -> None:
    device = devices_lib.canonicalize(device)
    devices_lib.report_missing(
        [device], "OneDeviceStrategy",
        session_creates_cpus=isinstance(container_strategy,
                                        tf.compat.v1.distribute.Strategy))
    super().__init__(container_strategy, (device,), (device,))
    self._device = device
    self._input_device = devices_lib.host_of(device)

  def _create_variable(self, next_creator: Creator,
                       **kwargs: Any) -> tf.Variable:
    with placement.variable_placement(kwargs.pop("colocate_with", None),
                                      self._device, clear_scopes=False):
      return next_creator(**kwargs)

  def _reduce_to(self, reduce_op: ReduceOpLike, value: Nest,
                 destinations: Destinations,
                 options: ReduceOptions) -> Nest:
    del reduce_op, destinations, options
    return value

  def _update(self, var: tf.Variable, fn: ReplicaFn, args: tuple,
              kwargs: dict, group: bool) -> Nest:
    with tf.device(self._device):
      result = fn(var, *args, **kwargs)
    if group:
      return result
    return tf.nest.map_structure(lambda x: self._local_results(x), result)

  def _update_non_slot(self, colocate_with: Any, fn: ReplicaFn,
                       args: tuple, kwargs: dict, group: bool) -> Nest:
    del colocate_with
    return self._update(None, lambda _, *a, **k: fn(*a, **k), args, kwargs,
                        group)

  def experimental_run_steps_on_iterator(self, fn: ReplicaFn,
                                         iterator: Any, iterations: Any = 1,
                                         initial_loop_values: Nest = None
                                         ) -> Any:
    """Deprecated by TensorFlow (use ``run`` in a loop), kept as its
    ``OneDeviceStrategy`` keeps it: runs ``fn(context, inputs)``
    ``iterations`` times in one loop; see ``multi_step.run_steps``."""
    return multi_step.run_steps(self, fn, iterator, iterations,
                                initial_loop_values)


class OneDeviceMethods:
  """Constructor and repr shared by the v1 and v2 ``OneDeviceStrategy``."""

  def __init__(self, device: str) -> None:
    super().__init__(OneDeviceExtended(self, device))

  def __repr__(self) -> str:
    return f"{type(self).__name__}(device={self.extended._device!r})"  # pylint: disable=protected-access

  def _with_same_configuration(self) -> StrategyLike:
    return type(self)(self.extended._device)  # pylint: disable=protected-access


# TensorFlow's class comes last among the bases, for type identity only:
# ``isinstance(s, tf.distribute.OneDeviceStrategy)`` holds, as code such as
# tf_keras' mixed precision checks, while every method it defines is
# overridden by ours (tests/project/test_layout.py checks that none of its
# code runs).
class OneDeviceStrategy(OneDeviceMethods, strategy_lib.Strategy,
                        tf.distribute.OneDeviceStrategy):
  """Runs on a single device: variables and ``run`` on ``device``, input
  prefetched to it.

  Args:
    device: where variables and computation live, e.g. ``"/cpu:0"`` or
      ``"/gpu:0"``.

  Raises:
    TypeError: ``device`` is not a string (for a ``tf.DeviceSpec``, pass
      ``spec.to_string()``).

  Examples:
    >>> import tensorflow as tf
    >>> from compat_distribute import v2 as distribute
    >>> strategy = distribute.OneDeviceStrategy("/cpu:0")
    >>> with strategy.scope():
    ...   counter = tf.Variable(0)
    >>> @tf.function
    ... def count(batch):
    ...   counter.assign_add(tf.size(batch))
    ...   return tf.reduce_sum(batch)
    >>> dataset = strategy.experimental_distribute_dataset(
    ...     tf.data.Dataset.range(5).batch(2))
    >>> [int(strategy.run(count, args=(batch,))) for batch in dataset]
    [1, 5, 4]
    >>> int(counter)
    5
  """


# The v1 class, beside its v2 twin.  Its name ends in V1, as TensorFlow's v1
# classes do (tf_keras puts ``type(strategy).__name__`` into messages); the
# facade exports it under the public name.  TensorFlow's class last, as above.
class OneDeviceStrategyV1(OneDeviceMethods, strategy_v1.StrategyV1,
                          tf.compat.v1.distribute.OneDeviceStrategy):
  """``tf.compat.v1.distribute.OneDeviceStrategy``: variables, computation
  and input all on ``device``.

  Args:
    device: where everything runs, e.g. ``"/cpu:0"`` or ``"/gpu:0"``.

  Raises:
    TypeError: ``device`` is not a string (for a ``tf.DeviceSpec``, pass
      ``spec.to_string()``).

  Examples:
    >>> import tensorflow as tf
    >>> from compat_distribute import v1 as distribute
    >>> with tf.Graph().as_default():
    ...   strategy = distribute.OneDeviceStrategy("/cpu:0")
    ...   with strategy.scope():
    ...     total = tf.compat.v1.Variable(0.0)
    ...     add = strategy.experimental_run(lambda: total.assign_add(1.5))
    ...   with tf.compat.v1.Session() as session:
    ...     session.run(tf.compat.v1.global_variables_initializer())
    ...     _ = session.run(add)
    ...     print(session.run(add))
    3.0
  """
