"""The Keras that the running TensorFlow brings, as the tests use it.

TensorFlow 2.12-2.15 bundle Keras 2 (``tf.keras``; the bare ``keras``
package there is Keras 2's implementation, whose ``keras.optimizers`` are
the legacy ones), TensorFlow 2.16+ work with Keras 3 (``import keras``).
Tests import ``keras`` from here and read weights through the helpers, so
one test runs on either and compares with native TensorFlow on the same
Keras.
"""
import keras as _keras_package
import numpy as np
import tensorflow as tf

# Keras 3 has a top-level Variable class; Keras 2 has none.
KERAS_3 = hasattr(_keras_package, "Variable")
keras = _keras_package if KERAS_3 else tf.keras


def tf_variable(weight):
  """The ``tf.Variable`` behind a Keras weight (Keras 3 wraps it in a
  ``keras.Variable`` as ``.value``; a Keras 2 weight is the variable)."""
  value = getattr(weight, "value", None)
  # Keras 2's weight is the variable, whose ``value`` is a method.
  return weight if value is None or callable(value) else value


def weight_path(weight):
  """A weight's name that identifies it within its model."""
  return getattr(weight, "path", None) or weight.name


def optimizer_variables(optimizer):
  """An optimizer's variables (a property in Keras 3, a method in Keras 2's
  legacy optimizers)."""
  variables = optimizer.variables
  return list(variables() if callable(variables) else variables)


def optimizer_values(optimizer):
  """The values of an optimizer's variables, as NumPy arrays."""
  return [np.asarray(tf_variable(v).numpy())
          for v in optimizer_variables(optimizer)]


def keras_2():
  """Keras 2 beside the running TensorFlow: the tf-keras package where it
  is installed, else the bundled ``tf.keras`` on TensorFlow 2.12-2.15 (no
  tf-keras release matches 2.12 or 2.13), else None."""
  try:
    import tf_keras  # pylint: disable=g-import-not-at-top
    return tf_keras
  except ImportError:
    return None if KERAS_3 else tf.keras
