"""How replicas run: the one place that chooses, and the one-replica paths.

``call_for_each_replica(replicas, fn, args, kwargs)`` is what
``strategy.run`` reaches (through the base ``Extended._call_for_each_replica``,
with the ``plan.Replicas`` that ``extended`` makes once, from its
``ReplicaPlan``):

* Several replicas: ``threads.call_for_each_replica`` -- eagerly, replica
  0 on the calling thread, the others there too until a ``merge_call``
  moves them to long-lived worker threads; in a graph, that loop on a
  replica thread (see ``threads``); for a ``tf.function``,
  through ``replicated_function``, which traces every replica into one.
* One replica, for a strategy that runs it as it runs several
  (``plan.one_replica_like_many``; CentralStorage, as TensorFlow's):
  a ``tf.function`` is traced anew for the replica as for several;
  any other ``fn`` runs in an ``OnlyReplicaContext`` -- eagerly on the
  calling thread, in a graph on a replica thread (``own_thread``) --
  whose ``merge_fn`` runs under the caller's device, with the caller's
  summary state kept, and the result regrouped as several replicas' would
  be (lists and tuples come back plain).
* One replica otherwise (OneDevice): ``fn`` runs on the calling thread, on
  the device, in one ``ReplicaContext`` kept for every call -- no thread
  hand-off, nothing regrouped (the hot path).

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> one = distribute.OneDeviceStrategy("/cpu:0")
>>> with one.scope():
...   call_for_each_replica(one.extended._replicas, lambda: [tf.constant(1)],
...                         (), {})
[<tf.Tensor: shape=(), dtype=int32, numpy=1>]
"""
from __future__ import annotations

import types
from typing import Callable, Optional

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute.replicas import caller_state
from compat_distribute.replicas import own_thread
from compat_distribute.replicas import replicated_function
from compat_distribute.replicas import threads
from compat_distribute.replicas.context import ReplicaContext
from compat_distribute.replicas.context import first_replica_variable_scope
from compat_distribute.replicas.context import reentered_variable_scope
from compat_distribute.replicas.plan import ReplicaPlan
from compat_distribute.replicas.plan import Replicas
from compat_distribute.runtime.types import DeviceName
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReplicaFn
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.values import distributed as values_lib

_PolymorphicFunction = _tf_compat.PolymorphicFunction
# Never a tf.function: checked by type before the abstract-class isinstance.
_PLAIN_FUNCTIONS = frozenset((types.FunctionType, types.MethodType))
_device = _tf_private.device  # tf.device, cheaper while tracing


def call_for_each_replica(replicas: Replicas, fn: ReplicaFn,
                          args: tuple, kwargs: dict) -> Nest:
  """Runs ``fn`` once per replica of ``replicas`` (see the module
  docstring); must be called inside the strategy's scope."""
  like_many = replicas.like_many
  if (like_many and type(fn) not in _PLAIN_FUNCTIONS and
      isinstance(fn, _PolymorphicFunction)):
    return replicated_function.call_for_each_replica(replicas, fn, args,
                                                     kwargs)
  if replicas.several:
    return threads.call_for_each_replica(replicas, fn, args, kwargs)
  if not like_many:
    return run_one_replica(replicas.plan, _kept_context(replicas), fn, args,
                           kwargs)
  return _run_only_replica(replicas.plan, fn, args, kwargs)


def run_one_replica(plan: ReplicaPlan, replica_context: ReplicaContext,
                    fn: ReplicaFn, args: tuple, kwargs: dict) -> Nest:
  """Runs the only replica's ``fn`` on the calling thread."""
  with _device(plan.devices[0]), replica_context:
    return fn(*values_lib.select_replica(0, args),
              **values_lib.select_replica(0, kwargs))


def _kept_context(replicas: Replicas) -> ReplicaContext:
  """The one replica's context: stateless between uses, so one instance
  (kept by ``replicas``) serves every call."""
  context = replicas.kept_context
  if context is None:
    context = replicas.kept_context = ReplicaContext(replicas.plan.strategy, 0)
  return context


def _run_only_replica(plan: ReplicaPlan, fn: ReplicaFn, args: tuple,
                      kwargs: dict) -> Nest:
  replica_context = OnlyReplicaContext(plan.strategy,
                                       _tf_private.current_device())

  def run_replica() -> Nest:
    if tf.executing_eagerly():
      return run_one_replica(plan, replica_context, fn, args, kwargs)
    with first_replica_variable_scope():
      return run_one_replica(plan, replica_context, fn, args, kwargs)

  if tf.executing_eagerly():
    result = caller_state.keeping_summary_state(run_replica)
  else:
    graph = tf.compat.v1.get_default_graph()
    graph.switch_to_thread_local()  # as threads._Run.start does
    result = own_thread.call_on_replica_thread(
        caller_state.CallerState(graph, eager=False), run_replica)
  if replica_context.merge_error is not None:  # caught by the replica fn
    raise replica_context.merge_error
  return values_lib.regroup([result])


class OnlyReplicaContext(ReplicaContext):
  """The replica context of the one replica of a strategy that runs it as
  it runs several (CentralStorage).

  ``merge_fn`` runs under the caller's device scope rather than the
  replica's, and an exception it raises fails the whole ``run`` even if the
  replica function catches it: as with several replicas, and as in
  TensorFlow, whose ``merge_fn`` runs on the calling thread.
  """

  def __init__(self, strategy: StrategyLike,
               caller_device: DeviceName) -> None:
    super().__init__(strategy, 0)
    self._caller_device = caller_device
    self.merge_error: Optional[BaseException] = None

  def _merge_call(self, merge_fn: Callable[..., Nest], args: tuple,
                  kwargs: dict) -> Nest:
    try:
      with _device(None), _device(
          self._caller_device or None), reentered_variable_scope():
        result = super()._merge_call(merge_fn, values_lib.regroup([args]),
                                     values_lib.regroup([kwargs]))
      return values_lib.select_replica(0, result)
    except BaseException as e:
      if self.merge_error is None:
        self.merge_error = e
      raise
