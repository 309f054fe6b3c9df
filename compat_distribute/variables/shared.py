"""One set of variables for all replicas of a multi-replica ``run``.

A layer built inside ``strategy.run`` creates its variables once per
replica call.  As in TensorFlow, replica 0 really creates them; replica
``i`` > 0 gets replica 0's variable of the same name (with the
``_1``-style suffixes TensorFlow adds to repeated names removed), in
creation order.  A replica that asks for a variable replica 0 did not
create gets a ``RuntimeError`` saying how to fix it.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.experimental.CentralStorageStrategy(
...     ["/cpu:0", "/cpu:1"])
>>> with strategy.scope():
...   made = strategy.run(lambda: tf.Variable(1.0, name="w"))
>>> isinstance(made, tf.Variable)  # one variable, not one per replica
True
>>> canonical_name("replica_1/dense_1/kernel_2")
'replica/dense/kernel'
"""
from __future__ import annotations

import re
from typing import Callable, Optional

import tensorflow as tf

from compat_distribute.runtime import context
from compat_distribute.runtime.types import Creator

_UNIQUIFIED_SCOPE = re.compile(r"_\d/")
_UNIQUIFIED_END = re.compile(r"_\d$")


def canonical_name(name: Optional[str]) -> str:
  """``name`` without the numeric suffixes TensorFlow uniquifies with."""
  if name is None:
    return "Variable"
  return _UNIQUIFIED_END.sub("", _UNIQUIFIED_SCOPE.sub("/", name))


class SharedVariables:
  """The variables one run's replica 0 created, handed out to the others.

  ``create`` is what the variable creator installed innermost around each
  replica's function calls; ``sharing`` is set while replica 0 creates one
  (so the strategy's own creator beneath need not share again).
  """

  def __init__(self, num_replicas: int) -> None:
    self.created: dict[str, list[tf.Variable]] = {}
    self.counts: list[dict[str, int]] = [{} for _ in range(num_replicas)]
    self.sharing = False

  def create(self, replica_context: object, next_creator: Creator,
             kwargs: dict) -> tf.Variable:
    """A variable creator's body for the replica ``replica_context``:
    replica 0 creates (through ``next_creator``), the others get replica
    0's; outside that replica's own code (e.g. in ``merge_fn``) nothing is
    shared."""
    mode = context.current_mode()
    if mode is None or mode.replica_context is not replica_context:
      return next_creator(**kwargs)
    i = replica_context._replica_id_in_sync_group  # pylint: disable=protected-access
    name = kwargs.get("name")
    if i > 0:
      return self.get(i, name, None)

    def create():
      outer, self.sharing = self.sharing, True
      try:
        return next_creator(**kwargs)
      finally:
        self.sharing = outer
    return self.get(0, name, create)

  def get(self, replica_id: int, name: Optional[str],
          create: Optional[Callable[[], tf.Variable]]) -> tf.Variable:
    """Replica 0 calls ``create``; replica ``i`` > 0 gets replica 0's
    variable of the same canonical name, in creation order."""
    key = canonical_name(name)
    if replica_id == 0:
      variable = create()
      self.created.setdefault(key, []).append(variable)
      return variable
    counts = self.counts[replica_id]
    index = counts.get(key, 0)
    created = self.created.get(key, [])
    if index >= len(created):
      raise RuntimeError(
          f"Replica {replica_id} created variable {name!r}, but replica 0 "
          f"created {len(created)} variable(s) named {key!r}. Inside "
          "`strategy.run` every replica must create the same variables, in "
          "the same order (they are shared); create variables outside `run` "
          "to avoid this.")
    counts[key] = index + 1
    return created[index]


def shared_variable(name: Optional[str],
                    create: Callable[[], tf.Variable]) -> tf.Variable:
  """Creates a variable, or -- in replica ``i`` > 0 of a multi-replica run --
  returns the one replica 0 created under the same name.

  Strategies call this from their variable creator so that a layer built
  inside ``strategy.run`` gets one set of variables, as in TensorFlow.

  >>> shared_variable("x", lambda: 42)  # outside any run: just creates
  42
  """
  mode = context.current_mode()
  ctx = mode.replica_context if mode is not None else None
  shared = getattr(ctx, "shared_variables", None)
  if shared is None or shared.sharing:
    return create()
  return shared.get(ctx._replica_id_in_sync_group, name, create)  # pylint: disable=protected-access
