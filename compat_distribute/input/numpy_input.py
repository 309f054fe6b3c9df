"""``experimental_make_numpy_dataset``: NumPy arrays as a dataset on the host.

Eagerly the arrays become ``tf.data.Dataset.from_tensor_slices`` on the input
device.  In a TF1 graph embedding a large array as a constant would bloat
the graph (and hit the 2 GB GraphDef limit), so each array is fed through
the session, once, into a host-side resource variable that the dataset
reads.  That variable belongs to no collection: ``global_variables_initializer``
does not touch it (so it cannot wipe the data) and ``Saver`` does not save it.

>>> import numpy as np
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> ds = strategy.experimental_make_numpy_dataset(np.arange(6).reshape(3, 2))
>>> [x.tolist() for x in ds.as_numpy_iterator()]
[[0, 1], [2, 3], [4, 5]]
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import tensorflow as tf

from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import Session


def _as_array(value: Nest) -> tuple[np.ndarray, tf.DType]:
  array = np.asarray(value)
  if array.dtype.kind in "USO":
    return array.astype(object), tf.string
  return array, tf.as_dtype(array.dtype)


def _fed_variable(array: np.ndarray, dtype: tf.DType,
                  session: Optional[Session]) -> Any:
  """A host resource variable holding ``array``, filled through ``session``;
  returns the tensor that reads it."""
  with tf.compat.v1.name_scope("numpy_input") as scope:
    feed = tf.compat.v1.placeholder(dtype, array.shape, name="feed")
    handle = tf.raw_ops.VarHandleOp(dtype=dtype, shape=array.shape,
                                    shared_name=scope + "data")
    fill = tf.raw_ops.AssignVariableOp(resource=handle, value=feed)
    session.run(fill, feed_dict={feed: array})
    return tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype)


class NoSessionError(Error, ValueError, AssertionError):
  """``experimental_make_numpy_dataset`` in a graph with no session to feed
  the arrays through.

  TensorFlow raises a bare ``AssertionError``; this error is also a
  ``ValueError`` and says what to pass.
  """


class NotAnArrayError(Error, ValueError, AttributeError):
  """A value with no dimension to slice (a scalar or ``None``).

  TensorFlow raises ``ValueError`` eagerly and ``AttributeError`` (no
  ``shape``) in a graph; this error is both.
  """


def _rank(value: Nest) -> Any:
  """``value``'s number of dimensions, or None if unknown."""
  shape = getattr(value, "shape", None)
  if shape is not None:
    return tf.TensorShape(shape).rank
  try:
    return np.ndim(value)
  except ValueError:  # a ragged list
    return None


def _not_an_array(value: Nest) -> NotAnArrayError:
  return NotAnArrayError(
      "experimental_make_numpy_dataset slices arrays along their first "
      f"dimension, but got {value!r}, which has none. Pass NumPy arrays of "
      "examples, e.g. np.array([x1, x2, ...]).")


class NotASessionError(Error, TypeError, AttributeError):
  """``session`` is not a session (TensorFlow: ``AttributeError``)."""


def _graph_session(session: Optional[Session]) -> Any:
  session = session or tf.compat.v1.get_default_session()
  if session is not None and not (hasattr(session, "run") and
                                  hasattr(session, "graph")):
    raise NotASessionError(
        "experimental_make_numpy_dataset: `session` must be a "
        f"tf.compat.v1.Session, got {session!r} of type "
        f"{type(session).__name__}. Pass the session that will run the "
        "input, or None for the default session.")
  if session is None:
    raise NoSessionError(
        "experimental_make_numpy_dataset in graph mode feeds the arrays into "
        "the graph through a session, but no session was given and there is "
        "no default session. Pass the session that will run the input: "
        "strategy.experimental_make_numpy_dataset(x, session=sess).")
  if session.graph is not tf.compat.v1.get_default_graph():
    raise ValueError(
        "experimental_make_numpy_dataset: the session runs a different graph "
        "than the one being built. Build the input inside `with "
        "session.graph.as_default():` or pass the session of this graph.")
  return session


def make_numpy_dataset(host: str, numpy_input: Nest,
                       session: Optional[Session] = None) -> tf.data.Dataset:
  """A dataset of the slices of ``numpy_input`` (a nest of arrays) on
  ``host``; ``session`` is needed (or a default session) in graph mode."""
  flat = tf.nest.flatten(numpy_input)
  if not flat:
    raise ValueError(
        "experimental_make_numpy_dataset needs at least one array, got "
        f"{numpy_input!r}.")
  with tf.device(host):
    if tf.executing_eagerly() or tf.inside_function():
      return tf.data.Dataset.from_tensor_slices(numpy_input)
    # A scalar has nothing to slice.  TensorFlow checks for a shape before
    # the session, and for a scalar shape after it.
    scalar = not tf.nest.is_nested(numpy_input) and _rank(numpy_input) == 0
    if scalar and not hasattr(numpy_input, "shape"):
      raise _not_an_array(numpy_input)
    session = _graph_session(session)
    if scalar:
      raise _not_an_array(numpy_input)
    reads = [_fed_variable(*_as_array(value), session) for value in flat]
    return tf.data.Dataset.from_tensor_slices(
        tf.nest.pack_sequence_as(numpy_input, reads))
