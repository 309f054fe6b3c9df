"""Running ``fn`` once per replica, and ``merge_call`` across replicas.

``call_for_each_replica`` is what ``strategy.run`` uses with more than one
replica.  Replica ``i`` runs ``fn`` under ``tf.device(worker_devices[i])``
in its own ``ReplicaContext``; the results are regrouped into per-replica
values (a value that is the same object on every replica, such as a
variable, comes back unwrapped).

How a run proceeds, and why it is cheap:

* Eagerly, replica 0 always runs on the calling thread.  If it returns
  without calling ``merge_call``, replicas 1..N-1 also run on the calling
  thread, one after the other: no thread hand-off at all.  While building
  a graph (a v1 graph, a ``tf.function`` being traced), the same loop runs
  on a replica thread instead (``own_thread``), so replicas see a thread's
  fresh state, as TensorFlow's do.
* The first time replica 0 calls ``merge_call``, replicas 1..N-1 move to
  long-lived worker threads, and meet at each ``merge_call``
  (``rendezvous``): ``merge_fn`` runs once, on the calling thread, with
  every replica's arguments grouped, and each gets its part of the result.
* The order of execution is TensorFlow's: replica 0 up to the merge point,
  replica 1 up to it, ..., ``merge_fn``, and again after it.

Worker threads carry the caller's default graph (and ``tf.init_scope``'s
outer graph), strategy stack, variable creators, name scope and variable
scope, so this works eagerly and while tracing a ``tf.function``.  An
exception raised by any replica or by ``merge_fn`` reaches the caller
unchanged; paused replicas are unwound first, so no thread is left waiting.
So does an interrupt (``KeyboardInterrupt``) that reaches the calling
thread while a replica runs on a worker: the run waits for that replica to
pause or end, then unwinds the others (``workers.Lease``).

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.experimental.CentralStorageStrategy(
...     ["/cpu:0", "/cpu:1"])
>>> def step():
...   ctx = tf.distribute.get_replica_context()
...   x = tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 1.0
...   return ctx.merge_call(lambda s, v: s.reduce("SUM", v, axis=None),
...                         args=(x,))
>>> strategy.run(step)
<tf.Tensor: shape=(), dtype=float32, numpy=3.0>
"""
from __future__ import annotations

import sys
from typing import Optional

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.replicas import caller_state
from compat_distribute.runtime import context
from compat_distribute.replicas import errors as replica_errors
from compat_distribute.replicas import own_thread
from compat_distribute.variables import shared as replica_variables
from compat_distribute.replicas import rendezvous as rendezvous_lib
from compat_distribute.values import distributed as values_lib
from compat_distribute.replicas.context import ReplicaContext
from compat_distribute.replicas.plan import Replicas
from compat_distribute.replicas.context import first_replica_variable_scope
from compat_distribute.replicas.rendezvous import replica_scope
from compat_distribute.runtime.types import Creator
from compat_distribute.runtime.types import MergeFn
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReplicaFn
from compat_distribute.runtime.types import StrategyLike

_get_default_graph = tf.compat.v1.get_default_graph
_executing_eagerly = tf.executing_eagerly
_device = _tf_private.device  # tf.device, cheaper while tracing


def call_for_each_replica(replicas: Replicas, fn: ReplicaFn, args: tuple,
                          kwargs: dict) -> Nest:
  """Runs ``fn`` once per replica of ``replicas`` (a strategy's
  ``plan.Replicas``); returns the regrouped results.  Must be called
  inside the strategy's scope.  (A ``tf.function`` goes through
  ``replicated_function`` first, which calls this with its Python function
  while tracing.)"""
  return values_lib.regroup(_run_to_end(_Run.begin(replicas, fn, args, kwargs)))


def _run_to_end(run: "_Run") -> list[Nest]:
  """Runs every replica of ``run``, then ``run.release(...)`` on every exit
  path."""
  returned = False
  try:
    if run.eager:
      results = run.execute_eagerly()
    else:
      results = own_thread.call_on_replica_thread(run.caller,
                                                  run.execute_in_graph)
    returned = True
    return results
  except RuntimeError as e:
    if run.rendezvous is not None:
      run.rendezvous.lease.closed = True
    interrupt = replica_errors.interrupt_behind(e)
    if interrupt is None:
      raise
    raise interrupt  # pylint: disable=raise-missing-from
  finally:
    # First, and no call before it: an interrupt cannot come between the
    # run's end and the mark that lets a later run reclaim its workers.
    if run.rendezvous is not None:
      run.rendezvous.lease.closed = True
    run.release(restore=not returned)


class MultiReplicaContext(ReplicaContext):
  """The replica context of one replica in a run with several."""

  def __init__(self, strategy: StrategyLike, replica_id: int, run: "_Run") -> None:
    super().__init__(strategy, replica_id, run.n)
    self._run = run

  @property
  def shared_variables(self) -> replica_variables.SharedVariables:
    """The variables this run's replicas share (``variables.shared``)."""
    return self._run.variables

  def share_variable(self, next_creator: Creator, **kwargs) -> tf.Variable:
    """The variable creator around this replica's function (see
    ``_Run.call_fn``)."""
    return self._run.variables.create(self, next_creator, kwargs)

  def _gather_to(self, value: Nest, destinations: Nest, axis: int) -> Nest:
    return self._run.gather_to(value, destinations, axis)

  def _merge_call(self, merge_fn: MergeFn, args: tuple,
                  kwargs: dict) -> Nest:
    self._require_running("merge_call")
    return self._run.merge_call(self._replica_id_in_sync_group, merge_fn,
                                args, kwargs)


# -- one run ------------------------------------------------------------------

class _Run:
  """The state of one ``call_for_each_replica``: the replicas' loop on the
  calling thread.

  A run whose replicas never call ``merge_call`` (an eager ``run`` of a
  plain function: the hot path) needs only the replicas' contexts and
  results; the workers, their lease and the merge bookkeeping are the
  ``rendezvous.Rendezvous`` made by the first ``merge_call``, and the
  variables the replicas share are made by the first variable created in a
  replica.  Such an eager run, once over, serves the strategy's next eager
  run (``begin``).
  """

  def __init__(self, replicas: Replicas, eager: bool) -> None:
    plan = replicas.plan
    self.strategy = strategy = plan.strategy
    self.devices = devices = plan.devices
    self.n = n = len(devices)
    self.strategy_creator = plan.variable_creator
    self.gather_to = plan.gather_to
    self.eager = eager
    self.idle_runs: list["_Run"] = replicas.idle_runs
    self.contexts = [MultiReplicaContext(strategy, i, self) for i in range(n)]
    # Each replica's device, and what entering its context sets: its
    # strategy-stack entry and summary flag (see execute_eagerly).
    self.entries = [(device, ctx._thread_context, ctx._records_summaries)  # pylint: disable=protected-access
                    for device, ctx in zip(devices, self.contexts)]
    self.fn: Optional[ReplicaFn] = None
    self.args: Optional[tuple] = None
    self.kwargs: Optional[dict] = None
    self.graph: Optional[tf.Graph] = None
    self.caller: Optional[caller_state.CallerState] = None
    self.caller_device = ""
    self.results: Optional[list[Nest]] = None
    self.error: Optional[BaseException] = None
    # Made by the first merge_call: the workers, their lease (closed when
    # the run ends), and what the replicas' pauses report.
    self.rendezvous: Optional[rendezvous_lib.Rendezvous] = None
    self.shared: Optional[replica_variables.SharedVariables] = None

  @classmethod
  def begin(cls, replicas: Replicas, fn: ReplicaFn, args: tuple,
            kwargs: dict) -> "_Run":
    """A run of ``fn`` on the calling thread's graph: eagerly, one that an
    earlier eager run of the strategy left (``release``), if any.  (A traced
    run is always new: TensorFlow's gradient registry may keep its replica
    contexts.)"""
    if _executing_eagerly():
      try:
        run = replicas.idle_runs.pop()
      except IndexError:  # atomic, unlike a test first: runs on other threads
        run = cls(replicas, True)
    else:
      run = cls(replicas, False)
    run.start(fn, args, kwargs)
    return run

  def start(self, fn: ReplicaFn, args: tuple, kwargs: dict) -> None:
    """Takes this run's function and arguments, and the calling thread's
    state (``caller_state``)."""
    self.fn, self.args, self.kwargs = fn, args, kwargs
    self.graph = graph = _get_default_graph()
    if not self.eager:
      # TF2 graphs already keep device, colocation and control-dependency
      # stacks per thread; a TF1-behaviour graph must, before replicas on
      # several threads push onto them (TensorFlow does the same).
      graph.switch_to_thread_local()
    self.caller = caller = caller_state.CallerState(graph, self.eager)
    self.caller_device = (caller.eager_device[0] or "" if self.eager else
                          _tf_private.current_device())
    self.results = [None] * self.n

  @property
  def variables(self) -> replica_variables.SharedVariables:
    """The variables this run's replicas share (made on first use)."""
    if self.shared is None:
      self.shared = replica_variables.SharedVariables(self.n)
    return self.shared

  def fail(self, error: BaseException) -> BaseException:
    """Records the run's first error; returns ``error``."""
    if self.error is None:
      self.error = error
    return error

  def raise_error(self) -> None:
    raise self.error  # pylint: disable=raising-bad-type

  # -- the calling thread -----------------------------------------------------

  def execute_in_graph(self) -> list[Nest]:
    """Runs every replica, in a graph, and returns their results: replica 0
    on the calling thread; the others after it, there too, or on their
    workers once replica 0 has called merge_call.  Then puts back the
    calling thread's summary state (replica 0 runs here, and TensorFlow's
    replicas never touch it)."""
    try:
      for i in range(self.n):
        if self.rendezvous is not None:
          self.rendezvous.finish_on_workers()
          break
        try:
          self.results[i] = self.run_here(i)
        except BaseException:  # pylint: disable=broad-except
          self.raise_first_error()
          raise
        if self.error is not None:  # user code swallowed it
          self.raise_error()
      return self.results
    finally:
      caller_state.restore_summary(self.caller.summary)

  def execute_eagerly(self) -> list[Nest]:
    """``execute_in_graph``, executing eagerly: each replica's device, its
    strategy-stack entry and its summary flag are set here directly, as
    ``tf.device`` and its context's ``with`` would set them (no scope
    objects: the hot path).

    When the caller's innermost variable creator is the strategy's own
    (the usual case), ``fn`` is called as it is (see ``call_fn``): each
    replica starts from the caller's creators, as TensorFlow's replica
    threads do.
    """
    fn, args, kwargs, graph = self.fn, self.args, self.kwargs, self.graph
    results = self.results
    direct = self.strategy_creator_innermost(self.caller.creators)
    stack = _tf_private.strategy_stack_of(graph)
    summary = _tf_private.summary_state()
    outer_flag = summary.is_recording_distribution_strategy
    try:
      for i, (device_name, mode, flag) in enumerate(self.entries):
        if self.rendezvous is not None:
          self.rendezvous.finish_on_workers()
          break
        device = _tf_private.enter_eager_device(device_name)
        stack.append(mode)
        summary.is_recording_distribution_strategy = flag
        try:
          replica_args = values_lib.select_replica(i, args)
          replica_kwargs = values_lib.select_replica(i, kwargs)
          results[i] = (fn(*replica_args, **replica_kwargs) if direct else
                        self.call_fn(i, replica_args, replica_kwargs, graph))
        except BaseException:  # pylint: disable=broad-except
          self.raise_first_error()
          raise
        finally:
          try:
            context.pop_from(stack, mode)
          finally:
            _tf_private.exit_eager_device(device)
        if self.error is not None:  # user code swallowed it
          self.raise_error()
      return results
    finally:
      try:
        summary.is_recording_distribution_strategy = outer_flag
      finally:
        caller_state.restore_summary(self.caller.summary)

  def raise_first_error(self) -> None:
    """(handling an exception) Raises the run's first error instead, if that
    is another: a replica or ``merge_fn`` failed, and the replica function
    caught that and raised something else."""
    if self.error is not None and sys.exc_info()[1] is not self.error:
      self.raise_error()

  def run_here(self, i: int) -> Nest:
    """Runs replica ``i`` on the calling thread, in a graph."""
    args = values_lib.select_replica(i, self.args)
    kwargs = values_lib.select_replica(i, self.kwargs)
    with _device(self.devices[i]), self.contexts[i]:
      if i == 0:
        with first_replica_variable_scope():
          return self.call_fn(i, args, kwargs)
      with tf.name_scope(replica_scope(self.graph.get_name_scope(), i)), \
          tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(),
                                      reuse=True):
        return self.call_fn(i, args, kwargs)

  def strategy_creator_innermost(self, creators: list[Nest]) -> bool:
    """Whether the strategy's own variable creator is the innermost of
    ``creators`` (a thread's creator stack): it then shares the replicas'
    variables itself (see ``call_fn``)."""
    return bool(creators) and creators[-1][1] == self.strategy_creator

  def call_fn(self, i: int, args: tuple, kwargs: dict,
              graph: Optional[tf.Graph] = None) -> Nest:
    """Calls ``fn`` for replica ``i`` under the variable-sharing creator,
    innermost (above any creator entered around ``run`` or inside the
    strategy's scope), as TensorFlow does: so replica ``i`` > 0 gets replica
    0's variable without the creators beneath being called again.

    When the innermost creator is the strategy's own, it is that creator:
    a strategy that runs several replicas shares their variables in its
    creator (``variables.shared.shared_variable``), so nothing is pushed.
    """
    if graph is None:
      graph = _get_default_graph()
    if self.strategy_creator_innermost(_tf_private.variable_creators(graph)):
      return self.fn(*args, **kwargs)
    token = _tf_private.push_variable_creator(
        graph, self.contexts[i].share_variable)
    try:
      return self.fn(*args, **kwargs)
    finally:
      _tf_private.pop_variable_creator(graph, token)

  def release(self, restore: bool) -> None:
    """Ends the run on every exit path: waits for a replica still running on
    a worker (the calling thread's wait for it may have been interrupted),
    unwinds replicas paused on workers, returns the workers to the pool;
    with ``restore`` (the run raised), puts back the calling thread's
    strategy stack, variable creators and eager device scope (an interrupt
    may have cut an exit short).

    An eager run that never merged is then left for the strategy's next
    eager run, without what this call took.  Any other run detaches its
    replica contexts: while tracing, the gradient function of an
    ``all_reduce`` (``tf.custom_gradient``) keeps its context in
    TensorFlow's process-wide gradient registry, and detached, it no longer
    keeps the run's function, arguments, results and graphs (e.g. a Keras
    model) alive.
    """
    reusable = self.eager and self.rendezvous is None
    if reusable and not restore:  # the hot path: nothing to close or undo
      self.pool()
      return
    try:
      if self.rendezvous is not None:
        self.rendezvous.lease.close()
    finally:
      try:
        if restore:
          self.caller.restore_stacks()
      except BaseException:
        self.caller.restore_stacks()  # an interrupt cut the first short
        raise
      finally:
        if not reusable:
          for ctx in self.contexts:
            ctx._run = None  # pylint: disable=protected-access
    if reusable:  # (not after an interrupt above)
      self.pool()

  def pool(self) -> None:
    """Leaves this (eager, never merged) run for the strategy's next eager
    run, without what its call took."""
    self.fn = self.args = self.kwargs = self.results = self.graph = None
    self.caller = self.error = self.shared = None
    self.idle_runs.append(self)

  # -- merge_call -------------------------------------------------------------

  def merge_call(self, i: int, merge_fn: MergeFn, args: tuple,
                 kwargs: dict) -> Nest:
    """Replica ``i``'s ``merge_call``: replica 0's first one makes the
    run's ``Rendezvous``, which does the rest."""
    if (not tf.executing_eagerly() if self.eager else
        _get_default_graph() is not self.graph):
      # Eager workers each have their own default graph, so eagerly the
      # test is that no tf.function is being traced.
      raise self.fail(rendezvous_lib.nested_merge_error())
    rendezvous = self.rendezvous
    if i == 0:
      if self.error is not None:
        self.raise_error()
      if rendezvous is None:
        # Recorded before it lends workers: the run's end closes its lease
        # even if an interrupt cuts the lending short.
        rendezvous = self.rendezvous = rendezvous_lib.Rendezvous(self)
        rendezvous.take_workers()
      return rendezvous.leader_merge(merge_fn, args, kwargs)
    if rendezvous is None:
      # Replica 0 finished without merge_call; replica i made one.
      raise self.fail(replica_errors.mismatch())
    return rendezvous.worker_merge(i, args, kwargs)
