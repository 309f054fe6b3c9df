"""Where the replicas of one run meet at ``merge_call``: the ``Rendezvous``.

A run of several replicas (``threads._Run``) makes its rendezvous at replica
0's first ``merge_call``, and only then: an eager run whose replicas never
merge (the hot path) has none.  The rendezvous lends replicas 1..N-1 a
worker thread each (``workers.Lease``), lets each run to its own
``merge_call`` and pause there, runs ``merge_fn`` once on the calling thread
with every replica's arguments grouped, and hands each replica its part of
the result.  It holds the lease, the workers, the replicas' requests and
the merge results; the run it serves holds the replicas' function,
arguments, contexts and results.

>>> replica_scope("", 1), replica_scope("outer", 2)
('replica_1/', 'outer/replica_2/')
"""
from __future__ import annotations

import contextlib
from typing import ContextManager, Optional

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.replicas import caller_state
from compat_distribute.replicas import errors as replica_errors
from compat_distribute.replicas import workers as workers_lib
from compat_distribute.replicas.context import reentered_variable_scope
from compat_distribute.runtime import context
from compat_distribute.runtime.types import MergeFn
from compat_distribute.runtime.types import Nest
from compat_distribute.values import distributed as values_lib

_device = _tf_private.device  # tf.device, cheaper while tracing


class Rendezvous:
  """The merge bookkeeping of one run (``threads._Run``) of ``n`` replicas.

  ``workers[i]`` runs replica ``i`` (``workers[0]`` is ``None``: replica 0
  runs on the calling thread); ``started[i]`` / ``finished[i]`` say whether
  its job has begun / ended; ``requests[i]`` is the ``(args, kwargs)`` its
  pending ``merge_call`` passed, ``control_deps[i]`` the control
  dependencies in force there (in a graph), ``results[i]`` its part of the
  last ``merge_fn`` result.  ``lease.closed`` is the run's end: a replica
  that reaches ``merge_call`` after it unwinds (``replica_errors.Aborted``).
  """

  def __init__(self, run: "threads._Run") -> None:  # (threads imports this)
    n = run.n
    self.run = run
    self.n = n
    self.lease = workers_lib.Lease()
    self.workers: list[Optional[workers_lib.Worker]] = [None] * n
    self.started = [False] * n
    self.finished = [False] * n
    self.requests: list[Nest] = [None] * n
    self.control_deps: list[Nest] = [()] * n
    self.results: list[Nest] = [None] * n

  def take_workers(self) -> None:
    """Lends replicas 1..N-1 a worker thread each."""
    self.workers[1:] = self.lease.take(self.n - 1)

  # -- the calling thread -----------------------------------------------------

  def advance(self, i: int) -> None:
    """Lets replica ``i`` (on its worker) run to its next pause or end."""
    worker = self.workers[i]
    if self.started[i]:
      worker.resume()
    else:
      self.started[i] = True
      worker.start_job(lambda: self.run_on_worker(i))

  def finish_on_workers(self) -> None:
    """(replica 0 has returned, having called merge_call) Lets replicas
    1..N-1 run to their ends on their workers."""
    run = self.run
    for i in range(1, self.n):
      self.advance(i)
      if run.error is not None:
        run.raise_error()
      if not self.finished[i]:
        raise run.fail(replica_errors.mismatch())

  def leader_merge(self, merge_fn: MergeFn, args: tuple,
                   kwargs: dict) -> Nest:
    """Replica 0's merge_call: gathers the others, runs ``merge_fn``."""
    run = self.run
    self.requests[0] = (args, kwargs)
    for i in range(1, self.n):
      self.advance(i)
      if run.error is not None:
        run.raise_error()
      if self.finished[i]:
        raise run.fail(replica_errors.mismatch())
    merged_args = values_lib.regroup([r[0] for r in self.requests])
    merged_kwargs = values_lib.regroup([r[1] for r in self.requests])
    self.requests = [None] * self.n
    strategy = run.strategy
    try:
      with context.CrossReplicaFromReplica(strategy), \
          _device(None), _maybe_device(run.caller_device), \
          _control_dependencies(self.control_deps), \
          _tf_private.stop_recording(), reentered_variable_scope():
        result = merge_fn(strategy, *merged_args, **merged_kwargs)
    except BaseException as e:
      run.fail(e)
      raise
    for i in range(1, self.n):
      self.results[i] = values_lib.select_replica_result(i, result)
    return values_lib.select_replica_result(0, result)

  # -- a worker thread --------------------------------------------------------

  def worker_merge(self, i: int, args: tuple, kwargs: dict) -> Nest:
    """Replica ``i``'s merge_call, on its worker: pause until merged."""
    if self.lease.closed:
      raise replica_errors.Aborted()
    self.requests[i] = (args, kwargs)
    if not self.run.eager:
      self.control_deps[i] = tuple(
          _tf_private.current_control_dependencies(self.run.graph))
    self.workers[i].pause()
    if self.lease.closed:
      raise replica_errors.Aborted()
    self.control_deps[i] = ()
    result, self.results[i] = self.results[i], None
    return result

  def run_on_worker(self, i: int) -> None:
    """Replica ``i``'s whole job on its worker thread; never raises."""
    run = self.run
    caller = run.caller
    try:
      if self.lease.closed:
        return  # asked to start after the run ended (its leader interrupted)
      with caller_state.BorrowedState(caller):
        args = values_lib.select_replica(i, run.args)
        kwargs = values_lib.select_replica(i, run.kwargs)
        with _device(run.devices[i]), run.contexts[i]:
          if run.eager:
            run.results[i] = run.call_fn(i, args, kwargs)
          else:
            with tf.name_scope(replica_scope(caller.name_scope, i)), \
                tf.compat.v1.variable_scope(caller.var_scope, reuse=True):
              run.results[i] = run.call_fn(i, args, kwargs)
    except replica_errors.Aborted:
      pass
    except BaseException as e:  # pylint: disable=broad-except
      run.fail(e)
    finally:
      self.finished[i] = True


def nested_merge_error() -> RuntimeError:
  """The error of a ``merge_call`` made outside the graph ``strategy.run``
  was called in."""
  return RuntimeError(
      "merge_call was called inside a nested tf.function or a "
      "control-flow branch of the replica function; all replicas must "
      "reach merge_call in the graph `strategy.run` was called in. Move "
      "the synchronising call (e.g. optimizer.apply_gradients or "
      "all_reduce) out of the nested tf.function / tf.cond / "
      "tf.while_loop, or wrap the whole `strategy.run` in one "
      "tf.function.")


def replica_scope(outer: str, i: int) -> str:
  """The name scope replica ``i`` > 0 builds its graph in, inside
  ``outer``."""
  return f"{outer}/replica_{i}/" if outer else f"replica_{i}/"


_NULL = contextlib.nullcontext()


def _maybe_device(device: str) -> ContextManager[None]:
  return _device(device) if device else _NULL


def _control_dependencies(per_replica: list[Nest]) -> ContextManager[None]:
  ops = [op for deps in per_replica for op in deps]
  return tf.control_dependencies(ops) if ops else _NULL
