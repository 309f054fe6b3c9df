"""The v1 input iterator of ``make_dataset_iterator`` / ``make_input_fn_iterator``.

In graph mode it wraps an initializable ``tf.data`` iterator: build
``get_next()`` into the graph, run ``initializer`` (the op
``initialize()`` returns) in the session, then run the step.  Running a step
before the initializer fails at once with TensorFlow's
``FailedPreconditionError`` ("... iterator has not been initialized"); it
never blocks.  Running the initializer again restarts the input.  Eagerly
the iterator is ready as soon as it is made and ``initialize()`` restarts it.

>>> import tensorflow as tf
>>> from compat_distribute import v1 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> it = strategy.make_dataset_iterator(tf.data.Dataset.range(4).batch(2))
>>> it.initialize() is None  # eagerly: restarts the input
True
>>> it.get_next()
<tf.Tensor: shape=(2,), dtype=int64, numpy=array([0, 1])>
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import tensorflow as tf

from compat_distribute.runtime import context
from compat_distribute.input import fast_path
from compat_distribute.input import fetch
from compat_distribute.input import iterator as iterator_lib
from compat_distribute.input import layout as layout_lib
from compat_distribute.input import rebatch
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.runtime.types import SpecNest


class InputIterator(tf.distribute.DistributedIterator):
  """Steps of input for all replicas, for the v1 API (graph or eager).

  A ``tf.distribute.DistributedIterator``, as TensorFlow's v1 iterators are.

  Args:
    layout: how host elements map to replicas.
    source: the host ``tf.data.Dataset``, or a callable returning the next
      element (``make_input_fn_iterator``'s input_fn may return one).
    unsplit: for a ``"rounds"`` layout in a TF1 graph, the same input
      before its per-replica split (``source`` is its split form): the
      iterator reads a global batch and splits it in the graph, which
      costs less per step than the split ``map`` in the pipeline (a
      function call per element).
  """

  def __init__(self, layout: layout_lib.Layout, source: Any,
               strategy: Optional[StrategyLike] = None,
               unsplit: Optional[tf.data.Dataset] = None) -> None:
    self._layout = layout
    # Reading a step under another strategy's scope is refused.
    self._strategy = strategy
    # A TF1 graph (not eager, not a tf.function being traced).
    self._graph = fetch.building_tf1_graph()
    # Only a TF1 graph splits in the graph; elsewhere ``source`` is read.
    self._unsplit = unsplit if self._graph else None
    if isinstance(source, tf.data.Dataset):
      self._dataset = source
      self._fn: Optional[Callable[[], Nest]] = None
      self._host_spec = source.element_spec
      self._host = self._make_host_iterator()
    else:
      self._dataset = None
      self._fn = source
      self._host_spec = None
      self._host = None
      self._reader = None

  def _make_host_iterator(self) -> Any:
    with tf.device(self._layout.host):
      if self._graph:
        self._reader = None
        return tf.compat.v1.data.make_initializable_iterator(
            self._dataset if self._unsplit is None else self._unsplit)
      host = iter(self._dataset)
    self._reader = fast_path.EagerReader.create(self._layout, host,
                                                self._host_spec)
    return host

  def __repr__(self) -> str:
    source = "dataset" if self._fn is None else f"callable {self._fn!r}"
    return (f"InputIterator(kind={self._layout.kind!r}, "
            f"devices={self._layout.devices!r}, source={source}, "
            f"mode={'graph' if self._graph else 'eager'})")

  # -- initialisation -------------------------------------------------------

  def initialize(self) -> Optional[tf.Operation]:
    """One op that (re)starts the input: run it in your session before the
    first step.  Eagerly this restarts the input and returns ``None``;
    inside a ``tf.function`` it restarts it and returns a ``tf.Operation``
    (a no-op), as TensorFlow's iterator does."""
    if self._graph:
      # On the replica's device with one replica (its input worker), else
      # on the host, as TensorFlow's initializer op.
      layout = self._layout
      with tf.device(layout.devices[0] if layout.kind == "whole" else
                     layout.host), tf.control_dependencies(
                         [] if self._host is None else
                         [self._host.initializer]):
        return tf.no_op(name="group_deps")  # what tf.group names it
    if self._host is not None:
      self._host = self._make_host_iterator()
    if not tf.executing_eagerly():  # a tf.function being traced
      return tf.no_op(name="group_deps")
    return None

  @property
  def initializer(self) -> Optional[tf.Operation]:
    """The same as ``initialize()``."""
    return self.initialize()

  # -- reading --------------------------------------------------------------

  def get_next(self, name: Optional[str] = None) -> Nest:
    """The next step's input: one value (one replica) or ``PerReplica``s.

    In graph mode this adds the read to the graph; each run of the result
    consumes one step.
    """
    del name
    if self._strategy is not None:
      context.refuse_other_strategy(self._strategy, "InputIterator.get_next")
    iterator_lib.check_cross_replica("InputIterator.get_next")
    if self._fn is not None:
      return fetch.next_step(self._layout, self._fn)
    if (self._reader is not None and
        tf.config.experimental.get_synchronous_execution()):
      return self._reader.next_step()
    if self._unsplit is not None:
      return fetch.next_step(self._layout,
                             lambda: self._split(self._host.get_next()))
    return fetch.next_step(self._layout, self._host.get_next)

  def _split(self, global_batch: Nest) -> Nest:
    """One global batch of ``unsplit`` as the split pipeline's element."""
    return rebatch.split_element(global_batch, self._layout.num_replicas)

  def _read_and_split_optional(self) -> tf.experimental.Optional:
    opt = self._host.get_next_as_optional()
    return tf.cond(
        opt.has_value(),
        lambda: tf.experimental.Optional.from_value(
            self._split(opt.get_value())),
        lambda: tf.experimental.Optional.empty(self._host_spec))

  def get_next_as_optional(self) -> tf.experimental.Optional:
    """The next step's input as an Optional (empty at the end).

    As in TensorFlow, a single replica's function may call this.
    """
    if self._layout.num_replicas > 1:
      iterator_lib.check_cross_replica("InputIterator.get_next_as_optional")
    if self._fn is not None:
      return tf.experimental.Optional.from_value(self.get_next())
    read = (self._read_and_split_optional if self._unsplit is not None
            else self._host.get_next_as_optional)
    return fetch.next_optional(self._layout, read, self._host_spec)

  @property
  def element_spec(self) -> SpecNest:
    """The ``TypeSpec`` structure of one step's input (None for a callable
    source, whose elements are only known once read)."""
    if self._host_spec is None:
      return None
    return self._layout.element_spec(self._host_spec)

  def _per_replica_dataset_property(self, getter: Callable[[Any], Any],
                                    name: str) -> Any:
    if self._dataset is None:
      raise AttributeError(
          f"InputIterator.{name} is not known for an input_fn that returned "
          "a callable: its elements are only known once read. Return a "
          "tf.data.Dataset from input_fn to get it.")
    value = getter(self._dataset)
    # "rounds" host elements are n-tuples of pieces; report one replica's.
    return value[0] if self._layout.kind == "rounds" else value

  @property
  def output_types(self) -> Any:
    """One replica's element dtypes, as TF1 iterators report them."""
    return self._per_replica_dataset_property(
        tf.compat.v1.data.get_output_types, "output_types")

  @property
  def output_shapes(self) -> Any:
    """One replica's element shapes, as TF1 iterators report them."""
    return self._per_replica_dataset_property(
        tf.compat.v1.data.get_output_shapes, "output_shapes")

  @property
  def output_classes(self) -> Any:
    """One replica's element classes (``tf.Tensor``, ``tf.SparseTensor``,
    ...), as TF1 iterators report them."""
    return self._per_replica_dataset_property(
        tf.compat.v1.data.get_output_classes, "output_classes")

  def __iter__(self) -> "InputIterator":
    return self

  def next(self) -> Nest:
    """Same as ``next(iterator)``."""
    return self.__next__()

  def __next__(self) -> Nest:
    if self._graph:
      # The TF1 idiom: ``next(iterator)`` once builds the read into the
      # graph, and each session run of it consumes one step (as
      # TensorFlow's).  The end of input is an OutOfRangeError from
      # ``session.run``, never a StopIteration here.
      return self.get_next()
    try:
      return self.get_next()
    except tf.errors.OutOfRangeError:
      raise StopIteration from None
