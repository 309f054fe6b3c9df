"""Whether the cluster's tasks reach one another, checked at connect.

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

``wait_until_reachable`` runs one small function in which each task reads
a value from every task it exchanges values with in a step (``pairs``:
every worker with every ps, both ways, and the client with every task,
both ways; never two workers or two ps tasks, which a
``CentralStorageStrategy`` step never connects), again until it
succeeds: at most
``timeout`` seconds, retrying every ``RETRY_PERIOD`` seconds while the
error is of the ``UnavailableError`` kind and the watchdog has lost no
task; the last error otherwise.  On a cluster whose connections are up it
costs one function call.

>>> pairs([("worker", 0), ("worker", 1), ("ps", 0)])
[(('worker', 0), ('ps', 0)), (('ps', 0), ('worker', 0)), (('worker', 1), ('ps', 0)), (('ps', 0), ('worker', 1))]
>>> len(pairs([("worker", 0), ("worker", 1), ("ps", 0)], ("chief", 0)))
10
>>> pairs([("worker", 0)])
[]
"""
from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

import tensorflow as tf

RETRY_PERIOD = 0.5

Task = tuple[str, int]


def pairs(served: Sequence[Task],
          client: Optional[Task] = None) -> list[tuple[Task, Task]]:
  """``(source, reader)``: each worker and each ps of ``served`` both ways,
  then ``client`` (when given) and each served task both ways."""
  workers = [t for t in served if t[0] == "worker"]
  ps = [t for t in served if t[0] == "ps"]
  found = [pair for w in workers for p in ps for pair in ((w, p), (p, w))]
  if client is not None:
    found += [pair for t in served for pair in ((client, t), (t, client))]
  return found


def _device(task: Task) -> str:
  return f"/job:{task[0]}/replica:0/task:{task[1]}/device:CPU:0"


def exchange_function(served: Sequence[Task], client: Optional[Task] = None
                      ) -> Callable[[], tf.Tensor]:
  """A function in which each pair of ``pairs`` exchanges a value: a
  timestamp made on the source, summed on the reader (a value constant
  folding cannot remove; ``x * 0`` would be folded away, and the read with
  it)."""

  @tf.function
  def exchange() -> tf.Tensor:
    total = tf.constant(0.0, tf.float64)
    for source, reader in pairs(served, client):
      with tf.device(_device(source)):
        value = tf.timestamp()
      with tf.device(_device(reader)):
        total += value
    return total

  return exchange


def wait_until_reachable(
    served: Sequence[Task], timeout: float,
    any_lost: Callable[[], bool] = lambda: False,
    exchange: Optional[Callable[[], tf.Tensor]] = None,
    client: Optional[Task] = None) -> int:
  """Runs ``exchange`` (default: ``exchange_function(served, client)``)
  until it succeeds; returns the attempts it took (0: no pair to check).

  Raises the exchange's error when it is not an ``UnavailableError``, when
  ``any_lost()`` says a task was lost, or when the next attempt would
  start after ``timeout`` seconds."""
  if not pairs(served, client):
    return 0
  if exchange is None:
    exchange = exchange_function(served, client)
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
