"""What input functions and value functions are told about the replicas.

``InputContext`` goes to ``dataset_fn`` / ``input_fn``; ``ValueContext`` goes
to ``value_fn`` of ``experimental_distribute_values_from_function``.  Both
subclass TensorFlow's public classes, so ``isinstance`` checks written for
native TensorFlow accept them, but every documented member is defined here.

>>> ctx = InputContext(num_input_pipelines=1, input_pipeline_id=0,
...                    num_replicas_in_sync=4)
>>> ctx
InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=4)
>>> ctx.get_per_replica_batch_size(64)
16
>>> ValueContext(replica_id_in_sync_group=1, num_replicas_in_sync=2)
ValueContext(replica_id_in_sync_group=1, num_replicas_in_sync=2)
"""
from __future__ import annotations

import numbers

import tensorflow as tf


def _check_count(name: str, value: object, owner: str) -> int:
  if isinstance(value, bool) or not isinstance(value, numbers.Integral):
    raise TypeError(
        f"{owner}: `{name}` must be an int, got {value!r} of type "
        f"{type(value).__name__}.")
  if value < 1:
    raise ValueError(f"{owner}: `{name}` must be at least 1, got {value}.")
  return int(value)


def _check_index(name: str, value: object, count: int, count_name: str,
                 owner: str) -> int:
  if isinstance(value, bool) or not isinstance(value, numbers.Integral):
    raise TypeError(
        f"{owner}: `{name}` must be an int, got {value!r} of type "
        f"{type(value).__name__}.")
  if not 0 <= value < count:
    raise ValueError(
        f"{owner}: `{name}` must be in [0, {count_name}) = [0, {count}), "
        f"got {value}.")
  return int(value)


class InputContext(tf.distribute.InputContext):
  """Information an input function needs to shard and batch its dataset.

  Args:
    num_input_pipelines: how many input pipelines (``dataset_fn`` calls)
      feed the replicas; 1 on a single machine.
    input_pipeline_id: which of them this call builds, in
      ``[0, num_input_pipelines)``.
    num_replicas_in_sync: how many replicas consume batches each step.

  Raises:
    TypeError: an argument that is not an integer.
    ValueError: a count below 1, or ``input_pipeline_id`` out of range.

  Examples:
    ``distribute_datasets_from_function`` passes one to ``dataset_fn``; it
    can also be made directly, e.g. to test an input function:

    >>> from compat_distribute import v2 as distribute
    >>> context = distribute.InputContext(num_replicas_in_sync=4)
    >>> context.get_per_replica_batch_size(global_batch_size=32)
    8
    >>> context.input_pipeline_id, context.num_input_pipelines
    (0, 1)
  """

  def __init__(self, num_input_pipelines: int = 1,  # pylint: disable=super-init-not-called
               input_pipeline_id: int = 0,
               num_replicas_in_sync: int = 1) -> None:
    owner = "InputContext"
    self._num_input_pipelines = _check_count(
        "num_input_pipelines", num_input_pipelines, owner)
    self._input_pipeline_id = _check_index(
        "input_pipeline_id", input_pipeline_id, self._num_input_pipelines,
        "num_input_pipelines", owner)
    self._num_replicas_in_sync = _check_count(
        "num_replicas_in_sync", num_replicas_in_sync, owner)

  @property
  def num_input_pipelines(self) -> int:
    """How many input pipelines there are in total."""
    return self._num_input_pipelines

  @property
  def input_pipeline_id(self) -> int:
    """The index of this input pipeline, in ``[0, num_input_pipelines)``."""
    return self._input_pipeline_id

  @property
  def num_replicas_in_sync(self) -> int:
    """How many replicas are in sync (consume one batch each per step)."""
    return self._num_replicas_in_sync

  def get_per_replica_batch_size(self, global_batch_size: int) -> int:
    """The batch size each replica gets out of ``global_batch_size``.

    Args:
      global_batch_size: the batch size of one step over all replicas.

    Returns:
      ``global_batch_size // num_replicas_in_sync``.

    Raises:
      ValueError: ``global_batch_size`` is not a multiple of
        ``num_replicas_in_sync``.

    Examples:
      >>> from compat_distribute import v2 as distribute
      >>> distribute.InputContext(
      ...     num_replicas_in_sync=2).get_per_replica_batch_size(8)
      4
    """
    if global_batch_size % self._num_replicas_in_sync != 0:
      raise ValueError(
          "The global batch size must be divisible by num_replicas_in_sync "
          f"so every replica gets the same batch size: got "
          f"global_batch_size={global_batch_size!r} and "
          f"num_replicas_in_sync={self._num_replicas_in_sync}. Use a multiple "
          f"of {self._num_replicas_in_sync}.")
    return global_batch_size // self._num_replicas_in_sync

  def __repr__(self) -> str:
    return (f"InputContext(num_input_pipelines={self._num_input_pipelines}, "
            f"input_pipeline_id={self._input_pipeline_id}, "
            f"num_replicas_in_sync={self._num_replicas_in_sync})")



class ValueContext(tf.distribute.experimental.ValueContext):
  """Which replica a ``value_fn`` call produces the value for.

  Args:
    replica_id_in_sync_group: the replica, in ``[0, num_replicas_in_sync)``.
    num_replicas_in_sync: how many replicas there are.

  Raises:
    TypeError: an argument that is not an integer.
    ValueError: a count below 1, or ``replica_id_in_sync_group`` out of
      range.

  Examples:
    ``experimental_distribute_values_from_function`` passes one per
    replica to ``value_fn``:

    >>> from compat_distribute import v2 as distribute
    >>> context = distribute.experimental.ValueContext(
    ...     replica_id_in_sync_group=1, num_replicas_in_sync=2)
    >>> context.replica_id_in_sync_group, context.num_replicas_in_sync
    (1, 2)
  """

  def __init__(self, replica_id_in_sync_group: int = 0,  # pylint: disable=super-init-not-called
               num_replicas_in_sync: int = 1) -> None:
    owner = "ValueContext"
    self._num_replicas_in_sync = _check_count(
        "num_replicas_in_sync", num_replicas_in_sync, owner)
    self._replica_id_in_sync_group = _check_index(
        "replica_id_in_sync_group", replica_id_in_sync_group,
        self._num_replicas_in_sync, "num_replicas_in_sync", owner)

  @property
  def replica_id_in_sync_group(self) -> int:
    """The replica this value is for."""
    return self._replica_id_in_sync_group

  @property
  def num_replicas_in_sync(self) -> int:
    """How many replicas are in sync."""
    return self._num_replicas_in_sync

  def __repr__(self) -> str:
    return (f"ValueContext(replica_id_in_sync_group="
            f"{self._replica_id_in_sync_group}, "
            f"num_replicas_in_sync={self._num_replicas_in_sync})")

