"""``MultiWorkerMirroredStrategy`` on the TF2 cluster machinery of
``CentralStorageStrategy``.

TensorFlow's strategy runs the program on every ``chief`` and ``worker``
task of ``TF_CONFIG`` and all-reduces the gradients between them by
collective ops.  Ours runs the program once, on the *driving* task (the
chief, else worker 0; ``cluster.multi_worker_config``); every other task
serves it (``python -m compat_distribute run`` decides which from
``TF_CONFIG``, ``runner.multi_worker``).  The driving task connects to
the others by TensorFlow's remote eager execution as its own task, so:

* the replicas are every chief and worker task's devices (all of its
  GPUs, else its CPU), the chief first, then the workers in order -- as
  many as TensorFlow's strategy has;
* every variable has one copy, on the driving task's CPU; each step sums
  the replicas' gradients there and applies them once, which is what
  TensorFlow's all-reduce computes;
* each task reads its replicas' input from a pipeline of its own, its
  share by the dataset's auto-shard policy, as TensorFlow's strategy gives
  that task (``input.auto_shard``).

Why this design rather than collective ops: it is the cluster form the
package already runs, survives and checks (``cluster.remote``,
``cluster.failures``), and one program means one Python process whose
Keras sees every replica's results -- Keras 3 trains on it, where it fails
on TensorFlow's strategy (docs/cluster.md).

Once connected, the driving task reads each serving task's cluster (a
file ``serve`` writes into its working folder, read by an op on that
task): a task not served by compat_distribute, or whose ``TF_CONFIG``
names another cluster, is refused by name, with the fix.

``communication_options`` and the v1 ``communication`` are TensorFlow's
collective hints: ``implementation`` and ``bytes_per_pack`` are accepted
(they change nothing here: no collective runs), ``timeout_seconds`` is
refused (``COMPAT_DISTRIBUTE_TASK_TIMEOUT`` bounds a silent task).

Without a cluster it is the strategy on this machine's devices:

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> distribute.MultiWorkerMirroredStrategy().cluster_resolver is None
True
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from typing import Optional

import tensorflow as tf

from compat_distribute.api import strategy as strategy_lib
from compat_distribute.api import strategy_v1
from compat_distribute.cluster import central_storage as cluster_central
from compat_distribute.cluster import failures
from compat_distribute.cluster import folders
from compat_distribute.cluster import multi_worker_config as config
from compat_distribute.cluster import remote
from compat_distribute.cluster import supervisor
from compat_distribute.input import InputWorkers
from compat_distribute.runtime.errors import Error
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.strategies import central_storage

MultiWorkerConfigError = config.MultiWorkerConfigError
_Implementation = tf.distribute.experimental.CommunicationImplementation
# CommunicationOptions is a factory; this is the type of what it makes.
_OPTIONS_TYPE = type(tf.distribute.experimental.CommunicationOptions())


class CommunicationOptionsError(Error, TypeError):
  """``communication_options`` or ``communication`` of the wrong type."""


class MultiWorkerClient(remote.ClusterClient):
  """The driving task of a ``MultiWorkerMirroredStrategy`` cluster: it
  serves as a replica task itself, keeps the variables, and every other
  chief and worker task serves it."""

  owner = config.STRATEGY
  start_hint = (f"Start it with `{config.RUN_COMMAND}` and that task's "
                "TF_CONFIG")

  def __repr__(self) -> str:
    return (f"MultiWorkerClient(task='/job:{self.job}/task:{self.task}', "
            f"chief={self.num_tasks('chief')}, "
            f"workers={self.num_tasks('worker')})")

  @property
  def served_tasks(self) -> list[tuple[str, int]]:
    return [(job, i) for job in config.REPLICA_JOBS
            for i in range(self.num_tasks(job))
            if (job, i) != (self.job, self.task)]

  @property
  def parameter_devices(self) -> tuple[str, ...]:
    return (f"/job:{self.job}/replica:0/task:{self.task}/device:CPU:0",)


def _on_task(job: str, index: int) -> tf.DeviceSpec:
  return tf.device(f"/job:{job}/replica:0/task:{index}/device:CPU:0")


def _task_file(kind: str, client: MultiWorkerClient, job: str,
               index: int) -> str:
  """``kind``'s file of the served task ``job``/``index`` (``folders``)."""
  return folders.task_file(kind, job, index,
                           client.spec.task_address(job, index))


def check_served(client: MultiWorkerClient) -> None:
  """Refuses the serving tasks that are not compat_distribute's ``serve``
  for this cluster, by name, and tells those that are to stop.

  Raises:
    MultiWorkerConfigError: naming each such task and the fix.
  """
  problems, served = [], []
  for job, index in client.served_tasks:
    name = f"/job:{job}/task:{index} at {client.spec.task_address(job, index)}"
    try:
      with _on_task(job, index):
        theirs = json.loads(tf.io.read_file(_task_file("cluster", client, job,
                                                       index)).numpy())
    except tf.errors.NotFoundError:
      remote.do_not_tell((job, index))  # not ours: write nothing there
      problems.append(
          f"{name} is not run by compat_distribute (a plain TensorFlow server "
          f"or `python train.py`): start it with `{config.RUN_COMMAND}`, as "
          "every task")
      continue
    served.append((job, index))
    if theirs != client.cluster:
      problems.append(
          f"{name} has another cluster in its TF_CONFIG: {theirs} (this task "
          f"has {client.cluster}): give every task the same \"cluster\"")
  if not problems:
    return
  message = (f"{config.STRATEGY} cannot run on this cluster: "
             + "; ".join(problems) + ".")
  for job, index in served:  # their serve ends with this message
    with _on_task(job, index):
      tf.io.write_file(_task_file("refused", client, job, index), message)
  raise MultiWorkerConfigError(message)


# Seconds the program has, once a task is lost, to end by its own error.
LOST_EXIT_WAIT = 10.0
_ending: set[tuple[str, int]] = set()


def end_if_stuck(task: failures.LostTask) -> None:
  """Ends this process if it is still running ``LOST_EXIT_WAIT`` seconds
  after ``task`` was lost, saying so (the ``TaskLostError`` naming it).

  The driving task is itself a replica task: a step's part on its own
  devices can wait for ever for a tensor from the lost task, where the
  error the other tasks give does not reach it.  Exit status: that of an
  uncaught ``TaskLostError`` under ``run`` (1; 75 under ``--max-restarts``).
  """
  if (task.job, task.index) in _ending:
    return
  _ending.add((task.job, task.index))

  def end() -> None:
    time.sleep(LOST_EXIT_WAIT)
    error = failures.TaskLostError([task])
    sys.stderr.write(
        f"compat_distribute: {type(error).__name__}: {error} (the program "
        f"still waited on it {LOST_EXIT_WAIT:g} s later; ending it)\n")
    sys.stderr.flush()
    os._exit(supervisor.child_status(error) or 1)  # pylint: disable=protected-access

  threading.Thread(target=end, daemon=True, name="compat_distribute-lost-end"
                   ).start()


class MultiWorkerExtended(cluster_central.ClusterCentralStorageExtended):
  """``strategy.extended`` of ``MultiWorkerMirroredStrategy`` on a cluster:
  replicas on every chief and worker task, variables on the driving one."""

  _replica_jobs = config.REPLICA_JOBS

  def _check_tasks(self, client: remote.ClusterClient) -> None:
    check_served(client)  # type: ignore[arg-type]
    remote.also_on_lost(end_if_stuck)

  def _input_workers(self) -> InputWorkers:
    # Each task reads its share by the dataset's auto-shard policy.
    return dataclasses.replace(super()._input_workers(), auto_shard=True)


def client_for(cluster_resolver: Optional[remote.Resolver]
               ) -> Optional[MultiWorkerClient]:
  """The cluster a new strategy runs on (None: this machine alone), from
  ``cluster_resolver`` or else ``TF_CONFIG``.

  Raises:
    TypeError: ``cluster_resolver`` is not a ``ClusterResolver``.
    MultiWorkerConfigError: a cluster it cannot run on, this task is not
      the driving one, or eager execution is off.
  """
  if cluster_resolver is None:
    source = "TF_CONFIG"
    task = config.from_tf_config(os.environ.get("TF_CONFIG"))
  else:
    if not isinstance(cluster_resolver,
                      tf.distribute.cluster_resolver.ClusterResolver):
      raise TypeError(
          "cluster_resolver must be a tf.distribute.cluster_resolver."
          f"ClusterResolver, got {cluster_resolver!r} of type "
          f"{type(cluster_resolver).__name__}. Pass e.g. "
          "TFConfigClusterResolver(), or None to read TF_CONFIG.")
    source = "The cluster resolver"
    cluster = cluster_resolver.cluster_spec().as_dict()
    task = None if not cluster else config.check_task(
        cluster, cluster_resolver.task_type, cluster_resolver.task_id, source)
  if task is None:
    return None
  if not task.drives:
    raise config.not_driving_error(task, source)
  if not tf.executing_eagerly():
    raise MultiWorkerConfigError(
        f"{config.STRATEGY} on a cluster ({task.shape()}) runs the program "
        "by TensorFlow's remote eager execution, but eager execution is "
        "off. Run the program eagerly (TF2), or unset TF_CONFIG to run it on "
        "this machine.")
  return MultiWorkerClient.of(task.cluster, task.job, task.index,
                              cluster_resolver)


def check_communication(options: Optional[object],
                        communication: Optional[object] = None) -> None:
  """Accepts TensorFlow's collective hints; refuses ``timeout_seconds``.

  Raises:
    CommunicationOptionsError: a value of the wrong type.
    MultiWorkerConfigError: ``timeout_seconds`` set.
  """
  if communication is not None and not isinstance(communication,
                                                  _Implementation):
    raise CommunicationOptionsError(
        "communication must be a tf.distribute.experimental."
        f"CommunicationImplementation, got {communication!r}. Pass e.g. "
        "CommunicationImplementation.AUTO.")
  if options is None:
    return
  if not isinstance(options, _OPTIONS_TYPE):
    raise CommunicationOptionsError(
        "communication_options must be a tf.distribute.experimental."
        f"CommunicationOptions, got {options!r} of type "
        f"{type(options).__name__}. Pass e.g. CommunicationOptions("
        "implementation=CommunicationImplementation.RING), or None.")
  if options.timeout_seconds is not None:
    raise MultiWorkerConfigError(
        "CommunicationOptions(timeout_seconds="
        f"{options.timeout_seconds!r}) is not supported by compat_distribute's"
        f" {config.STRATEGY}: no collective op runs to time out. A task that "
        "stops answering is found within COMPAT_DISTRIBUTE_TASK_TIMEOUT "
        "seconds (default 30); leave timeout_seconds unset.")


class MultiWorkerMethods:
  """What the v1 and v2 classes share: the cluster, copies, repr."""

  def _setup(self, cluster_resolver: Optional[remote.Resolver]) -> None:
    client = client_for(cluster_resolver)
    if client is None:
      central_storage.CentralStorageMethods.__init__(self)  # type: ignore[arg-type]
    else:
      super(central_storage.CentralStorageMethods, self).__init__(  # type: ignore[call-arg]
          MultiWorkerExtended(self, client))
    # Sync-on-read variables read as a mirrored strategy's (Keras metrics).
    self.extended._shares_on_read = True  # type: ignore[attr-defined]  # pylint: disable=protected-access

  def _with_same_configuration(self) -> StrategyLike:
    extended = self.extended  # type: ignore[attr-defined]
    copied = type(self).__new__(type(self))
    client = getattr(extended, "_cluster_client", None)
    if client is None:
      made = central_storage.CentralStorageExtended(
          copied, list(extended.worker_devices), extended._variable_device)  # pylint: disable=protected-access
    else:
      made = MultiWorkerExtended(copied, client, extended.cluster_wait_timeout)
    super(central_storage.CentralStorageMethods, copied).__init__(made)
    made._shares_on_read = True  # pylint: disable=protected-access
    return copied

  @property
  def cluster_resolver(self) -> Optional[remote.Resolver]:
    """The resolver of the cluster (None on one machine, as TensorFlow's
    without ``TF_CONFIG``)."""
    client = getattr(self.extended, "_cluster_client", None)  # type: ignore[attr-defined]
    return None if client is None else client.resolver_or_new()

  def __repr__(self) -> str:
    extended = self.extended  # type: ignore[attr-defined]
    client = getattr(extended, "_cluster_client", None)
    where = "this machine" if client is None else repr(client)
    return (f"{type(self).__name__}({where}, "
            f"devices={extended.worker_devices!r})")


# TensorFlow's class last, for type identity only (see one_device.py).
class MultiWorkerMirroredStrategy(
    MultiWorkerMethods, central_storage.CentralStorageMethods,
    strategy_lib.Strategy, tf.distribute.MultiWorkerMirroredStrategy):
  """Synchronous training on every chief and worker task of a cluster, the
  program running on one of them (see the module docstring).

  Args:
    cluster_resolver: the cluster (a ``tf.distribute.cluster_resolver.
      ClusterResolver`` with a ``worker`` job, maybe a ``chief``, no
      ``ps``); None: ``TF_CONFIG``, and without one this machine alone.
    communication_options: a ``tf.distribute.experimental.
      CommunicationOptions``; its ``implementation`` and
      ``bytes_per_pack`` are accepted and change nothing here, its
      ``timeout_seconds`` is refused.

  Raises:
    MultiWorkerConfigError: a ``ps`` job, an ``evaluator`` task, a task
      that does not drive the program, a serving task not run by
      compat_distribute or with another cluster -- each named, with the
      fix; ``timeout_seconds`` in ``communication_options``.
    TaskUnavailableError: a task did not accept connections within
      ``COMPAT_DISTRIBUTE_CLUSTER_WAIT`` seconds (named, with its address).

  Examples:
    Without ``TF_CONFIG`` it runs on this machine, a ``tf.distribute``
    strategy like TensorFlow's:

    >>> import tensorflow as tf
    >>> from compat_distribute import v2 as distribute
    >>> strategy = distribute.MultiWorkerMirroredStrategy()
    >>> isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    True
    >>> with strategy.scope():
    ...   v = tf.Variable(1.0)
    >>> float(strategy.reduce("SUM", strategy.run(lambda: v * 2.0),
    ...                       axis=None))
    2.0
  """

  def __init__(self, cluster_resolver: Optional[remote.Resolver] = None,
               communication_options: Optional[object] = None) -> None:
    check_communication(communication_options)
    self._setup(cluster_resolver)


class MultiWorkerMirroredStrategyExperimental(
    MultiWorkerMirroredStrategy, tf.distribute.experimental.MultiWorkerMirroredStrategy):
  """``tf.distribute.experimental.MultiWorkerMirroredStrategy``, TensorFlow's
  deprecated spelling: ``communication`` (a ``CommunicationImplementation``)
  before ``cluster_resolver``.

  Examples:
    >>> import tensorflow as tf
    >>> from compat_distribute import v2 as distribute
    >>> ring = tf.distribute.experimental.CollectiveCommunication.RING
    >>> strategy = distribute.experimental.MultiWorkerMirroredStrategy(ring)
    >>> strategy.cluster_resolver is None
    True
  """

  def __init__(self, communication: object = _Implementation.AUTO,
               cluster_resolver: Optional[remote.Resolver] = None) -> None:
    check_communication(None, communication)
    self._setup(cluster_resolver)


# The v1 class (see strategies/central_storage.py for the name).
class MultiWorkerMirroredStrategyV1(
    MultiWorkerMethods, central_storage.CentralStorageMethods,
    strategy_v1.StrategyV1,
    tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy):
  """``tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy``:
  the v2 class's cluster and replicas behind the v1 API, eager programs
  only on a cluster.

  Args:
    communication: a ``CommunicationImplementation`` (a hint; see the v2
      class).
    cluster_resolver: as the v2 class's.

  Examples:
    Without ``TF_CONFIG`` it runs on this machine:

    >>> import tensorflow as tf
    >>> from compat_distribute import v1 as distribute
    >>> strategy = distribute.experimental.MultiWorkerMirroredStrategy()
    >>> isinstance(strategy, tf.compat.v1.distribute.Strategy)
    True
  """

  def __init__(self, communication: object = _Implementation.AUTO,
               cluster_resolver: Optional[remote.Resolver] = None) -> None:
    check_communication(None, communication)
    self._setup(cluster_resolver)
