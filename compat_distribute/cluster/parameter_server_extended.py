"""``strategy.extended`` of the v1 ``ParameterServerStrategy``: the
cluster and this task, where variables go (the ``ps`` tasks in turn), the
one wait for the cluster, and what a task may checkpoint or reduce.

``configure_extended`` makes it for a task of a ``configure(cluster_spec=...)``
cluster (``ParameterServerStrategy`` and a configured ``CentralStorageStrategy``
both use it); ``copy_extended`` for a strategy's copy.  The strategy class
itself, graph mode only, is in ``parameter_server``.

>>> resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
...     tf.train.ClusterSpec({"worker": ["127.0.0.1:2222"],
...                           "ps": ["127.0.0.1:2224", "127.0.0.1:2225"]}),
...     task_type="worker", task_id=0)
>>> from compat_distribute import v1 as distribute
>>> with tf.Graph().as_default():
...   extended = distribute.experimental.ParameterServerStrategy(
...       resolver).extended
>>> type(extended) is ParameterServerExtended
True
>>> extended.parameter_devices, extended.should_checkpoint  # no chief: 0 is
(('/job:ps/task:0', '/job:ps/task:1'), True)
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import tensorflow as tf

from compat_distribute.strategies import central_storage
from compat_distribute.cluster import tasks as cluster_lib
from compat_distribute.cluster import configured as configured_lib
from compat_distribute.runtime import devices as devices_lib
from compat_distribute.variables import placement
from compat_distribute.variables import shared as replica_variables
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.variables import central as variables_lib

_UNSET = object()


class ParameterServerExtended(central_storage.CentralStorageExtended):
  """``strategy.extended`` of the v1 ``ParameterServerStrategy``."""

  def __init__(self, container_strategy: Any,
               cluster_resolver: Any = None,
               task_info: Optional[cluster_lib.TaskInfo] = None) -> None:
    # task_info: the cluster and task already checked (configure, copies).
    info = task_info or cluster_lib.resolve(cluster_resolver)
    self._task_info = info
    self._placer: Optional[placement.RoundRobinPlacer] = None
    self.cluster_wait_timeout: Optional[float] = cluster_lib.default_cluster_wait()
    if info.cluster_spec is None:
      # One machine: CentralStorage over the local GPUs (else the CPU).
      super().__init__(container_strategy)
      self._cluster_resolver = info.resolver
      self._input_pipelines = (1, 0)
      return
    worker = info.worker_device
    compute = ([f"{worker}/device:GPU:{i}" for i in range(info.num_gpus)]
               or [worker])
    super().__init__(container_strategy, compute, "/job:ps/task:0")
    self._parameter_devices = tuple(f"/job:ps/task:{i}"
                                    for i in range(info.num_ps))
    self._placer = placement.RoundRobinPlacer(info.num_ps, worker)
    self._variable_device = self._placer
    self._input_device = devices_lib.canonicalize(f"{worker}/device:CPU:0")
    # Ops made in scope() without a device stay on this worker.
    self._default_device = worker
    self._cluster_resolver = info.resolver
    self._cluster_spec = info.cluster_spec
    self._task_type = info.task_type
    self._task_id = info.task_id
    self._is_chief = info.is_chief
    self._worker_device = worker
    self._input_pipelines = info.input_pipelines

  def __repr__(self) -> str:
    return f"{type(self).__name__}({self.describe()})"

  def describe(self) -> str:
    """The task and devices, as the strategies' reprs show them."""
    return (f"task={self._worker_device!r}, "
            f"parameter_devices={self.parameter_devices!r}, "
            f"worker_devices={self.worker_devices!r}")

  # -- cluster --------------------------------------------------------------

  def _in_multi_worker_mode(self) -> bool:
    return self._cluster_spec is not None

  @property
  def experimental_should_init(self) -> bool:
    """Whether this task initialises variables: the chief only."""
    return self._is_chief

  @property
  def should_checkpoint(self) -> bool:
    """Whether this task saves checkpoints: the chief only."""
    return self._is_chief

  @property
  def should_save_summary(self) -> bool:
    """Whether this task writes summaries: the chief only."""
    return self._is_chief

  def _update_config_proto(self, config_proto: Any) -> Any:
    """Also filters the devices a session sees to this task and the ``ps``
    job, as TensorFlow does (workers never talk to each other).  Returns at
    once: no server needs to be up (see ``wait_for_cluster``)."""
    config = super()._update_config_proto(config_proto)
    if self._cluster_spec is None:
      return config
    config.isolate_session_state = False
    del config.device_filters[:]
    if self._task_type in ("chief", "worker"):
      config.device_filters.extend([self._worker_device, "/job:ps"])
    elif self._task_type == "evaluator":
      config.device_filters.append(self._worker_device)
    return config

  def wait_for_cluster(self, timeout: Any = _UNSET) -> None:
    """Waits until this task's server and (on a chief or worker) every
    ``ps`` task accept connections; call it before the first ``Session``.

    A TensorFlow ``Session`` on a cluster whose ``ps`` task is not up waits
    for ever; this bounds the wait and names what is missing.  While it
    waits, the ``compat_distribute`` logger says once which tasks (and
    addresses) it waits for, then every 10 s which are still missing.
    Without a cluster it returns at once.

    Args:
      timeout: seconds; default ``cluster_wait_timeout`` (300, or the
        ``COMPAT_DISTRIBUTE_CLUSTER_WAIT`` environment variable); None: do
        not wait.

    Raises:
      TaskUnavailableError: a task still unreachable after ``timeout``.
    """
    if timeout is _UNSET:
      timeout = self.cluster_wait_timeout
    if self._cluster_spec is None or timeout is None:
      return
    needed = [(self._task_type, self._task_id)]
    if self._task_type in ("chief", "worker"):
      needed += [("ps", i) for i in range(self._task_info.num_ps)]
    cluster_lib.wait_for_tasks(self._cluster_spec, needed, float(timeout))

  # -- variables ------------------------------------------------------------

  def _create_variable(self, next_creator: Callable[..., Any],
                       **kwargs: Any) -> Any:
    if self._placer is None:
      return super()._create_variable(next_creator, **kwargs)

    def create():
      return variables_lib.create_central_variable(
          self, next_creator, device=self._placer, **kwargs)
    if len(self._compute_devices) == 1:
      return create()
    return replica_variables.shared_variable(kwargs.get("name"), create)

  # -- reduction ------------------------------------------------------------

  def _check_destinations_on_this_worker(self, destinations: Any) -> None:
    if self._cluster_spec is None or destinations is None:
      return
    names = destinations if isinstance(destinations, (list, tuple)) else [
        destinations]
    for item in names:
      device = item if isinstance(item, str) else getattr(item, "device", "")
      if not isinstance(device, str) or not device:
        continue
      spec = tf.DeviceSpec.from_string(device)
      if spec.job == self._task_type and spec.task not in (None,
                                                           self._task_id):
        raise ValueError(
            f"Cannot reduce to {device!r}: it is on another worker, and "
            f"this is {self._worker_device}. Each worker reduces onto its "
            "own devices; pass one of this worker's devices (or a "
            "variable).")

  def _reduce_to(self, reduce_op: Any, value: Any, destinations: Any,
                 options: Any) -> Any:
    self._check_destinations_on_this_worker(destinations)
    return super()._reduce_to(reduce_op, value, destinations, options)

  def _batch_reduce_to(self, reduce_op: Any, value_destination_pairs: Any,
                       options: Any) -> list[Any]:
    for _, destinations in value_destination_pairs:
      self._check_destinations_on_this_worker(destinations)
    return super()._batch_reduce_to(reduce_op, value_destination_pairs,
                                    options)


def configure_extended(strategy: StrategyLike,
                       cluster_spec: configured_lib.ClusterSpecLike,
                       task_type: configured_lib.TaskType,
                       task_id: configured_lib.TaskId, num_gpus: int,
                       cluster_wait_timeout: Optional[float]
                       ) -> Optional[ParameterServerExtended]:
  """The extended of ``strategy`` as task ``task_type``/``task_id`` of
  ``cluster_spec`` (see ``cluster.configured``), or None when no cluster
  is given.  ``ParameterServerStrategy`` and a configured
  ``CentralStorageStrategy`` both use it: on a cluster they are the same
  training."""
  spec = configured_lib.cluster_spec_of(cluster_spec)
  if spec is None:
    return None
  resolver = configured_lib.task_resolver(spec, task_type, task_id, num_gpus,
                                          type(strategy).__name__)
  extended = ParameterServerExtended(strategy, task_info=configured_lib.ConfiguredTask(
      resolver, spec, resolver.task_type, resolver.task_id, num_gpus))
  extended.cluster_wait_timeout = cluster_wait_timeout
  return extended


def copy_extended(extended: ParameterServerExtended,
                  strategy: StrategyLike) -> ParameterServerExtended:
  """A new extended for ``strategy`` (a deep copy's) with ``extended``'s
  cluster, task and wait setting."""
  copied = ParameterServerExtended(strategy,
                                   task_info=extended._task_info)  # pylint: disable=protected-access
  copied.cluster_wait_timeout = extended.cluster_wait_timeout
  return copied
