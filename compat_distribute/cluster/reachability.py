"""Whether every cluster task can reach every other, checked at connect.

A task's port answering the client is not enough for training: a step of
a TF2 ``CentralStorageStrategy`` program makes the worker tasks read the
variables from the ps tasks and the ps tasks read the gradients from the
workers, over the connections the tasks keep among themselves.  After a
task has been restarted (the ps of a cluster whose workers kept running,
as ``run --max-restarts`` and a cluster manager do), a surviving task's
connection to it can still hold the refusal of an attempt made while the
task was down (gRPC reports it at the connection's next call), so the
program's first step fails with ``UnavailableError: failed to connect to
all addresses`` although every task answers the client.

``wait_until_reachable`` runs one small function in which every served
task reads a value from every other, again until it succeeds: at most
``timeout`` seconds, retrying every ``RETRY_PERIOD`` seconds while the
error is of the ``UnavailableError`` kind and the watchdog has lost no
task; the last error otherwise.  On a cluster whose connections are up it
costs one function call.

>>> pairs([("worker", 0), ("worker", 1), ("ps", 0)])[:2]
[(('worker', 0), ('worker', 1)), (('worker', 0), ('ps', 0))]
>>> len(pairs([("worker", 0), ("ps", 0)])), pairs([("worker", 0)])
(2, [])
"""
from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

import tensorflow as tf

RETRY_PERIOD = 0.5

Task = tuple[str, int]


def pairs(served: Sequence[Task]) -> list[tuple[Task, Task]]:
  """``(source, reader)`` for every ordered pair of different tasks."""
  return [(a, b) for a in served for b in served if a != b]


def _device(task: Task) -> str:
  return f"/job:{task[0]}/replica:0/task:{task[1]}/device:CPU:0"


def exchange_function(served: Sequence[Task]) -> Callable[[], tf.Tensor]:
  """A function in which every task reads a value made on every other: a
  timestamp, summed where it is read (a value constant folding cannot
  remove; ``x * 0`` would be folded away, and the read with it)."""

  @tf.function
  def exchange() -> tf.Tensor:
    total = tf.constant(0.0, tf.float64)
    for source, reader in pairs(served):
      with tf.device(_device(source)):
        value = tf.timestamp()
      with tf.device(_device(reader)):
        total += value
    return total

  return exchange


def wait_until_reachable(
    served: Sequence[Task], timeout: float,
    any_lost: Callable[[], bool] = lambda: False,
    exchange: Optional[Callable[[], tf.Tensor]] = None) -> int:
  """Runs ``exchange`` (default: ``exchange_function(served)``) until it
  succeeds; returns the attempts it took (0: fewer than two tasks).

  Raises the exchange's error when it is not an ``UnavailableError``, when
  ``any_lost()`` says a task was lost, or when the next attempt would
  start after ``timeout`` seconds."""
  if len(served) < 2:
    return 0
  if exchange is None:
    exchange = exchange_function(served)
  deadline = time.monotonic() + timeout
  attempts = 0
  while True:
    attempts += 1
    try:
      exchange().numpy()
      return attempts
    except tf.errors.UnavailableError:
      if any_lost() or time.monotonic() + RETRY_PERIOD > deadline:
        raise
    time.sleep(RETRY_PERIOD)
