"""Building a graph's replicas on a thread of their own, as TensorFlow does.

TensorFlow's CentralStorage (and Mirrored) strategies run each replica's
function on a new thread, even while building a graph.  Libraries keep
state per thread -- tf-keras' seed generator behind
``tf.keras.utils.set_random_seed``, Keras 3's global state (call context,
name scopes, seed generator), a program's own ``threading.local`` -- so
what a replica function sees there is a thread's fresh state, not the
caller's.  That decides real numbers: a Keras model cloned inside an
Estimator's ``model_fn`` (``model_to_estimator``) draws its initial weights
from the seed generator of the thread it is built on, and on a fresh
thread that is Python's global ``random`` (seeded by ``set_random_seed``
too), as on TensorFlow.

``call_on_replica_thread(caller, call)`` runs ``call`` -- a whole run's
replica loop while building a graph (``threads``), or its only replica
(``runner``) -- on a worker thread (``workers``) that borrows what
TensorFlow's replica threads borrow from the caller: its default graph and
``tf.init_scope`` graph, strategy stack, variable creators, summary state,
name scope and variable scope (``caller_state``).  The calling thread waits;
whatever ``call`` returns or raises is returned or raised there.  Eager
runs of a plain function stay on the calling thread: that is the per-step
hot path (docs/differences.md).

>>> import tensorflow as tf
>>> from compat_distribute.replicas import caller_state
>>> import threading
>>> with tf.Graph().as_default() as graph, tf.name_scope("outer"):
...   state = caller_state.CallerState(graph, eager=False)
...   name, op = call_on_replica_thread(
...       state, lambda: (threading.current_thread().name,
...                       tf.constant(1.0, name="c").op.name))
>>> name, op
('compat_distribute-replica', 'outer/c')
"""
from __future__ import annotations

from typing import Callable, TypeVar

import tensorflow as tf

from compat_distribute.replicas import caller_state
from compat_distribute.replicas import workers

Result = TypeVar("Result")


def call_on_replica_thread(caller: caller_state.CallerState,
                           call: Callable[[], Result]) -> Result:
  """Returns ``call()``, run on a replica worker thread that borrows
  ``caller`` (captured on the calling thread, in a graph); raises what it
  raises."""
  lease = workers.Lease()
  worker = lease.take(1)[0]
  outcome: list[tuple[bool, object]] = []

  def job() -> None:
    try:
      # The caller's name scope and variable scope as they are: entering
      # the scope object opens no name scope of its own here, since
      # ``call`` re-enters it as it would on the calling thread.
      with caller_state.BorrowedState(caller), \
          caller.graph.name_scope(_absolute(caller.name_scope)), \
          tf.compat.v1.variable_scope(caller.var_scope,
                                      auxiliary_name_scope=False):
        outcome.append((True, call()))
    except BaseException as e:  # pylint: disable=broad-except
      outcome.append((False, e))

  try:
    worker.start_job(job)
  finally:
    lease.closed = True
    lease.close()
  returned, value = outcome[0]
  if not returned:
    raise value  # pylint: disable=raising-bad-type
  return value  # type: ignore[return-value]


def _absolute(name_scope: str) -> str:
  """``name_scope`` as ``Graph.name_scope`` re-enters it ("" is the top)."""
  return name_scope + "/" if name_scope else ""
