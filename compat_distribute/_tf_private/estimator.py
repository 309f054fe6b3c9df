"""TensorFlow's private names for what Estimator needs of TensorFlow (part of
``compat_distribute._tf_private``), used by ``compat_distribute.estimator``
only, and only where the running TensorFlow lacks a piece; TensorFlow 2.12
to 2.15 have them all, 2.16 and later none of those marked *removed*:

* ``ESTIMATOR_MODULES`` -- the ``tensorflow.python.*`` module names Estimator
  2.15 imports that TensorFlow 2.16 removed: ``distribute.estimator_training``
  (the glue between ``RunConfig`` / ``train_and_evaluate`` and the distribute
  coordinator) and three TPU modules (``tpu.session_support``,
  ``tpu.tpu_embedding``, ``tpu.tpu_embedding_gradient``).  Putting a module
  in ``sys.modules`` under one of these names (``register_module``) is the
  only way to let ``from tensorflow.python... import ...`` in Estimator's
  unmodified sources succeed; these four are the only names registered.
* ``ESTIMATOR_PATH`` (``tensorflow.python.estimator``, *removed* in 2.16)
  and ``ESTIMATOR_PATH_MODULES`` -- the package TensorFlow 2.12 to 2.15
  shipped for libraries that import Estimator by TensorFlow's module names
  (``from tensorflow.python.estimator.canned.head import _Head``): each of
  its modules, as in the 2.15 wheel, with the ``tensorflow_estimator``
  module whose names it held (None: a package holding only its
  submodules).  ``estimator.legacy_path`` serves these names, lazily, by
  a finder in ``sys.meta_path`` (``sys.modules`` entries appear only when
  imported); ``has_estimator_path`` says whether TensorFlow has the package
  itself and ``python_package`` is the module its ``estimator`` attribute
  is set on.
* ``tensorflow.python.util.tf_export`` -- its ``ESTIMATOR_API_NAME``,
  ``API_ATTRS`` and ``API_ATTRS_V1`` entries for ``"estimator"`` (*removed*
  in 2.16): Estimator's ``estimator_export`` decorator, run on every class
  it exports, looks them up.  ``register_estimator_api`` adds them back in
  the form the other entries have (the named pair of attribute names).
* ``tensorflow.python.distribute.distribute_coordinator`` and
  ``distribute_coordinator_context`` (present from 2.12 to the 2.23
  nightly) -- the coordinator that runs a task of a ``TF_CONFIG`` cluster,
  which the supplied ``estimator_training`` drives as TensorFlow's did.
* ``tensorflow.python.summary.tb_summary`` (2.16+) -- what ``tf.summary``'s
  ``scalar``, ``histogram``, ``image``, ``text`` and ``audio`` are from
  2.16 on: stand-ins that import TensorBoard's implementation when called
  and raise its ``TBNotInstalledError`` if they cannot.
  ``tensorboard_stand_ins`` finds them in an API module by that module
  name; ``tb_not_installed_error`` is the class (None before 2.16, where
  TensorFlow requires TensorBoard and ``tf.summary`` is TensorBoard's).
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
from typing import Any, Callable, Optional

import tensorflow as tf

# Refuses an unsupported TensorFlow before any private name below is looked up.
from compat_distribute import _tf_compat  # pylint: disable=unused-import


ESTIMATOR_MODULES: dict[str, str] = {
    "estimator_training": "tensorflow.python.distribute.estimator_training",
    "session_support": "tensorflow.python.tpu.session_support",
    "tpu_embedding": "tensorflow.python.tpu.tpu_embedding",
    "tpu_embedding_gradient": "tensorflow.python.tpu.tpu_embedding_gradient",
}


ESTIMATOR_PATH = "tensorflow.python.estimator"
_ESTIMATOR = "tensorflow_estimator.python.estimator"
# Every module of TensorFlow 2.15's tensorflow/python/estimator/, by name
# below ESTIMATOR_PATH ("" is the package itself) -> the Estimator module
# whose names it held, or None for a package with no names of its own.
ESTIMATOR_PATH_MODULES: dict[str, Optional[str]] = {
    "": None, "canned": None, "export": None, "inputs": None,
    "inputs.queues": None,
    **{name: f"{_ESTIMATOR}.{name}" for name in (
        "canned.baseline", "canned.dnn", "canned.dnn_linear_combined",
        "canned.head", "canned.linear", "canned.metric_keys",
        "canned.optimizers", "canned.parsing_utils",
        "canned.prediction_keys", "estimator", "estimator_lib",
        "export.export", "export.export_lib", "export.export_output",
        "exporter", "gc", "inputs.inputs", "inputs.numpy_io",
        "inputs.pandas_io", "inputs.queues.feeding_functions",
        "inputs.queues.feeding_queue_runner", "model_fn", "run_config",
        "training", "util")},
    "keras": f"{_ESTIMATOR}.keras_lib",  # the one renamed
}


def has_estimator_path() -> bool:
  """Whether TensorFlow itself has ``tensorflow.python.estimator`` (2.12 to
  2.15 do), asked of the import system without importing it.

  >>> has_estimator_path() == (tf.__version__ < "2.16")
  True
  """
  if ESTIMATOR_PATH in sys.modules:
    return True
  try:
    return importlib.util.find_spec(ESTIMATOR_PATH) is not None
  except ImportError:
    return False


def python_package() -> types.ModuleType:
  """``tensorflow.python``, the package ``ESTIMATOR_PATH`` sits in."""
  return importlib.import_module(ESTIMATOR_PATH.rpartition(".")[0])


_TB_SUMMARY = "tensorflow.python.summary.tb_summary"


def tb_not_installed_error() -> Optional[type[Exception]]:
  """TensorFlow's ``TBNotInstalledError``, or None where it has none.

  >>> error = tb_not_installed_error()
  >>> error is None or issubclass(error, Exception)
  True
  """
  try:
    module = importlib.import_module(_TB_SUMMARY)
  except ImportError:
    return None
  error = getattr(module, "TBNotInstalledError", None)
  return error if isinstance(error, type) else None


def tensorboard_stand_ins(
    module: types.ModuleType) -> dict[str, Callable[..., object]]:
  """The functions of the API module ``module`` (``tf.summary``) that are
  TensorFlow's stand-ins for TensorBoard's, by name (none before 2.16).

  >>> sorted(tensorboard_stand_ins(tf.summary)) == (
  ...     [] if tf.__version__ < "2.16" else
  ...     ["audio", "histogram", "image", "scalar", "text"])
  True
  """
  return {name: value for name, value in vars(module).items()
          if callable(value) and getattr(value, "__module__", "") == _TB_SUMMARY}


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
