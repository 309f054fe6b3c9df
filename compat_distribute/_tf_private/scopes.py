"""TensorFlow's private names for the calling thread's graph state: the
strategy stack, the variable creators, control dependencies and control
flow, the summary state (part of ``compat_distribute._tf_private``).

* ``Graph._distribution_strategy_stack`` -- the per-graph, per-thread stack
  whose top entry ``tf.distribute.get_strategy()``,
  ``tf.distribute.get_replica_context()`` and ``in_cross_replica_context()``
  read.  Entering a strategy scope or a replica context has to push onto it;
  there is no public way to do so.  Each entry only needs the attributes
  ``strategy``, ``cross_replica_context`` and ``replica_context``.
* ``Graph._variable_creator_stack`` -- the calling thread's variable
  creators.  ``strategy.run`` runs some replicas on worker threads, which
  start with an empty stack; they get a copy of the caller's so variables
  created inside ``run`` are still placed by the strategy (TensorFlow's own
  replica threads copy it the same way).  ``strategy.scope()`` and
  ``strategy.run`` also install the strategy's creator on it directly
  (``push_variable_creator``), with the ordering and nesting check of
  ``tf.variable_creator_scope`` (whose entries are ``(priority, creator)``
  pairs, default priority 100, kept sorted by priority with a stable sort);
  the public context manager costs ~2.2 µs per enter/exit, about a fifth of
  our whole per-call overhead of an eager ``run``.
* ``Graph._current_control_dependencies()`` -- the control inputs of the
  calling thread's innermost ``tf.control_dependencies`` (graph mode).
  ``merge_fn`` runs once for all replicas, so it must depend on every
  replica's control dependencies at its ``merge_call``, not only replica
  0's.
* ``Graph._get_control_flow_context()`` -- the TF1 ``while_loop`` / ``cond``
  being built.  ``experimental_run_steps_on_iterator`` records the context
  around its loop as ``extended._outer_control_flow_context``, where
  TensorFlow's v1 metrics (``tf.compat.v1.metrics``) create their value ops
  so that they are read once after the loop, as with TensorFlow's
  strategies.
* ``tensorflow.python.ops.summary_ops_v2._summary_state`` -- the calling
  thread's summary writer, step and recording conditions.  A replica context
  sets its ``is_recording_distribution_strategy`` so that only replica 0
  writes summaries (TensorFlow's rule), and replica worker threads take the
  caller's writer, step and ``record_if`` condition, which are thread-local.
* ``saveable_object_util.op_list_to_dict``'s local ``op_list`` -- the
  variables a TF1 ``Saver`` is saving, read from its frame when it asks an
  ``AggregatingVariable`` for its saveables.  TensorFlow's Saver refuses
  when the list holds a CentralStorage variable and its wrapper both; ours
  raises then, and only then, and the Saver passes nothing else that tells.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

import tensorflow as tf

# Refuses an unsupported TensorFlow before any private name below is looked up.
from compat_distribute import _tf_compat  # pylint: disable=unused-import
from tensorflow.python.ops import summary_ops_v2 as _summary_ops_v2

_get_default_graph = tf.compat.v1.get_default_graph  # bound once: hot path
_executing_eagerly = tf.executing_eagerly


def strategy_stack() -> list[Any]:
  """Returns the current thread's strategy stack of the default graph.

  >>> isinstance(strategy_stack(), list)
  True
  """
  return _get_default_graph()._distribution_strategy_stack  # pylint: disable=protected-access


def strategy_stack_of(graph: tf.Graph) -> list[Any]:
  """``graph``'s strategy stack for the calling thread (``strategy_stack``
  for a graph already at hand)."""
  return graph._distribution_strategy_stack  # pylint: disable=protected-access


def set_strategy_stack(graph: tf.Graph, stack: list[Any]) -> None:
  """Replaces ``graph``'s strategy stack for the calling thread.

  Replica worker threads start with an empty stack and need the caller's.
  """
  graph._distribution_strategy_stack = stack  # pylint: disable=protected-access


def variable_creator_stack(graph: tf.Graph) -> Any:
  """The calling thread's variable-creator stack of ``graph`` (a copy)."""
  return list(graph._variable_creator_stack)  # pylint: disable=protected-access


def variable_creators(graph: tf.Graph) -> Any:
  """The calling thread's variable-creator stack of ``graph``, itself (to
  read only: entering a creator scope replaces the list, never changes it).
  """
  return graph._variable_creator_stack  # pylint: disable=protected-access


def set_variable_creator_stack(graph: tf.Graph, stack: Any) -> None:
  """Replaces the calling thread's variable-creator stack of ``graph``."""
  graph._variable_creator_stack = stack  # pylint: disable=protected-access


_CREATOR_PRIORITY = 100  # tf.variable_creator_scope's


def _priority(entry: tuple[int, Any]) -> int:
  return entry[0]


def push_variable_creator(graph: tf.Graph, creator: Any) -> tuple[Any, Any]:
  """Enters ``tf.variable_creator_scope(creator)`` on ``graph`` for the
  calling thread; returns the token ``pop_variable_creator`` takes.

  The new stack is the old one plus ``creator`` at the default priority,
  stably sorted by priority: exactly what the public scope installs.

  >>> g = tf.Graph()
  >>> token = push_variable_creator(g, print)
  >>> variable_creator_stack(g) == [(100, print)]
  True
  >>> pop_variable_creator(g, token)
  >>> variable_creator_stack(g)
  []
  """
  old = graph._variable_creator_stack  # pylint: disable=protected-access
  new = old + [(_CREATOR_PRIORITY, creator)]
  if len(new) > 1:
    new.sort(key=_priority)
  graph._variable_creator_stack = new  # pylint: disable=protected-access
  return old, new


def pop_variable_creator(graph: tf.Graph, token: tuple[Any, Any]) -> None:
  """Leaves the creator scope ``push_variable_creator`` entered.  Nothing
  is left to do if the stack is already the one before the push (an exit
  cut short by an interrupt after this step, and resumed).

  Raises:
    RuntimeError: a creator scope entered after it is still open (then,
      like ``tf.variable_creator_scope``, the stack is left as it is).
  """
  old, new = token
  current = graph._variable_creator_stack  # pylint: disable=protected-access
  if current is old:
    return
  if current is not new:
    raise RuntimeError(
        "Exiting the strategy's variable creator scope without proper "
        "nesting: a tf.variable_creator_scope entered inside it is still "
        "open. Exit `with` blocks in the reverse order they were entered.")
  graph._variable_creator_stack = old  # pylint: disable=protected-access


def current_control_dependencies(graph: tf.Graph) -> set[Any]:
  """Control inputs the calling thread's ops in ``graph`` would get now.

  >>> current_control_dependencies(tf.Graph())
  set()
  """
  return set(graph._current_control_dependencies())  # pylint: disable=protected-access


def control_flow_context() -> Any:
  """The TF1 control-flow context of the default graph (None eagerly, in
  a ``tf.function`` or outside any loop or cond).

  >>> control_flow_context() is None
  True
  """
  if _executing_eagerly():
    return None
  return _get_default_graph()._get_control_flow_context()  # pylint: disable=protected-access


def summary_state() -> Any:
  """The calling thread's summary state: ``writer``, ``step``,
  ``is_recording`` and ``is_recording_distribution_strategy``."""
  return _summary_ops_v2._summary_state  # pylint: disable=protected-access


def tf1_saver_list() -> Optional[list[Any]]:
  """The variables of the TF1 ``Saver`` building on this thread (the
  ``op_list`` of the innermost ``op_list_to_dict`` call), or None."""
  frame = sys._getframe(1)  # pylint: disable=protected-access
  while frame is not None:
    code = frame.f_code
    if (code.co_name == "op_list_to_dict"
        and code.co_filename.endswith("saveable_object_util.py")):
      return frame.f_locals.get("op_list")
    frame = frame.f_back
  return None
