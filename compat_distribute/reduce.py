"""ReduceOp handling, reduction along an axis, and cross-device reduction.

>>> import tensorflow as tf
>>> to_reduce_op("mean")
<ReduceOp.MEAN: 'MEAN'>
>>> reduce_across([tf.constant(1.), tf.constant(3.)], ReduceOp.MEAN, "/cpu:0")
<tf.Tensor: shape=(), dtype=float32, numpy=2.0>
"""
from __future__ import annotations

import operator
from typing import Any, Sequence, Union

import numpy as np
import tensorflow as tf

ReduceOp = tf.distribute.ReduceOp

_VALID = ", ".join(f"tf.distribute.ReduceOp.{op.name} (or {op.value!r})"
                   for op in ReduceOp)


class ReduceOpTypeError(TypeError, AssertionError, ValueError):
  """A ``reduce_op`` that is neither a ``ReduceOp`` nor a string.

  TensorFlow raises ``TypeError`` for this in some methods
  (``Strategy.reduce`` with an ``axis``), ``AssertionError`` in others
  (``reduce`` with ``axis=None``, ``reduce_to``, ``all_reduce``) and
  ``ValueError`` in CentralStorage's ``batch_reduce_to`` and ``all_reduce``
  with several replicas; this class is all three, so code catching any of
  them keeps working.
  """
  # Exception's own __init__ lets AutoGraph re-raise this type (with the
  # user's source location) when it is raised inside a tf.function.
  __init__ = Exception.__init__


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
  compat_distribute.reduce.AggregationAsReduceOpError: reduce_op must be a tf.distribute.ReduceOp or its name, got tf.VariableAggregation.SUM, a variable's aggregation (TensorFlow rejects it too). Pass tf.distribute.ReduceOp.SUM instead.

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


def check_axis(axis: Any, value: Any) -> Any:
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


def check_summable(value: Any) -> None:
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


def reduce_across(values: Sequence[Any], reduce_op: ReduceOp,
                  destination: str) -> Any:
  """Reduces one value per replica into one tensor on ``destination``.

  SUM adds the values; MEAN divides the sum by the number of values.
  ``tf.IndexedSlices`` are concatenated (and scaled for MEAN).
  """
  with tf.device(destination):
    if len(values) == 1:
      return tf.identity(values[0]) if not isinstance(
          values[0], tf.IndexedSlices) else values[0]
    if any(isinstance(v, tf.IndexedSlices) for v in values):
      return _reduce_indexed_slices(values, reduce_op)
    total = tf.math.add_n([tf.convert_to_tensor(v) for v in values])
    if reduce_op == ReduceOp.MEAN:
      return _divide(total, len(values))
    return total


def _divide(total: tf.Tensor, count: int) -> tf.Tensor:
  if total.dtype.is_integer:
    return total // count
  return total / tf.cast(count, total.dtype)


def _reduce_indexed_slices(values: Sequence[Any], reduce_op: ReduceOp
                           ) -> tf.IndexedSlices:
  slices = [v if isinstance(v, tf.IndexedSlices) else
            tf.IndexedSlices(tf.convert_to_tensor(v),
                             tf.range(tf.shape(v)[0])) for v in values]
  result = tf.IndexedSlices(
      tf.concat([s.values for s in slices], axis=0),
      tf.concat([s.indices for s in slices], axis=0),
      slices[0].dense_shape)
  if reduce_op == ReduceOp.MEAN:
    result = tf.IndexedSlices(_divide(result.values, len(values)),
                              result.indices, result.dense_shape)
  return result
