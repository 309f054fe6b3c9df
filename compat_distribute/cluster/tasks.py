"""The cluster a parameter-server strategy runs in: who we are, where the
parameter servers are, and whether they are up.

The cluster comes from a ``tf.distribute.cluster_resolver.ClusterResolver``
or, by default, from the ``TF_CONFIG`` environment variable (TensorFlow's
``TFConfigClusterResolver`` reads it).  ``TF_CONFIG`` is checked here first,
so a mistake in it is reported with the value and the fix:

>>> describe_task(resolve(tf.distribute.cluster_resolver.SimpleClusterResolver(
...     tf.train.ClusterSpec({"worker": ["127.0.0.1:1", "127.0.0.1:2"],
...                           "ps": ["127.0.0.1:3"]}),
...     task_type="worker", task_id=1)))
'/job:worker/task:1 of {ps: 1, worker: 2} (not chief)'
>>> check_tf_config('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}}')
Traceback (most recent call last):
...
ValueError: TF_CONFIG has no 'ps' job: ParameterServerStrategy puts variables on the tasks of the 'ps' job, but the cluster is {'worker': ['a:1']}. Add e.g. "ps": ["host:port"] to TF_CONFIG's "cluster".
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Optional

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.cluster import addresses
from compat_distribute.runtime import logs
from compat_distribute.runtime.errors import Error

TASK_TYPES = ("chief", "worker", "ps", "evaluator")

# Seconds wait_for_cluster waits for the cluster's tasks by default
# (TensorFlow's Session waits for ever).
DEFAULT_CLUSTER_WAIT = 300.0


def parse_cluster_wait(text: str) -> Optional[float]:
  """A value of ``COMPAT_DISTRIBUTE_CLUSTER_WAIT``: seconds, or a word of
  ``addresses.NO_WAIT_WORDS`` for no wait (None); empty:
  ``DEFAULT_CLUSTER_WAIT``.

  >>> parse_cluster_wait("30"), parse_cluster_wait("Off"), parse_cluster_wait("")
  (30.0, None, 300.0)
  >>> parse_cluster_wait("soon")
  Traceback (most recent call last):
  ...
  ValueError: COMPAT_DISTRIBUTE_CLUSTER_WAIT must be a number of seconds (at least 0) or one of none, off, no, never (no wait), got 'soon'. Set it to e.g. 60 or none, or unset it for 300.
  """
  return addresses.parse_seconds(text, "COMPAT_DISTRIBUTE_CLUSTER_WAIT",
                                 DEFAULT_CLUSTER_WAIT, "no wait")


def default_cluster_wait() -> Optional[float]:
  """The wait ``COMPAT_DISTRIBUTE_CLUSTER_WAIT`` sets (see
  ``parse_cluster_wait``)."""
  return parse_cluster_wait(
      os.environ.get("COMPAT_DISTRIBUTE_CLUSTER_WAIT", ""))


@dataclasses.dataclass
class TaskInfo:
  """What the strategy needs to know about the cluster and this task."""
  resolver: Any
  cluster_spec: Optional[tf.train.ClusterSpec]
  task_type: Optional[str]
  task_id: Optional[int]
  num_gpus: int

  @property
  def is_chief(self) -> bool:
    """The chief task, else worker 0 when there is no chief (evaluators are
    their own chief), as TensorFlow decides."""
    if self.cluster_spec is None:
      return True
    if self.task_type in ("chief", "evaluator"):
      return True
    return (self.task_type == "worker" and self.task_id == 0 and
            "chief" not in self.cluster_spec.jobs)

  @property
  def worker_device(self) -> str:
    return f"/job:{self.task_type}/task:{self.task_id}"

  @property
  def num_ps(self) -> int:
    return self.cluster_spec.num_tasks("ps") if self.cluster_spec else 0

  @property
  def input_pipelines(self) -> tuple[int, int]:
    """(number of input pipelines, this task's pipeline id): one per chief
    and worker task, the chief first; an evaluator reads alone."""
    if self.cluster_spec is None or self.task_type not in ("chief", "worker",
                                                           "evaluator"):
      return 1, 0
    jobs = self.cluster_spec.jobs
    if self.task_type == "evaluator":
      return self.cluster_spec.num_tasks("evaluator"), self.task_id
    chiefs = self.cluster_spec.num_tasks("chief") if "chief" in jobs else 0
    workers = self.cluster_spec.num_tasks("worker") if "worker" in jobs else 0
    index = 0 if self.task_type == "chief" else chiefs + self.task_id
    return chiefs + workers, index


def check_tf_config(text: Optional[str]) -> None:
  """Refuses a malformed ``TF_CONFIG`` with its value and the fix.

  An unset or empty ``TF_CONFIG``, or one without a cluster, is fine: the
  strategy then runs on this machine alone.

  Raises:
    ValueError: bad JSON, an unknown task type, an index out of range, a
      task missing from the cluster, or no ``ps`` job.
  """
  config = load_tf_config(text)
  cluster = config.get("cluster") or {}
  if not cluster:
    return
  if not isinstance(cluster, dict):
    raise ValueError(
        f"TF_CONFIG's 'cluster' must map job names to lists of addresses, "
        f"got {cluster!r}.")
  task = config.get("task") or {}
  check_cluster(cluster, task.get("type"), task.get("index"), "TF_CONFIG")


def load_tf_config(text: Optional[str]) -> dict[str, Any]:
  """``TF_CONFIG``'s value as a dict; ``{}`` when unset or empty.

  Raises:
    ValueError: not JSON, or not a JSON object.
  """
  if not text or not text.strip():
    return {}
  try:
    config = json.loads(text)
  except ValueError as e:
    raise ValueError(
        f"TF_CONFIG is not valid JSON ({e}): {text!r}. Set it to e.g. "
        '{"cluster": {"worker": ["host:port"], "ps": ["host:port"]}, '
        '"task": {"type": "worker", "index": 0}}.') from e
  if not isinstance(config, dict):
    raise ValueError(
        f"TF_CONFIG must be a JSON object with 'cluster' and 'task', got "
        f"{text!r}.")
  return config


def task_addresses(cluster: dict[str, Any], job: str) -> list[str]:
  """The addresses of ``job``'s tasks in a ``TF_CONFIG`` cluster, by index
  (a job is a list of addresses or a map of index to address).

  >>> task_addresses({"ps": {"1": "b:1", "0": "a:1"}}, "ps")
  ['a:1', 'b:1']
  """
  tasks = cluster[job]
  if isinstance(tasks, dict):
    return [tasks[k] for k in sorted(tasks, key=int)]
  return list(tasks)


def check_cluster(cluster: dict[str, Any], task_type: Any, task_id: Any,
                  source: str, needs_ps: bool = True) -> None:
  """The checks of ``check_tf_config`` on a cluster dict and a task (the
  ``ps`` job's only with ``needs_ps``)."""
  if task_type not in TASK_TYPES:
    raise ValueError(
        f"{source} names task type {task_type!r}; it must be one of "
        f"{', '.join(TASK_TYPES)}. Set the task's type to the job this "
        f"process runs in, e.g. 'worker'.")
  if task_type not in cluster:
    raise ValueError(
        f"{source} says this task is a {task_type!r}, but the cluster has no "
        f"{task_type!r} job: {cluster!r}. Add the job to the cluster or fix "
        "the task's type.")
  tasks = cluster[task_type]
  count = len(tasks) if isinstance(tasks, (list, tuple, dict)) else 0
  ids = (sorted(int(k) for k in tasks) if isinstance(tasks, dict)
         else list(range(count)))
  if not isinstance(task_id, int) or isinstance(task_id, bool) or (
      task_id not in ids):
    raise ValueError(
        f"{source} names task index {task_id!r} of job {task_type!r}, which "
        f"has {count} task{'s' if count != 1 else ''} ({tasks!r}). Use an "
        f"index in {ids}.")
  if needs_ps and not cluster.get("ps"):
    raise ValueError(
        f"{source} has no 'ps' job: ParameterServerStrategy puts variables on "
        f"the tasks of the 'ps' job, but the cluster is {cluster!r}. Add e.g. "
        '"ps": ["host:port"] to ' + f"{source}'s \"cluster\".")


def resolve(cluster_resolver: Any = None) -> TaskInfo:
  """Reads the cluster and this task from ``cluster_resolver`` (default:
  ``TF_CONFIG``), checking them first."""
  if cluster_resolver is None:
    check_tf_config(os.environ.get("TF_CONFIG"))
    cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    tf_config = True
  elif isinstance(cluster_resolver,
                  tf.distribute.cluster_resolver.ClusterResolver):
    tf_config = isinstance(
        cluster_resolver,
        tf.distribute.cluster_resolver.TFConfigClusterResolver)
  else:
    raise TypeError(
        f"cluster_resolver must be a tf.distribute.cluster_resolver."
        f"ClusterResolver, got {cluster_resolver!r} of type "
        f"{type(cluster_resolver).__name__}. Pass e.g. SimpleClusterResolver("
        "tf.train.ClusterSpec({...}), task_type='worker', task_id=0), or None "
        "to read TF_CONFIG.")
  spec = cluster_resolver.cluster_spec()
  if not spec.as_dict():
    return TaskInfo(cluster_resolver, None, None, None, _local_gpus())
  task_type, task_id = cluster_resolver.task_type, cluster_resolver.task_id
  check_cluster(spec.as_dict(), task_type, task_id,
                "TF_CONFIG" if tf_config else "The cluster resolver")
  if tf_config:
    num_gpus = _local_gpus()  # as TensorFlow: the resolver's count is unused
  else:
    num_gpus = int(cluster_resolver.num_accelerators().get("GPU", 0))
  return TaskInfo(cluster_resolver, spec, task_type, int(task_id), num_gpus)


def describe_task(info: TaskInfo) -> str:
  """One line naming the task and the cluster's shape."""
  if info.cluster_spec is None:
    return "no cluster (this machine only)"
  shape = ", ".join(f"{job}: {info.cluster_spec.num_tasks(job)}"
                    for job in sorted(info.cluster_spec.jobs))
  chief = "chief" if info.is_chief else "not chief"
  return f"{info.worker_device} of {{{shape}}} ({chief})"


def _local_gpus() -> int:
  return len(_tf_private.list_logical_devices("GPU"))


class TaskUnavailableError(Error, TimeoutError):
  """A task of the cluster did not accept connections in time."""


PROGRESS_EVERY = 10.0  # seconds between "still waiting" lines


def describe_tasks(cluster_spec: tf.train.ClusterSpec,
                   tasks: list[tuple[str, int]]) -> str:
  """``/job:J/task:I at host:port`` for each task, comma separated."""
  return ", ".join(f"/job:{job}/task:{i} at {cluster_spec.task_address(job, i)}"
                   for job, i in tasks)


WAIT_LONGER = (
    "to wait longer pass a timeout to strategy.extended.wait_for_cluster, or "
    "set strategy.extended.cluster_wait_timeout (seconds) or the "
    "COMPAT_DISTRIBUTE_CLUSTER_WAIT environment variable")


def wait_for_tasks(cluster_spec: tf.train.ClusterSpec,
                   tasks: list[tuple[str, int]], timeout: float,
                   progress_every: float = PROGRESS_EVERY,
                   owner: str = "ParameterServerStrategy",
                   start_hint: str = "Start its tf.distribute.Server",
                   wait_longer: str = WAIT_LONGER) -> None:
  """Waits until every task in ``tasks`` accepts TCP connections at its
  address, at most ``timeout`` seconds.

  A ``Session`` to a cluster whose parameter server is not up waits for it
  forever (TensorFlow logs "CreateSession still waiting"); this bounds the
  wait and names what is missing.  When a task is not up at once, the
  package's logger says which tasks it waits for and for how long, then
  every ``progress_every`` seconds which are still missing.  ``owner``
  starts those lines; ``start_hint`` and ``wait_longer`` are the error's
  two fixes.

  Raises:
    TaskUnavailableError: naming each task still unreachable.
  """
  start = time.monotonic()
  deadline = start + timeout
  pending = list(tasks)
  said = False
  next_progress = start + progress_every
  while True:
    pending = [(job, i) for job, i in pending
               if not addresses.accepts(cluster_spec.task_address(job, i))]
    now = time.monotonic()
    if not pending or now >= deadline:
      break
    if not said:
      logs.logger().warning(
          "%s: waiting up to %g s for cluster tasks to accept connections: "
          "%s", owner, timeout,
          describe_tasks(cluster_spec, pending))
      said = True
    elif now >= next_progress:
      logs.logger().warning(
          "%s: still waiting (%.0f s of %g s) for %s", owner,
          now - start, timeout, describe_tasks(cluster_spec, pending))
      next_progress = now + progress_every
    time.sleep(0.1)
  if pending:
    raise TaskUnavailableError(
        f"Cluster task{'s' if len(pending) > 1 else ''} not reachable after "
        f"{timeout:g} s: {describe_tasks(cluster_spec, pending)}. "
        f"{start_hint} (or fix its address in TF_CONFIG); {wait_longer}.")
  if said:
    logs.logger().warning("%s: cluster tasks up after %.1f s", owner,
                          time.monotonic() - start)
