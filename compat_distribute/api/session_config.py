"""The ``tf.compat.v1.ConfigProto`` a strategy asks a ``Session`` for.

``strategy.update_config_proto`` returns a copy of the caller's config in
which every local device the strategy uses exists (``device_count`` is
raised, never lowered: a v1 ``Session`` creates only the devices its config
counts) and, for CentralStorage, session state is isolated as TensorFlow's
strategy asks.

>>> config = updated(tf.compat.v1.ConfigProto(),
...                  ["/job:localhost/replica:0/task:0/device:CPU:3"],
...                  isolate_session_state=True)
>>> config.device_count["CPU"] >= 4, config.isolate_session_state
(True, True)
"""
from __future__ import annotations

from typing import Any, Iterable

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.runtime.types import ConfigProto


def updated(config_proto: ConfigProto, devices: Iterable[str],
            isolate_session_state: bool) -> ConfigProto:
  """A copy of ``config_proto`` that creates every one of ``devices`` (and
  sets ``isolate_session_state`` if asked); the original is unchanged."""
  config = tf.compat.v1.ConfigProto()
  config.CopyFrom(config_proto)
  _count_devices(config, devices)
  if isolate_session_state:
    config.isolate_session_state = True
  return config


def _count_devices(config: Any, devices: Iterable[str]) -> None:
  """Raises ``config.device_count`` so that every local device in
  ``devices`` exists in a session; never lowers a count."""
  needed: dict[str, int] = {}
  for device in devices:
    spec = tf.DeviceSpec.from_string(device)
    if spec.job not in (None, "localhost") or not spec.device_type:
      continue
    kind = spec.device_type.upper()
    needed[kind] = max(needed.get(kind, 0), (spec.device_index or 0) + 1)
  for kind, count in needed.items():
    configured = len(_tf_private.list_logical_devices(kind))
    current = config.device_count.get(kind, 0)
    config.device_count[kind] = max(count, configured, current)
