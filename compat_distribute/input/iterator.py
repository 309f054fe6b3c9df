"""``DistributedIterator``: steps of input for all replicas, and its TypeSpec.

An iterator wraps one ``tf.data`` iterator on the input host (see
``layout.py`` for how its elements map to replicas).  It is a composite
tensor whose only component is that host iterator, so it can be passed to a
``tf.function``; its ``TypeSpec`` depends only on the layout and the element
spec, so passing it again does not retrace.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> it = iter(strategy.experimental_distribute_dataset(
...     tf.data.Dataset.range(4).batch(2)))
>>> next(it)
<tf.Tensor: shape=(2,), dtype=int64, numpy=array([0, 1])>
>>> it.get_next_as_optional().get_value()
<tf.Tensor: shape=(2,), dtype=int64, numpy=array([2, 3])>
>>> it.get_next_as_optional().has_value()
<tf.Tensor: shape=(), dtype=bool, numpy=False>
"""
from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute.runtime import context
from compat_distribute.input import fast_path
from compat_distribute.input import fetch
from compat_distribute.input import layout as layout_lib
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest
from compat_distribute.runtime.types import StrategyLike

_CompositeTensor = _tf_compat.CompositeTensor


def check_cross_replica(method: str) -> None:
  """Input is read in cross-replica context, never inside ``run``'s fn."""
  if tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context():
    raise ValueError(
        f"{method} was called inside a replica function. Read the input "
        "outside and pass it in: strategy.run(step_fn, "
        "args=(next(iterator),)).")


class IterationProtocol:
  """Python iteration over ``get_next``: ``next(iterator)`` and ``for``
  loops end with StopIteration where ``get_next`` raises OutOfRangeError."""

  def __iter__(self):
    return self

  def __next__(self) -> Nest:
    try:
      return self.get_next()  # pytype: disable=attribute-error
    except tf.errors.OutOfRangeError:
      raise StopIteration from None

  def next(self) -> Nest:
    """Same as ``next(iterator)``."""
    return self.__next__()


class DistributedIterator(IterationProtocol, tf.distribute.DistributedIterator,
                          _CompositeTensor):
  """Iterates over a ``DistributedDataset``: one step of input per call.

  With one replica each step is the dataset's element itself; with several
  it is the same structure with a ``PerReplica`` at every leaf.
  """

  def __init__(self, layout: layout_lib.Layout, host_iterator: tf.data.Iterator,  # pylint: disable=super-init-not-called
               host_spec: SpecNest, static_batch: bool = False,
               partial_rounds: bool = False,
               strategy: Optional[StrategyLike] = None) -> None:
    self._layout = layout
    self._strategy = strategy
    self._host = host_iterator
    self._host_spec = host_spec
    # Input known to be infinite or empty never yields a partial batch:
    # inside a graph, get_next_as_optional then keeps the static batch
    # dimension, as TensorFlow does.
    self._static_batch = bool(static_batch)
    # get_next returns a last incomplete "stream" round (with empty values
    # for replicas without data) instead of ending the input: see
    # build.partial_rounds_wanted.
    self._partial_rounds = partial_rounds and layout.kind == "stream"
    self._reader = None if self._partial_rounds else (
        fast_path.EagerReader.create(layout, host_iterator, host_spec))

  def __repr__(self) -> str:
    return (f"DistributedIterator(kind={self._layout.kind!r}, "
            f"devices={self._layout.devices!r}, "
            f"element_spec={self.element_spec!r})")

  def get_next(self, name: Optional[str] = None) -> Nest:
    """The next step's input.

    Raises:
      tf.errors.OutOfRangeError: the input is exhausted.
    """
    del name
    if self._strategy is not None:
      context.refuse_other_strategy(self._strategy,
                                    "DistributedIterator.get_next")
    check_cross_replica("DistributedIterator.get_next")
    if (self._reader is not None and
        tf.config.experimental.get_synchronous_execution()):
      return self._reader.next_step()
    if self._partial_rounds:
      return self._next_with_partial_round()
    return fetch.next_step(self._layout, self._host.get_next)

  # -- eager reads of a worker's iterator on a cluster (input.multi_worker) --

  def start_reads(self) -> list[tf.experimental.Optional]:
    """Eagerly, this step's reads of the host iterator as Optionals, none
    awaited: one, or one per replica for a ``"stream"`` layout.

    A read that fails at the end of input on a remote worker would fail
    after it returned (remote ops report their errors later) and leave the
    error on the client's executor; an Optional never fails.
    """
    if self._strategy is not None:
      context.refuse_other_strategy(self._strategy,
                                    "DistributedIterator.get_next")
    check_cross_replica("DistributedIterator.get_next")
    reads = self._layout.num_replicas if self._layout.kind == "stream" else 1
    return [self._host.get_next_as_optional() for _ in range(reads)]

  def step_from(self, optionals: list[tf.experimental.Optional],
                flags: Optional[list[bool]] = None) -> Nest:
    """The step ``start_reads`` read: each Optional's value, or where
    ``flags`` says it holds none, an empty value (a last partial round)."""
    if flags is None:
      flags = [True] * len(optionals)
    values = iter([o.get_value() if flag else layout_lib.dummy(self._host_spec)
                   for o, flag in zip(optionals, flags)])
    return fetch.next_step(self._layout, lambda: next(values))

  def _next_with_partial_round(self) -> Nest:
    optional = self.get_next_as_optional()
    if tf.executing_eagerly():
      if not optional.has_value():
        raise tf.errors.OutOfRangeError(None, None, "End of sequence")
      return optional.get_value()
    has_value = tf.cond(optional.has_value(), lambda: tf.constant(True),
                        self._end_of_input)
    with tf.control_dependencies([has_value]):
      return optional.get_value()

  def _end_of_input(self) -> tf.Tensor:
    # Reading the exhausted host iterator raises OutOfRangeError when run.
    with tf.control_dependencies(
        tf.nest.flatten(self._host.get_next(), expand_composites=True)):
      return tf.constant(False)

  def get_next_as_optional(self) -> tf.experimental.Optional:
    """The next step's input as an Optional (empty at the end).

    Unlike ``get_next``, TensorFlow lets a single replica's function call
    this (``strategy.run(lambda: iterator.get_next_as_optional()...)``).
    """
    if self._layout.num_replicas > 1:
      check_cross_replica("DistributedIterator.get_next_as_optional")
    return fetch.next_optional(self._layout, self._host.get_next_as_optional,
                               self._host_spec,
                               relax_batch=not self._static_batch,
                               static_batch=self._static_batch)

  @property
  def element_spec(self) -> SpecNest:
    """The ``TypeSpec`` structure of one step's input."""
    return self._layout.element_spec(self._host_spec)

  @property
  def _type_spec(self) -> "DistributedIteratorSpec":
    # Built once: tf.function asks for it on every call.
    spec = self.__dict__.get("_spec")
    if spec is None:
      spec = self._spec = DistributedIteratorSpec(self._layout.as_tuple(),
                                                  self._host_spec,
                                                  self._static_batch,
                                                  self._partial_rounds
                                                 ).with_strategy(self._strategy)
    return spec


class DistributedIteratorSpec(layout_lib.HostBackedSpec):
  """``TypeSpec`` of ``DistributedIterator``: layout plus host element spec."""

  __slots__ = ("_static_batch", "_partial_rounds")

  def __init__(self, layout_tuple: tuple[Nest, ...], host_spec: SpecNest,
               static_batch: bool = False,
               partial_rounds: bool = False) -> None:
    super().__init__(layout_tuple, host_spec)
    self._static_batch = bool(static_batch)
    self._partial_rounds = bool(partial_rounds)

  def _serialize(self) -> tuple[Nest, ...]:
    return (self._layout_tuple, self._host_spec, self._static_batch,
            self._partial_rounds)

  def is_subtype_of(self, other: tf.TypeSpec) -> bool:
    # Iterators of finite and of infinite input share a trace, as in
    # TensorFlow (whose spec leaves cardinality out), instead of tracing
    # once each.  The flags only change static batch dimensions, except
    # that a "stream" trace for infinite input reads no empty stand-ins
    # and no last partial round: an iterator of finite input must not use
    # it (TensorFlow's does, and fails with OutOfRangeError on a last
    # partial round).
    if type(other) is not type(self):
      return False
    # pylint: disable-next=protected-access
    flags = (other._static_batch, other._partial_rounds)
    if (self._static_batch, self._partial_rounds) == flags:
      return super().is_subtype_of(other)
    if not self._static_batch and (self._partial_rounds != flags[1] or
                                   self._layout_tuple[0] == "stream"):
      return False
    return type(self)(self._layout_tuple, self._host_spec,
                      *flags).is_subtype_of(other)

  @property
  def value_type(self) -> type:
    return DistributedIterator

  @property
  def _component_specs(self) -> tf.TypeSpec:
    return tf.data.IteratorSpec(self._host_spec)

  def _from_components(self, components: Any) -> DistributedIterator:
    return DistributedIterator(self._layout(), components,
                               self._host_spec, self._static_batch,
                               self._partial_rounds, strategy=self._strategy)


layout_lib.forbid_enumerate_in_tf_function(DistributedIterator)
