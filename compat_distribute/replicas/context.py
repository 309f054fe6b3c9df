"""The replica context that ``fn`` sees inside ``strategy.run``.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> def step():
...   ctx = tf.distribute.get_replica_context()
...   return ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync
>>> strategy.run(step)
(<tf.Tensor: shape=(), dtype=int32, numpy=0>, 1)
"""
from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Optional, Sequence, Union

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute.runtime import context
from compat_distribute.values import reduction as reduce_lib
from compat_distribute.variables.aggregating import AggregatingVariable
from compat_distribute.runtime.types import MergeFn
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReduceOpLike
from compat_distribute.runtime.types import ReduceOptions
from compat_distribute.runtime.types import StrategyLike

_NO_SCOPE = contextlib.nullcontext()


class ReplicaContext(tf.distribute.ReplicaContext,
                     tf.compat.v1.distribute.ReplicaContext):
  """Where one replica of ``strategy.run`` executes.

  The single-replica behaviour lives here; several replicas use a subclass
  whose ``_merge_call`` synchronises the replica threads.

  Examples:
    Inside ``run``, ``tf.distribute.get_replica_context()`` returns it:

    >>> import tensorflow as tf
    >>> from compat_distribute import v2 as distribute
    >>> strategy = distribute.experimental.CentralStorageStrategy(
    ...     ["/cpu:0", "/cpu:1"])
    >>> def replica_fn():
    ...   context = tf.distribute.get_replica_context()
    ...   mine = tf.cast(context.replica_id_in_sync_group + 1, tf.float32)
    ...   return context.all_reduce("SUM", mine)
    >>> strategy.experimental_local_results(strategy.run(replica_fn))
    (<tf.Tensor: shape=(), dtype=float32, numpy=3.0>, <tf.Tensor: shape=(), dtype=float32, numpy=3.0>)
  """

  def __init__(self, strategy: StrategyLike, replica_id_in_sync_group: int,
               num_replicas: Optional[int] = None) -> None:  # pylint: disable=super-init-not-called
    """``num_replicas`` is the strategy's ``num_replicas_in_sync``, for a
    caller that knows it (asked of the strategy otherwise)."""
    # TensorFlow's __init__ registers TF's own thread mode; ours is below.
    self._strategy = strategy
    self._replica_id_in_sync_group = replica_id_in_sync_group
    self._local_replica_id = replica_id_in_sync_group
    self._summary_recording_distribution_strategy = None
    self._thread_context = context.ThreadMode(strategy, None, self)
    if num_replicas is None:
      num_replicas = strategy.num_replicas_in_sync
    # Only replica 0 writes summaries.  With one replica that is every
    # replica, so the summary state is left alone (the run hot path).
    self._records_summaries = (
        None if num_replicas == 1 else
        _is_replica_zero(replica_id_in_sync_group))
    self._saved_summary_flags: list[Nest] = []

  def __repr__(self) -> str:
    return (f"{type(self).__name__}(strategy={self._strategy!r}, "
            f"replica_id_in_sync_group={self._replica_id_in_sync_group})")

  def __enter__(self) -> "ReplicaContext":
    context.push(self._thread_context)
    if self._records_summaries is not None:
      state = _tf_private.summary_state()
      self._saved_summary_flags.append(state.is_recording_distribution_strategy)
      state.is_recording_distribution_strategy = self._records_summaries
    return self

  def __exit__(self, exc_type, exc_value, traceback) -> None:
    if self._records_summaries is not None:
      _tf_private.summary_state().is_recording_distribution_strategy = (
          self._saved_summary_flags.pop())
    context.pop(self._thread_context)

  # -- identity -------------------------------------------------------------

  @property
  def strategy(self) -> StrategyLike:
    """The strategy running this replica."""
    return self._strategy

  @property
  def num_replicas_in_sync(self) -> int:
    """How many replicas run ``fn`` together."""
    return self._strategy.num_replicas_in_sync

  @property
  def replica_id_in_sync_group(self) -> tf.Tensor:
    """This replica's index, as an int32 scalar tensor."""
    replica_id = self._replica_id_in_sync_group
    # (tf.is_tensor of a Python int costs ~5 µs: a Protocol check.)
    if not isinstance(replica_id, int) and tf.is_tensor(replica_id):
      return replica_id
    return tf.constant(replica_id, tf.int32, name="replica_id_in_sync_group")

  @property
  def _replica_id(self) -> tf.Tensor:
    return self.replica_id_in_sync_group

  @property
  def devices(self) -> tuple[str, ...]:
    """The device(s) this replica runs on."""
    return (self._strategy.extended.worker_devices[
        self._replica_id_in_sync_group],)

  # -- synchronisation ------------------------------------------------------

  def merge_call(self, merge_fn: MergeFn, args: Sequence[Nest] = (),
                 kwargs: Optional[dict] = None) -> Nest:
    """Runs ``merge_fn(strategy, *args, **kwargs)`` once, in cross-replica
    context, with every replica's ``args`` grouped into per-replica values;
    each replica gets back its own part of the result.
    """
    if not callable(merge_fn):
      raise TypeError(
          f"merge_call expects a callable merge_fn(strategy, *args), got "
          f"{merge_fn!r} of type {type(merge_fn).__name__}.")
    if not context.in_replica_context_of(self._strategy):
      raise RuntimeError(
          "merge_call must be called in replica context (inside "
          f"`strategy.run`); the current context is "
          f"{context.current_mode() or 'the default strategy'!r}. In "
          "cross-replica context call merge_fn(strategy, ...) directly.")
    if not isinstance(args, (list, tuple)):
      raise TypeError(
          f"merge_call takes `args` as a list or tuple, got "
          f"{type(args).__name__}: {args!r}. Wrap a single argument: "
          "args=(value,).")
    merge_fn = _tf_compat.convert_as_caller(merge_fn, convert_by_default=False)
    return self._merge_call(merge_fn, tuple(args), dict(kwargs or {}))

  def _merge_call(self, merge_fn: MergeFn, args: tuple,
                  kwargs: dict) -> Nest:
    with context.CrossReplicaFromReplica(self._strategy):
      return merge_fn(self._strategy, *args, **kwargs)

  def all_reduce(self, reduce_op: ReduceOpLike, value: Nest,
                 options: ReduceOptions = None) -> Nest:
    """Reduces ``value`` (a nest of tensors) across replicas; every replica
    receives the result."""
    del options
    reduce_op = reduce_lib.to_reduce_op(reduce_op)
    if self.num_replicas_in_sync == 1:
      self._require_running("all_reduce")
      return tf.nest.map_structure(_identity, value)
    return self._all_reduce(reduce_op, value)

  def all_gather(self, value: Nest, axis: int,
                 options: ReduceOptions = None) -> Nest:
    """Concatenates ``value`` from every replica along ``axis``; every
    replica receives the result."""
    del options
    if any(isinstance(v, tf.IndexedSlices) for v in tf.nest.flatten(value)):
      raise NotImplementedError(
          "all_gather does not support IndexedSlices, got "
          f"{value!r}; convert them with tf.convert_to_tensor first.")
    if self.num_replicas_in_sync == 1:
      self._require_running("all_gather")
      return tf.nest.map_structure(_identity, value)
    return self._all_gather(value, axis)

  def _gather_to(self, value: Nest, destinations: Nest, axis: int) -> Nest:
    """The strategy's gather of ``value`` onto ``destinations``; a context
    of several replicas (``threads.MultiReplicaContext``) has it from its
    run's ``ReplicaPlan``."""
    raise NotImplementedError(
        f"all_gather across {self.num_replicas_in_sync} replicas needs the "
        f"replica context strategy.run makes, not {self!r}. Call "
        "tf.distribute.get_replica_context().all_gather(...) inside the "
        "replica function.")

  def _require_running(self, method: str) -> None:
    """A collective is valid only from the code this context is running
    (with several replicas, ``merge_call`` checks it for all of them)."""
    mode = context.current_mode()
    if mode is None or mode.replica_context is not self:
      raise RuntimeError(
          f"{method} was called on {self!r}, which is not the replica "
          "context of the running code (it was kept from another replica or "
          "a replica function that has returned, or this is merge_fn / "
          "cross-replica code). Call "
          f"tf.distribute.get_replica_context().{method}(...) inside the "
          "replica function.")

  # -- several replicas: everything goes through merge_call ----------------

  def _all_reduce(self, reduce_op: ReduceOpLike, value: Nest) -> Nest:
    """All-reduce for several replicas: ``batch_reduce_to`` in ``merge_fn``,
    each replica getting the copy on its own device.

    The gradient of an all-reduce is the all-reduce (same op) of the
    replicas' upstream gradients, as in TensorFlow; IndexedSlices are
    reduced without a custom gradient.
    """
    single = tf.is_tensor(value) and not isinstance(value, tf.IndexedSlices)
    flat = [value] if single else tf.nest.flatten(value)

    def merge_fn(strategy, *per_replica):
      return strategy.extended.batch_reduce_to(
          reduce_op, [(v, v) for v in per_replica])

    if any(isinstance(v, tf.IndexedSlices) for v in flat):
      return tf.nest.pack_sequence_as(value,
                                      self.merge_call(merge_fn, args=flat))

    @tf.custom_gradient
    def reduce_with_gradient(*xs):
      ys = self.merge_call(merge_fn, args=xs)
      return ys, lambda *dys: self.all_reduce(reduce_op, list(dys))

    # tf.custom_gradient rejects a variable read inside it unless that very
    # object is an input: a CentralStorage wrapper goes in as its variable.
    reduced = reduce_with_gradient(*[
        v.get() if isinstance(v, AggregatingVariable) else v
        for v in flat])
    return reduced[0] if single else tf.nest.pack_sequence_as(value, reduced)

  def _all_gather(self, value: Nest, axis: int) -> Nest:
    """All-gather for several replicas: the strategy's gather (``_gather_to``,
    from the run's ``ReplicaPlan``) in ``merge_fn``.

    The gradient for one replica is its own slice (along ``axis``) of the
    all-reduce SUM of the replicas' upstream gradients.
    """
    flat = tf.nest.flatten(value)

    def merge_fn(_, *per_replica):
      return [self._gather_to(v, v, axis) for v in per_replica]

    @tf.custom_gradient
    def gather_with_gradient(*xs):
      ys = self.merge_call(merge_fn, args=xs)

      def grad(*dys):
        summed = self.all_reduce(reduce_lib.ReduceOp.SUM, list(dys))
        sizes = tf.stack([tf.shape(x)[axis] for x in xs])
        all_sizes = self.all_gather(sizes[tf.newaxis], axis=0)
        begins = tf.reduce_sum(
            all_sizes[:self._replica_id_in_sync_group], axis=0)
        return [tf.gather(g, tf.range(begins[j], begins[j] + sizes[j]),
                          axis=axis)
                for j, g in enumerate(summed)]

      return ys, grad

    return tf.nest.pack_sequence_as(value, gather_with_gradient(*flat))


def _is_replica_zero(replica_id: Union[int, tf.Tensor]) -> Union[bool,
                     Callable[[], tf.Tensor]]:
  """A summary-recording condition true only on replica 0."""
  if not isinstance(replica_id, int) and tf.is_tensor(replica_id):
    return lambda: tf.equal(replica_id, 0)
  return replica_id == 0


def _identity(value: Nest) -> Nest:
  if isinstance(value, tf.IndexedSlices):
    return value
  return tf.identity(value)


def first_replica_variable_scope() -> ContextManager[None]:
  """The scope replica 0 of a CentralStorage run builds its graph in: the
  caller's v1 variable scope entered again, as TensorFlow's mirrored
  replicas do.

  Leaving it restores the counts behind default scope names, so a
  ``variable_scope(None, default_name=...)`` or a ``tf.layers`` layer made
  in the replica function gets the same name in every replica (the others
  reuse its variables) and in every traced run.

  >>> with tf.Graph().as_default():
  ...   for _ in range(2):
  ...     with first_replica_variable_scope():
  ...       with tf.compat.v1.variable_scope(None, default_name="block"):
  ...         print(tf.compat.v1.get_variable_scope().name)
  block
  block
  """
  return tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope())


def reentered_variable_scope() -> ContextManager[None]:
  """The scope in which TensorFlow's mirrored replicas (CentralStorage's)
  run ``merge_fn``: the replica's v1 variable scope entered once more.

  In a graph, entering a variable scope object again also opens a name
  scope of its name, so ops that ``merge_fn`` makes under variable scope
  ``vs`` and name scope ``vs/inner/`` are named ``vs/inner/vs/...``; in the
  root variable scope nothing changes.

  >>> with tf.Graph().as_default():
  ...   with tf.compat.v1.variable_scope("vs"), tf.name_scope("inner"):
  ...     with reentered_variable_scope():
  ...       print(tf.constant(1.0, name="c").op.name)
  vs/inner/vs/c
  """
  scope = tf.compat.v1.get_variable_scope()
  if not scope.name:
    return _NO_SCOPE
  return tf.compat.v1.variable_scope(scope)
