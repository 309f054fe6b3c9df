"""The calling thread's state that a replica worker thread borrows.

A worker thread (``workers``) starts with TensorFlow's per-thread
defaults -- its own default graph, an empty strategy stack, no variable
creators, no summary writer.  To run a replica as if on the calling thread
it re-enters what the caller had: ``CallerState`` captures it on the calling
thread when a run starts, ``BorrowedState`` installs it on the worker (and
undoes it when the replica ends).
"""
from __future__ import annotations

from typing import Callable, ContextManager, Optional

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.runtime.types import Nest

_get_default_graph = tf.compat.v1.get_default_graph

# A thread's summary writer, step and recording condition (TensorFlow's
# private summary state holds them; their types are its own).
SummarySnapshot = tuple[object, Optional[tf.Variable], object]


def summary_snapshot() -> SummarySnapshot:
  """The calling thread's summary writer, step and recording condition
  (TensorFlow keeps them per thread)."""
  state = _tf_private.summary_state()
  return state.writer, state.step, state.is_recording


def restore_summary(snapshot: SummarySnapshot) -> None:
  """Makes ``snapshot`` the calling thread's summary state again."""
  state = _tf_private.summary_state()
  state.writer, state.step, state.is_recording = snapshot


def keeping_summary_state(call: Callable[[], Nest]) -> Nest:
  """Returns ``call()``, then puts back the calling thread's summary
  writer, step and recording condition.

  TensorFlow runs every replica of a CentralStorageStrategy (even a single
  one) on a thread of its own, so a replica's
  ``tf.summary.experimental.set_step`` or ``writer.set_as_default()`` never
  reaches the caller; ours run replica 0 on the calling thread.

  >>> keeping_summary_state(lambda: tf.summary.experimental.set_step(7))
  >>> tf.summary.experimental.get_step() is None
  True
  """
  saved = summary_snapshot()
  try:
    return call()
  finally:
    restore_summary(saved)


class CallerState:
  """What a worker thread must re-enter to act like the calling thread;
  captured on the calling thread when a run starts."""

  __slots__ = ("graph", "eager", "init_graph", "init_eager", "strategy_stack",
               "creators", "init_strategy_stack", "init_creators",
               "name_scope", "var_scope", "summary", "eager_device")

  def __init__(self, graph: tf.Graph, eager: bool) -> None:
    self.graph = graph
    self.eager = eager
    self.summary = summary_snapshot()
    self.eager_device = _tf_private.eager_device_state()
    self.strategy_stack = list(_tf_private.strategy_stack_of(graph))
    # Kept, not copied: entering a creator scope replaces the list.
    self.creators = _tf_private.variable_creators(graph)
    if eager:
      self.init_graph, self.init_eager = graph, True
      self.init_strategy_stack, self.init_creators = None, None
      self.name_scope, self.var_scope = "", None
      return
    # What tf.init_scope lifts to (the eager context, or the outermost
    # graph), with its stacks, so that init_scope inside a replica behaves
    # on a worker as it does on the calling thread.
    with tf.init_scope():
      init_graph = _get_default_graph()
      self.init_graph = init_graph
      self.init_eager = tf.executing_eagerly()
      self.init_strategy_stack = list(_tf_private.strategy_stack())
      self.init_creators = _tf_private.variable_creator_stack(init_graph)
    self.name_scope = graph.get_name_scope()
    self.var_scope = tf.compat.v1.get_variable_scope()

  def restore_stacks(self) -> None:
    """(calling thread) Puts back the strategy stack, variable creators and
    eager device scope captured, if they differ: an interrupt that lands as
    a ``with`` block starts to exit can leave a replica's entry behind."""
    if _tf_private.eager_device_state()[1] is not self.eager_device[1]:
      _tf_private.set_eager_device_state(self.eager_device)
    graph = self.graph
    stack = _tf_private.strategy_stack_of(graph)
    if (len(stack) != len(self.strategy_stack) or
        any(a is not b for a, b in zip(stack, self.strategy_stack))):
      _tf_private.set_strategy_stack(graph, list(self.strategy_stack))
    if _tf_private.variable_creator_stack(graph) != self.creators:
      _tf_private.set_variable_creator_stack(graph, list(self.creators))

  def __repr__(self) -> str:
    mode = "eager" if self.eager else f"graph {self.graph!r}"
    return (f"CallerState({mode}, name_scope={self.name_scope!r}, "
            f"{len(self.strategy_stack)} strategy context(s), "
            f"{len(self.creators)} variable creator(s))")


class BorrowedState:
  """On a worker thread: enters the caller's ``tf.init_scope`` graph and
  default graph (unless the caller runs eagerly), and installs copies of the
  caller's strategy stack and variable creators; restores all on exit."""

  __slots__ = ("_caller", "_undo")

  def __init__(self, caller: CallerState) -> None:
    self._caller = caller
    self._undo: list[Callable[[], None]] = []

  def __repr__(self) -> str:
    return f"BorrowedState({self._caller!r})"

  def __enter__(self) -> None:
    caller = self._caller
    try:
      self._install_summary_state(caller.summary)
      if caller.init_eager and not tf.executing_eagerly():
        # Eager execution is disabled process-wide and the caller is in an
        # eager block: this thread starts in graph mode; run eagerly too.
        self._enter(_tf_private.eager_mode())
      if caller.eager:
        self._install(caller.strategy_stack, caller.creators)
        return
      if caller.init_graph is not caller.graph:
        if not caller.init_eager:
          self._enter(caller.init_graph.as_default())
        self._install(caller.init_strategy_stack, caller.init_creators)
      self._enter(caller.graph.as_default())
      self._install(caller.strategy_stack, caller.creators)
    except BaseException:
      self.__exit__(None, None, None)
      raise

  def _install_summary_state(self, summary: SummarySnapshot) -> None:
    """The caller's summary writer, step and record_if condition, which
    TensorFlow keeps per thread."""
    old = summary_snapshot()
    self._undo.append(lambda: restore_summary(old))
    restore_summary(summary)

  def _enter(self, manager: ContextManager[object]) -> None:
    manager.__enter__()
    self._undo.append(lambda: manager.__exit__(None, None, None))

  def _install(self, stack: list[Nest], creators: list[Nest]) -> None:
    """Gives the current default graph, on this thread, copies of the
    caller's strategy stack and variable creators."""
    graph = _get_default_graph()
    old_stack = _tf_private.strategy_stack()
    old_creators = _tf_private.variable_creator_stack(graph)

    def restore():
      _tf_private.set_variable_creator_stack(graph, old_creators)
      _tf_private.set_strategy_stack(graph, old_stack)

    self._undo.append(restore)
    _tf_private.set_strategy_stack(graph, list(stack))
    _tf_private.set_variable_creator_stack(graph, list(creators))

  def __exit__(self, *exc: object) -> None:
    """Undoes everything, innermost first; every step runs."""
    error = None
    while self._undo:
      try:
        self._undo.pop()()
      except Exception as e:  # pylint: disable=broad-except
        error = error or e
    if error is not None:
      raise error
