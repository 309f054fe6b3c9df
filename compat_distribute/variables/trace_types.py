"""``tf.function`` trace types for objects the package passes through
``tf.function`` arguments by identity (central-storage variables)."""
from __future__ import annotations

import weakref
from typing import Any, Optional, Sequence

import tensorflow as tf
from compat_distribute.runtime.types import Nest


class SameObject(tf.types.experimental.TraceType):
  """Trace type of an argument that reaches the function body as itself:
  one trace per object, no tensor inputs (the body captures what it reads).

  >>> v = tf.Variable(1.0)
  >>> SameObject(v) == SameObject(v), SameObject(v).to_tensors(v)
  (True, [])
  """

  def __init__(self, value: Nest) -> None:
    self._ref = weakref.ref(value)
    self._id = id(value)

  def is_subtype_of(self, other: tf.types.experimental.TraceType) -> bool:
    return self == other

  def most_specific_common_supertype(
      self, others: Sequence[tf.types.experimental.TraceType]
  ) -> Optional[SameObject]:
    return self if all(self == other for other in others) else None

  def placeholder_value(self, placeholder_context: Any) -> Any:
    del placeholder_context
    return self._ref()

  def cast(self, value: Nest, cast_context: Any) -> Any:
    del cast_context
    if value is not self._ref():
      raise ValueError(f"{value!r} is not the object {self!r} was traced "
                       "for.")
    return value

  def to_tensors(self, value: Nest) -> list[Nest]:
    """No tensor inputs: the traced body captures what it reads."""
    del value
    return []

  # TensorFlow 2.12-2.14 call the two methods above by their older names
  # (2.12's base class raises NotImplementedError for ``_to_tensors``).
  _to_tensors = to_tensors
  _cast = cast

  def __eq__(self, other: object) -> bool:
    return (isinstance(other, SameObject) and
            self._ref() is not None and self._ref() is other._ref())  # pylint: disable=protected-access

  def __hash__(self) -> int:
    return self._id

  def __repr__(self) -> str:
    return f"SameObject({self._ref()!r})"
