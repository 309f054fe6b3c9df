"""Errors for bad arguments to ``strategy.extended``'s methods.

Each is raised where TensorFlow raises one of several exception types for
the same mistake, and derives from all of them, so an ``except`` written for
TensorFlow still catches ours.

>>> check_destinations(["/cpu:0", "/cpu:1"], "reduce_to")
Traceback (most recent call last):
...
compat_distribute.api.errors.DestinationsError: reduce_to takes one destination (a device string, a variable, a tensor or a per-replica value), got the list ['/cpu:0', '/cpu:1']. Reduce once per destination instead.
"""
from __future__ import annotations

import tensorflow as tf

from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import Destinations


class NotAVariableError(Error, TypeError, AttributeError):
  """A variable argument that is not one (TensorFlow: ``AttributeError``,
  reading a variable's attribute)."""


class ConfigProtoError(Error, TypeError, AttributeError):
  """A session config that is not a ``tf.compat.v1.ConfigProto``
  (TensorFlow's ``CentralStorageStrategy``: ``AttributeError``, setting a
  field on it)."""


class NotAPairError(Error, ValueError,
                    tf.errors.OperatorNotAllowedInGraphError):
  """An element of ``batch_reduce_to``'s list that is not a ``(value,
  destinations)`` pair.

  TensorFlow raises ``ValueError`` (one-device CentralStorage), or unpacks
  it: ``TypeError``, or ``OperatorNotAllowedInGraphError`` (a
  ``TypeError``) for a tensor in a graph.  This error is all of them.
  """


class DestinationsError(Error, ValueError, AssertionError):
  """Several destinations given as a list or tuple.

  TensorFlow rejects them with ``AssertionError`` (``ValueError`` under
  CentralStorage); this class is both.
  """


def check_destinations(destinations: Destinations, method: str) -> None:
  """Refuses several destinations (a list or tuple) for ``method``."""
  if isinstance(destinations, (list, tuple)):
    raise DestinationsError(
        f"{method} takes one destination (a device string, a variable, a "
        f"tensor or a per-replica value), got the {type(destinations).__name__}"
        f" {destinations!r}. Reduce once per destination instead.")
