"""Keras 2 for Estimator on a TensorFlow whose ``tf.keras`` is Keras 3.

Estimator 2.15 is Keras 2 code: its canned estimators subclass
``tf.keras.Model``, build ``tf.keras.layers.DenseFeatures`` and take
``tf.keras.optimizers.legacy`` optimizers, and programs pass it Keras 2
optimizers of their own.  From TensorFlow 2.16, ``tf.keras`` is a lazy
loader that resolves, at its first use, to Keras 3 -- or to tf-keras
(Keras 2) when ``TF_USE_LEGACY_KERAS`` is set then, TensorFlow's own switch.

So when Estimator is imported (``prepare_for_estimator``, called just
before ``tensorflow_estimator`` runs): if TensorFlow routes ``tf.keras`` and
it has not resolved yet, the switch is set and the loaders of ``tf``,
``tf.compat.v1`` and ``tf.compat.v2`` are resolved, and ``tf.keras`` is
Keras 2 for the whole program -- as it was on TensorFlow 2.15, which an
Estimator program was written for.  A program that already used ``tf.keras`` as
Keras 3 gets ``KerasAlreadyLoadedError`` (TensorFlow does not switch a
resolved loader), and a missing tf-keras ``TfKerasMissingError``, both
with the fix.  ``restore`` puts the environment variable back as it was
(loaders that resolved meanwhile stay tf-keras).

>>> set(keras_routes()) <= {"tf.keras", "tf.compat.v1.keras", "tf.compat.v2.keras"}
True
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from typing import Optional

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.estimator.errors import (
    KerasAlreadyLoadedError, TfKerasMissingError)

LEGACY_KERAS_VARIABLE = "TF_USE_LEGACY_KERAS"
_TRUE_WORDS = ("true", "True", "1")  # what TensorFlow takes as set
# Where Estimator reads Keras from: tf.keras and tf.compat.v1/v2.keras.
_PATHS = ("", "compat.v1", "compat.v2")


def tf_minor() -> str:
  """``"2.21"`` for TensorFlow 2.21.x."""
  return ".".join(tf.__version__.split(".")[:2])


def keras_routes() -> dict[str, str]:
  """``{"tf.keras": state, ...}``: what each ``keras`` attribute of the API
  stands for (``_tf_private.keras_state``), read without resolving it."""
  routes = {}
  for path in _PATHS:
    module = tf
    for part in path.split(".") if path else ():
      module = getattr(module, part)
    state = _tf_private.keras_state(getattr(module, "keras", None))
    if state is not None:
      routes[".".join(filter(None, ("tf", path, "keras")))] = state
  return routes


def _keras_package_is_keras_3() -> bool:
  try:
    return importlib.metadata.version("keras").split(".")[0] >= "3"
  except importlib.metadata.PackageNotFoundError:
    return False


def _legacy_switch_on() -> bool:
  return os.environ.get(LEGACY_KERAS_VARIABLE) in _TRUE_WORDS


def prepare_for_estimator() -> Optional[tuple[Optional[str]]]:
  """Makes ``tf.keras`` Keras 2 for Estimator, or says why it cannot.

  Returns:
    None if nothing was changed, else a token for ``restore`` (the
    variable's previous value).

  Raises:
    KerasAlreadyLoadedError: ``tf.keras`` is already Keras 3.
    TfKerasMissingError: tf-keras is not installed.
  """
  routes = keras_routes()
  keras_3 = sorted(name for name, state in routes.items()
                   if state == "keras" and _keras_package_is_keras_3())
  if keras_3:
    raise KerasAlreadyLoadedError(f"Keras 3 ({', '.join(keras_3)})")
  if "unresolved" not in routes.values():
    return None  # tf.keras is Keras 2 already
  if importlib.util.find_spec("tf_keras") is None:
    raise TfKerasMissingError(tf_minor())
  token = None
  if not _legacy_switch_on():
    token = (os.environ.get(LEGACY_KERAS_VARIABLE),)
    os.environ[LEGACY_KERAS_VARIABLE] = "1"
  _resolve_routes()
  return token


def _resolve_routes() -> None:
  """Resolves every Keras-routing loader of the API now, while the switch
  is on: a loader resolves at its first use, which may come on a thread
  whose ``os.environ`` is not the process's (tests of multi-worker code
  swap in a per-thread environment), or after the variable changed."""
  for path in _PATHS:
    module = tf
    for part in path.split(".") if path else ():
      module = getattr(module, part)
    for name in sorted(vars(module)):
      value = vars(module)[name]
      if _tf_private.keras_state(value) == "unresolved":
        # A name the loader lacks makes it resolve (then reads None).
        getattr(value, "_compat_distribute_resolve", None)


def restore(token: Optional[tuple[Optional[str]]]) -> None:
  """Puts ``TF_USE_LEGACY_KERAS`` back as ``prepare_for_estimator`` found
  it (a no-op for a None token)."""
  if token is None:
    return
  (previous,) = token
  if previous is None:
    os.environ.pop(LEGACY_KERAS_VARIABLE, None)
  else:
    os.environ[LEGACY_KERAS_VARIABLE] = previous
