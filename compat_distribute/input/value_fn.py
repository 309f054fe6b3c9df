"""``experimental_distribute_values_from_function``: one value per replica.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> strategy.experimental_distribute_values_from_function(
...     lambda ctx: ctx.replica_id_in_sync_group + 10)
10
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from compat_distribute.runtime.errors import Error

from compat_distribute.input import contexts
from compat_distribute.input import layout as layout_lib
from compat_distribute.input.workers import InputWorkers
from compat_distribute.runtime.types import Nest


class ReplicaValuesMismatchError(Error, ValueError, AssertionError):
  """``value_fn`` returned differently structured values for two replicas.

  TensorFlow raises ``AssertionError``; this error is also a ``ValueError``.
  """


def _check_same_structure(values: list[Nest]) -> None:
  for i, value in enumerate(values[1:], start=1):
    try:
      tf.nest.assert_same_structure(values[0], value)
    except (ValueError, TypeError) as e:
      raise ReplicaValuesMismatchError(
          "experimental_distribute_values_from_function: value_fn must "
          "return the same structure (nesting, lengths, keys) for every "
          f"replica, but returned {values[0]!r} for replica 0 and {value!r} "
          f"for replica {i}. Make value_fn return one structure and vary "
          "only the values.") from e


def distribute_values_from_function(workers: InputWorkers,
                                    value_fn: Callable[[Any], Any]) -> Nest:
  """Calls ``value_fn(ValueContext(i, n))`` for each replica ``i``.

  With one replica the result is ``value_fn``'s return value as it is (as
  for TensorFlow's OneDeviceStrategy), unless ``workers.wrap_single_replica_values`` (TensorFlow's CentralStorageStrategy
  returns a one-value ``PerReplica``).  With several replicas each call runs
  under its replica's device and every leaf of the results becomes a
  ``PerReplica``.
  """
  if not callable(value_fn):
    raise TypeError(
        "experimental_distribute_values_from_function expects a callable "
        f"value_fn(value_context), got {value_fn!r} of type "
        f"{type(value_fn).__name__}.")
  devices = workers.devices
  n = len(devices)
  if n == 1 and not workers.wrap_single_replica_values:
    return value_fn(contexts.ValueContext(0, 1))
  values = []
  for i, device in enumerate(devices):
    with tf.device(device):
      values.append(value_fn(contexts.ValueContext(i, n)))
  _check_same_structure(values)
  return layout_lib.wrap_per_replica(values)
