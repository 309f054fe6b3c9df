"""The errors of the Estimator layer: each says what is missing or refused,
why, and the command or change that fixes it.

Each derives from ``compat_distribute.Error`` and from the class Python or
TensorFlow 2.15 raised in the same situation (``ModuleNotFoundError`` for a
package that is not installed, ``ImportError`` for one that cannot be used,
``NotImplementedError`` for TPU functionality, TensorFlow's
``TBNotInstalledError`` for a summary without TensorBoard), so that a program's own
``except ImportError:`` around ``import tensorflow_estimator`` still works.

>>> error = EstimatorNotInstalledError(tf_minor="2.21")
>>> isinstance(error, ModuleNotFoundError), error.name
(True, 'tensorflow_estimator')
>>> print(error)
TensorFlow Estimator is not installed (no module named 'tensorflow_estimator'). TensorFlow 2.16 and later no longer ship it; compat_distribute supplies what it needs of TensorFlow, but not Estimator itself. Install it with: pip install tensorflow-estimator==2.15.0 && pip install --no-deps "tf-keras~=2.21.0"
"""
from __future__ import annotations

from compat_distribute import _tf_private
from compat_distribute.runtime.errors import Error

ESTIMATOR_REQUIREMENT = "tensorflow-estimator==2.15.0"


def tf_keras_requirement(tf_minor: str) -> str:
  """The pip requirement of the tf-keras release that matches TensorFlow
  ``tf_minor`` (``"2.21"``): tf-keras is released once per TensorFlow minor
  and works only with its own.

  >>> tf_keras_requirement("2.21")
  '"tf-keras~=2.21.0"'
  """
  return f'"tf-keras~={tf_minor}.0"'


def install_command(tf_minor: str) -> str:
  """The command that installs Estimator and the tf-keras it needs.

  tf-keras is installed with ``--no-deps``: it requires the ``tensorflow``
  distribution, which pip would otherwise install beside ``tensorflow-cpu``.
  """
  return (f"pip install {ESTIMATOR_REQUIREMENT} && pip install --no-deps "
          f"{tf_keras_requirement(tf_minor)}")


class EstimatorNotInstalledError(Error, ModuleNotFoundError):
  """``import tensorflow_estimator`` (or ``tf.estimator``) with no Estimator
  installed."""

  def __init__(self, tf_minor: str) -> None:
    super().__init__(
        "TensorFlow Estimator is not installed (no module named "
        "'tensorflow_estimator'). TensorFlow 2.16 and later no longer ship "
        "it; compat_distribute supplies what it needs of TensorFlow, but not "
        f"Estimator itself. Install it with: {install_command(tf_minor)}")
    self.name = "tensorflow_estimator"


class TfKerasMissingError(Error, ImportError):
  """Estimator imported on a TensorFlow whose ``tf.keras`` is Keras 3, with
  no tf-keras (Keras 2) installed for its canned models to run on."""

  def __init__(self, tf_minor: str) -> None:
    super().__init__(
        "TensorFlow Estimator needs Keras 2 as tf.keras (its canned "
        "estimators build tf.keras.layers.DenseFeatures and Keras 2 "
        f"optimizers), but TensorFlow {tf_minor}'s tf.keras is Keras 3 and "
        "the tf-keras package (Keras 2) is not installed. Install the "
        "release matching your TensorFlow: pip install --no-deps "
        f"{tf_keras_requirement(tf_minor)}")
    self.name = "tf_keras"


class KerasAlreadyLoadedError(Error, ImportError):
  """Estimator imported after the program already used ``tf.keras`` as
  Keras 3: the two cannot share it."""

  def __init__(self, resolved: str) -> None:
    super().__init__(
        "TensorFlow Estimator needs tf.keras to be Keras 2 (tf-keras), but "
        f"this program already loaded it as {resolved} before "
        "importing Estimator, and TensorFlow does not switch it afterwards. "
        "Import tensorflow_estimator (or use tf.estimator) before the first "
        "use of tf.keras, or start the program with TF_USE_LEGACY_KERAS=1 "
        "in its environment, or run it as python -m compat_distribute run "
        "--keras 2 PROGRAM (--keras auto, the default, does so when it sees "
        "the program use Estimator).")


class EstimatorUnsupportedError(Error, ImportError):
  """The running TensorFlow lacks something Estimator needs that
  compat_distribute cannot supply."""

  def __init__(self, tf_version: str, missing: str, why: str) -> None:
    super().__init__(
        f"TensorFlow Estimator cannot run on TensorFlow {tf_version}: it "
        f"lacks {missing}, which {why}. Use TensorFlow 2.12 to 2.22 with "
        "compat_distribute, or report the TensorFlow version to "
        "compat_distribute.")


class CoordinatorConfigError(Error, ValueError):
  """A ``RunConfig`` or call that the distribute coordinator's glue refuses
  (a strategy given twice, two clusters, a mode that cannot run)."""


class TPUEstimatorUnsupportedError(Error, NotImplementedError):
  """TPU functionality of Estimator (``TPUEstimator`` on TPUs, TPU
  embeddings) reached on TensorFlow 2.16 or later."""

  def __init__(self, what: str) -> None:
    super().__init__(
        f"{what} is TPUEstimator functionality, which compat_distribute does "
        "not supply: TensorFlow 2.16 removed the TPU modules it is built on "
        "(the TPU embedding v1 API and TPU session support), and "
        "TPUEstimator drives them on TPU hardware only. Use "
        "tf.estimator.Estimator (CPU/GPU, with a distribution strategy), or "
        "TensorFlow 2.15 for TPUEstimator.")


def tensorboard_requirement(tf_minor: str) -> str:
  """The pip requirement of a TensorBoard for TensorFlow ``tf_minor``: one
  released for TensorFlow 2.16 or later, no newer than that minor (pip then
  takes the newest whose protobuf agrees with TensorFlow's).

  >>> tensorboard_requirement("2.21")
  '"tensorboard>=2.16,<2.22"'
  """
  major, minor = tf_minor.split(".")[:2]
  return f'"tensorboard>=2.16,<{major}.{int(minor) + 1}"'


class TensorBoardMissingError(
    Error, _tf_private.tb_not_installed_error() or ImportError):
  """A ``tf.summary`` function that TensorBoard implements (``scalar``,
  ``histogram``, ``image``, ``text``, ``audio``) called in an Estimator
  program while TensorBoard cannot be imported.

  >>> error = TensorBoardMissingError("tf.summary.scalar", "2.21")
  >>> print(error)  # doctest: +NORMALIZE_WHITESPACE
  tf.summary.scalar needs TensorBoard, which is not installed (or cannot be
  imported). TensorFlow 2.16 and later (tensorflow-cpu) no longer install it.
  Install it with: pip install "tensorboard>=2.16,<2.22" (or with
  Estimator: pip install "compat_distribute[estimator]")
  """

  def __init__(self, api_name: str, tf_minor: str) -> None:
    message = (
        f"{api_name} needs TensorBoard, which is not installed (or cannot be "
        "imported). TensorFlow 2.16 and later (tensorflow-cpu) no longer "
        "install it. Install it with: pip install "
        f"{tensorboard_requirement(tf_minor)} (or with Estimator: pip "
        'install "compat_distribute[estimator]")')
    Exception.__init__(self, message)  # pylint: disable=non-parent-init-called
    self.error_message = message  # as TensorFlow's error has it
