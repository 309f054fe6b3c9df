"""``AggregatingVariable``: a CentralStorage variable with several replicas.

It reads like the variable it wraps everywhere and, in replica context,
combines each replica's ``assign``/``assign_add``/``assign_sub`` by the
variable's ``aggregation`` before applying it once (``central`` makes
them).

>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> with strategy.scope():
...   inner = tf.Variable(1.0, name="w")
>>> w = AggregatingVariable(strategy, inner, tf.VariableAggregation.SUM)
>>> w
<AggregatingVariable aggregation=SUM tf.Variable 'w:0' shape=() dtype=float32, numpy=1.0>
>>> isinstance(w, tf.Variable), float(w * 2), float(w.assign_add(1.0))
(True, 2.0, 2.0)
"""
from __future__ import annotations

import copy
import weakref
from typing import Any, Optional, Union

import numpy as np
import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute.runtime import context
from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.variables.trace_types import SameObject

_Aggregation = tf.VariableAggregation


class AggregatingVariable(_tf_compat.VariableBase, _tf_compat.TensorMarker):
  """A variable whose replica-context updates are combined across replicas.

  Reads (``value``, ``read_value``, tensor conversion, operators, ``numpy``,
  ``sparse_read``...) go to the wrapped variable.  ``assign``,
  ``assign_add`` and ``assign_sub`` called inside ``strategy.run`` with more
  than one replica meet in ``merge_call``: SUM and MEAN reduce the
  replicas' values with ``strategy.extended.reduce_to``, ONLY_FIRST_REPLICA
  takes replica 0's, and the result is applied once.  Anywhere else --
  cross-replica context, ``strategy.extended.update``, one replica -- they
  apply directly.  ``scatter_*`` updates always apply directly, per replica,
  as in TensorFlow.

  Checkpoints and SavedModels see the wrapped variable, so values move
  freely between this wrapper, TensorFlow's strategies and no strategy.

  Args:
    strategy: the strategy that created the variable.
    variable: the ``tf.Variable`` to wrap.
    aggregation: how replica-context updates combine: a
      ``tf.VariableAggregation``.
  """

  def __init__(self, strategy: StrategyLike, variable: tf.Variable,  # pylint: disable=super-init-not-called
               aggregation: tf.VariableAggregation) -> None:
    # tf.Variable.__init__ would build a second variable: not called.
    self._distribute_strategy = strategy
    self._v = variable
    self._aggregation = aggregation
    # Lets value_container() and optimizers' slot keys find the wrapper.
    variable._distributed_container = weakref.ref(self)  # pylint: disable=protected-access

  def __getattr__(self, name: str) -> Any:
    # Everything not defined here (private TF variable internals and
    # Trackable's state, e.g. the restore uid that keeps a checkpoint from
    # restoring a variable twice) is the wrapped variable's, as in TF.
    if name.startswith("__") or name == "_v":
      raise AttributeError(
          f"{type(self).__name__!r} object has no attribute {name!r}")
    return getattr(self._v, name)

  def __repr__(self) -> str:
    aggregation = getattr(self._aggregation, "name", self._aggregation)
    return f"<{type(self).__name__} aggregation={aggregation} {repr(self._v)[1:]}"

  def get(self) -> tf.Variable:
    """The wrapped variable."""
    return self._v

  def _distributed_container(self) -> "AggregatingVariable":
    return self  # what Keras optimizers key slot variables by

  @property
  def distribute_strategy(self) -> StrategyLike:
    """The strategy that created this variable."""
    return self._distribute_strategy

  @property
  def aggregation(self) -> tf.VariableAggregation:
    """How replica-context updates combine across replicas."""
    return self._aggregation

  def __copy__(self) -> "AggregatingVariable":
    return self  # as tf.Variable: a shallow copy is the variable itself

  def __reduce__(self) -> tuple:
    return self._v.__reduce__()  # pickles as its (plain) variable, as TF's

  def __deepcopy__(self, memo: dict) -> "AggregatingVariable":
    # A copy keeps this strategy, so (as in TensorFlow) it is only made
    # outside every scope or inside this strategy's own.
    context.refuse_other_strategy(self._distribute_strategy, "deepcopy")
    copied = type(self)(self._distribute_strategy,
                        copy.deepcopy(self._v, memo), self._aggregation)
    memo[id(self)] = copied
    return copied

  # -- updates ----------------------------------------------------------------

  def assign(self, value: Nest, use_locking: bool = False,
             name: Optional[str] = None, read_value: bool = True
             ) -> Union[tf.Tensor, tf.Operation]:
    """Assigns ``value``; in replica context, the replicas' values are
    first combined by ``aggregation``."""
    return self._update("assign", value, use_locking, name, read_value)

  def assign_add(self, delta: Nest, use_locking: bool = False,
                 name: Optional[str] = None, read_value: bool = True
             ) -> Union[tf.Tensor, tf.Operation]:
    """Adds ``delta``; in replica context, the replicas' deltas are first
    combined by ``aggregation``."""
    return self._update("assign_add", delta, use_locking, name, read_value)

  def assign_sub(self, delta: Nest, use_locking: bool = False,
                 name: Optional[str] = None, read_value: bool = True
             ) -> Union[tf.Tensor, tf.Operation]:
    """Subtracts ``delta``; in replica context, the replicas' deltas are
    first combined by ``aggregation``."""
    return self._update("assign_sub", delta, use_locking, name, read_value)

  def _update(self, method: str, value: Nest, use_locking: bool,
              name: Optional[str], read_value: bool) -> Nest:
    strategy = self._distribute_strategy
    context.refuse_other_strategy(strategy, f"{method} of {self._v.name!r}")
    if (strategy.num_replicas_in_sync <= 1 or
        not context.in_replica_context_of(strategy)):
      # Outside replica context (plain code, merge_fn, an update function)
      # a per-replica value contributes replica 0's part, as TensorFlow's
      # extended.update gives it.
      return _apply(self._v, method, _first(strategy, value),
                    use_locking=use_locking, name=name, read_value=read_value)
    if self._aggregation == _Aggregation.NONE:
      raise ValueError(
          f"Cannot {method} variable {self._v.name!r} in replica context: "
          f"it has aggregation=NONE, and with {strategy.num_replicas_in_sync}"
          " replicas TensorFlow requires an aggregation method so that the "
          "replicas' updates can be combined into one. Create the variable "
          "with an aggregation other than NONE, e.g. `tf.Variable(..., "
          "aggregation=tf.VariableAggregation.SUM)` (or MEAN, "
          "ONLY_FIRST_REPLICA), or update it in cross-replica context: "
          "`tf.distribute.get_replica_context().merge_call(merge_fn)` with "
          "`strategy.extended.update(var, fn)` inside merge_fn.")
    return tf.distribute.get_replica_context().merge_call(
        self._merge_update, args=(method, value),
        kwargs={"use_locking": use_locking, "name": name,
                "read_value": read_value})

  def _merge_update(self, strategy: StrategyLike, method: str, value: Nest,
                    use_locking: bool = False, name: Optional[str] = None,
                    read_value: bool = True) -> Nest:
    """Runs once in cross-replica context with every replica's ``value``."""
    if self._aggregation == _Aggregation.ONLY_FIRST_REPLICA:
      value = strategy.experimental_local_results(value)[0]
    else:
      reduce_op = (tf.distribute.ReduceOp.SUM
                   if self._aggregation == _Aggregation.SUM else
                   tf.distribute.ReduceOp.MEAN)
      value = strategy.extended.reduce_to(reduce_op, value, destinations=self)
    name = _first(strategy, name)
    return strategy.extended.update(
        self, _apply, args=(method, _first(strategy, value)),
        kwargs={"use_locking": use_locking, "name": name,
                "read_value": read_value})

  # -- reads and plain forwards -----------------------------------------------

  def value(self) -> tf.Tensor:
    """The variable's current value, as a tensor."""
    return self._v.value()

  def read_value(self) -> tf.Tensor:
    """Reads the variable's value (a new tensor)."""
    return self._v.read_value()

  def numpy(self) -> np.ndarray:
    """The value as a NumPy array (eager mode only)."""
    return self._v.numpy()

  def __array__(self, dtype: Optional[tf.DType] = None, copy: Any = None) -> np.ndarray:  # pylint: disable=redefined-outer-name
    del copy
    return np.asarray(self._v.numpy(), dtype=dtype)

  def __bool__(self) -> bool:
    return bool(self._v.read_value())

  def __int__(self) -> int:
    return int(self._v.read_value())

  def __float__(self) -> float:
    return float(self._v.read_value())

  def __complex__(self) -> complex:
    return complex(self._v.read_value())

  def _dense_var_to_tensor(self, dtype: Optional[tf.DType] = None,
                           name: Optional[str] = None,
                           as_ref: bool = False) -> tf.Tensor:
    return self._v._dense_var_to_tensor(dtype=dtype, name=name, as_ref=as_ref)  # pylint: disable=protected-access

  def __tf_tracing_type__(self, tracing_context: object) -> SameObject:
    # As a tf.function argument the wrapper itself reaches the function body
    # (which captures the wrapped variable's handle), as with a closure.
    del tracing_context
    return SameObject(self)

  def _should_act_as_resource_variable(self) -> None:
    """Makes TensorFlow treat this as a resource variable (gradients,
    SavedModel, optimizers)."""

  # -- checkpoints and SavedModel ---------------------------------------------

  def _gather_saveables_for_checkpoint(self) -> dict[str, Any]:
    # Only a TF1 name-based Saver asks for these (tf.train.Checkpoint and
    # SavedModel use _serialize_to_tensors); TensorFlow's refuses to save a
    # variable and its wrapper together.
    saving = _tf_private.tf1_saver_list() or ()
    if any(v is self._v for v in saving):
      raise SameNameSavedTwiceError(self._v)
    return self._v._gather_saveables_for_checkpoint()  # pylint: disable=protected-access

  def _serialize_to_tensors(self) -> dict[str, Any]:
    return self._v._serialize_to_tensors()  # pylint: disable=protected-access

  def _restore_from_tensors(self, restored_tensors: dict[str, Any]
                            ) -> Optional[tf.Operation]:
    return self._v._restore_from_tensors(restored_tensors)  # pylint: disable=protected-access

  def _export_to_saved_model_graph(self, object_map: Any, tensor_map: Any,
                                   options: Any, **kwargs: Any) -> list[Nest]:
    resources = self._v._export_to_saved_model_graph(  # pylint: disable=protected-access
        object_map, tensor_map, options, **kwargs)
    object_map[self] = object_map[self._v]
    return resources

  def _copy_trackable_to_cpu(self, object_map: Any) -> None:
    self._v._copy_trackable_to_cpu(object_map)  # pylint: disable=protected-access
    if self not in object_map:
      object_map[self] = type(self)(self._distribute_strategy,
                                    object_map[self._v], self._aggregation)

  def _write_object_proto(self, proto: Any, options: Any) -> None:
    self._v._write_object_proto(proto, options)  # pylint: disable=protected-access


class ShareOnReadVariable(AggregatingVariable):
  """A ``synchronization=ON_READ`` variable with ``aggregation=SUM`` (what
  Keras 3 makes its metrics' totals and counts) under a strategy whose
  replicas stand for mirrored tasks (``MultiWorkerMirroredStrategy``).

  TensorFlow's mirrored strategies keep one copy per replica: a replica
  reads and writes its own, a cross-replica read sums them.  Here the one
  central variable holds that sum and each replica's copy is taken to be an
  equal share of it: a read inside ``strategy.run`` gives the value divided
  by the number of replicas, elsewhere the sum.  So Keras' ``assign(self +
  delta)`` from every replica, combined by SUM, adds the replicas' deltas
  once, as on TensorFlow's strategy (a plain central variable would add
  the old value once per replica).
  """

  def _share(self, value: tf.Tensor) -> tf.Tensor:
    strategy = self._distribute_strategy
    if not context.in_replica_context_of(strategy):
      return value
    return value / tf.cast(strategy.num_replicas_in_sync, value.dtype)

  def value(self) -> tf.Tensor:
    """The value: this replica's share in replica context, else the sum."""
    return self._share(self._v.value())

  def read_value(self) -> tf.Tensor:
    """Reads the value (this replica's share in replica context)."""
    return self._share(self._v.read_value())

  def _dense_var_to_tensor(self, dtype: Optional[tf.DType] = None,
                           name: Optional[str] = None,
                           as_ref: bool = False) -> tf.Tensor:
    tensor = super()._dense_var_to_tensor(dtype=dtype, name=name,
                                          as_ref=as_ref)
    return tensor if as_ref else self._share(tensor)


def _forward(name: str, is_property: bool) -> None:
  """Defines ``AggregatingVariable.<name>`` as the wrapped variable's."""
  if is_property:
    member = property(lambda self: getattr(self._v, name),  # pylint: disable=protected-access
                      doc=f"The wrapped variable's ``{name}``.")
  else:
    def member(self, *args, **kwargs):
      return getattr(self._v, name)(*args, **kwargs)  # pylint: disable=protected-access
    member.__name__ = name
    member.__doc__ = (f"The wrapped variable's ``{name}`` (an update here "
                      "applies directly, per replica, never aggregated).")
  setattr(AggregatingVariable, name, member)


for _name in ("name", "dtype", "shape", "device", "graph", "op", "handle",
              "trainable", "synchronization", "constraint", "initializer",
              "initial_value", "_shared_name", "_unique_id", "_in_graph_mode",
              "_graph_element", "_save_slice_info"):
  _forward(_name, is_property=True)

for _name in ("get_shape", "set_shape", "sparse_read", "gather_nd", "eval",
              "load", "initialized_value", "count_up_to", "to_proto",
              "from_proto", "is_initialized", "scatter_update", "scatter_add",
              "scatter_sub", "scatter_max", "scatter_min", "scatter_mul",
              "scatter_div", "scatter_nd_update", "scatter_nd_add",
              "scatter_nd_sub", "scatter_nd_max", "scatter_nd_min",
              "batch_scatter_update", "_as_graph_element",
              "_get_save_slice_info", "_set_save_slice_info"):
  _forward(_name, is_property=False)


def _apply(variable: tf.Variable, method: str, value: Nest,
           **kwargs: Any) -> Nest:
  """``variable.<method>(value, **kwargs)`` where the variable lives."""
  if isinstance(variable, AggregatingVariable):
    variable = variable.get()
  if not variable.device:
    return getattr(variable, method)(value, **kwargs)
  with _tf_private.device(variable.device):
    return getattr(variable, method)(value, **kwargs)


def _first(strategy: StrategyLike, value: Nest) -> Nest:
  """The first replica's part of a per-replica or mirrored ``value``."""
  if isinstance(value, tf.distribute.DistributedValues):
    return strategy.experimental_local_results(value)[0]
  return value


def _to_tensor(variable: AggregatingVariable, dtype: Optional[tf.DType] = None,
               name: Optional[str] = None, as_ref: bool = False) -> tf.Tensor:
  return variable._dense_var_to_tensor(dtype=dtype, name=name, as_ref=as_ref)  # pylint: disable=protected-access


tf.register_tensor_conversion_function(AggregatingVariable, _to_tensor)


class SameNameSavedTwiceError(Error, ValueError):
  """A TF1 ``Saver`` over a graph where a multi-replica CentralStorage
  variable is filed twice under one name, as TensorFlow's strategy files it.

  A ``tf.Variable`` (the V2 constructor, which takes no ``collections``)
  created in a ``tf.Graph`` under a CentralStorage strategy with several
  replicas is filed in ``GLOBAL_VARIABLES`` by TensorFlow both as itself and
  as its ``AggregatingVariable``; TensorFlow's ``Saver`` then refuses the
  graph's variables with this ``ValueError``.  Keras optimizers create their
  slots that way, so TensorFlow 2 canned estimators (default Adagrad and
  Ftrl) cannot checkpoint under TensorFlow's CentralStorage.
  """

  def __init__(self, variable: tf.Variable) -> None:
    name = variable._shared_name  # pylint: disable=protected-access
    super().__init__(
        f"At least two variables have the same name: {name}. As TensorFlow's "
        "CentralStorageStrategy with several replicas does, this graph files "
        f"{name!r} twice in GLOBAL_VARIABLES (the tf.Variable created in a "
        "graph, e.g. a Keras optimizer's slot, and its AggregatingVariable), "
        "so a TF1 Saver (an Estimator's checkpoints) cannot save it; "
        "TensorFlow raises the same ValueError. What runs instead: a v1 "
        "optimizer (e.g. optimizer=lambda: tf.compat.v1.train."
        "AdagradOptimizer(0.05), or the tf.compat.v1.estimator canned "
        "estimators, whose defaults are v1 optimizers), variables made by "
        "tf.compat.v1.get_variable, or OneDeviceStrategy.")

