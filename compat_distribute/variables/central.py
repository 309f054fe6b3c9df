"""CentralStorage variables: one copy on the parameter device, updates
aggregated across replicas.

``create_central_variable`` is what ``CentralStorageStrategy``'s variable
creator calls.  With one replica it returns a plain ``tf.Variable`` placed on
the parameter device (TensorFlow's rule); with several it wraps that variable
in an ``AggregatingVariable`` (``aggregating``), which reads like the
variable everywhere and, in replica context, combines each replica's
``assign``/``assign_add``/``assign_sub`` by the variable's ``aggregation``
before applying it once.

>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.experimental.CentralStorageStrategy(
...     ["/cpu:0", "/cpu:1"])
>>> with strategy.scope():
...   w = tf.Variable(1.0, aggregation=tf.VariableAggregation.MEAN)
>>> type(w).__name__, w.device
('AggregatingVariable', '/job:localhost/replica:0/task:0/device:CPU:0')
"""
from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf

from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import Creator
from compat_distribute.runtime.types import DeviceOrFunction
from compat_distribute.runtime.types import ExtendedLike
from compat_distribute.variables import placement as placement_lib
from compat_distribute.variables.aggregating import AggregatingVariable
from compat_distribute.variables.aggregating import ShareOnReadVariable

_Aggregation = tf.VariableAggregation
_VALID_AGGREGATIONS = (_Aggregation.NONE, _Aggregation.SUM, _Aggregation.MEAN,
                       _Aggregation.ONLY_FIRST_REPLICA)
_GraphKeys = tf.compat.v1.GraphKeys


def create_central_variable(extended: ExtendedLike, next_creator: Creator,
                            device: Optional[DeviceOrFunction] = None,
                            **kwargs: Any) -> tf.Variable:
  """Creates a variable for ``CentralStorageStrategy``.

  The variable is colocated with ``colocate_with`` when that is given (as
  ``colocate_vars_with`` and optimizers' slot variables ask), else goes on
  ``extended.parameter_devices[0]`` whatever device or colocation scope it
  is created in.  With more than one replica it is
  wrapped in an ``AggregatingVariable`` (and, in graph mode, the wrapper
  replaces the variable in the graph's collections -- except that a
  ``tf.Variable`` the next creator filed in ``GLOBAL_VARIABLES`` itself
  stays there beside its wrapper, as TensorFlow's strategy leaves it).

  Args:
    extended: the strategy's ``StrategyExtended``.
    next_creator: the next variable creator in the chain.
    device: where the variable goes when it is not colocated: a device name
      or a graph device function; None means ``parameter_devices[0]``.
    **kwargs: the variable's constructor arguments.

  Returns:
    A ``tf.Variable``: the plain variable with one replica, else its
    ``AggregatingVariable``.

  Raises:
    ValueError: ``aggregation`` is not a ``tf.VariableAggregation``.
  """
  placement = placement_lib.variable_placement(
      kwargs.pop("colocate_with", None),
      extended.parameter_devices[0] if device is None else device,
      clear_scopes=True)
  if len(extended.worker_devices) <= 1:
    with placement:
      return next_creator(**kwargs)
  aggregation = _check_aggregation(kwargs.get("aggregation"),
                                   kwargs.get("name"))
  collections = kwargs.pop("collections", None)
  if collections is None:
    collections = [_GraphKeys.GLOBAL_VARIABLES]
  kwargs["collections"] = []
  with placement:
    variable = next_creator(**kwargs)
  kind = AggregatingVariable
  if (getattr(extended, "_shares_on_read", False) and
      aggregation == _Aggregation.SUM and kwargs.get("synchronization") ==
      tf.VariableSynchronization.ON_READ):
    kind = ShareOnReadVariable  # a mirrored strategy's per-replica copies
  wrapper = kind(extended._container_strategy(), variable,  # pylint: disable=protected-access
                 aggregation)
  _fix_collections(variable, wrapper, collections)
  return wrapper


class InvalidAggregationError(Error, ValueError, TypeError):
  """An ``aggregation`` that is not a ``tf.VariableAggregation``.

  TensorFlow's CentralStorageStrategy means to raise ``ValueError`` but
  fails with a ``TypeError`` while formatting its message; this error is
  both.
  """


def _check_aggregation(aggregation: object, name: Optional[str]
                       ) -> tf.VariableAggregation:
  """Returns ``aggregation`` as an enum; ``ValueError`` if it is none."""
  if aggregation is None:
    return _Aggregation.NONE
  if aggregation in _VALID_AGGREGATIONS:
    return aggregation
  try:
    return _Aggregation(aggregation)
  except (ValueError, TypeError):
    pass
  raise InvalidAggregationError(
      f"Invalid variable aggregation {aggregation!r} for variable {name!r}: "
      "a variable made under CentralStorageStrategy must have one of "
      "tf.VariableAggregation.NONE, SUM, MEAN or ONLY_FIRST_REPLICA. Pass "
      "e.g. aggregation=tf.VariableAggregation.SUM.")


def _fix_collections(variable: tf.Variable, wrapper: AggregatingVariable,
                     collections: list[str]) -> None:
  """Puts ``wrapper`` where ``variable`` would have gone (graph mode)."""
  if tf.executing_eagerly():
    if _GraphKeys.GLOBAL_STEP in collections:
      tf.compat.v1.add_to_collections(_GraphKeys.GLOBAL_STEP, wrapper)
    return
  collections = list(collections)
  if variable.trainable and _GraphKeys.TRAINABLE_VARIABLES not in collections:
    collections.append(_GraphKeys.TRAINABLE_VARIABLES)
  # A creator that ignores `collections` (tf.Variable in a tf.Graph) has
  # already filed the inner variable.  The wrapper takes its place among the
  # trainable variables; in GLOBAL_VARIABLES both stay, as TensorFlow's
  # CentralStorage leaves them, so a TF1 Saver over the graph's variables
  # raises as TensorFlow's does (aggregating.SameNameSavedTwiceError).
  members = tf.compat.v1.get_collection_ref(_GraphKeys.TRAINABLE_VARIABLES)
  if any(v is variable for v in members):
    members[:] = [v for v in members if v is not variable]
  tf.compat.v1.add_to_collections(collections, wrapper)
