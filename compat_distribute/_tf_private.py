"""The only door to TensorFlow's private names.

Every other module reaches TensorFlow through public ``tf.*``, through the
helpers here, or through the sibling ``_tf_compat`` (``tf.__internal__`` and
public names that differ between versions), so that a TensorFlow upgrade
that moves one of these names breaks exactly one file.

Private names used (each present on every supported TensorFlow, 2.12 to
2.22; names that moved between versions say where they live on which).
Checked again on 2.22.0rc0 and on the 2.23 nightly 2.23.0.dev20261026:
every name below is there, with the signature it has on 2.21.

* ``Graph._distribution_strategy_stack`` -- the per-graph, per-thread stack
  whose top entry ``tf.distribute.get_strategy()``,
  ``tf.distribute.get_replica_context()`` and ``in_cross_replica_context()``
  read.  Entering a strategy scope or a replica context has to push onto it;
  there is no public way to do so.  Each entry only needs the attributes
  ``strategy``, ``cross_replica_context`` and ``replica_context``.
* ``tensorflow.python.distribute.device_util.current`` -- the device named by
  the innermost ``tf.device`` scope (eager or graph), which is where
  ``Strategy.reduce`` and ``gather`` put their result.  TensorFlow has no
  public query for the current device scope.
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
* ``tensorflow.python.framework.ops.EagerTensor`` -- the class of eager
  tensors, which ``values.distributed.regroup`` tests by identity for the
  eager ``run``'s common result (``isinstance`` against ``tf.Tensor`` and
  ``collections.abc.Mapping`` costs more than the regrouping).
* ``tensorflow.python.framework.ops.colocate_with`` -- the same scope as
  ``tf.compat.v1.colocate_with`` without its deprecation warning (TensorFlow
  keeps this alias for its own code).  TensorFlow's strategies create a
  variable with ``colocate_with`` (an optimizer slot's primary variable) in
  a colocation scope, and CentralStorage creates every other variable after
  clearing the caller's device and colocation scopes; in TF1 graphs the
  scope decides the variable's device string and its ``_class`` attribute.
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
* ``tensorflow.python.eager.record.stop_recording`` (``eager.tape`` on
  TensorFlow 2.12; chosen by trying the import) -- pauses the calling
  thread's gradient tapes.  ``merge_fn`` runs on replica 0's thread here
  (TensorFlow runs it on a separate thread, unseen by any replica's tape), so
  without this replica 0's tapes would record it.
* ``Function._clone(python_function=...)`` -- a ``tf.function`` with the same
  options (autograph, jit_compile, reduce_retracing, input_signature) around
  another Python function.  ``strategy.run(tf_function)`` traces all replicas
  into one function, as TensorFlow does; rebuilding it with the public
  ``tf.function`` would drop options that have no public getter.
* ``tensorflow.python.eager.context.eager_mode`` -- runs a block as if
  executing eagerly.  ``tf.config.list_logical_devices`` initialises
  TensorFlow's runtime on first use, and initialised while a TF1 graph is
  the default it leaves soft device placement off for the whole process
  (the default is taken from the mode at that moment); strategies made in
  a TF1 graph list devices, so they do it in eager mode (see
  ``list_logical_devices`` below).  Replica worker threads also enter it
  when eager execution is disabled process-wide but ``run`` is called in an
  eager block: a new thread starts in the process default (graph) mode.
* ``tensorflow.python.framework.type_spec_registry.register`` -- gives a
  ``TypeSpec`` class a name SavedModel can write and look up again.
  TensorFlow registers its own ``PerReplicaSpec`` with the SavedModel coder;
  unregistered, ours made ``tf.saved_model.save`` fail for any function
  taking or returning per-replica values.  There is no public alias.
* ``tensorflow.python.autograph.core.config.CONVERSION_RULES`` -- AutoGraph
  converts every function that converted code calls, unless the function's
  module is listed there (TensorFlow lists itself).  ``compat_distribute`` is
  added at import, so that our internals run as written, like TensorFlow's
  own strategies: converting them made tracing a two-replica training step
  ~6x slower (134 ms against 21 ms).  Functions users pass to ``run`` and
  ``merge_call`` are still converted as the caller's AutoGraph setting says.
* ``tensorflow.python.autograph.operators.py_builtins.enumerate_registry`` --
  how AutoGraph's ``enumerate`` treats a type.  ``enumerate`` over a
  distributed dataset inside ``tf.function`` would otherwise fall back to a
  Python loop that never ends while tracing (``get_next`` in a graph never
  raises StopIteration); TensorFlow registers its own distributed datasets
  and iterators there to raise instead, and we register ours.
* ``tensorflow.python.ops.summary_ops_v2._summary_state`` -- the calling
  thread's summary writer, step and recording conditions.  A replica context
  sets its ``is_recording_distribution_strategy`` so that only replica 0
  writes summaries (TensorFlow's rule), and replica worker threads take the
  caller's writer, step and ``record_if`` condition, which are thread-local.
* ``tensorflow.python.tpu.tpu_strategy_util.get_initialized_tpu_systems`` --
  the TPU systems this process has initialized (``tf.tpu.experimental.
  initialize_tpu_system`` records them there; there is no public query).
  ``auto_strategy`` picks a TPU strategy when one is initialized, and does
  not initialize it a second time (which would reset it).  Present on 2.12
  to 2.22 and the 2.23 nightly; where it is missing, none counts as
  initialized.
* ``tensorflow.python.distribute.input_lib.DistributedDataset`` (its name and
  module only, never the class) -- Keras 3 (``keras.src.trainers.
  data_adapters.is_tf_dataset``, checked in Keras 3.15) accepts a distributed
  dataset as ``model.fit``/``evaluate``/``predict`` input only if a class in
  its MRO is named ``DistributedDataset`` and has a module under
  ``tensorflow.python.``; otherwise it raises "Unrecognized data type".
  ``KerasDistributedDatasetMarker`` is an empty base class with that name and
  module for our distributed datasets.

What Estimator needs of TensorFlow (used by ``compat_distribute.estimator``
only, and only where the running TensorFlow lacks a piece; TensorFlow 2.12
to 2.15 have them all, 2.16 and later none of those marked *removed*):

* ``ESTIMATOR_MODULES`` -- the ``tensorflow.python.*`` module names Estimator
  2.15 imports that TensorFlow 2.16 removed: ``distribute.estimator_training``
  (the glue between ``RunConfig`` / ``train_and_evaluate`` and the distribute
  coordinator) and three TPU modules (``tpu.session_support``,
  ``tpu.tpu_embedding``, ``tpu.tpu_embedding_gradient``).  Putting a module
  in ``sys.modules`` under one of these names (``register_module``) is the
  only way to let ``from tensorflow.python... import ...`` in Estimator's
  unmodified sources succeed; these four are the only names registered.
* ``tensorflow.python.util.tf_export`` -- its ``ESTIMATOR_API_NAME``,
  ``API_ATTRS`` and ``API_ATTRS_V1`` entries for ``"estimator"`` (*removed*
  in 2.16): Estimator's ``estimator_export`` decorator, run on every class
  it exports, looks them up.  ``register_estimator_api`` adds them back in
  the form the other entries have (the named pair of attribute names).
* ``tensorflow.python.distribute.distribute_coordinator`` and
  ``distribute_coordinator_context`` (present from 2.12 to the 2.23
  nightly) -- the coordinator that runs a task of a ``TF_CONFIG`` cluster,
  which the supplied ``estimator_training`` drives as TensorFlow's did.
* ``_tfll_initialized`` / ``_tfll_keras_version`` of TensorFlow's
  ``KerasLazyLoader`` (``tf.keras`` and friends, 2.16+) -- whether
  ``tf.keras`` already resolved to Keras 3 (``keras_state``).  Estimator's
  canned models are Keras 2 code (``tf.keras.layers.DenseFeatures``); the
  loader picks tf-keras only if ``TF_USE_LEGACY_KERAS`` is set when it
  first resolves.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any, Optional

import tensorflow as tf

# Refuses an unsupported TensorFlow before any private name below is looked up.
from compat_distribute import _tf_compat  # pylint: disable=unused-import
from tensorflow.python.distribute import device_util as _device_util
from tensorflow.python.autograph.core import config as _autograph_config
from tensorflow.python.autograph.core import config_lib as _autograph_config_lib
from tensorflow.python.eager import context as _eager_context
try:  # TF 2.13+
  from tensorflow.python.eager import record as _record
except ImportError:  # TF 2.12: the same function lived in eager.tape
  from tensorflow.python.eager import tape as _record
from tensorflow.python.framework import ops as _ops
from tensorflow.python.framework import type_spec_registry as _type_spec_registry
from tensorflow.python.ops import summary_ops_v2 as _summary_ops_v2


_get_default_graph = tf.compat.v1.get_default_graph  # bound once: hot path
EagerTensor = _ops.EagerTensor


def _do_not_autograph_convert(package: str) -> None:
  """Adds ``package`` to AutoGraph's do-not-convert modules (idempotent)."""
  rule = _autograph_config_lib.DoNotConvert(package)
  rules = _autograph_config.CONVERSION_RULES
  if not any(getattr(r, "_prefix", None) == package for r in rules):
    _autograph_config.CONVERSION_RULES = (rule,) + tuple(rules)


_do_not_autograph_convert("compat_distribute")


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


def register_type_spec(name: str) -> Any:
  """Class decorator: registers a ``TypeSpec`` subclass under ``name``
  (``"project.TypeName"``) so SavedModel can save and load it."""
  return _type_spec_registry.register(name)


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


def stop_recording() -> Any:
  """A context manager pausing every gradient tape of the calling thread.

  >>> x = tf.constant(2.0)
  >>> with tf.GradientTape() as tape:
  ...   tape.watch(x)
  ...   with stop_recording():
  ...     y = x * x
  >>> print(tape.gradient(y, x))
  None
  """
  return _record.stop_recording()


def clone_function(function: Any, python_function: Any) -> Any:
  """``function`` (a ``tf.function``) with its options, around
  ``python_function``.

  >>> f = tf.function(lambda x: x + 1, reduce_retracing=True)
  >>> g = clone_function(f, lambda x: x * 10)
  >>> int(g(tf.constant(2)))
  20
  """
  return function._clone(python_function=python_function)  # pylint: disable=protected-access


def forbid_autograph_enumerate(cls: type, message: str) -> None:
  """Makes ``enumerate(x)`` inside AutoGraph raise ``NotImplementedError``
  with ``message`` when ``x`` is a ``cls``."""
  from tensorflow.python.autograph.operators import py_builtins  # pylint: disable=g-import-not-at-top

  def fail(unused_iterable: Any, unused_start: Any) -> None:
    raise NotImplementedError(message)

  py_builtins.enumerate_registry.register(cls, fail)


def summary_state() -> Any:
  """The calling thread's summary state: ``writer``, ``step``,
  ``is_recording`` and ``is_recording_distribution_strategy``."""
  return _summary_ops_v2._summary_state  # pylint: disable=protected-access


def initialized_tpu_systems() -> dict[Any, Any]:
  """The TPU systems this process has initialized, by name (a copy).

  >>> initialized_tpu_systems()
  {}
  """
  try:
    from tensorflow.python.tpu import tpu_strategy_util  # pylint: disable=g-import-not-at-top
  except ImportError:
    return {}
  systems = getattr(tpu_strategy_util, "get_initialized_tpu_systems", None)
  return dict(systems()) if systems is not None else {}


class KerasDistributedDatasetMarker:
  """Empty base class that makes Keras 3 take a subclass as a distributed
  dataset (see the module docstring); it adds no behaviour."""
  __slots__ = ()


# What Keras reads: the class name and module of TensorFlow's own class.
KerasDistributedDatasetMarker.__name__ = "DistributedDataset"
KerasDistributedDatasetMarker.__qualname__ = "DistributedDataset"
KerasDistributedDatasetMarker.__module__ = (
    "tensorflow.python.distribute.input_lib")


# -- What Estimator needs of TensorFlow (compat_distribute.estimator) ---------

ESTIMATOR_MODULES: dict[str, str] = {
    "estimator_training": "tensorflow.python.distribute.estimator_training",
    "session_support": "tensorflow.python.tpu.session_support",
    "tpu_embedding": "tensorflow.python.tpu.tpu_embedding",
    "tpu_embedding_gradient": "tensorflow.python.tpu.tpu_embedding_gradient",
}


def has_module(key: str) -> bool:
  """Whether the module ``ESTIMATOR_MODULES[key]`` is loaded or importable.

  >>> has_module("tpu_embedding_gradient") == (tf.__version__ < "2.16")
  True
  """
  name = ESTIMATOR_MODULES[key]
  if name in sys.modules:
    return True
  try:
    return importlib.util.find_spec(name) is not None
  except ImportError:
    return False


def register_module(key: str, module: types.ModuleType) -> None:
  """Makes ``module`` importable as ``ESTIMATOR_MODULES[key]``."""
  name = ESTIMATOR_MODULES[key]
  parent, _, child = name.rpartition(".")
  sys.modules[name] = module
  setattr(importlib.import_module(parent), child, module)


def unregister_module(key: str, module: types.ModuleType) -> None:
  """Undoes ``register_module(key, module)``; leaves any other module."""
  name = ESTIMATOR_MODULES[key]
  parent, _, child = name.rpartition(".")
  if sys.modules.get(name) is module:
    del sys.modules[name]
  package = sys.modules.get(parent)
  if package is not None and vars(package).get(child) is module:
    delattr(package, child)


def _tf_export() -> Any:
  from tensorflow.python.util import tf_export  # pylint: disable=g-import-not-at-top
  return tf_export


def has_estimator_api() -> bool:
  """Whether TensorFlow's export registry knows the ``estimator`` API name.

  >>> has_estimator_api() == (tf.__version__ < "2.16")
  True
  """
  tf_export = _tf_export()
  name = getattr(tf_export, "ESTIMATOR_API_NAME", None)
  return name is not None and name in tf_export.API_ATTRS


def register_estimator_api(name: str) -> Optional[Any]:
  """Registers the API name ``name`` with TensorFlow's export registry, its
  attribute names spelled as TensorFlow spells its own API's; returns the
  token ``unregister_estimator_api`` takes (None: nothing to add, or a
  registry without the fields the decorator reads)."""
  tf_export = _tf_export()
  attrs = getattr(tf_export, "API_ATTRS", None)
  attrs_v1 = getattr(tf_export, "API_ATTRS_V1", None)
  if not isinstance(attrs, dict) or not isinstance(attrs_v1, dict):
    return None
  pair = type(attrs[tf_export.TENSORFLOW_API_NAME])
  added = {"v2": name not in attrs, "v1": name not in attrs_v1,
           "constant": not hasattr(tf_export, "ESTIMATOR_API_NAME")}
  if added["v2"]:
    attrs[name] = pair(f"_{name}_api_names", f"_{name}_api_constants")
  if added["v1"]:
    attrs_v1[name] = pair(f"_{name}_api_names_v1",
                          f"_{name}_api_constants_v1")
  if added["constant"]:
    tf_export.ESTIMATOR_API_NAME = name
  return (name, added)


def unregister_estimator_api(token: Any) -> None:
  """Takes out what ``register_estimator_api`` added."""
  name, added = token
  tf_export = _tf_export()
  if added["v2"]:
    tf_export.API_ATTRS.pop(name, None)
  if added["v1"]:
    tf_export.API_ATTRS_V1.pop(name, None)
  if added["constant"] and hasattr(tf_export, "ESTIMATOR_API_NAME"):
    del tf_export.ESTIMATOR_API_NAME


def distribute_coordinator() -> Optional[tuple[Any, Any]]:
  """(``distribute_coordinator``, ``distribute_coordinator_context``) of
  TensorFlow, or None if it has no coordinator.

  >>> distribute_coordinator()[0].CoordinatorMode.INDEPENDENT_WORKER
  'independent_worker'
  """
  try:
    from tensorflow.python.distribute import distribute_coordinator as dc  # pylint: disable=g-import-not-at-top
    from tensorflow.python.distribute import distribute_coordinator_context as dcc  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return dc, dcc


def keras_state(value: Any) -> Optional[str]:
  """Which Keras an attribute such as ``tf.keras`` stands for, read without
  resolving a lazy loader: ``"unresolved"`` (TensorFlow's Keras-routing
  loader, not used yet), ``"tf_keras"`` (Keras 2 from tf-keras), ``"keras"``
  (the ``keras`` package: Keras 3 on TensorFlow 2.16+, Keras 2 before), or
  None (not Keras).

  >>> keras_state(tf.compat.v1.layers) in ("unresolved", "tf_keras", "keras", None)
  True
  """
  state = vars(value) if isinstance(value, types.ModuleType) else {}
  if "_tfll_initialized" in state:  # TensorFlow's KerasLazyLoader
    if not state["_tfll_initialized"]:
      return "unresolved"
    version = state.get("_tfll_keras_version")
    return "tf_keras" if version == "tf_keras" else "keras"
  top = str(state.get("__name__", "")).split(".")[0]
  return top if top in ("keras", "tf_keras") else None
