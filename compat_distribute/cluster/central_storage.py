"""``CentralStorageStrategy`` past one machine: the same program on a cluster.

The facades' ``CentralStorageStrategy`` classes are these subclasses of the
single-machine ones (``strategies.central_storage``).  Without a cluster
they are exactly those.  With one, the program -- a custom loop or Keras
``fit`` -- runs unchanged on a cluster of TensorFlow servers, every step
synchronous:

* the replicas are every worker's devices (all of its GPUs, else its CPU),
  in worker order;
* the variables live on the ``ps`` tasks: with one, as the parameter
  device; with several, in turn in the order they are made, as the v1
  ``ParameterServerStrategy`` places them (optimizer slots go with their
  variable);
* each worker reads its replicas' input from a pipeline on that worker
  (``input.per_worker``);
* this process is the client, connected by TensorFlow's remote eager
  execution (``cluster.remote``); the other tasks run
  ``python -m compat_distribute serve``.

When a cluster is used (the rule, also in docs/cluster.md):

* **v2** (``tf.distribute.experimental.CentralStorageStrategy``): given
  ``cluster_resolver=``; or, with no devices given, eager execution on
  (a TF2 program) and ``TF_CONFIG`` naming this task ``chief`` of a cluster
  with ``worker`` and ``ps`` jobs.  ``TF_CONFIG`` naming any other task
  (a worker, ps or evaluator of an Estimator or MultiWorkerMirrored
  program) leaves the strategy on this machine, as today.
* **v1** (``tf.compat.v1.distribute.experimental.CentralStorageStrategy``):
  only given ``cluster_resolver=``, executing eagerly.  It never reads
  ``TF_CONFIG``: TF1 graph programs keep their single-machine behaviour.

Either class, made without devices, can also be *configured* for a cluster:
``configure(cluster_spec=..., task_type=..., task_id=...)``, which TensorFlow's
distribute coordinator (Estimator's ``train_and_evaluate`` on a ``TF_CONFIG``
cluster) calls on every task, makes it that task's part of between-graph
parameter-server training, exactly the v1 ``ParameterServerStrategy``
(``cluster.parameter_server``, ``cluster.configured``), as TensorFlow's does.

Making a strategy that uses a cluster waits, at most
``COMPAT_DISTRIBUTE_CLUSTER_WAIT`` seconds (300; ``none``: no wait), for
every worker and ps task, then connects; the error names each task still
missing and its address.  Without ``TF_CONFIG`` nothing changes:

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> distribute.experimental.CentralStorageStrategy(["/cpu:0"]).cluster_resolver is None
True
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence, Union

import tensorflow as tf

from compat_distribute.api import strategy as strategy_lib
from compat_distribute.api import strategy_v1
from compat_distribute.cluster import configured as configured_lib
from compat_distribute.cluster import parameter_server_extended as ps_extended
from compat_distribute.cluster import remote
from compat_distribute.cluster import tasks
from compat_distribute.input import InputWorkers
from compat_distribute.runtime.types import Creator
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.strategies import central_storage
from compat_distribute.variables import central as variables_lib
from compat_distribute.variables import placement
from compat_distribute.variables import shared as replica_variables

_UNSET = object()
Resolver = remote.Resolver


class ClusterCentralStorageExtended(central_storage.CentralStorageExtended):
  """``strategy.extended`` of a ``CentralStorageStrategy`` on a cluster."""

  # The jobs whose tasks run the replicas, in replica order.
  _replica_jobs: tuple[str, ...] = ("worker",)

  def __init__(self, container_strategy: StrategyLike,
               client: remote.ClusterClient,
               cluster_wait_timeout: Union[float, None, object] = _UNSET
               ) -> None:
    wait = (tasks.default_cluster_wait() if cluster_wait_timeout is _UNSET
            else cluster_wait_timeout)
    remote.connect(client, wait)
    self._check_tasks(client)
    groups = remote.worker_devices(client, self._replica_jobs)
    compute = [device for _, replicas in groups for device in replicas]
    parameter_devices = client.parameter_devices
    super().__init__(container_strategy, compute, parameter_devices[0])
    self.cluster_wait_timeout: Optional[float] = wait
    self._parameter_devices = parameter_devices
    self._worker_groups = groups
    self._cluster_client = client
    self._ps_rotation = placement.RoundRobin(self._parameter_devices)

  def _check_tasks(self, client: remote.ClusterClient) -> None:
    """What a subclass checks of the tasks once connected (nothing here)."""

  def __repr__(self) -> str:
    return (f"{type(self).__name__}(worker_devices={self.worker_devices!r}, "
            f"parameter_devices={self.parameter_devices!r})")

  def _create_variable(self, next_creator: Creator,
                       **kwargs: Any) -> tf.Variable:
    if len(self._parameter_devices) == 1:
      return super()._create_variable(next_creator, **kwargs)

    def create():
      device = (None if kwargs.get("colocate_with") is not None else
                self._ps_rotation.next())
      return variables_lib.create_central_variable(
          self, next_creator, device=device, **kwargs)
    if len(self._compute_devices) == 1:
      return create()
    return replica_variables.shared_variable(kwargs.get("name"), create)

  def _input_workers(self) -> InputWorkers:
    return dataclasses.replace(super()._input_workers(),
                               per_worker=self._worker_groups)


def _wants_cluster(compute_devices: Optional[Sequence[str]],
                   parameter_device: Optional[str],
                   cluster_resolver: Optional[Resolver],
                   read_tf_config: bool) -> Optional[remote.ClusterClient]:
  """The cluster a new strategy uses (see the module's rule), or None."""
  if cluster_resolver is not None:
    if compute_devices is not None or parameter_device is not None:
      raise ValueError(
          "CentralStorageStrategy takes either devices or a cluster_resolver,"
          f" got compute_devices={compute_devices!r}, parameter_device="
          f"{parameter_device!r} and cluster_resolver={cluster_resolver!r}. "
          "On a cluster the replicas are the workers' devices and the "
          "variables go to the ps tasks: pass only cluster_resolver.")
    if not tf.executing_eagerly():
      raise ValueError(
          "CentralStorageStrategy(cluster_resolver=...) runs the program on "
          "a cluster by TensorFlow's remote eager execution, but eager "
          "execution is off. For a TF1 graph program on a cluster use "
          "tf.compat.v1.distribute.experimental.ParameterServerStrategy.")
    return remote.from_resolver(cluster_resolver)
  if (not read_tf_config or compute_devices is not None or
      parameter_device is not None or not tf.executing_eagerly()):
    return None
  return remote.from_environment()


class ClusterMethods:
  """What the cluster-aware v1 and v2 classes add to the single-machine
  ones: the ``cluster_resolver`` argument and property, copies, repr."""

  _reads_tf_config: bool = True

  def __init__(self, compute_devices: Optional[Sequence[str]] = None,
               parameter_device: Optional[str] = None,
               cluster_resolver: Optional[Resolver] = None) -> None:
    client = _wants_cluster(compute_devices, parameter_device,
                            cluster_resolver, self._reads_tf_config)
    if client is None:
      super().__init__(compute_devices, parameter_device)
      return
    # Past CentralStorageMethods.__init__, which would build the
    # single-machine extended.
    super(central_storage.CentralStorageMethods, self).__init__(
        ClusterCentralStorageExtended(self, client))

  def _with_same_configuration(self) -> StrategyLike:
    extended = self.extended
    client = getattr(extended, "_cluster_client", None)
    if isinstance(extended, ps_extended.ParameterServerExtended):
      copied = type(self).__new__(type(self))
      super(central_storage.CentralStorageMethods, copied).__init__(
          ps_extended.copy_extended(extended, copied))
      return copied
    if client is None:
      return super()._with_same_configuration()
    copied = type(self).__new__(type(self))
    super(central_storage.CentralStorageMethods, copied).__init__(
        ClusterCentralStorageExtended(copied, client,
                                      extended.cluster_wait_timeout))
    return copied

  def _configure_cluster(self, cluster_spec: configured_lib.ClusterSpecLike,
                         task_type: configured_lib.TaskType,
                         task_id: configured_lib.TaskId) -> None:
    """``configure`` with a cluster that has a ``ps`` job: this task's part
    of between-graph parameter-server training, as TensorFlow's (the
    v1 ``ParameterServerStrategy``'s extended, ``cluster.parameter_server_extended``).
    Refused for a strategy that runs on a cluster of its own
    (``cluster_resolver=``) or was given ``compute_devices``."""
    if configured_lib.cluster_spec_of(cluster_spec) is None:
      return
    extended = self.extended
    name = type(self).__name__
    if getattr(extended, "_cluster_client", None) is not None:
      raise configured_lib.ConfigureClusterError(
          f"{name} already runs on the cluster of its cluster_resolver "
          f"({extended._cluster_client!r}), so configure cannot put it on "  # pylint: disable=protected-access
          f"another ({cluster_spec!r}). Make the strategy without "
          "cluster_resolver for a program that TensorFlow's distribute "
          "coordinator configures (Estimator's train_and_evaluate).")
    if isinstance(extended, ps_extended.ParameterServerExtended):
      num_gpus = extended._task_info.num_gpus  # pylint: disable=protected-access
      wait = extended.cluster_wait_timeout
    elif extended._picks_devices:  # pylint: disable=protected-access
      num_gpus = sum("GPU" in d.upper() for d in extended.worker_devices)
      wait = tasks.default_cluster_wait()
    else:
      raise configured_lib.FixedDevicesError(
          f"{name} was made with compute_devices="
          f"{extended.worker_devices!r}, and a strategy bound to devices "
          f"cannot be configured for a cluster ({cluster_spec!r}): there its "
          "replicas are each task's own devices. Make it without "
          f"compute_devices ({name}()) for a program on a cluster.")
    self._extended = ps_extended.configure_extended(
        self, cluster_spec, task_type, task_id, num_gpus, wait)

  @property
  def cluster_resolver(self) -> Optional[Resolver]:
    """The resolver of the cluster this strategy runs on (None on one
    machine, as TensorFlow's)."""
    client = getattr(self.extended, "_cluster_client", None)
    return None if client is None else client.resolver_or_new()

  def __repr__(self) -> str:
    if isinstance(self.extended, ps_extended.ParameterServerExtended):
      return f"{type(self).__name__}({self.extended.describe()})"
    client = getattr(self.extended, "_cluster_client", None)
    if client is None:
      return super().__repr__()
    return (f"{type(self).__name__}(cluster={client!r}, "
            f"compute_devices={self.extended.worker_devices!r}, "
            f"parameter_devices={list(self.extended.parameter_devices)!r})")


# TensorFlow's class last, for type identity only (see one_device.py).
class CentralStorageStrategy(
    ClusterMethods, central_storage.CentralStorageMethods,
    strategy_lib.Strategy, tf.distribute.experimental.CentralStorageStrategy):
  """Puts every variable on one device and replicates compute -- on this
  machine, or on a cluster's workers and parameter servers.

  Args:
    compute_devices: the devices replicas run on; None means all local
      GPUs, else the CPU (or, on a cluster, every worker's).
    parameter_device: where variables live; None means the CPU when there
      are several compute devices, else the single compute device (on a
      cluster: the ps tasks).
    cluster_resolver: run on this cluster (a ``tf.distribute.
      cluster_resolver.ClusterResolver`` with ``worker`` and ``ps`` jobs).
      None: the cluster ``TF_CONFIG`` names when this task is its
      ``chief`` (a TF2 program, no devices given), else this machine.

  Raises:
    ValueError: ``compute_devices`` is empty or names a device twice; a
      malformed ``TF_CONFIG`` for a chief; devices and a resolver together.
    TaskUnavailableError: a cluster task did not accept connections within
      ``COMPAT_DISTRIBUTE_CLUSTER_WAIT`` seconds (named, with its address).

  Examples:
    Two replicas on two CPU devices of this machine (a process makes them
    with ``tf.config.set_logical_device_configuration`` before TensorFlow
    starts); the variable has one copy, on the CPU, and the replicas'
    updates are summed (its ``aggregation``) and applied once:

    >>> import tensorflow as tf
    >>> from compat_distribute import v2 as distribute
    >>> strategy = distribute.experimental.CentralStorageStrategy(
    ...     ["/cpu:0", "/cpu:1"])
    >>> strategy.num_replicas_in_sync
    2
    >>> with strategy.scope():
    ...   weight = tf.Variable(
    ...       1.0, aggregation=tf.VariableAggregation.SUM)
    >>> weight.device
    '/job:localhost/replica:0/task:0/device:CPU:0'
    >>> @tf.function
    ... def step(x):
    ...   with tf.GradientTape() as tape:
    ...     loss = weight * x
    ...   weight.assign_sub(tape.gradient(loss, weight))
    >>> inputs = strategy.experimental_distribute_values_from_function(
    ...     lambda context: tf.constant(
    ...         float(context.replica_id_in_sync_group + 1)))
    >>> _ = strategy.run(step, args=(inputs,))
    >>> float(weight)  # 1 - (1 + 2)
    -2.0
  """


# The v1 class, beside its v2 twin (see strategies/central_storage.py).
class CentralStorageStrategyV1(
    ClusterMethods, central_storage.CentralStorageMethods,
    strategy_v1.StrategyV1,
    tf.compat.v1.distribute.experimental.CentralStorageStrategy):
  """``tf.compat.v1.distribute.experimental.CentralStorageStrategy``: one
  copy of every variable on ``parameter_device``, compute replicated over
  ``compute_devices``; on a cluster only when given ``cluster_resolver``
  (eagerly), never from ``TF_CONFIG``.

  Args:
    compute_devices: the devices replicas run on; None means all local GPUs,
      else the CPU.
    parameter_device: where variables live; None means the CPU (or the only
      compute device).
    cluster_resolver: run on this cluster (see the v2 class).

  Raises:
    ValueError: ``compute_devices`` is empty or names a device twice, or
      devices and a resolver are given together.

  Examples:
    A TF1 graph program: the iterator and the replicas' results are graph
    tensors that a session runs, with the strategy's session config.

    >>> import tensorflow as tf
    >>> from compat_distribute import v1 as distribute
    >>> with tf.Graph().as_default():
    ...   strategy = distribute.experimental.CentralStorageStrategy(
    ...       ["/cpu:0", "/cpu:1"])
    ...   dataset = tf.data.Dataset.range(1, 9).batch(4)
    ...   with strategy.scope():
    ...     iterator = strategy.make_dataset_iterator(dataset)
    ...     squares = strategy.experimental_run(tf.square, iterator)
    ...     total = strategy.reduce("SUM", squares, axis=0)
    ...   config = strategy.update_config_proto(tf.compat.v1.ConfigProto())
    ...   with tf.compat.v1.Session(config=config) as session:
    ...     session.run(iterator.initialize())
    ...     print(session.run(total), session.run(total))
    30 174
  """

  _reads_tf_config = False

