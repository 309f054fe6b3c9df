"""Splitting each global batch into one piece per replica.

The rule reproduces what TensorFlow 2.21's CentralStorage and Mirrored
strategies yield (measured; see tests/input/test_input_rebatch.py): every
element of the dataset is cut along its first dimension into exactly ``n``
pieces.
If that dimension has ``b`` rows, each piece takes ``c = ceil(b / n)`` rows
in replica order until the rows run out; later pieces are empty.  Each
component of an element is cut by its own first dimension, and each element
is cut on its own (pieces never mix rows of two elements).

>>> [p.numpy().tolist() for p in split_element(tf.range(5), 4)]
[[0, 1], [2, 3], [4], []]

Static shapes follow the same rule as TensorFlow: a known first dimension
``d`` becomes ``d // n`` when ``n`` divides it and unknown otherwise.

>>> piece_spec(tf.TensorSpec([8, 3]), 4)
TensorSpec(shape=(2, 3), dtype=tf.float32, name=None)
>>> piece_spec(tf.TensorSpec([6, 3]), 4)
TensorSpec(shape=(None, 3), dtype=tf.float32, name=None)
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf

from compat_distribute.runtime.errors import Error

from compat_distribute import _tf_compat
from compat_distribute.input import layout as layout_lib
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest

_SPLITTABLE = (tf.TensorSpec, tf.RaggedTensorSpec, tf.SparseTensorSpec)


class UnbatchedDatasetError(Error, ValueError, IndexError):
  """A dataset element cannot be split across replicas.

  Native TensorFlow raises ``IndexError`` in this situation; this error is
  both a ``ValueError`` and an ``IndexError`` so handlers for either work.
  """


def piece_spec(spec: tf.TypeSpec, n: int) -> tf.TypeSpec:
  """The spec of one replica's piece of a component with spec ``spec``."""
  shape = spec.shape
  if shape.rank is None:
    return spec
  d = shape[0]
  piece = d // n if d is not None and d % n == 0 else None
  new_shape = tf.TensorShape([piece]).concatenate(shape[1:])
  if isinstance(spec, tf.TensorSpec):
    return tf.TensorSpec(new_shape, spec.dtype)
  if isinstance(spec, tf.RaggedTensorSpec):
    return tf.RaggedTensorSpec(new_shape, spec.dtype, spec.ragged_rank,
                               spec.row_splits_dtype,
                               spec.flat_values_spec)
  return tf.SparseTensorSpec(new_shape, spec.dtype)


def check_splittable(element_spec: SpecNest, n: int, method: str) -> None:
  """Raises a clear error if some component has no dimension to split.

  Raises:
    UnbatchedDatasetError: a component is a scalar (the dataset is not
      batched) or a type that cannot be split.
  """
  paths = list(_tf_compat.yield_flat_paths(element_spec))
  for path, spec in zip(paths, tf.nest.flatten(element_spec)):
    where = "/".join(str(p) for p in path) or "<element>"
    if isinstance(spec, layout_lib.NONE_SPEC_TYPE):
      continue  # every replica gets None
    if not isinstance(spec, _SPLITTABLE):
      raise UnbatchedDatasetError(
          f"{method} splits every component of a dataset element along its "
          f"first dimension over {n} replicas, but component {where!r} is a "
          f"{type(spec).__name__} ({spec!r}), which cannot be split. Use "
          "tensors, ragged or sparse tensors, or supply per-replica batches "
          "with distribute_datasets_from_function.")
    if spec.shape.rank == 0:
      raise UnbatchedDatasetError(
          f"{method} splits every dataset element along its first (batch) "
          f"dimension over {n} replicas, but component {where!r} is a scalar "
          f"({spec!r}): the dataset is not batched. Call "
          "dataset.batch(global_batch_size) before distributing it, or "
          "supply per-replica batches with distribute_datasets_from_function.")


def _bounds(rows: tf.Tensor, n: int) -> tf.Tensor:
  """``n + 1`` row offsets: piece ``i`` is ``[bounds[i], bounds[i + 1])``."""
  per_piece = (rows + (n - 1)) // n
  return tf.minimum(per_piece * tf.range(n + 1, dtype=rows.dtype), rows)


def _sizes(rows: tf.Tensor, n: int) -> tf.Tensor:
  """The ``n`` pieces' row counts: ``ceil(rows / n)`` each in turn until the
  rows run out (five ops per step, where ``_bounds`` and a difference
  take seven)."""
  per_piece = (rows + (n - 1)) // n
  left = rows - per_piece * tf.range(n, dtype=rows.dtype)
  return tf.raw_ops.ClipByValue(t=left, clip_value_min=tf.zeros_like(rows),
                                clip_value_max=per_piece)


def _split_dense(t: tf.Tensor, n: int) -> list[tf.Tensor]:
  d = t.shape[0] if t.shape.rank else None
  if d is not None:
    if d % n == 0:
      return tf.split(t, n)
    # Static sizes would give the pieces different static shapes; TensorFlow
    # declares them all with an unknown first dimension, so forget ``d``.
    t = tf.raw_ops.PlaceholderWithDefault(
        input=t, shape=tf.TensorShape([None]).concatenate(t.shape[1:]))
  return tf.split(t, _sizes(tf.shape(t, out_type=tf.int64)[0], n), num=n)


def _split_ragged(t: tf.RaggedTensor, n: int) -> list[tf.RaggedTensor]:
  rows = t.nrows(out_type=tf.int64)
  d = t.shape[0]
  if d is not None and d % n != 0:
    # As for dense tensors: the pieces' row counts must not be static.
    rows = tf.raw_ops.PlaceholderWithDefault(input=rows, shape=[])
  bounds = _bounds(rows, n)
  return [t[bounds[i]:bounds[i + 1]] for i in range(n)]


def _split_sparse(t: tf.SparseTensor, n: int) -> list[tf.SparseTensor]:
  shape = t.dense_shape
  bounds = _bounds(shape[0], n)
  rest = shape[1:]
  zeros = tf.zeros_like(rest)
  pieces = []
  for i in range(n):
    start = tf.concat([bounds[i:i + 1], zeros], 0)
    size = tf.concat([bounds[i + 1:i + 2] - bounds[i:i + 1], rest], 0)
    piece = tf.sparse.slice(t, start, size)
    # tf.sparse.slice forgets the static shape; TensorFlow keeps it.
    piece.set_shape(piece_spec(tf.SparseTensorSpec(t.shape, t.dtype), n).shape)
    pieces.append(piece)
  return pieces


def split_element(element: Any, n: int) -> tuple[Nest, ...]:
  """Cuts one element (a nest of tensors) into ``n`` per-replica nests."""
  flat = tf.nest.flatten(element)
  per_leaf = []
  for leaf in flat:
    if leaf is None:
      per_leaf.append([None] * n)
    elif isinstance(leaf, tf.RaggedTensor):
      per_leaf.append(_split_ragged(leaf, n))
    elif isinstance(leaf, tf.SparseTensor):
      per_leaf.append(_split_sparse(leaf, n))
    else:
      per_leaf.append(_split_dense(leaf, n))
  if not tf.nest.is_nested(element):
    return tuple(per_leaf[0])
  return tuple(
      tf.nest.pack_sequence_as(element, [pieces[i] for pieces in per_leaf])
      for i in range(n))


def split_dataset(dataset: tf.data.Dataset, n: int,
                  method: str) -> tf.data.Dataset:
  """A dataset whose elements are ``n``-tuples: each global batch of
  ``dataset`` cut into one piece per replica."""
  check_splittable(dataset.element_spec, n, method)
  # tf.data passes the components of a plain-tuple element as separate
  # arguments (and only then).
  unpacked = type(dataset.element_spec) is tuple  # pylint: disable=unidiomatic-typecheck

  @tf.autograph.experimental.do_not_convert
  def split(*components):
    return split_element(components if unpacked else components[0], n)

  return dataset.map(split, num_parallel_calls=tf.data.AUTOTUNE,
                     deterministic=True)
