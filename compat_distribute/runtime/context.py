"""Entering and leaving cross-replica and replica contexts.

TensorFlow answers ``tf.distribute.get_strategy()`` and friends from the top
entry of a per-thread stack.  This module owns the entries we push there and
the context managers that push and pop them, always in ``try/finally`` so an
exception leaves the stack exactly as it was.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Optional

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.runtime.types import Creator
from compat_distribute.runtime.types import DeviceName
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import StrategyLike


class ThreadMode:
  """One entry of TensorFlow's strategy stack.

  Exactly one of ``cross_replica_context`` and ``replica_context`` is set.
  """

  __slots__ = ("strategy", "cross_replica_context", "replica_context")

  def __init__(self, strategy: StrategyLike, cross_replica_context: Any,
               replica_context: tf.distribute.ReplicaContext) -> None:
    self.strategy = strategy
    self.cross_replica_context = cross_replica_context
    self.replica_context = replica_context

  def __repr__(self) -> str:
    kind = "cross-replica" if self.replica_context is None else "replica"
    return f"ThreadMode({kind}, strategy={self.strategy!r})"


def cross_replica_mode(strategy: StrategyLike) -> ThreadMode:
  """The stack entry for ``strategy``'s cross-replica context."""
  return ThreadMode(strategy, strategy, None)


_get_default_graph = tf.compat.v1.get_default_graph  # bound once: hot path


def push(mode: ThreadMode) -> None:
  _tf_private.strategy_stack().append(mode)


def pop(mode: ThreadMode) -> None:
  """Pops ``mode``, which must be the top entry (a nesting bug otherwise)."""
  pop_from(_tf_private.strategy_stack(), mode)


def pop_from(stack: list[Nest], mode: ThreadMode) -> None:
  """Pops ``mode`` from ``stack`` (a thread's strategy stack, at hand)."""
  if not stack or stack[-1] is not mode:
    raise RuntimeError(
        "Strategy contexts were exited out of order: expected to leave "
        f"{mode!r} but the innermost context is "
        f"{stack[-1] if stack else 'none'!r}. Exit `with` blocks in the "
        "reverse order they were entered.")
  stack.pop()


def current_mode() -> Optional[ThreadMode]:
  """The top stack entry, or None when only the default strategy is active."""
  stack = _tf_private.strategy_stack()
  return stack[-1] if stack else None


@dataclasses.dataclass(frozen=True)
class ScopePlan:
  """What entering a strategy's scope installs, as its ``extended`` hands it
  over (built once, ``api/extended.py``), so this layer reads nothing
  private of a strategy.

  Attributes:
    variable_creator: installed as by ``tf.variable_creator_scope``.
    default_device: entered as ``tf.device`` when not None.
    partition_getter: the custom getter of the scope's
      ``tf.compat.v1.variable_scope``.
  """
  variable_creator: Creator
  default_device: Optional[DeviceName]
  partition_getter: Creator


def enter_scope(strategy: StrategyLike, plan: ScopePlan,
                variable_getter: bool = True) -> Optional[list[Nest]]:
  """Enters ``strategy``'s scope (see ``StrategyScope``) on the calling
  thread; returns the token ``exit_scope`` takes.

  Makes ``strategy`` current in cross-replica context, installs its
  variable creator (as ``tf.variable_creator_scope`` would) and, if it has
  one, its default device.  With ``variable_getter`` it also enters a
  ``tf.compat.v1.variable_scope`` whose custom getter drops
  ``tf.compat.v1.get_variable``'s ``partitioner`` where the strategy does
  not allow partitioned variables (TensorFlow's rule).  The token is None
  when ``strategy`` was already current in cross-replica context (nothing
  to undo).  ``strategy.run`` calls this directly: it is the cheap core of
  ``strategy.scope()``.

  Raises:
    RuntimeError: another strategy is current, or ``strategy`` is in
      replica context.
  """
  graph = _get_default_graph()
  stack = _tf_private.strategy_stack_of(graph)
  if stack:
    mode = stack[-1]
    if mode.strategy is not strategy:
      raise RuntimeError(
          "Cannot enter the scope of one tf.distribute.Strategy inside the "
          f"scope of another: {strategy!r} was entered while "
          f"{mode.strategy!r} is current. Exit the outer `with "
          "strategy.scope():` block first, or use the same strategy object.")
    if mode.replica_context is not None:
      raise RuntimeError(
          f"{strategy!r}.scope() was entered in replica context (inside "
          "`strategy.run`). The scope is a cross-replica context; enter it "
          "outside `run`, or use `tf.distribute.get_replica_context()."
          "merge_call` to reach cross-replica context from a replica.")
    return None
  mode = ThreadMode(strategy, strategy, None)
  stack.append(mode)
  try:
    creators = _tf_private.push_variable_creator(
        graph, plan.variable_creator)
    device_scope = None
    try:
      if plan.default_device:
        device_scope = tf.device(plan.default_device)
        device_scope.__enter__()
      var_scope = None
      if variable_getter:
        var_scope = tf.compat.v1.variable_scope(
            tf.compat.v1.get_variable_scope(),
            custom_getter=plan.partition_getter,
            auxiliary_name_scope=False)
        var_scope.__enter__()
    except BaseException:
      if device_scope is not None:
        device_scope.__exit__(None, None, None)
      _tf_private.pop_variable_creator(graph, creators)
      raise
  except BaseException:
    pop_from(stack, mode)
    raise
  return [graph, mode, creators, device_scope, var_scope]


def exit_scope(token: Optional[list[Nest]], finish_all: bool = True) -> None:
  """Leaves what ``enter_scope`` entered, innermost first.

  A step fails with ``RuntimeError`` when a scope entered inside the
  strategy's scope (a device, a variable creator or, for
  ``StrategyScope``, a ``tf.compat.v1.variable_scope``) is still open.
  With ``finish_all`` (what ``run`` uses) every step still runs and the
  first error is raised.  Without it (``StrategyScope``) the first failing
  step stops the exit and the steps not yet done stay in ``token``, so once
  the inner scope is closed, exiting again completes: TensorFlow's
  behaviour for a scope's ``__exit__``.
  """
  if token is None:
    return
  graph, mode, creators, device_scope, var_scope = token[:5]
  error = None
  if len(token) > 5 and token[5] is not None:
    if tf.compat.v1.get_variable_scope() is not token[5]:
      error = _nesting_error("Variable", "tf.compat.v1.variable_scope")
      if not finish_all:
        _leave_graph_of(var_scope)
        raise error
    token[5] = None
  if var_scope is not None and error is None:
    try:
      var_scope.__exit__(None, None, None)
      token[4] = None
    except Exception as e:  # pylint: disable=broad-except
      error = _nesting_error("Variable", "tf.compat.v1.variable_scope")
      if not finish_all:
        raise error from e
  if device_scope is not None:
    try:
      device_scope.__exit__(None, None, None)
      token[3] = None
    except Exception as e:  # pylint: disable=broad-except
      error = _nesting_error("Device", "tf.device")
      if not finish_all:
        raise error from e
  if creators is not None:
    try:
      _tf_private.pop_variable_creator(graph, creators)
      token[2] = None
    except Exception as e:  # pylint: disable=broad-except
      error = error or _nesting_error(
          "Variable creator", "tf.variable_creator_scope")
      if not finish_all:
        raise error from e
  try:
    stack = _tf_private.strategy_stack_of(graph)
    if mode in stack:  # (not if an exit cut short by an interrupt did it)
      pop_from(stack, mode)
  except Exception as e:  # pylint: disable=broad-except
    error = error or e
  if error is not None:
    raise error


def _leave_graph_of(var_scope: Any) -> None:
  """Undoes the default-graph push of a variable scope that cannot be
  exited yet.

  Entered in a TF1 graph, a ``tf.compat.v1.variable_scope`` also makes that
  graph the default, and its exit pops the graph even when the variable
  scope itself is still nested (TensorFlow's strategy scope fails the same
  way), so leaving the user's ``with graph.as_default()`` block leaves no
  graph behind.  The variable-scope part fails without changing anything
  and completes when the strategy scope is exited again (the graph part is
  then already done).
  """
  try:
    var_scope.__exit__(None, None, None)
  except RuntimeError:
    pass


def _nesting_error(kind: str, api: str) -> RuntimeError:
  return RuntimeError(
      f"{kind} scope nesting error: a `{api}` entered inside the strategy's "
      "scope is still open while the strategy scope is exited. "
      "Exit `with` blocks in the reverse order they were entered; once the "
      "inner scope is closed, exiting the strategy scope again completes.")


class StrategyScope:
  """What ``strategy.scope()`` returns.

  On entry it makes ``strategy`` current in cross-replica context, installs
  the strategy's variable creator and, if the strategy has one, its default
  device.  Re-entering the scope of the strategy that is already current is a
  no-op; entering a different strategy's scope raises ``RuntimeError``.
  """

  def __init__(self, strategy: StrategyLike, plan: ScopePlan) -> None:
    self._strategy = strategy
    self._plan = plan
    # One (exit_scope token, entering thread's id) per __enter__.
    self._entered: list[tuple[Any, int]] = []

  def __repr__(self) -> str:
    return f"StrategyScope({self._strategy!r})"

  def __enter__(self) -> StrategyLike:
    token = enter_scope(self._strategy, self._plan)
    if token is not None:
      # Checked on exit: a variable_scope left open inside is a nesting error.
      token.append(tf.compat.v1.get_variable_scope())
    self._entered.append((token, threading.get_ident()))
    return self._strategy

  def __exit__(self, exc_type, exc_value, traceback) -> None:
    # The token is dropped only once the exit completed, so after a nesting
    # error (inner scope still open) a second __exit__ can finish the job.
    if not self._entered:
      raise RuntimeError(
          f"{self!r} was exited more times than it was entered. Exit a "
          "strategy scope once per `with` (or __enter__).")
    token, thread_id = self._entered[-1]
    if thread_id != threading.get_ident():
      # TensorFlow's contexts are per thread: exiting here would undo
      # nothing of the entering thread's and break its own exit.
      raise RuntimeError(
          f"{self!r} was exited on thread {threading.current_thread().name!r}"
          f" but entered on another thread (id {thread_id}). Exit a "
          "strategy scope on the thread that entered it.")
    exit_scope(token, finish_all=False)
    self._entered.pop()


class CrossReplicaFromReplica:
  """Temporarily switches a replica thread to cross-replica context.

  Used around ``merge_fn`` in ``ReplicaContext.merge_call``.
  """

  __slots__ = ("_mode",)

  def __init__(self, strategy: StrategyLike) -> None:
    self._mode = cross_replica_mode(strategy)

  def __enter__(self) -> None:
    push(self._mode)

  def __exit__(self, exc_type, exc_value, traceback) -> None:
    pop(self._mode)


def in_replica_context_of(strategy: StrategyLike) -> bool:
  mode = current_mode()
  return (mode is not None and mode.strategy is strategy and
          mode.replica_context is not None)


def require_cross_replica(strategy: StrategyLike, method: str,
                          replica_alternative: str = "") -> None:
  """Raises ``RuntimeError`` unless in ``strategy``'s cross-replica context.

  The default strategy's context (nothing entered) is also accepted, as in
  TensorFlow.
  """
  mode = current_mode()
  if mode is None:
    return
  refuse_other_strategy(strategy, method)
  if mode.replica_context is not None:
    hint = (f" Use {replica_alternative} in replica context instead."
            if replica_alternative else
            " Call it from cross-replica context, e.g. via "
            "`tf.distribute.get_replica_context().merge_call`.")
    raise RuntimeError(
        f"{method} requires cross-replica context, but it was called inside "
        f"`run` (replica context).{hint}")


def refuse_other_strategy(strategy: StrategyLike, method: str) -> None:
  """Raises ``RuntimeError`` when a strategy other than ``strategy`` is
  current (its scope, or a replica of its ``run``).

  >>> from compat_distribute import v2 as distribute
  >>> one, other = (distribute.OneDeviceStrategy("/cpu:0") for _ in "ab")
  >>> refuse_other_strategy(one, "it")  # nothing entered: fine
  >>> with other.scope():
  ...   refuse_other_strategy(one, "it")
  Traceback (most recent call last):
  ...
  RuntimeError: it of OneDeviceStrategy(...) was called while a different strategy, ...
  """
  mode = current_mode()
  if mode is not None and mode.strategy is not strategy:
    raise RuntimeError(
        f"{method} of {strategy!r} was called while a different strategy, "
        f"{mode.strategy!r}, is current. Call it outside that strategy's "
        "scope, or inside this strategy's own scope.")


def require_scope(strategy: StrategyLike, method: str) -> None:
  """Raises ``RuntimeError`` unless ``strategy`` is the current strategy."""
  mode = current_mode()
  if mode is None or mode.strategy is not strategy:
    current = mode.strategy if mode is not None else "the default strategy"
    raise RuntimeError(
        f"{method} must be called inside `with strategy.scope():` of "
        f"{strategy!r}, but the current strategy is {current!r}. Enter that "
        "strategy's scope first.")


def get_cross_replica_context() -> Any:
  """The current strategy when in its cross-replica context, else None.

  Outside every ``scope()`` the default strategy's replica context is
  current, so this returns None there too (TensorFlow's rule).

  Returns:
    The strategy whose ``scope()`` is current, or None (outside every
    scope, or in replica context inside ``run``).

  Examples:
    >>> from compat_distribute import v2 as distribute
    >>> strategy = distribute.OneDeviceStrategy("/cpu:0")
    >>> distribute.get_cross_replica_context() is None
    True
    >>> with strategy.scope():
    ...   print(distribute.get_cross_replica_context() is strategy)
    ...   print(strategy.run(distribute.get_cross_replica_context))
    True
    None
  """
  mode = current_mode()
  return None if mode is None else mode.cross_replica_context
