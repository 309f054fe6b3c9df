"""``configure(cluster_spec=..., task_type=..., task_id=...)``: the cluster and
task TensorFlow's distribute coordinator hands every task, checked.

Estimator's ``train_and_evaluate`` on a ``TF_CONFIG`` cluster deep-copies
the strategy of ``RunConfig(train_distribute=...)`` and calls its
``configure`` on every chief, worker (and evaluator) before that task's
server starts.  What a strategy makes of the cluster:

* ``OneDeviceStrategy``: nothing, it stays on its device (as TensorFlow's);
* ``CentralStorageStrategy`` made without ``compute_devices`` and
  ``ParameterServerStrategy``: between-graph parameter-server training --
  the variables go to the ``ps`` tasks in turn, the replicas are this task's
  devices, and only the chief (or an evaluator) initialises, checkpoints
  and writes summaries (``cluster.parameter_server``).

This module turns the three arguments into a cluster resolver for that
task, refusing what TensorFlow refuses, with the rule, the value and the
fix, and before anything about the strategy changes:

>>> spec = cluster_spec_of({"chief": ["h:1"], "worker": ["h:2"], "ps": ["h:3"]})
>>> resolver = task_resolver(spec, "worker", 0, 0, "CentralStorageStrategy")
>>> resolver.task_type, resolver.task_id, resolver.cluster_spec().num_tasks("ps")
('worker', 0, 1)
>>> cluster_spec_of({}) is None  # no cluster: nothing to configure
True
>>> task_resolver(cluster_spec_of({"worker": ["h:2"]}), "worker", 0, 0,
...               "CentralStorageStrategy")
Traceback (most recent call last):
...
compat_distribute.cluster.configured.ConfigureClusterError: CentralStorageStrategy.configure got a cluster without a 'ps' job: {'worker': ['h:2']}. On a cluster the strategy trains between graphs with its variables on the 'ps' tasks; add e.g. "ps": ["host:port"] to the cluster, or call configure without cluster_spec to stay on this machine.
"""
from __future__ import annotations

import numbers
from typing import Optional, Union

import tensorflow as tf

from compat_distribute.cluster import tasks
from compat_distribute.runtime.errors import Error


# What configure accepts (anything else is refused with the fix).
ClusterSpecLike = Union[dict, tf.train.ClusterSpec, tf.train.ClusterDef, None]
TaskType = Optional[str]
TaskId = Optional[int]


class ConfigureClusterError(Error, ValueError):
  """``configure`` got a cluster or task it cannot use (TensorFlow:
  ``ValueError``)."""


class TaskIdTypeError(Error, TypeError):
  """``configure``'s ``task_id`` is not a number (TensorFlow:
  ``TypeError``)."""


class FixedDevicesError(Error, AttributeError):
  """A strategy made with ``compute_devices`` was given a cluster
  (TensorFlow fails there with ``AttributeError``)."""


class ConfiguredTask(tasks.TaskInfo):
  """The ``TaskInfo`` of a task given to ``configure``, which may be an
  evaluator the cluster does not list (it then reads its input alone)."""

  @property
  def input_pipelines(self) -> tuple[int, int]:
    if (self.task_type == "evaluator" and self.cluster_spec is not None and
        "evaluator" not in self.cluster_spec.jobs):
      return 1, 0
    return super().input_pipelines


def cluster_spec_of(cluster_spec: ClusterSpecLike) -> Optional[tf.train.ClusterSpec]:
  """``cluster_spec`` (a dict, ``tf.train.ClusterSpec`` or ``ClusterDef``)
  as a ``ClusterSpec``; None when it is None or names no job.

  Raises:
    ConfigureClusterError: any other type.
  """
  if cluster_spec is None:
    return None
  if isinstance(cluster_spec, dict) and not cluster_spec:
    return None
  try:
    spec = tf.train.ClusterSpec(cluster_spec)
  except TypeError as e:
    raise ConfigureClusterError(
        "configure's cluster_spec must be a dict of job names to address "
        "lists, a tf.train.ClusterSpec or a tf.train.ClusterDef, got "
        f"{cluster_spec!r} of type {type(cluster_spec).__name__}. Pass e.g. "
        '{"chief": ["host:port"], "ps": ["host:port"]}.') from e
  return spec if spec.jobs else None


def _task_index(task_id: TaskId) -> int:
  if isinstance(task_id, numbers.Real) and not isinstance(task_id, str):
    index = int(task_id)
    if index == task_id:
      return index
  raise TaskIdTypeError(
      f"configure's task_id must be a whole number, got {task_id!r} of type "
      f"{type(task_id).__name__}. Pass this task's index in its job, e.g. "
      "task_id=0.")


def task_resolver(spec: tf.train.ClusterSpec, task_type: TaskType,
                  task_id: TaskId, num_gpus: int, owner: str
                  ) -> tf.distribute.cluster_resolver.SimpleClusterResolver:
  """A resolver for task ``task_type``/``task_id`` of ``spec``, whose
  workers have ``num_gpus`` GPUs each; ``owner`` names the strategy in
  errors.  An evaluator need not be listed in the cluster (as in
  TensorFlow).

  Raises:
    ConfigureClusterError: no task given, no ``ps`` job, an unknown task
      type, or a task the cluster does not have.
    TaskIdTypeError: ``task_id`` is not a whole number.
  """
  if task_type is None or task_id is None:
    raise ConfigureClusterError(
        f"{owner}.configure got a cluster but task type {task_type!r} and "
        f"task_id {task_id!r}: with cluster_spec it needs both, to know "
        "which task this process is. Pass e.g. task_type='worker', "
        "task_id=0.")
  index = _task_index(task_id)
  cluster = spec.as_dict()
  if "ps" not in cluster:
    raise ConfigureClusterError(
        f"{owner}.configure got a cluster without a 'ps' job: {cluster!r}. "
        "On a cluster the strategy trains between graphs with its variables "
        'on the \'ps\' tasks; add e.g. "ps": ["host:port"] to the cluster, or '
        "call configure without cluster_spec to stay on this machine.")
  if task_type == "evaluator" and task_type not in cluster:
    if index < 0:
      raise ConfigureClusterError(
          f"{owner}.configure got task_id {task_id!r} for the evaluator; "
          "task indices start at 0. Pass task_id=0.")
  else:
    try:
      tasks.check_cluster(cluster, task_type, index,
                          f"{owner}.configure's cluster_spec")
    except ValueError as e:
      raise ConfigureClusterError(str(e)) from None
  return tf.distribute.cluster_resolver.SimpleClusterResolver(
      spec, task_type=task_type, task_id=index,
      num_accelerators={"GPU": num_gpus})
