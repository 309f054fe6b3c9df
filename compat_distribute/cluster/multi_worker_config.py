"""The cluster of a ``MultiWorkerMirroredStrategy`` program: which task
drives it, which tasks serve it, and what is refused.

TensorFlow's ``MultiWorkerMirroredStrategy`` runs the same program on every
``chief`` and ``worker`` task of ``TF_CONFIG``.  Ours runs it once, on the
*driving* task -- the ``chief`` when the cluster has one, else ``worker``
0 -- and every other ``chief``/``worker`` task serves it (``cluster.serve``;
``python -m compat_distribute run`` decides which from ``TF_CONFIG``,
``runner.multi_worker``).  An ``evaluator`` job is not part of the
training cluster (TensorFlow leaves it out too); a ``ps`` job is refused:
there are no parameter servers in a ``MultiWorkerMirroredStrategy``
cluster.

>>> task = check_task({"worker": ["a:1", "b:1"]}, "worker", 1, "TF_CONFIG")
>>> task.name, task.driver_name, task.drives
('/job:worker/task:1', '/job:worker/task:0', False)
>>> check_task({"chief": ["c:1"], "worker": ["a:1"]}, "chief", 0,
...            "TF_CONFIG").drives
True
>>> check_task({"worker": ["a:1"], "ps": ["p:1"]}, "worker", 0, "TF_CONFIG")
Traceback (most recent call last):
...
compat_distribute.cluster.multi_worker_config.MultiWorkerConfigError: TF_CONFIG of /job:worker/task:0 has a 'ps' job (['p:1']), but MultiWorkerMirroredStrategy has no parameter servers: every variable lives on the driving task and the replicas run on every chief and worker task. Remove "ps" from the "cluster" of every task's TF_CONFIG, or use CentralStorageStrategy (tf.distribute.experimental) for a cluster with ps tasks.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from compat_distribute.cluster import tasks
from compat_distribute.runtime.errors import Error

STRATEGY = "MultiWorkerMirroredStrategy"
# The jobs whose tasks run replicas, the driving one first.
REPLICA_JOBS = ("chief", "worker")
RUN_COMMAND = "python -m compat_distribute run train.py"


class MultiWorkerConfigError(Error, ValueError):
  """A cluster ``MultiWorkerMirroredStrategy`` cannot run on, or this task's
  part in it is not the program's."""


@dataclasses.dataclass(frozen=True)
class MultiWorkerTask:
  """This task in a ``MultiWorkerMirroredStrategy`` cluster.

  Attributes:
    cluster: the ``chief`` and ``worker`` jobs, each a list of addresses.
    job: this task's job.
    index: this task's index.
  """
  cluster: dict[str, list[str]]
  job: str
  index: int

  @property
  def name(self) -> str:
    return f"/job:{self.job}/task:{self.index}"

  @property
  def driver(self) -> tuple[str, int]:
    """The task that runs the program: chief 0, else worker 0."""
    return ("chief", 0) if self.cluster.get("chief") else ("worker", 0)

  @property
  def driver_name(self) -> str:
    return f"/job:{self.driver[0]}/task:{self.driver[1]}"

  @property
  def drives(self) -> bool:
    return (self.job, self.index) == self.driver

  @property
  def tasks(self) -> list[tuple[str, int]]:
    """Every task that runs replicas, in replica order (chief first)."""
    return [(job, i) for job in REPLICA_JOBS
            for i in range(len(self.cluster.get(job, ())))]

  def address(self, job: str, index: int) -> str:
    return self.cluster[job][index]

  def shape(self) -> str:
    """``chief: 1, worker: 2``."""
    return ", ".join(f"{job}: {len(self.cluster[job])}"
                     for job in REPLICA_JOBS if self.cluster.get(job))


def check_task(cluster: object, task_type: object, task_id: object,
               source: str) -> MultiWorkerTask:
  """This task's part in a ``MultiWorkerMirroredStrategy`` cluster.

  Args:
    cluster: job name -> addresses (a list, or ``{index: address}``).
    task_type, task_id: this task.
    source: where they come from (``TF_CONFIG``, ``The cluster resolver``),
      for the messages.

  Raises:
    MultiWorkerConfigError: a ``ps`` job, an ``evaluator`` task, no
      ``worker`` or ``chief`` job, a task missing from the cluster, or more
      than one chief -- naming the task and the fix.
  """
  if not isinstance(cluster, dict) or not any(
      cluster.get(job) for job in REPLICA_JOBS):
    raise MultiWorkerConfigError(
        f"{source}'s cluster has no 'worker' (or 'chief') job: {cluster!r}. "
        f"{STRATEGY} runs its replicas on the chief and worker tasks: set "
        'e.g. "cluster": {"worker": ["host1:2222", "host2:2222"]} in every '
        "task's TF_CONFIG.")
  name = f"/job:{task_type}/task:{task_id}"
  if cluster.get("ps"):
    raise MultiWorkerConfigError(
        f"{source} of {name} has a 'ps' job ({cluster['ps']!r}), but "
        f"{STRATEGY} has no parameter servers: every variable lives on the "
        "driving task and the replicas run on every chief and worker task. "
        "Remove \"ps\" from the \"cluster\" of every task's TF_CONFIG, or use "
        "CentralStorageStrategy (tf.distribute.experimental) for a cluster "
        "with ps tasks.")
  if task_type == "evaluator":
    raise MultiWorkerConfigError(
        f"{source} names this task {name}, an evaluator, which takes no part "
        f"in {STRATEGY} training (its replicas run on the chief and worker "
        "tasks). Run the evaluator's own program without "
        f"{STRATEGY} (e.g. with tf.distribute.get_strategy()), or start this "
        "task as a worker.")
  jobs = {job: tasks.task_addresses(cluster, job) for job in REPLICA_JOBS
          if cluster.get(job)}
  tasks.check_cluster(jobs, task_type, task_id, source, needs_ps=False)
  if len(jobs.get("chief", ())) > 1:
    raise MultiWorkerConfigError(
        f"{source} has {len(jobs['chief'])} chief tasks ({jobs['chief']!r}); "
        "a cluster has at most one. Make the others workers.")
  return MultiWorkerTask(jobs, task_type, int(task_id))


def from_tf_config(text: Optional[str]) -> Optional[MultiWorkerTask]:
  """This task from ``TF_CONFIG``'s value; None when it names no cluster.

  Raises:
    ValueError: not JSON; MultiWorkerConfigError: see ``check_task``.
  """
  config = tasks.load_tf_config(text)
  cluster = config.get("cluster")
  if not cluster:
    return None
  task = config.get("task")
  task = task if isinstance(task, dict) else {}
  return check_task(cluster, task.get("type"), task.get("index", 0),
                    "TF_CONFIG")


def not_driving_error(task: MultiWorkerTask, source: str
                      ) -> MultiWorkerConfigError:
  """The error of a program that makes the strategy on a serving task."""
  return MultiWorkerConfigError(
      f"{source} names this task {task.name}, but compat_distribute's "
      f"{STRATEGY} runs the program on one task only, {task.driver_name} "
      "(the chief when the cluster has one, else worker 0); every other "
      f"task serves it. Start every task with `{RUN_COMMAND}` (it decides "
      "from TF_CONFIG which task runs the program), or start this one with "
      "`python -m compat_distribute serve`.")
