"""``DistributedDataset``: a re-iterable source of steps for all replicas.

It holds the host ``tf.data`` pipeline that ``build.py`` prepared (global
batches already split for ``experimental_distribute_dataset``); each
``iter()`` starts a fresh ``DistributedIterator`` from the beginning.  It is
a composite tensor (its component is the host dataset), so it can be a
``tf.function`` argument and a ``for`` loop inside one iterates over it.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> dist = strategy.experimental_distribute_dataset(
...     tf.data.Dataset.range(6).batch(3))
>>> [x.numpy().tolist() for x in dist]
[[0, 1, 2], [3, 4, 5]]
>>> @tf.function
... def total(dataset):
...   result = tf.constant(0, tf.int64)
...   for x in dataset:
...     result += tf.reduce_sum(x)
...   return result
>>> total(dist)
<tf.Tensor: shape=(), dtype=int64, numpy=15>
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import tensorflow as tf

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute.input import fetch
from compat_distribute.input import iterator as iterator_lib
from compat_distribute.input import iterator_v1
from compat_distribute.input import layout as layout_lib
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest
from compat_distribute.runtime.types import StrategyLike

_CompositeTensor = _tf_compat.CompositeTensor


class DistributedDataset(tf.distribute.DistributedDataset, _CompositeTensor,
                         _tf_private.KerasDistributedDatasetMarker):
  """Steps of input for all replicas; iterate it (several times if you
  like) in eager mode or inside a ``tf.function``; Keras's ``fit``,
  ``evaluate`` and ``predict`` take it as input."""

  def __init__(self, layout: layout_lib.Layout,  # pylint: disable=super-init-not-called
               host_dataset: tf.data.Dataset,
               cardinality: Any = tf.data.UNKNOWN_CARDINALITY,
               partial_rounds: bool = False,
               strategy: Optional[StrategyLike] = None) -> None:
    self._layout = layout
    self._host = host_dataset
    self._cardinality = cardinality
    # See build.partial_rounds_wanted (eager iteration only).
    self._partial_rounds = partial_rounds
    # Reading a step under another strategy's scope is refused.
    self._strategy = strategy

  def __repr__(self) -> str:
    return (f"DistributedDataset(kind={self._layout.kind!r}, "
            f"devices={self._layout.devices!r}, "
            f"element_spec={self.element_spec!r})")

  def __iter__(self) -> iterator_lib.DistributedIterator:
    if fetch.building_tf1_graph():
      raise RuntimeError(
          "__iter__() is only supported inside of tf.function or when eager "
          "execution is enabled; this DistributedDataset was iterated while "
          "building a TF1 graph. In graph mode use "
          "dist_dataset.make_initializable_iterator() (or "
          "strategy.make_dataset_iterator(dataset)) and run its initializer "
          "in your session.")
    with tf.device(self._layout.host):
      host_iterator = iter(self._host)
    static_batch = self._cardinality in (tf.data.INFINITE_CARDINALITY, 0)
    return iterator_lib.DistributedIterator(
        self._layout, host_iterator, self._host.element_spec,
        static_batch=bool(static_batch), partial_rounds=self._partial_rounds,
        strategy=self._strategy)

  def make_initializable_iterator(self) -> iterator_v1.InputIterator:
    """A v1 input iterator over this dataset, as TensorFlow's v1
    distributed datasets offer for graph mode: run its ``initializer``,
    then ``get_next()``.  Eagerly there is nothing to initialize, so, as in
    TensorFlow, it raises ``ValueError``: use ``iter()`` (or
    ``make_one_shot_iterator()``) there."""
    return self._make_initializable_iterator()

  def _make_initializable_iterator(
      self, shared_name: Optional[str] = None) -> iterator_v1.InputIterator:
    # Also what tf.compat.v1.data.make_initializable_iterator(dataset)
    # calls; shared_name has no meaning for a distributed dataset.
    del shared_name
    if tf.executing_eagerly():
      raise ValueError(
          "Cannot create initializable iterator in Eager mode: eagerly a "
          "distributed dataset's iterator is ready as soon as it is made, "
          "so there is no initializer to run. Use iter(dist_dataset) or "
          "dist_dataset.make_one_shot_iterator() instead.")
    return self._v1_iterator()

  def make_one_shot_iterator(self) -> iterator_v1.InputIterator:
    """A v1 input iterator over this dataset that needs no initializer, as
    TensorFlow's v1 distributed datasets offer eagerly.  In a graph (TF1 or
    a ``tf.function``) it raises ``ValueError``, as in TensorFlow: use
    ``make_initializable_iterator()`` and run its ``initializer``.

    >>> from compat_distribute import v1 as distribute
    >>> strategy = distribute.OneDeviceStrategy("/cpu:0")
    >>> dist = strategy.experimental_distribute_dataset(
    ...     tf.data.Dataset.range(4).batch(2))
    >>> dist.make_one_shot_iterator().get_next()
    <tf.Tensor: shape=(2,), dtype=int64, numpy=array([0, 1])>
    """
    return self._make_one_shot_iterator()

  def _make_one_shot_iterator(self) -> iterator_v1.InputIterator:
    # Also what tf.compat.v1.data.make_one_shot_iterator(dataset) calls.
    if not tf.executing_eagerly():
      raise ValueError(
          "Cannot create a one shot iterator of a distributed dataset in a "
          "graph: its per-replica input must be initialized first. Use "
          "iterator = dist_dataset.make_initializable_iterator() and run "
          "iterator.initializer in your session (or iterate the dataset "
          "with a for loop inside a tf.function).")
    return self._v1_iterator()

  def _v1_iterator(self) -> iterator_v1.InputIterator:
    return iterator_v1.InputIterator(self._layout, self._host,
                                     strategy=self._strategy)

  @property
  def cardinality(self) -> Any:
    """The cardinality of the dataset this was built from (for
    ``distribute_datasets_from_function``, of the dataset ``dataset_fn``
    returned), as TensorFlow's distributed datasets report it: a NumPy
    int64 when built eagerly -- ``tf.data.INFINITE_CARDINALITY`` (-1) for
    an endless dataset, ``tf.data.UNKNOWN_CARDINALITY`` (-2) when it cannot
    be known -- and -2 when built in a graph or received by a
    ``tf.function``.

    >>> from compat_distribute import v2 as distribute
    >>> strategy = distribute.OneDeviceStrategy("/cpu:0")
    >>> int(strategy.experimental_distribute_dataset(
    ...     tf.data.Dataset.range(9).batch(4)).cardinality)
    3
    """
    return self._cardinality

  @property
  def element_spec(self) -> SpecNest:
    """The ``TypeSpec`` structure of one step's input: the dataset's with
    one replica, a ``PerReplicaSpec`` at every leaf with several."""
    return self._layout.element_spec(self._host.element_spec)

  def reduce(self, initial_state: Nest,
             reduce_func: Callable[[Nest, Nest], Nest]) -> Nest:
    """Folds ``reduce_func(state, step_input)`` over every step.

    This is also how a ``for`` loop over the dataset runs inside a
    ``tf.function``.
    """
    iterator = iter(self)

    def has_more(optional, state):
      del state
      return optional.has_value()

    def body(optional, state):
      state = reduce_func(state, optional.get_value())
      return iterator.get_next_as_optional(), state

    _, state = tf.while_loop(
        has_more, body, (iterator.get_next_as_optional(), initial_state),
        parallel_iterations=1)
    return state

  @property
  def _type_spec(self) -> "DistributedDatasetSpec":
    # Built once: tf.function asks for it on every call.
    spec = self.__dict__.get("_spec")
    if spec is None:
      spec = self._spec = DistributedDatasetSpec(self._layout.as_tuple(),
                                                 self._host.element_spec,
                                                 self._partial_rounds
                                                ).with_strategy(self._strategy)
    return spec


class DistributedDatasetSpec(layout_lib.HostBackedSpec):
  """``TypeSpec`` of ``DistributedDataset``: layout plus host element spec."""

  __slots__ = ("_partial_rounds",)

  def __init__(self, layout_tuple: tuple[Nest, ...], host_spec: SpecNest,
               partial_rounds: bool = False) -> None:
    super().__init__(layout_tuple, host_spec)
    # Only a "stream" layout has partial rounds (see DistributedIterator):
    # elsewhere the flag must not make a second trace.
    self._partial_rounds = bool(partial_rounds) and layout_tuple[0] == "stream"

  def _serialize(self) -> tuple[Nest, ...]:
    return (self._layout_tuple, self._host_spec, self._partial_rounds)

  @property
  def value_type(self) -> type:
    return DistributedDataset

  @property
  def _component_specs(self) -> tf.TypeSpec:
    return tf.data.DatasetSpec(self._host_spec)

  def _from_components(self, components: Any) -> DistributedDataset:
    return DistributedDataset(self._layout(), components,
                              partial_rounds=self._partial_rounds,
                              strategy=self._strategy)


layout_lib.forbid_enumerate_in_tf_function(DistributedDataset)
