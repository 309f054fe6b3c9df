"""Where a parameter-server strategy's variables go.

Variables go to the ``ps`` tasks in turn, in the order they are created
(``RoundRobinPlacer``); everything else a variable's creation makes stays on
the worker.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf

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

  def __call__(self, op: Any) -> str:
    current = tf.DeviceSpec.from_string(op.device or "")
    if op.type in STATE_OPS:
      target = tf.DeviceSpec(job="ps")
      if current.job in (None, "ps"):
        target = target.replace(task=self._take())
      return target.make_merged_spec(current).to_string()
    worker = tf.DeviceSpec.from_string(self.worker_device)
    return worker.make_merged_spec(current).to_string()
