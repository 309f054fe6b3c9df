"""TensorFlow's private names for functions, tapes and types: AutoGraph's
rules, a ``tf.function``'s clone, gradient tapes paused, eager tensors,
``TypeSpec`` names, TPU systems, the Keras dataset marker (part of
``compat_distribute._tf_private``).

* ``tensorflow.python.framework.ops.EagerTensor`` -- the class of eager
  tensors, which ``values.distributed.regroup`` tests by identity for the
  eager ``run``'s common result (``isinstance`` against ``tf.Tensor`` and
  ``collections.abc.Mapping`` costs more than the regrouping).
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
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf

# Refuses an unsupported TensorFlow before any private name below is looked up.
from compat_distribute import _tf_compat  # pylint: disable=unused-import
from tensorflow.python.autograph.core import config as _autograph_config
from tensorflow.python.autograph.core import config_lib as _autograph_config_lib
try:  # TF 2.13+
  from tensorflow.python.eager import record as _record
except ImportError:  # TF 2.12: the same function lived in eager.tape
  from tensorflow.python.eager import tape as _record
from tensorflow.python.framework import ops as _ops
from tensorflow.python.framework import type_spec_registry as _type_spec_registry

EagerTensor = _ops.EagerTensor


def _do_not_autograph_convert(package: str) -> None:
  """Adds ``package`` to AutoGraph's do-not-convert modules (idempotent)."""
  rule = _autograph_config_lib.DoNotConvert(package)
  rules = _autograph_config.CONVERSION_RULES
  if not any(getattr(r, "_prefix", None) == package for r in rules):
    _autograph_config.CONVERSION_RULES = (rule,) + tuple(rules)


_do_not_autograph_convert("compat_distribute")


def register_type_spec(name: str) -> Any:
  """Class decorator: registers a ``TypeSpec`` subclass under ``name``
  (``"project.TypeName"``) so SavedModel can save and load it."""
  return _type_spec_registry.register(name)


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
