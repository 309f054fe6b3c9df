"""The TF2 cluster form's client: which cluster, connecting, saying done.

A ``CentralStorageStrategy`` made in the client program (the ``chief`` task
of ``TF_CONFIG``, or any process given a ``cluster_resolver``) runs its
replicas on the ``worker`` tasks and keeps its variables on the ``ps``
tasks, through TensorFlow's remote eager execution
(``tf.config.experimental_connect_to_cluster``).  Every other task runs
``python -m compat_distribute serve`` (``cluster.serve``).  This module:

* ``from_environment`` / ``from_resolver``: the ``ClusterClient`` to use, or
  None to stay on this machine (``TF_CONFIG`` unset, without a cluster, or
  naming another task type);
* ``connect``: waits (bounded, naming what is missing) until every worker
  and ps task accepts connections, then connects this process as its own
  task -- ``chief`` in ``TF_CONFIG``'s cluster (connecting under TensorFlow's
  default job name, ``localhost``, would wait for ever);
* ``tell_servers_done``: at exit, each task's ``serve`` is told the job is
  done: the client writes that task's ``folders.done_file`` on it (an op
  run there, so into the folder ``serve`` runs in).  (A queue or variable
  by shared name would not do: TensorFlow gives each remote eager client
  resources of its own, which a ``Session`` on the server cannot see.)
  From connecting on, a checkpoint under a relative prefix is written and
  read by the client (``folders.relative_checkpoints_on``).
* ``explain``: the error an uncaught TensorFlow error becomes when a task
  was lost (``failures.TaskLostError``, naming it; ``failures`` watches the
  tasks from ``connect`` on).

Every wait of the client on its tasks is bounded:

* before connecting, for every task to accept connections: at most
  ``COMPAT_DISTRIBUTE_CLUSTER_WAIT`` seconds (default 300), then
  ``TaskUnavailableError``;
* connecting, for the tasks to reach one another (``reachability``): the
  same bound (``REACHABLE_WAIT``, 60 s, when there is none), then the
  ``UnavailableError``;
* connecting, and every op on a task (a training step, a variable read,
  the next batch): a task killed or closed fails it within a second or
  so; a task silent for ``COMPAT_DISTRIBUTE_TASK_TIMEOUT`` seconds
  (default 30) is found within that and one check period (at most 5 s),
  then the op fails within ``failures.SWEEP_PERIOD`` (1 s);
* naming the lost task of an uncaught error: at most 2 s of checks, in
  parallel;
* at exit, telling the tasks the job is done: ``SAY_DONE_TIMEOUT`` (10 s)
  for all of them at once, a lost task skipped.

>>> client = ClusterClient.of({"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"],
...                            "worker": ["127.0.0.1:3", "127.0.0.1:4"]},
...                           "chief", 0)
>>> client
ClusterClient(task='/job:chief/task:0', workers=2, ps=1)
>>> client.parameter_devices
('/job:ps/replica:0/task:0/device:CPU:0',)
>>> from_environment('{"cluster": {"worker": ["a:1"], "ps": ["b:1"]}, '
...                  '"task": {"type": "worker", "index": 0}}') is None
True
"""
from __future__ import annotations

import atexit
import dataclasses
import json
import os
import threading
import time
from typing import Callable, Optional, Union

import tensorflow as tf

from compat_distribute.cluster import addresses
from compat_distribute.cluster import causes
from compat_distribute.cluster import failures
from compat_distribute.cluster import folders
from compat_distribute.cluster import reachability
from compat_distribute.cluster import tasks
from compat_distribute.runtime import devices
from compat_distribute.runtime import logs

Resolver = tf.distribute.cluster_resolver.ClusterResolver
# TF_CONFIG's "cluster": job name -> addresses (a list, or {index: address}).
ClusterDict = dict[str, Union[list[str], dict[str, str]]]

CLIENT_JOB = "chief"
SERVED_JOBS = ("worker", "ps")
# How long the client waits at exit for the servers to take the message
# (all at once, in parallel).
SAY_DONE_TIMEOUT = 10.0
# Between tries to tell a task whose channel is not up again yet.
TELL_AGAIN_PAUSE = 0.5
# How long connecting waits for the tasks to reach one another when no
# wait for the tasks was given (``reachability``).
REACHABLE_WAIT = 60.0


@dataclasses.dataclass(frozen=True)
class ClusterClient:
  """A cluster and the task this process connects to it as.

  Attributes:
    jobs: ``((job, (address, ...)), ...)``, sorted by job.
    job: this process's job (``chief``, or ``localhost`` when the cluster
      has no task for the client).
    task: this process's task index.
    resolver: the cluster resolver it came from (None: ``TF_CONFIG``).
  """
  jobs: tuple[tuple[str, tuple[str, ...]], ...]
  job: str
  task: int
  resolver: Optional[Resolver] = dataclasses.field(default=None,
                                                   compare=False)
  # What the messages of ``connect`` call the strategy, and how a missing
  # task is started.
  owner = "CentralStorageStrategy"
  start_hint = ("Start it with `python -m compat_distribute serve` and that "
                "task's TF_CONFIG")

  @classmethod
  def of(cls, cluster: ClusterDict, job: str, task: int,
         resolver: Optional[Resolver] = None) -> "ClusterClient":
    jobs = tuple(sorted((name, tuple(addresses))
                        for name, addresses in cluster.items()))
    return cls(jobs, job, int(task), resolver)

  def __repr__(self) -> str:
    return (f"ClusterClient(task='/job:{self.job}/task:{self.task}', "
            f"workers={self.num_tasks('worker')}, ps={self.num_tasks('ps')})")

  @property
  def cluster(self) -> dict[str, list[str]]:
    return {name: list(addresses) for name, addresses in self.jobs}

  @property
  def spec(self) -> tf.train.ClusterSpec:
    return tf.train.ClusterSpec(self.cluster)

  def num_tasks(self, job: str) -> int:
    return len(self.cluster.get(job, ()))

  @property
  def served_tasks(self) -> list[tuple[str, int]]:
    """Every worker and ps task, workers first."""
    return [(job, i) for job in SERVED_JOBS for i in range(self.num_tasks(job))]

  @property
  def parameter_devices(self) -> tuple[str, ...]:
    return tuple(f"/job:ps/replica:0/task:{i}/device:CPU:0"
                 for i in range(self.num_tasks("ps")))

  def resolver_or_new(self) -> Resolver:
    """The resolver this came from, or one that gives the same cluster."""
    if self.resolver is not None:
      return self.resolver
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        self.spec, task_type=self.job, task_id=self.task)


def _check_jobs(cluster: object, source: str, value: object) -> None:
  if not isinstance(cluster, dict) or not all(cluster.get(job)
                                              for job in SERVED_JOBS):
    raise ValueError(
        f"{source} names this task {CLIENT_JOB!r}, the client of a cluster, "
        "but its cluster lacks a 'worker' or a 'ps' job: "
        f"{value!r}. CentralStorageStrategy runs its replicas on the "
        "'worker' tasks and keeps its variables on the 'ps' tasks: add e.g. "
        '"worker": ["host:port"], "ps": ["host:port"] to the cluster, or '
        "unset TF_CONFIG to run on this machine alone.")


def from_environment(text: Optional[str] = None) -> Optional[ClusterClient]:
  """The cluster ``TF_CONFIG`` (or ``text``) gives a strategy made in this
  process: only when it names this task ``chief``; else None.

  Raises:
    ValueError: ``TF_CONFIG`` is not valid JSON, or names this task
      ``chief`` of a cluster without ``worker`` and ``ps`` jobs or with a
      bad index.
  """
  if text is None:
    text = os.environ.get("TF_CONFIG")
  config = tasks.load_tf_config(text)
  cluster = config.get("cluster") or {}
  task = config.get("task") or {}
  if not cluster or not isinstance(task, dict) or task.get(
      "type") != CLIENT_JOB:
    return None
  _check_jobs(cluster, "TF_CONFIG", text)
  tasks.check_cluster(cluster, CLIENT_JOB, task.get("index", 0), "TF_CONFIG")
  return ClusterClient.of(cluster, CLIENT_JOB, task.get("index", 0))


def from_resolver(resolver: object) -> ClusterClient:
  """The cluster a ``cluster_resolver`` argument gives.

  Raises:
    TypeError: not a ``ClusterResolver``.
    ValueError: its cluster has no ``worker`` or ``ps`` job, or it names
      this task ``worker`` or ``ps`` (those run ``serve``).
  """
  if not isinstance(resolver, tf.distribute.cluster_resolver.ClusterResolver):
    raise TypeError(
        f"cluster_resolver must be a tf.distribute.cluster_resolver."
        f"ClusterResolver, got {resolver!r} of type {type(resolver).__name__}."
        " Pass e.g. TFConfigClusterResolver(), or SimpleClusterResolver("
        "tf.train.ClusterSpec({...}), task_type='chief', task_id=0).")
  cluster = resolver.cluster_spec().as_dict()
  _check_jobs(cluster, "The cluster resolver", cluster)
  job, task = resolver.task_type, resolver.task_id
  if job in SERVED_JOBS:
    raise ValueError(
        f"The cluster resolver names this task {job!r} {task!r}, but the "
        "strategy's program is the cluster's client: the worker and ps tasks "
        "run `python -m compat_distribute serve`. Give the client task_type="
        f"{CLIENT_JOB!r} (with a 'chief' job in the cluster), or no task.")
  if not job or job not in cluster:
    job, task = "localhost", 0  # TensorFlow adds this job for the client
  elif job != "localhost":
    tasks.check_cluster(cluster, job, task, "The cluster resolver")
  return ClusterClient.of(cluster, job, task or 0, resolver)


_lock = threading.Lock()
_connected: Optional[ClusterClient] = None
_watchdog: Optional[failures.Watchdog] = None


def connected() -> Optional[ClusterClient]:
  """The cluster this process is connected to, if any."""
  return _connected


def watchdog() -> Optional[failures.Watchdog]:
  """The watchdog of the connected cluster's tasks, if any."""
  return _watchdog


def explain(error: BaseException) -> BaseException:
  """``error``, or the ``failures.TaskLostError`` naming the lost task(s)
  that caused it (see ``causes``)."""
  return causes.explain(error, _watchdog)


# What else to do when a task is lost (``also_on_lost``), once per task.
_lost_hooks: list[Callable[[failures.LostTask], None]] = []


def also_on_lost(hook: Callable[[failures.LostTask], None]) -> None:
  """Calls ``hook(task)`` (once per task) whenever the watchdog finds a
  task lost, after this module's own action (once, if given twice)."""
  if hook not in _lost_hooks:
    _lost_hooks.append(hook)


def _on_lost(task: failures.LostTask) -> None:
  # An op waiting on a stalled task waits for ever: make it fail now (and
  # every second from then on, as TensorFlow connects to it again).
  failures.close_connections_to(task.address)
  for hook in _lost_hooks:
    hook(task)


_UNSET: object = object()


def connect(client: ClusterClient, timeout: Optional[float],
            task_timeout: Union[Optional[float], object] = _UNSET) -> None:
  """Connects this process to ``client``'s cluster (once per process).

  First waits, at most ``timeout`` seconds (None: not at all), until every
  worker and ps task accepts connections.  Then watches them
  (``failures.Watchdog``): a task silent for ``task_timeout`` seconds
  (default ``COMPAT_DISTRIBUTE_TASK_TIMEOUT``, 30; None: no watchdog), or
  refusing connections, is lost, and an uncaught TensorFlow error of the
  program then prints as the ``TaskLostError`` naming it.

  Raises:
    TaskUnavailableError: naming each task still unreachable, with its
      address.
    ValueError: this process is already connected to another cluster.
  """
  global _connected
  with _lock:
    if _connected is not None:
      if _connected != client:
        raise ValueError(
            f"This process is already connected to {_connected!r}; it "
            f"cannot also connect to {client!r} (TensorFlow has one cluster "
            "per process). Make every strategy of the program with the same "
            "cluster.")
      return
    if task_timeout is _UNSET:
      task_timeout = failures.default_task_timeout()
    if timeout is not None:
      tasks.wait_for_tasks(
          client.spec, client.served_tasks, float(timeout),
          owner=client.owner, start_hint=client.start_hint,
          wait_longer=("to wait longer set the COMPAT_DISTRIBUTE_CLUSTER_WAIT "
                       "environment variable (seconds)"))
    # Watched from here on: a task that stalls now would hold the
    # connection itself for ever.
    _start_watchdog(client, task_timeout)  # type: ignore[arg-type]
    try:
      tf.config.experimental_connect_to_cluster(
          client.spec, job_name=client.job, task_index=client.task,
          protocol="grpc")
      # A task restarted while the others ran: their connections to it
      # come back within seconds; the program's first step must not fail.
      attempts = reachability.wait_until_reachable(
          client.served_tasks,
          REACHABLE_WAIT if timeout is None else float(timeout),
          lambda: bool(_watchdog is not None and _watchdog.lost),
          client=(client.job, client.task))
      if attempts > 1:
        logs.logger().info("the cluster's tasks reach one another after "
                           "%d attempts", attempts)
    except tf.errors.OpError as e:
      named = explain(e)
      if _watchdog is not None:
        _watchdog.stop()
      if named is e:
        raise
      raise named from e
    folders.relative_checkpoints_on(client.job, client.task)
    devices.set_eager_task(client.job, client.task)
    _connected = client
    atexit.register(tell_servers_done)


_hook_installed = False


def _start_watchdog(client: ClusterClient,
                    task_timeout: Optional[float]) -> None:
  global _watchdog, _hook_installed
  if _watchdog is not None:
    _watchdog.stop()  # of a connection that failed
  _watchdog = None
  if task_timeout is None:
    return
  _watchdog = failures.Watchdog(client.spec, client.served_tasks,
                                float(task_timeout), _on_lost).start()
  if not _hook_installed:
    causes.install_excepthook(watchdog)
    _hook_installed = True


def worker_devices(client: ClusterClient, jobs: tuple[str, ...] = ("worker",)
                   ) -> tuple[tuple[str, tuple[str, ...]], ...]:
  """``(input host, compute devices)`` of each task of ``jobs``, in order:
  all its GPUs, else its CPU (the host)."""
  gpus: dict[tuple[str, int], list[tuple[int, str]]] = {}
  for device in tf.config.list_logical_devices("GPU"):
    spec = tf.DeviceSpec.from_string(device.name)
    if spec.job in jobs:
      gpus.setdefault((spec.job, spec.task), []).append(
          (spec.device_index, device.name))
  groups = []
  for job in jobs:
    for i in range(client.num_tasks(job)):
      host = f"/job:{job}/replica:0/task:{i}/device:CPU:0"
      mine = tuple(name for _, name in sorted(gpus.get((job, i), [])))
      groups.append((host, mine or (host,)))
  return tuple(groups)


# Tasks the client found are not compat_distribute's serve: never told.
_not_ours: set[tuple[str, int]] = set()


def do_not_tell(task: tuple[str, int]) -> None:
  """Leaves ``task`` out of ``tell_servers_done`` (it is not ``serve``, so
  a file written there would land in some program's working folder)."""
  _not_ours.add(task)


def _tell_until(deadline: float, job: str, index: int, address: str) -> None:
  """``folders.tell_done``, again after each ``UnavailableError`` until
  ``deadline``: a channel the watchdog shut while the task was lost comes
  back only after gRPC's reconnection pause, and a new op fails until then."""
  while True:
    try:
      folders.tell_done(job, index, address)
      return
    except tf.errors.UnavailableError:
      if time.monotonic() + TELL_AGAIN_PAUSE >= deadline:
        raise
      time.sleep(TELL_AGAIN_PAUSE)


def tell_servers_done(timeout: float = SAY_DONE_TIMEOUT) -> list[str]:
  """Tells each worker and ps task's ``serve`` that the job is done, so it
  ends; returns the tasks told.  All tasks at once, in parallel, at most
  ``timeout`` seconds in all; a task the watchdog found lost, or that
  refuses connections, is skipped.  Runs at exit of a process that
  connected (after stopping the watchdog: the tasks now end)."""
  client = _connected
  if client is None:
    return []
  lost: set[tuple[str, int]] = set()
  if _watchdog is not None:
    _watchdog.stop()
    lost = {(task.job, task.index) for task in _watchdog.lost}
  told: list[str] = []
  deadline = time.monotonic() + timeout

  def say(job: str, index: int) -> None:
    # A refused connection answers at once; a loaded task's may take more
    # than a usual check's half second, so the check may take what is left.
    if not addresses.accepts(client.spec.task_address(job, index),
                             timeout=max(0.1, deadline - time.monotonic())):
      return
    try:
      _tell_until(deadline, job, index, client.spec.task_address(job, index))
      told.append(f"/job:{job}/task:{index}")
    except (tf.errors.OpError, RuntimeError) as e:
      logs.logger().warning("could not tell /job:%s/task:%d the job is "
                            "done: %s", job, index, e)

  waiting = [task for task in client.served_tasks
             if task not in lost and task not in _not_ours]
  threads = [threading.Thread(target=say, args=task, daemon=True,
                              name="tell-servers-done") for task in waiting]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join(max(0.0, deadline - time.monotonic()))
  for thread, (job, index) in zip(threads, waiting):
    if thread.is_alive():  # stalled: the process's teardown must not wait
      silent = failures.LostTask(
          job, index, client.spec.task_address(job, index),
          f"no answer for {timeout:g} s to the message that the job is done")
      if _watchdog is not None:
        _watchdog.report(silent)
      else:
        logs.logger().error("lost cluster task %s", silent)
        _on_lost(silent)
  return told


def describe(client: ClusterClient) -> str:
  """One line: the cluster and its addresses."""
  return json.dumps(client.cluster, sort_keys=True)
