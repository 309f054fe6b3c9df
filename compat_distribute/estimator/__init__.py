"""What TensorFlow Estimator needs of TensorFlow that TensorFlow 2.16 and
later removed, supplied while ``compat_distribute.install()`` is in effect.

Estimator's last release (``tensorflow-estimator`` 2.15.0) imports and
calls pieces of TensorFlow that are gone from 2.16 on.  ``supply()`` puts
back each piece the running TensorFlow lacks -- each found missing by
looking for it, never by version -- and ``withdraw()`` takes out exactly
what it put in:

==============================================  ==========================================
piece                                           supplied by
==============================================  ==========================================
``estimator_training`` (RunConfig and           ``coordinator`` (registered under
``train_and_evaluate`` to the distribute        TensorFlow's module name)
coordinator)
the ``estimator`` API name of TensorFlow's      ``_tf_private.register_estimator_api``
export registry (``@estimator_export``)
the TPU modules ``session_support``,            ``tpu.stand_in_modules``: importable, every
``tpu_embedding``, ``tpu_embedding_gradient``   name refuses use (TPUEstimator only)
``tf.estimator``, ``tf.compat.v1.estimator``    ``api.attach``: lazy modules, as TensorFlow's
(and the other API modules' ``estimator``)
``import tensorflow.estimator``; a clear        ``api.EstimatorImportFinder``
error if Estimator or tf-keras is missing
``tf.keras`` as Keras 2 when Estimator is       ``keras.prepare_for_estimator``
imported
``tensorflow.python.estimator`` and every       ``legacy_path.EstimatorPathFinder``: each
module TensorFlow 2.15 had below it             holds the names of its Estimator module,
(``canned.head``, ``estimator_lib``, ...)       loaded when imported
a clear error for ``tf.summary.scalar`` & co.   ``summaries.guard``, when Estimator is
without TensorBoard                             imported (``TensorBoardMissingError``)
==============================================  ==========================================

On TensorFlow 2.12 to 2.15 every piece is TensorFlow's own and ``supply()``
changes nothing.  The private TensorFlow names involved are all in
``compat_distribute._tf_private`` (``ESTIMATOR_MODULES`` and
``ESTIMATOR_PATH_MODULES`` list the module names registered).

>>> native = has_estimator_support()   # False on TensorFlow 2.16+
>>> supplied = supply()
>>> supplied.is_empty() == native
True
>>> withdraw(supplied)
>>> supplied
Supplied(nothing)
"""
from __future__ import annotations

import sys
import types
from typing import Optional

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.estimator import api
from compat_distribute.estimator import coordinator
from compat_distribute.estimator import keras
from compat_distribute.estimator import legacy_path
from compat_distribute.estimator import summaries
from compat_distribute.estimator import tpu
from compat_distribute.estimator.errors import EstimatorUnsupportedError

ESTIMATOR_API_NAME = "estimator"
# Public TensorFlow 1 names every Estimator run needs and nothing here can
# stand in for: (path below tf, why Estimator needs it).
_REQUIRED: tuple[tuple[str, str], ...] = (
    ("compat.v1.Session", "runs every Estimator graph"),
    ("compat.v1.train.MonitoredTrainingSession",
     "drives Estimator.train and its hooks"),
    ("compat.v1.feature_column.input_layer",
     "builds the canned estimators' inputs"),
)


def has_estimator_support() -> bool:
  """Whether the running TensorFlow has every piece Estimator needs (2.12
  to 2.15 do; 2.16 and later do not).

  >>> has_estimator_support() == hasattr(tf, "estimator")
  True
  """
  return (all(_tf_private.has_module(key)
              for key in _tf_private.ESTIMATOR_MODULES)
          and _tf_private.has_estimator_api())


class Supplied:
  """What one ``supply()`` put in place; ``withdraw`` takes it out."""

  def __init__(self) -> None:
    self.modules: list[tuple[str, types.ModuleType]] = []
    self.api_token: Optional[object] = None
    self.attached: list[tuple[types.ModuleType, api.LazyEstimatorAPI]] = []
    self.finder: Optional[api.EstimatorImportFinder] = None
    self.keras_token: Optional[tuple[Optional[str]]] = None
    self.path_finder: Optional[legacy_path.EstimatorPathFinder] = None
    self.summaries: summaries.Guarded = []

  def is_empty(self) -> bool:
    """Whether nothing is (still) supplied."""
    return not (self.modules or self.api_token or self.attached or
                self.finder or self.keras_token or self.path_finder or
                self.summaries)

  def names(self) -> list[str]:
    """What is supplied, one short label each."""
    labels = [f"module {_tf_private.ESTIMATOR_MODULES[key]}"
              for key, _ in self.modules]
    if self.path_finder is not None:
      labels.append(f"modules {self.path_finder.root}.*")
    if self.api_token is not None:
      labels.append("the 'estimator' export API name")
    labels.extend(f"{lazy.__name__}" for _, lazy in self.attached)
    if self.finder is not None:
      labels.append("the tensorflow_estimator import guard")
    if self.keras_token is not None:
      labels.append(f"{keras.LEGACY_KERAS_VARIABLE}=1")
    if self.summaries:
      labels.append("the TensorBoard check of tf.summary")
    return labels

  def __repr__(self) -> str:
    return f"Supplied({', '.join(self.names()) or 'nothing'})"


def _check_tensorflow() -> None:
  """Refuses a TensorFlow that lacks what cannot be supplied."""
  for path, why in _REQUIRED:
    module = tf
    for part in path.split("."):
      module = getattr(module, part, None)
      if module is None:
        raise EstimatorUnsupportedError(tf.__version__, f"tf.{path}", why)


def supply() -> Supplied:
  """Puts in place each piece Estimator needs that TensorFlow lacks.

  Returns:
    What was supplied (empty on TensorFlow 2.12 to 2.15).
  """
  supplied = Supplied()
  if has_estimator_support() and hasattr(tf, "estimator"):
    return supplied
  try:
    stand_ins = tpu.stand_in_modules()
    for key in _tf_private.ESTIMATOR_MODULES:
      if _tf_private.has_module(key):
        continue
      module = (sys.modules[coordinator.__name__]
                if key == "estimator_training" else stand_ins[key])
      _tf_private.register_module(key, module)
      supplied.modules.append((key, module))
    if not _tf_private.has_estimator_api():
      supplied.api_token = _tf_private.register_estimator_api(
          ESTIMATOR_API_NAME)
    supplied.attached = api.attach()
    if not _tf_private.has_estimator_path():
      supplied.path_finder = legacy_path.EstimatorPathFinder(
          _tf_private.ESTIMATOR_PATH, _tf_private.ESTIMATOR_PATH_MODULES)
      sys.meta_path.insert(0, supplied.path_finder)

    def before_import() -> None:
      if supplied.api_token is None and not _tf_private.has_estimator_api():
        raise EstimatorUnsupportedError(
            tf.__version__, "the export registry fields Estimator's "
            "@estimator_export decorator reads",
            "every Estimator class is registered with at import")
      _check_tensorflow()
      token = keras.prepare_for_estimator()
      if token is not None:
        supplied.keras_token = token
      if not supplied.summaries:
        supplied.summaries = summaries.guard(keras.tf_minor())

    supplied.finder = api.EstimatorImportFinder(
        before_import, keras.tf_minor(), supplied.attached)
    sys.meta_path.insert(0, supplied.finder)
  except BaseException:
    withdraw(supplied)
    raise
  return supplied


def withdraw(supplied: Supplied) -> None:
  """Takes out everything ``supplied`` records, newest first.

  An Estimator already imported keeps the modules it imported (Python
  modules hold what they imported); new imports see TensorFlow as it was.
  """
  if supplied.finder is not None:
    while supplied.finder in sys.meta_path:
      sys.meta_path.remove(supplied.finder)
    supplied.finder.forget()
    supplied.finder = None
  if supplied.path_finder is not None:
    while supplied.path_finder in sys.meta_path:
      sys.meta_path.remove(supplied.path_finder)
    supplied.path_finder.forget()
    supplied.path_finder = None
  summaries.unguard(supplied.summaries)
  supplied.summaries = []
  keras.restore(supplied.keras_token)
  supplied.keras_token = None
  api.detach(supplied.attached)
  supplied.attached = []
  if supplied.api_token is not None:
    _tf_private.unregister_estimator_api(supplied.api_token)
    supplied.api_token = None
  for key, module in reversed(supplied.modules):
    _tf_private.unregister_module(key, module)
  supplied.modules = []


__all__ = ["Supplied", "has_estimator_support", "supply", "withdraw"]
