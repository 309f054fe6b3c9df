"""The part of ``strategy.extended`` that only the v1 API documents.

``tf.compat.v1.distribute.StrategyExtended`` adds to the v2 class: reading
and broadcasting values, non-slot variables, numpy datasets fed through a
session, the deprecated multi-step loop and the multi-worker role
properties.  ``ExtendedV1Methods`` holds them, mixed into the shared
``api.extended.Extended`` (one extended object serves both API generations, as
in TensorFlow); strategies may override the ``_`` hooks.

>>> import tensorflow as tf
>>> from compat_distribute import v1
>>> extended = v1.OneDeviceStrategy("/cpu:0").extended
>>> extended.non_slot_devices([]), extended.should_checkpoint
(('/job:localhost/replica:0/task:0/device:CPU:0',), True)
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute import input as input_lib
from compat_distribute.runtime import context
from compat_distribute.values import distributed as values_lib
from compat_distribute.api.errors import DestinationsError
from compat_distribute.api.errors import NotAVariableError
from compat_distribute.runtime.types import Destinations
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReplicaFn
from compat_distribute.runtime.types import Session
from compat_distribute.runtime.types import TensorLike


class ExtendedV1Methods:
  """v1-only methods of ``strategy.extended``; see the module docstring."""

  _between_graph = False  # see experimental_between_graph
  _isolates_session_state = False  # see _update_config_proto
  # distribute_datasets_from_function: see input.options.settings_from.
  _per_replica_input_is_per_worker = False

  def read_var(self, v: tf.Variable) -> tf.Tensor:
    """The value of variable ``v`` as a tensor.

    Variables here have a single copy, so this is a read; TensorFlow
    aggregates replica-local variables, which these strategies never make.
    """
    return tf.identity(v)

  def broadcast_to(self, tensor: TensorLike,
                   destinations: Destinations) -> Nest:
    """Copies ``tensor`` to ``destinations`` (a device string or a
    variable, whose device is used)."""
    context.require_cross_replica(self._container_strategy(), "broadcast_to")
    if destinations is None or isinstance(destinations, (list, tuple)):
      raise DestinationsError(
          "broadcast_to takes one destination, a device string or a "
          f"variable, got {destinations!r}. Pass e.g. '/cpu:0' or the "
          "variable whose device the value should go to.")
    if not (isinstance(destinations, str) or
            values_lib.is_distributed(destinations)):
      # A variable stands for its device; hooks then only see strings.
      destinations = getattr(destinations, "device", None) or destinations
    return self._broadcast_to(tensor, destinations)

  def _broadcast_to(self, tensor: TensorLike,
                    destinations: Destinations) -> Nest:
    if (isinstance(tensor, (int, float)) or
        len(self._compute_devices) == 1):
      # Python numbers stay unconverted so their dtype follows their use
      # (global_step.assign_add(1) on an int64 variable).
      return tensor
    device = getattr(destinations, "device", destinations)
    with tf.device(device):
      return tf.identity(tensor)

  def non_slot_devices(self, var_list: Any) -> tuple[str, ...]:
    """Where non-slot variables (e.g. Adam's ``beta1_power``) live: the
    parameter device(s)."""
    del var_list
    return self.parameter_devices

  def update_non_slot(self, colocate_with: Any, fn: ReplicaFn,
                      args: Sequence[Nest] = (), kwargs: Optional[dict] = None,
                      group: bool = True) -> Nest:
    """Runs ``fn(*args, **kwargs)`` once, on the device(s)
    ``colocate_with`` (from ``non_slot_devices``) names."""
    strategy = self._container_strategy()
    context.require_cross_replica(strategy, "update_non_slot")
    if not tf.executing_eagerly():
      fn = _tf_compat.convert_as_caller(fn, convert_by_default=False)
    with strategy.scope():
      return self._update_non_slot(colocate_with, fn, tuple(args),
                                   dict(kwargs or {}), group)

  def _update_non_slot(self, colocate_with: Any, fn: ReplicaFn,
                       args: tuple, kwargs: dict, group: bool) -> Nest:
    device = colocate_with
    if isinstance(device, (list, tuple)):
      device = device[0] if device else self._parameter_devices[0]
    device = getattr(device, "device", device)
    if not isinstance(device, str):
      raise NotAVariableError(
          "update_non_slot needs `colocate_with` from non_slot_devices (a "
          "variable, or device names), got "
          f"{colocate_with!r} of type {type(colocate_with).__name__}. Pass "
          "strategy.extended.non_slot_devices(var_list).")
    with tf.device(device):
      result = fn(*args, **kwargs)
    if group:
      return result
    return tf.nest.map_structure(self._local_results, result)

  def experimental_make_numpy_dataset(self, numpy_input: Nest,
                                      session: Optional[Session] = None
                                      ) -> tf.data.Dataset:
    """A dataset of ``numpy_input``'s slices on the input host; in graph
    mode the data is fed in through ``session``."""
    context.require_cross_replica(self._container_strategy(),
                                  "experimental_make_numpy_dataset")
    return input_lib.make_numpy_dataset(self._input_workers(), numpy_input,
                                        session)

  def experimental_run_steps_on_iterator(self, fn: ReplicaFn,
                                         iterator: Any, iterations: int = 1,
                                         initial_loop_values: Nest = None
                                         ) -> Any:
    """Not provided (as in TensorFlow, whose ``OneDeviceStrategy`` alone
    keeps this deprecated API)."""
    raise NotImplementedError(
        "experimental_run_steps_on_iterator is deprecated and not provided "
        f"by {self!r}. Call strategy.run(fn, args=(iterator.get_next(),)) "
        "in a loop (a tf.while_loop in graph mode) instead.")

  @property
  def experimental_between_graph(self) -> bool:
    """Whether each worker builds its own graph: False on one machine."""
    return self._between_graph

  @property
  def experimental_should_init(self) -> bool:
    """Whether this process should initialise variables: always, here."""
    return True

  @property
  def should_checkpoint(self) -> bool:
    """Whether this process should save checkpoints: always, here."""
    return True

  @property
  def should_save_summary(self) -> bool:
    """Whether this process should write summaries: always, here."""
    return True
