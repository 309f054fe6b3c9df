"""Reduction: its arguments checked, and what it computes.

* ``to_reduce_op``, ``check_axis``, ``check_summable``,
  ``check_reducible``: the ``reduce_op``, ``axis`` and value checks of
  ``Strategy.reduce``, ``reduce_to``, ``batch_reduce_to`` and ``all_reduce``;
* ``aggregate``: SUM or MEAN of one value per replica (``IndexedSlices``
  concatenated), what every cross-replica reduction computes;
* ``reduce_along``: ``Strategy.reduce`` with an ``axis``, each replica's
  value summed along it, then across replicas (MEAN weighs by the element
  count, so partial batches count right).

Moving the values between devices (to one device and out to the
destinations, or by collective ops) is ``cross_device``'s.

>>> import tensorflow as tf
>>> to_reduce_op("mean")
<ReduceOp.MEAN: 'MEAN'>
"""
from __future__ import annotations

import collections.abc
import math
import operator
from typing import Any, Callable, Sequence, Union

import numpy as np
import tensorflow as tf

from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import Axis
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReduceOpLike

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
  compat_distribute.values.reduction.AggregationAsReduceOpError: reduce_op must be a tf.distribute.ReduceOp or its name, got tf.VariableAggregation.SUM, a variable's aggregation (TensorFlow rejects it too). Pass tf.distribute.ReduceOp.SUM instead.

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


def check_reducible(reduce_op: ReduceOpLike, value: Nest,
                    num_replicas: int) -> None:
  """TensorFlow's rule for a value that is not per-replica: MEAN keeps it,
  SUM over several replicas is ambiguous and rejected."""
  if reduce_op == ReduceOp.SUM and num_replicas > 1:
    raise ValueError(
        f"Cannot reduce {value!r} with {reduce_op}: it is not a per-replica "
        f"value, and summing one value over {num_replicas} replicas is not "
        "defined (TensorFlow's rule). Pass the per-replica result of "
        "`strategy.run`, or use ReduceOp.MEAN.")


def aggregate(values: Sequence[Nest], reduce_op: ReduceOpLike) -> Nest:
  """SUM or MEAN of one value per replica, on the current device."""
  if any(isinstance(v, tf.IndexedSlices) for v in values):
    total = _concat_slices(values)
  else:
    total = tf.math.add_n(list(values)) if len(values) > 1 else tf.identity(
        values[0])
  if reduce_op == ReduceOp.MEAN:
    n = len(values)
    if isinstance(total, tf.IndexedSlices):
      return tf.IndexedSlices(total.values / n, total.indices,
                              total.dense_shape)
    return total / n
  return total


def _concat_slices(values: Sequence[Nest]) -> Nest:
  if len(values) == 1:
    return values[0]
  if any(not isinstance(v, tf.IndexedSlices) for v in values):
    return tf.math.add_n([tf.convert_to_tensor(v) for v in values])
  index_dtypes = {v.indices.dtype for v in values}
  cast = tf.int64 if len(index_dtypes) > 1 else None
  return tf.IndexedSlices(
      tf.concat([v.values for v in values], axis=0),
      tf.concat([tf.cast(v.indices, cast) if cast else v.indices
                 for v in values], axis=0),
      values[0].dense_shape)


def reduce_along(reduce_op: ReduceOp, value: Nest, axis: Axis,
                 local_results: Callable[[Nest], Sequence[Nest]],
                 run: Callable[..., Nest],
                 reduce: Callable[[ReduceOp, Nest], Nest]) -> Nest:
  """``Strategy.reduce(reduce_op, value, axis)`` for an ``axis``: each
  replica's value summed along ``axis`` (with ``run``), then reduced across
  replicas (with ``reduce``, the strategy's cross-replica reduction); MEAN
  divides the total by the number of elements summed over all replicas.

  ``local_results`` gives the replicas' values, which are checked first.

  >>> value = tf.constant([[1.0, 2.0], [3.0, 6.0]])
  >>> reduce_along(ReduceOp.MEAN, value, 0, lambda v: (v,),
  ...              lambda fn, args: fn(*args), lambda op, v: v)
  <tf.Tensor: shape=(2,), dtype=float32, numpy=array([2., 4.], dtype=float32)>
  """
  if isinstance(value, collections.abc.Mapping):
    raise TypeError(
        f"reduce with axis={axis!r} takes a tensor or a per-replica tensor, "
        f"got a {type(value).__name__} of values: {value!r}. Reduce each "
        "entry separately, or pass axis=None to reduce the structure only "
        "across replicas.")
  for local in local_results(value):
    check_summable(local)
    axis = check_axis(axis, local)
  if reduce_op == ReduceOp.SUM:
    sums = run(_sum_along, args=(value, axis))
    return reduce(reduce_op, sums)
  sums, counts = run(_sum_and_count_along, args=(value, axis))
  total = reduce(ReduceOp.SUM, sums)
  count = reduce(ReduceOp.SUM, counts)
  return tf.math.truediv(total, tf.cast(count, total.dtype))


def _sum_along(value: Nest, axis: int) -> Nest:
  return tf.reduce_sum(value, axis=axis)


def _sum_and_count_along(value: Nest, axis: Axis
                         ) -> tuple[tf.Tensor, tf.Tensor]:
  """The sum along ``axis`` (an int or a tuple/list of them) and how many
  elements it summed; a count known while tracing is a constant."""
  if not isinstance(value, tf.RaggedTensor):
    value = tf.convert_to_tensor(value)
  axes = axis if isinstance(axis, (tuple, list)) else (axis,)
  dims = [value.shape[a] if isinstance(a, int) else None for a in axes]
  if all(d is not None for d in dims):
    count = tf.constant(math.prod(dims), tf.int64)
  else:
    # A ragged dimension has no single size: TensorFlow's ValueError.
    shape = tf.shape(value, out_type=tf.int64)
    count = tf.math.reduce_prod(tf.stack([shape[a] for a in axes]))
  return tf.reduce_sum(value, axis=axis), count
