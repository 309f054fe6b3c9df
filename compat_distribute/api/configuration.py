"""A strategy's configuration: the ``Session`` config it asks for, what it
makes of a distribute coordinator's cluster, and its copies.

``ConfigurationMethods`` is mixed into ``strategy.StrategyMethods`` (so
into every v1 and v2 strategy): ``update_config_proto`` (the copy of a
``tf.compat.v1.ConfigProto`` a ``Session`` needs, from the extended's
``_update_config_proto``), the deprecated ``configure`` and its
``_configure_cluster`` hook (one-machine strategies ignore a cluster, as
TensorFlow's do; ``cluster/`` overrides it), and ``copy.deepcopy`` (a new
strategy with the same configuration) beside a refused shallow copy.

>>> import copy
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> copied = copy.deepcopy(strategy)
>>> copied is strategy, copied.extended.worker_devices == strategy.extended.worker_devices
(False, True)
"""
from __future__ import annotations

from typing import NoReturn, Optional, Union

import tensorflow as tf

from compat_distribute.api.errors import ConfigProtoError
from compat_distribute.runtime.logs import warn_deprecated_once
from compat_distribute.runtime.types import ConfigProto
from compat_distribute.runtime.types import ExtendedLike
from compat_distribute.runtime.types import StrategyLike


class ConfigurationMethods:
  """``update_config_proto``, ``configure``, deep and shallow copies."""

  _extended: ExtendedLike

  def update_config_proto(self, config_proto: ConfigProto) -> ConfigProto:
    """A modified copy of ``config_proto`` for running this strategy in a
    ``tf.compat.v1.Session``; ``config_proto`` itself is left unchanged.

    Unlike TensorFlow's, the copy's ``device_count`` makes the session create
    every device the strategy uses (e.g. ``{"CPU": 4}`` for ``/cpu:3``);
    ``CentralStorageStrategy`` also sets ``isolate_session_state``, as
    TensorFlow's does.

    Args:
      config_proto: the session configuration to start from.

    Returns:
      A new ``tf.compat.v1.ConfigProto``; pass it to
      ``tf.compat.v1.Session(config=...)``.

    Raises:
      ConfigProtoError: ``config_proto`` is not a ``tf.compat.v1.ConfigProto``
        (a ``TypeError`` and an ``AttributeError``).

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> strategy = distribute.experimental.CentralStorageStrategy(
      ...     ["/cpu:0", "/cpu:3"])
      >>> config = strategy.update_config_proto(tf.compat.v1.ConfigProto())
      >>> config.device_count["CPU"], config.isolate_session_state
      (4, True)
    """
    if not isinstance(config_proto, tf.compat.v1.ConfigProto):
      raise ConfigProtoError(
          "update_config_proto expects a tf.compat.v1.ConfigProto, got "
          f"{config_proto!r} of type {type(config_proto).__name__}. Pass "
          "tf.compat.v1.ConfigProto() (or your session's config) and give "
          "the returned copy to tf.compat.v1.Session(config=...).")
    return self._extended._update_config_proto(config_proto)  # pylint: disable=protected-access

  def configure(self, session_config: Optional[ConfigProto] = None,
                cluster_spec: Optional[Union[tf.train.ClusterSpec, dict]] = None,
                task_type: Optional[str] = None,
                task_id: Optional[int] = None) -> None:
    """Deprecated: updates ``session_config`` in place with
    ``update_config_proto``.  With a cluster (TensorFlow's distribute
    coordinator passes one to every task), ``_configure_cluster`` says what
    the strategy makes of it first: one-machine strategies ignore it, as
    TensorFlow's do."""
    warn_deprecated_once("Strategy.configure", "Strategy.update_config_proto")
    if session_config is not None:
      self.update_config_proto(session_config)  # refuses a bad one first
    self._configure_cluster(cluster_spec, task_type, task_id)
    if session_config is not None:
      session_config.CopyFrom(self.update_config_proto(session_config))

  def _configure_cluster(self, cluster_spec: object, task_type: object,
                         task_id: object) -> None:
    """Hook: makes this strategy the ``task_type``/``task_id`` task's part
    of ``cluster_spec``; by default nothing (a one-machine strategy)."""
    del cluster_spec, task_type, task_id

  def __deepcopy__(self, memo: dict) -> StrategyLike:
    """A new strategy with the same configuration (its own scope and
    variables), as TensorFlow's deep copy gives."""
    copied = self._with_same_configuration()
    memo[id(self)] = copied
    return copied

  def _with_same_configuration(self) -> StrategyLike:
    raise NotImplementedError(
        f"{type(self).__name__} cannot be deep-copied; make a new strategy.")

  def __copy__(self) -> NoReturn:
    raise RuntimeError(
        f"A shallow copy of {self!r} would share its scope and variables "
        "with the original, so it is not allowed (as in TensorFlow). Use "
        "copy.deepcopy(strategy) for an independent strategy with the same "
        "devices, or keep using the strategy itself.")
