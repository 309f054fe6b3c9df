"""Where a strategy's new variable goes: the one module every strategy asks.

* ``variable_placement(colocate_with, device, clear_scopes)``: the scope a
  strategy's variable creator makes a variable in -- next to
  ``colocate_with`` when given; else on ``device``, merged into the caller's
  ``tf.device`` scope (OneDevice) or, with ``clear_scopes``, whatever scope
  the caller is in (CentralStorage's parameter device);
* ``RoundRobin``: the parameter devices in turn, one per new variable (a
  ``CentralStorageStrategy`` on a cluster with several ``ps`` tasks);
* ``RoundRobinPlacer``: the same as a graph device function (the v1
  ``ParameterServerStrategy``): each new variable's state op goes to the next
  ``ps`` task, every other op stays on the worker.

>>> ps = RoundRobin(["/job:ps/task:0", "/job:ps/task:1"])
>>> [ps.next() for _ in range(3)]
['/job:ps/task:0', '/job:ps/task:1', '/job:ps/task:0']
"""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Iterator, Sequence

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.runtime.types import DeviceName
from compat_distribute.runtime.types import DeviceOrFunction


def variable_placement(colocate_with: Any, device: DeviceOrFunction,
                       clear_scopes: bool) -> ContextManager[None]:
  """The scope a strategy's variable creator makes a variable in.

  As TensorFlow's strategies do: next to ``colocate_with`` when it is given
  (an optimizer slot's primary variable, a tensor or an operation; any
  other object names a device through its ``device``); otherwise on
  ``device``, merged into the caller's ``tf.device`` scope (OneDevice) or,
  with ``clear_scopes``, after clearing the caller's device and colocation
  scopes (CentralStorage: its variables go to the parameter device whatever
  scope they are made in; ``device`` may then be a graph device function,
  such as a ``RoundRobinPlacer``).

  >>> with tf.Graph().as_default():
  ...   with tf.device("/cpu:1"):
  ...     with variable_placement(None, "/cpu:0", clear_scopes=True):
  ...       print(tf.constant(1.0).op.device)
  /device:CPU:0
  """
  if colocate_with is not None:
    if isinstance(colocate_with, (tf.Variable, tf.Tensor, tf.Operation)):
      return _tf_private.colocate_with(colocate_with)
    return tf.device(colocate_with.device)
  if not clear_scopes:
    return tf.device(device)
  return _only_on(device)


@contextlib.contextmanager
def _only_on(device: DeviceOrFunction) -> Iterator[None]:
  # A device function (a parameter-server strategy's placer) needs the v1
  # tf.device, which accepts one in a graph.
  scope = tf.compat.v1.device if callable(device) else tf.device
  with _tf_private.colocate_with(None, ignore_existing=True):
    with scope(device):
      yield


class RoundRobin:
  """Parameter devices in turn: ``next()`` gives the device of the next
  new variable, starting with the first."""

  def __init__(self, devices: Sequence[DeviceName]) -> None:
    if not devices:
      raise ValueError(
          f"RoundRobin needs at least one device, got {devices!r}. Pass the "
          "strategy's parameter devices.")
    self.devices = tuple(devices)
    self._next = 0

  def __repr__(self) -> str:
    return f"RoundRobin({list(self.devices)!r}, next={self._next})"

  def next(self) -> DeviceName:
    device = self.devices[self._next]
    self._next = (self._next + 1) % len(self.devices)
    return device


# The op types that hold state; a variable's creation makes one of them, and
# that op is what goes to a ps task.
STATE_OPS = frozenset({
    "Variable", "VariableV2", "AutoReloadVariable", "VarHandleOp",
    "MutableHashTable", "MutableHashTableV2", "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
    "MutableDenseHashTableV2", "ResourceConditionalAccumulator",
})


class RoundRobinPlacer:
  """A graph device function: each new state op (a variable's handle) goes
  to the next ``ps`` task in turn; any other op goes to the worker.

  A device already set on the op is kept where it is more specific: a job
  other than ``ps`` keeps the op off the parameter servers' rotation.

  >>> placer = RoundRobinPlacer(num_ps=2, worker_device="/job:worker/task:0")
  >>> with tf.Graph().as_default(), tf.compat.v1.device(placer):
  ...   [tf.Variable(0.0).device for _ in range(3)]
  ['/job:ps/task:0', '/job:ps/task:1', '/job:ps/task:0']
  """

  def __init__(self, num_ps: int, worker_device: str) -> None:
    self.num_ps = num_ps
    self.worker_device = worker_device
    self._next = 0

  def __repr__(self) -> str:
    return (f"RoundRobinPlacer(num_ps={self.num_ps}, "
            f"worker_device={self.worker_device!r}, next_task={self._next})")

  def _take(self) -> int:
    task = self._next
    self._next = (self._next + 1) % self.num_ps
    return task

  def __call__(self, op: tf.Operation) -> str:
    current = tf.DeviceSpec.from_string(op.device or "")
    if op.type in STATE_OPS:
      target = tf.DeviceSpec(job="ps")
      if current.job in (None, "ps"):
        target = target.replace(task=self._take())
      return target.make_merged_spec(current).to_string()
    worker = tf.DeviceSpec.from_string(self.worker_device)
    return worker.make_merged_spec(current).to_string()
