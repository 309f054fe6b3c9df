"""TensorFlow's private names for device scopes: the current device, the
eager context's device scope entered cheaply, colocation, eager mode (part
of ``compat_distribute._tf_private``).

* ``tensorflow.python.distribute.device_util.current`` -- the device named by
  the innermost ``tf.device`` scope (eager or graph), which is where
  ``Strategy.reduce`` and ``gather`` put their result.  TensorFlow has no
  public query for the current device scope.
* ``tensorflow.python.eager.context.device`` -- the eager context's device
  scope, which is what ``tf.device`` enters when executing eagerly and,
  while a ``tf.function`` is traced, enters next to ``Graph.device``.
  ``device()`` here does the same as ``tf.device`` for a device name or
  None; ``tf.device`` builds and decorates a new generator function on every
  call while tracing (~45 µs in a two-replica trace against ~10 µs), and
  ``run`` and the reductions enter a dozen device scopes per training step.
* ``Context.device_spec`` and ``Context._set_device`` (the eager context's)
  -- the calling thread's eager device scope, as the ``tf.device`` scope
  object that must find it on exit (TensorFlow checks it by identity).
  ``tf.device``'s exit forgets its entry and then restores the device in a
  second Python call; a ``KeyboardInterrupt`` from a signal handler landing
  between the two leaves the thread on the inner device, and every
  enclosing scope's exit then fails ("Exiting device scope without proper
  scope nesting").  A run that ends by an interrupt puts back the state it
  started with (``eager_device_state``), so the caller's thread is usable
  again.  Both exist in this form since TensorFlow 2.0.  An eager ``run``
  enters each replica's device without them (``enter_eager_device``): it
  sets the two fields ``_set_device`` writes, ``device_name`` and
  ``device_spec`` of ``Context._thread_local_data``, to the state
  ``tf.device`` would set, cached per outer and inner name as TensorFlow
  caches it, with the same nesting check on exit: 1.2 µs against the
  scope object's 2.7 µs per enter and exit.
* ``tensorflow.python.framework.ops.colocate_with`` -- the same scope as
  ``tf.compat.v1.colocate_with`` without its deprecation warning (TensorFlow
  keeps this alias for its own code).  TensorFlow's strategies create a
  variable with ``colocate_with`` (an optimizer slot's primary variable) in
  a colocation scope, and CentralStorage creates every other variable after
  clearing the caller's device and colocation scopes; in TF1 graphs the
  scope decides the variable's device string and its ``_class`` attribute.
* ``tensorflow.python.eager.context.eager_mode`` -- runs a block as if
  executing eagerly.  ``tf.config.list_logical_devices`` initialises
  TensorFlow's runtime on first use, and initialised while a TF1 graph is
  the default it leaves soft device placement off for the whole process
  (the default is taken from the mode at that moment); strategies made in
  a TF1 graph list devices, so they do it in eager mode (see
  ``list_logical_devices`` below).  Replica worker threads also enter it
  when eager execution is disabled process-wide but ``run`` is called in an
  eager block: a new thread starts in the process default (graph) mode.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

import tensorflow as tf

# Refuses an unsupported TensorFlow before any private name below is looked up.
from compat_distribute import _tf_compat  # pylint: disable=unused-import
from tensorflow.python.distribute import device_util as _device_util
from tensorflow.python.eager import context as _eager_context
from tensorflow.python.framework import ops as _ops

_get_default_graph = tf.compat.v1.get_default_graph  # bound once: hot path


def current_device() -> str:
  """The device of the innermost ``tf.device`` scope, or ``''``.

  >>> with tf.device("/cpu:0"):
  ...   current_device()
  '/job:localhost/replica:0/task:0/device:CPU:0'
  """
  return _device_util.current() or ""


def colocate_with(target: Any, ignore_existing: bool = False) -> Any:
  """``tf.compat.v1.colocate_with(target, ignore_existing)``, silently.

  ``colocate_with(None, ignore_existing=True)`` clears the device and
  colocation scopes of a graph (nothing to clear when executing eagerly).

  >>> with tf.Graph().as_default():
  ...   with tf.device("/cpu:1"), colocate_with(None, ignore_existing=True):
  ...     print(repr(tf.constant(1.0).op.device))
  ''
  """
  return _ops.colocate_with(target, ignore_existing=ignore_existing)


def eager_mode() -> Any:
  """A scope that executes eagerly on the calling thread, even where eager
  execution is disabled process-wide."""
  return _eager_context.eager_mode()


def list_logical_devices(device_type: Optional[str] = None) -> list[Any]:
  """``tf.config.list_logical_devices``, leaving TensorFlow's defaults as
  they are when it is the first call that initialises the runtime.

  >>> [d.device_type for d in list_logical_devices("CPU")][:1]
  ['CPU']
  """
  with _eager_context.eager_mode():
    return tf.config.list_logical_devices(device_type)


_executing_eagerly = tf.executing_eagerly
_eagerly_outside_functions = tf.compat.v1.executing_eagerly_outside_functions


def eager_device_state() -> tuple[Any, Any]:
  """The calling thread's eager device scope: (name, spec) as the eager
  context holds them (``set_eager_device_state`` puts them back).

  >>> with tf.device("/cpu:0"):
  ...   print(eager_device_state()[0])
  /job:localhost/replica:0/task:0/device:CPU:0
  """
  data = _eager_context.context()._thread_local_data  # pylint: disable=protected-access
  return data.device_name, data.device_spec


def set_eager_device_state(state: tuple[Any, Any]) -> None:
  """Makes ``state`` (from ``eager_device_state``) the calling thread's
  eager device scope again."""
  _eager_context.context()._set_device(*state)  # pylint: disable=protected-access


# (outer device name, device name) -> the eager device state tf.device(name)
# enters under the outer one (TensorFlow keeps the same cache for its scope).
_ENTERED_EAGER_DEVICES: dict[tuple[Any, str], tuple[Any, Any]] = {}


def enter_eager_device(name: str) -> tuple[Any, Any, Any, Any]:
  """Enters ``tf.device(name)`` on the calling thread, executing eagerly,
  without a scope object; returns the token ``exit_eager_device`` takes.

  The eager context keeps a thread's device as two fields of its
  thread-local data (what ``Context._set_device`` writes); they are set
  directly.

  >>> token = enter_eager_device("/cpu:0")
  >>> print(tf.constant(1.0).device)
  /job:localhost/replica:0/task:0/device:CPU:0
  >>> exit_eager_device(token)
  """
  data = _eager_context.context()._thread_local_data  # pylint: disable=protected-access
  outer_name, outer_spec = data.device_name, data.device_spec
  entered = _ENTERED_EAGER_DEVICES.get((outer_name, name))
  if entered is None:
    with _eager_context.device(name):
      entered = (data.device_name, data.device_spec)
    _ENTERED_EAGER_DEVICES[(outer_name, name)] = entered
  data.device_name, data.device_spec = entered
  return data, outer_name, outer_spec, entered[1]


def exit_eager_device(token: tuple[Any, Any, Any, Any]) -> None:
  """Leaves the device ``enter_eager_device`` entered.

  Raises:
    RuntimeError: a device scope entered after it is still open (then, as
      with ``tf.device``, the device is left as it is).
  """
  data, outer_name, outer_spec, entered_spec = token
  if data.device_spec is not entered_spec:
    raise RuntimeError(
        "Exiting a device scope without proper nesting: a "
        "tf.device scope entered inside it is still open. Exit `with` "
        "blocks in the reverse order they were entered.")
  data.device_name, data.device_spec = outer_name, outer_spec


def device(name: Optional[str]) -> Any:
  """``tf.device(name)`` for a device name (or None), entered the same way:
  the eager context's device scope when executing eagerly; while tracing a
  ``tf.function``, the graph's device scope and then the eager context's;
  in a TF1 graph, the graph's only.

  >>> with device("/cpu:0"):
  ...   print(tf.constant(1.0).device)
  /job:localhost/replica:0/task:0/device:CPU:0
  >>> with tf.Graph().as_default():
  ...   with device("/cpu:0"):
  ...     print(tf.constant(1.0).op.device)
  /device:CPU:0
  """
  if _executing_eagerly():
    return _EagerDevice(name)
  graph = _get_default_graph()
  if _eagerly_outside_functions():
    return _GraphAndEagerDevice(graph.device(name),
                                _eager_context.device(name))
  return graph.device(name)


class _EagerDevice:
  """``tf.device(name)`` executing eagerly, entered and left through
  ``enter_eager_device`` / ``exit_eager_device`` (what ``tf.device``'s
  eager scope object sets, without its stack and spec handling)."""

  __slots__ = ("_name", "_token")

  def __init__(self, name: Optional[str]) -> None:
    self._name = name

  def __enter__(self) -> None:
    self._token = enter_eager_device(self._name)

  def __exit__(self, *exc: Any) -> None:
    exit_eager_device(self._token)


class _GraphAndEagerDevice:
  """Enters a graph device scope, then the eager context's (as the scope
  ``tf.device`` returns while a ``tf.function`` is traced)."""

  __slots__ = ("_graph_scope", "_eager_scope")

  def __init__(self, graph_scope: Any, eager_scope: Any) -> None:
    self._graph_scope = graph_scope
    self._eager_scope = eager_scope

  def __enter__(self) -> None:
    self._graph_scope.__enter__()
    try:
      self._eager_scope.__enter__()
    except BaseException:
      self._graph_scope.__exit__(*sys.exc_info())
      raise

  def __exit__(self, *exc: Any) -> None:
    try:
      self._eager_scope.__exit__(*exc)
    finally:
      self._graph_scope.__exit__(*exc)
