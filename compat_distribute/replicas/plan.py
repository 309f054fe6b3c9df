"""What the replica layer is told of a strategy: one immutable ``ReplicaPlan``.

A strategy's ``extended`` builds its plan once, when its replica devices are
fixed, as it builds an ``InputWorkers`` value for ``input/``.  The replica
layer (``runner``, ``threads``, ``rendezvous``) reads the plan and nothing
else of the strategy or its ``extended``; what it keeps between runs (the
one replica's context, the finished eager runs) it keeps itself, in the
``Replicas`` that owns the plan.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.experimental.CentralStorageStrategy(
...     ["/cpu:0", "/cpu:1"])
>>> plan = ReplicaPlan(devices=("/cpu:0", "/cpu:1"), strategy=strategy,
...                    variable_creator=lambda next_creator, **kw: None,
...                    gather_to=lambda value, destinations, axis: value,
...                    one_replica_like_many=True)
>>> plan.num_replicas, plan.several
(2, True)
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

from compat_distribute.runtime.types import Creator
from compat_distribute.runtime.types import DeviceName
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import StrategyLike


@dataclasses.dataclass(frozen=True)
class ReplicaPlan:
  """How a strategy's replicas run.

  Attributes:
    devices: the replicas' devices, replica ``i`` on ``devices[i]``.
    strategy: the strategy (``tf.distribute.Strategy``) the replicas' code
      sees: ``merge_fn``'s first argument, the replica contexts' strategy.
    variable_creator: the variable creator the strategy's ``scope()``
      installs; a run that finds it innermost lets it share the replicas'
      variables (see ``threads``).
    gather_to: ``gather_to(value, destinations, axis)``, the strategy's
      cross-replica gather, which ``ReplicaContext.all_gather`` runs in its
      ``merge_fn``.
    one_replica_like_many: a single replica runs as several do
      (CentralStorage, as TensorFlow's); otherwise it runs on the calling
      thread in one kept ``ReplicaContext`` (OneDevice: the hot path).
  """

  devices: tuple[DeviceName, ...]
  strategy: StrategyLike
  variable_creator: Creator
  gather_to: Callable[[Nest, Nest, int], Nest]
  one_replica_like_many: bool = False

  def __post_init__(self) -> None:
    if not self.devices:
      raise ValueError(
          "a ReplicaPlan needs at least one replica device, got "
          f"devices={self.devices!r}. Pass the strategy's worker devices.")

  @property
  def num_replicas(self) -> int:
    """How many replicas run in sync (one per device)."""
    return len(self.devices)

  @property
  def several(self) -> bool:
    """Whether more than one replica runs."""
    return len(self.devices) > 1


class Replicas:
  """The replica layer's side of one strategy: its ``ReplicaPlan`` and what
  the layer keeps between runs -- the one replica's ``ReplicaContext``
  (``kept_context``, made by ``runner`` on first use: stateless between
  uses, so one instance serves every call) and the finished eager runs of
  several replicas, reused by the next (``idle_runs``, ``threads``).
  ``extended`` makes one, once its devices are fixed, and hands it to
  ``runner.call_for_each_replica`` at every run.

  >>> replicas = Replicas(ReplicaPlan(
  ...     devices=("/cpu:0",), strategy=None,
  ...     variable_creator=lambda next_creator, **kw: None,
  ...     gather_to=lambda value, destinations, axis: value))
  >>> replicas.several, replicas.like_many, replicas.idle_runs
  (False, False, [])
  """

  __slots__ = ("plan", "several", "like_many", "kept_context", "idle_runs",
               "__weakref__")

  def __init__(self, plan: ReplicaPlan) -> None:
    self.plan = plan
    self.several = plan.several
    self.like_many = plan.several or plan.one_replica_like_many
    self.kept_context: Optional[object] = None  # a context.ReplicaContext
    self.idle_runs: list = []  # threads._Run objects

  def __repr__(self) -> str:
    return f"Replicas({self.plan!r})"
