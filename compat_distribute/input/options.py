"""Checking ``tf.distribute.InputOptions`` and turning them into settings.

What each field does here (single machine, one input pipeline):

* ``experimental_fetch_to_device`` -- honoured: True (default) puts each
  replica's batch on its compute device, False leaves it on the input host.
* ``experimental_per_replica_buffer_size`` -- honoured: how many steps of
  input are prefetched on the host (default 1; 0 turns prefetching off; a
  negative value, such as ``tf.data.AUTOTUNE``, lets tf.data choose, and is
  accepted as TensorFlow accepts it).
* ``experimental_replication_mode`` -- only ``PER_WORKER`` (one input
  pipeline for all replicas); ``PER_REPLICA`` raises ``NotImplementedError``,
  except in CentralStorage's ``distribute_datasets_from_function`` with
  ``experimental_fetch_to_device``, where TensorFlow's builds the same one
  pipeline (its other ``PER_REPLICA`` settings hand replica 1 no data).
* ``experimental_place_dataset_on_device`` -- only meaningful with
  ``PER_REPLICA``; setting it raises ``ValueError``, except for
  ``experimental_distribute_dataset`` with one replica, which ignores it as
  TensorFlow's ``OneDeviceStrategy`` does (the pipeline runs on the host
  and the batches reach the one device either way).

>>> settings_from(None, "experimental_distribute_dataset")
InputSettings(fetch_to_device=True, buffer_size=1)
>>> settings_from(tf.distribute.InputOptions(experimental_fetch_to_device=False),
...               "experimental_distribute_dataset")
InputSettings(fetch_to_device=False, buffer_size=1)
"""
from __future__ import annotations

import dataclasses
import numbers


import tensorflow as tf

from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import InputOptions


@dataclasses.dataclass(frozen=True)
class InputSettings:
  """The options that matter once validated."""
  fetch_to_device: bool = True
  buffer_size: int = 1


class NotInputOptionsError(Error, TypeError, AttributeError):
  """``options`` is not a ``tf.distribute.InputOptions``.

  TensorFlow fails reading a missing attribute (``AttributeError``); this
  error is also a ``TypeError``, the type that names the mistake.
  """


def settings_from(options: InputOptions, method: str,
                  may_ignore_placement: bool = False,
                  per_replica_fetch_is_per_worker: bool = False
                  ) -> InputSettings:
  """Validates ``options`` (an ``InputOptions`` or None) for ``method``;
  ``may_ignore_placement`` accepts ``experimental_place_dataset_on_device``
  (and ignores it).  ``per_replica_fetch_is_per_worker`` is TensorFlow's
  CentralStorage ``distribute_datasets_from_function``: it checks the
  placement options first, and ``PER_REPLICA`` with fetching to the devices
  (and no placement) builds the same single pipeline as ``PER_WORKER``.

  Raises:
    NotInputOptionsError: ``options`` is not a ``tf.distribute.InputOptions``
      (a ``TypeError`` and an ``AttributeError``).
    TypeError: the buffer size is not an int (TensorFlow also raises
      ``TypeError``, when the dataset is iterated).
    NotImplementedError: ``PER_REPLICA`` replication was asked for.
    ValueError: ``experimental_place_dataset_on_device`` is set and
      ``may_ignore_placement`` is not, or set together with
      ``experimental_fetch_to_device`` and ``PER_REPLICA`` (an invalid
      combination for TensorFlow too).
  """
  if options is None:
    return InputSettings()
  if not isinstance(options, tf.distribute.InputOptions):
    raise NotInputOptionsError(
        f"{method}: `options` must be a tf.distribute.InputOptions or None, "
        f"got {options!r} of type {type(options).__name__}. Build one with "
        "tf.distribute.InputOptions(experimental_fetch_to_device=...).")
  mode = options.experimental_replication_mode
  per_replica = mode == tf.distribute.InputReplicationMode.PER_REPLICA
  if per_replica and per_replica_fetch_is_per_worker:
    if (options.experimental_fetch_to_device and
        options.experimental_place_dataset_on_device):
      raise ValueError(
          f"{method}: experimental_place_dataset_on_device=True cannot be "
          "combined with experimental_fetch_to_device=True and "
          "InputReplicationMode.PER_REPLICA (got all three). Set one of the "
          "two placement options to False.")
    if options.experimental_fetch_to_device:
      mode = tf.distribute.InputReplicationMode.PER_WORKER
  if mode != tf.distribute.InputReplicationMode.PER_WORKER:
    raise NotImplementedError(
        f"{method}: experimental_replication_mode={mode!r} is not supported; "
        "these single-machine strategies build one input pipeline whose "
        "batches are shared out to all replicas "
        "(InputReplicationMode.PER_WORKER). Drop the option or pass "
        "experimental_replication_mode=tf.distribute.InputReplicationMode."
        "PER_WORKER.")
  if options.experimental_place_dataset_on_device and not may_ignore_placement:
    raise ValueError(
        f"{method}: experimental_place_dataset_on_device=True only applies "
        "with InputReplicationMode.PER_REPLICA, which these strategies do not "
        "support; the input pipeline always runs on the host. Remove it "
        "(experimental_fetch_to_device=True already puts the batches on the "
        "devices).")
  size = options.experimental_per_replica_buffer_size
  if not isinstance(size, numbers.Integral):
    raise TypeError(
        f"{method}: experimental_per_replica_buffer_size must be an int (>= 0 "
        f"steps to prefetch, or tf.data.AUTOTUNE), got {size!r}.")
  size = int(size)
  return InputSettings(fetch_to_device=bool(options.experimental_fetch_to_device),
                       buffer_size=tf.data.AUTOTUNE if size < 0 else size)
