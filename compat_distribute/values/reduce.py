"""``reduce_op`` and ``axis`` arguments: checking and normalising them.

The reduction itself is in ``cross_device`` (across replicas) and in
``Strategy.reduce`` (along an axis).

>>> import tensorflow as tf
>>> to_reduce_op("mean")
<ReduceOp.MEAN: 'MEAN'>
"""
from __future__ import annotations

import operator
from typing import Any, Union

import numpy as np
import tensorflow as tf

from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import Axis
from compat_distribute.runtime.types import Nest

ReduceOp = tf.distribute.ReduceOp

_VALID = ", ".join(f"tf.distribute.ReduceOp.{op.name} (or {op.value!r})"
                   for op in ReduceOp)


class ReduceOpTypeError(Error, TypeError, AssertionError, ValueError):
  """A ``reduce_op`` that is neither a ``ReduceOp`` nor a string.

  TensorFlow raises ``TypeError`` for this in some methods
  (``Strategy.reduce`` with an ``axis``), ``AssertionError`` in others
  (``reduce`` with ``axis=None``, ``reduce_to``, ``all_reduce``) and
  ``ValueError`` in CentralStorage's ``batch_reduce_to`` and ``all_reduce``
  with several replicas; this class is all three, so code catching any of
  them keeps working.
  """


class AggregationAsReduceOpError(ReduceOpTypeError, ValueError):
  """A ``tf.VariableAggregation`` passed where a ``ReduceOp`` belongs.

  TensorFlow rejects it with ``AssertionError``, ``TypeError`` or (from
  CentralStorage's ``batch_reduce_to``) ``ValueError``; this class is all
  three.
  """


def to_reduce_op(reduce_op: Union[ReduceOp, str]) -> ReduceOp:
  """Accepts a ``ReduceOp`` or its name in any case.

  >>> to_reduce_op(tf.VariableAggregation.SUM)
  Traceback (most recent call last):
  ...
  compat_distribute.values.reduce.AggregationAsReduceOpError: reduce_op must be a tf.distribute.ReduceOp or its name, got tf.VariableAggregation.SUM, a variable's aggregation (TensorFlow rejects it too). Pass tf.distribute.ReduceOp.SUM instead.

  Raises:
    ValueError: an unknown name (as TensorFlow does).
    AggregationAsReduceOpError: a ``tf.VariableAggregation``.
    ReduceOpTypeError: anything else that is not a ReduceOp (a ``TypeError``
      that is also an ``AssertionError``, the types TensorFlow raises).
  """
  if isinstance(reduce_op, ReduceOp):
    return reduce_op
  if isinstance(reduce_op, str):
    try:
      return ReduceOp(reduce_op.upper())
    except ValueError:
      raise ValueError(
          f"Unknown reduce_op {reduce_op!r}. Valid values are {_VALID}."
      ) from None
  if isinstance(reduce_op, tf.VariableAggregation):
    raise AggregationAsReduceOpError(
        f"reduce_op must be a tf.distribute.ReduceOp or its name, got "
        f"tf.VariableAggregation.{reduce_op.name}, a variable's aggregation "
        f"(TensorFlow rejects it too). {_AGGREGATION_FIX[reduce_op]}")
  raise ReduceOpTypeError(
      f"reduce_op must be a tf.distribute.ReduceOp or its name, got "
      f"{reduce_op!r} of type {type(reduce_op).__name__}. Valid values are "
      f"{_VALID}.")


_AGGREGATION_FIX = {
    tf.VariableAggregation.SUM: "Pass tf.distribute.ReduceOp.SUM instead.",
    tf.VariableAggregation.MEAN: "Pass tf.distribute.ReduceOp.MEAN instead.",
    tf.VariableAggregation.ONLY_FIRST_REPLICA: (
        "To keep the first replica's value, take "
        "strategy.experimental_local_results(value)[0] instead."),
    tf.VariableAggregation.NONE: f"Valid values are {_VALID}.",
}


def check_axis(axis: Axis, value: Nest) -> Any:
  """Validates ``axis`` against ``value``'s rank; returns it non-negative.

  ``axis`` may be a Python or NumPy integer, a tuple or list of them (each
  checked), or an integer tensor (inside a ``tf.function`` TensorFlow
  accepts one); a tensor whose value is unknown while tracing is returned as
  it is.

  >>> check_axis((0, -1), tf.zeros([2, 3, 4]))
  (0, 2)
  """
  if isinstance(axis, (tuple, list)):
    return type(axis)(check_axis(a, value) for a in axis)
  if tf.is_tensor(axis):
    if not axis.dtype.is_integer:
      raise TypeError(
          f"`axis` must be None or an integer, got a tensor of dtype "
          f"{axis.dtype.name}: {axis!r}. Pass an integer (or int32/int64 "
          "tensor), e.g. axis=0.")
    static = tf.get_static_value(axis)
    if static is None or axis.shape.rank != 0:
      return axis
    axis = int(static)
  else:
    # A bool is an int here, as in TensorFlow (True is axis 1).
    try:
      axis = operator.index(axis)
    except TypeError:
      raise TypeError(
          f"`axis` must be None or an integer, got {axis!r} of type "
          f"{type(axis).__name__}. Pass the batch dimension, e.g. axis=0."
      ) from None
  rank = getattr(getattr(value, "shape", None), "rank", None)
  if isinstance(value, (int, float, complex, np.generic)):
    rank = 0  # a Python or NumPy scalar: TensorFlow sums it as a tensor
  if rank is None:
    return axis
  if not -rank <= axis < rank:
    raise ValueError(
        f"`axis`={axis} is out of range for a value of rank {rank} (shape "
        f"{getattr(value, 'shape', ())}). Pass an axis in [{-rank}, {rank}), "
        "or axis=None to reduce only across replicas.")
  return axis + rank if axis < 0 else axis


def check_summable(value: Nest) -> None:
  """``reduce`` with an ``axis`` sums within each replica, which TensorFlow
  allows only for dense or ragged numbers; anything else is a TypeError
  (TensorFlow's type, raised before any work).

  >>> check_summable(tf.constant(["a"]))
  Traceback (most recent call last):
  ...
  TypeError: reduce with an axis sums each replica's value, which needs numbers, got a tensor of dtype string. Reduce numeric values, or pass axis=None to combine the values across replicas only.
  """
  if isinstance(value, tf.SparseTensor):
    raise TypeError(
        "reduce with an axis sums each replica's value, which a SparseTensor "
        "does not support. Convert it with tf.sparse.to_dense first, or pass "
        "axis=None to combine the values across replicas only.")
  dtype = getattr(value, "dtype", None)
  if dtype is None:
    return
  dtype = tf.as_dtype(dtype)
  if not (dtype.is_floating or dtype.is_complex or dtype.is_integer):
    raise TypeError(
        "reduce with an axis sums each replica's value, which needs numbers, "
        f"got a tensor of dtype {dtype.name}. Reduce numeric values, or pass "
        "axis=None to combine the values across replicas only.")
