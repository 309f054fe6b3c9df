"""Reading one step of input from a host iterator, per ``Layout``.

Both the TF2 ``DistributedIterator`` and the v1 input iterators read steps
through these two functions; they differ only in the host iterator they
pass in (``get_next`` / ``get_next_as_optional`` callables).

End of input, as TensorFlow 2.21 does it (measured):

* ``next_step`` raises ``OutOfRangeError`` when the host iterator is
  exhausted.  For a ``"stream"`` layout that includes a last round in which
  only some replicas would get an element: the round is not returned.
* ``next_optional`` returns an empty Optional at the end, but gives a last
  incomplete ``"stream"`` round with empty values for the replicas that got
  nothing (this is what ``for`` loops inside ``tf.function`` see).
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from compat_distribute.input import layout as layout_lib
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import SpecNest

Optional = tf.experimental.Optional


def _after(previous: Any, make: Callable[[], Nest]) -> Any:
  """``make()`` ordered after ``previous`` when building a graph.

  Several reads from one iterator in a graph (outside ``tf.function``,
  which orders stateful ops itself) would otherwise run in any order, and
  replicas could get each other's elements.
  """
  if previous is None or tf.executing_eagerly():
    return make()
  with tf.control_dependencies(
      tf.nest.flatten(previous, expand_composites=True)):
    return make()


def _on_host(layout: layout_lib.Layout,
             read: Callable[[], Nest]) -> Callable[[], Nest]:
  """``read`` pinned to the input host when building a graph.

  Eagerly a read runs where its iterator lives; in a graph the op would
  otherwise take the caller's device scope.
  """
  if tf.executing_eagerly():
    return read

  def pinned() -> Any:
    with tf.device(layout.host):
      return read()
  return pinned


def building_tf1_graph() -> bool:
  """Whether a TF1 graph is being built (neither eager nor a tf.function).

  >>> building_tf1_graph()
  False
  """
  return not (tf.executing_eagerly() or tf.inside_function())


def _read_stream(read: Callable[[], Nest], n: int) -> list[Nest]:
  values, previous = [], None
  for _ in range(n):
    previous = _after(previous, read)
    values.append(previous)
  return values


def next_step(layout: layout_lib.Layout, get_next: Callable[[], Nest]) -> Nest:
  """The next step's input: a plain value (one replica) or ``PerReplica``s."""
  get_next = _on_host(layout, get_next)
  if layout.kind == "stream":
    return _placed(layout, _read_stream(get_next, layout.num_replicas))
  return _placed(layout, get_next())


def _placed(layout: layout_lib.Layout, value: Nest) -> Any:
  targets = layout.targets
  if layout.kind == "whole":
    target = targets[0]
    if target is None and building_tf1_graph():
      # A TF1 graph shows where the value is (TensorFlow's tensors there
      # name the replica's device, or the input host when not fetched to
      # it); the read itself is colocated with the dataset, which may have
      # none.
      target = layout.devices[0] if layout.fetch_to_device else layout.host
    return layout_lib.place(value, target)
  return layout_lib.wrap_per_replica(
      [layout_lib.place(p, t) for p, t in zip(value, targets)])


def _value_or_dummy(opt: Any, host_spec: SpecNest) -> Any:
  if tf.executing_eagerly():
    return opt.get_value() if opt.has_value() else layout_lib.dummy(host_spec)
  return tf.cond(opt.has_value(), opt.get_value,
                 lambda: layout_lib.dummy(host_spec))


def next_optional(layout: layout_lib.Layout,
                  get_next_as_optional: Callable[[], Nest],
                  host_spec: SpecNest, relax_batch: bool = False,
                  static_batch: bool = False) -> Any:
  """The next step's input as a ``tf.experimental.Optional``.

  Args:
    layout: how steps are laid out.
    get_next_as_optional: reads the host iterator's next element as an
      Optional.
    host_spec: the host dataset's element spec.
    relax_batch: in a graph, give the Optional's ``element_spec`` an
      unknown batch dimension (``layout_lib.batch_relaxed``), as TensorFlow
      does for input not known to be infinite or empty: a later element
      may be a partial batch.
    static_batch: the input is known to be infinite or empty, so it has no
      partial ``"stream"`` round: read one without empty stand-ins (whose
      ``tf.cond`` would make the batch dimension unknown).
  """
  spec = layout.element_spec(host_spec)
  if relax_batch and not tf.executing_eagerly():
    spec = layout.element_spec(layout_lib.batch_relaxed(host_spec))
  get_next_as_optional = _on_host(layout, get_next_as_optional)
  if layout.kind == "stream":
    optionals = _read_stream(get_next_as_optional, layout.num_replicas)
    has_value = optionals[0].has_value()

    def value() -> tf.Tensor:
      if static_batch:
        return _placed(layout, [o.get_value() for o in optionals])
      return _placed(layout, [_value_or_dummy(o, host_spec)
                              for o in optionals])
  else:
    opt = get_next_as_optional()
    if (layout.kind == "whole" and all(t is None for t in layout.targets)
        and not tf.executing_eagerly()):
      if not relax_batch:
        return opt
      return tf.cond(opt.has_value(), lambda: opt,
                     lambda: Optional.empty(spec))
    # Eagerly TensorFlow rebuilds a full Optional from the value, so its
    # element_spec has the value's static shapes; so do we.
    has_value = opt.has_value()

    def value() -> tf.Tensor:
      return _placed(layout, opt.get_value())

  if tf.executing_eagerly():
    return Optional.from_value(value()) if has_value else Optional.empty(spec)
  return tf.cond(has_value, lambda: Optional.from_value(value()),
                 lambda: Optional.empty(spec))
