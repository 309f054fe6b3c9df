"""Estimator's glue to TensorFlow's distribute coordinator, for TensorFlow
2.16 and later (which removed its own, ``estimator_training``).

Estimator 2.15 calls five functions of that module, and this module is
registered under its name (``tensorflow.python.distribute.estimator_training``)
when TensorFlow lacks it:

* ``init_run_config(config, tf_config)`` -- from ``RunConfig.__init__`` when
  a strategy is given: decides whether the run goes through the distribute
  coordinator, and in which mode, and fills the config's cluster fields.
* ``should_run_distribute_coordinator(config)`` -- from
  ``train_and_evaluate``: whether it should hand over to the coordinator.
* ``train_and_evaluate(estimator, train_spec, eval_spec, executor_cls)`` --
  runs this task of the cluster: chief and workers train, the evaluator
  evaluates, a ``ps`` task serves.
* ``estimator_train`` / ``estimator_evaluate`` -- ``Estimator.train`` and
  ``evaluate`` with a remote cluster (the coordinator's standalone-client
  mode).

Which mode a ``RunConfig`` gets (``_distribute_coordinator_mode``):

=========================================================  ======================
the config                                                 mode
=========================================================  ======================
a ``train_distribute`` and ``experimental_distribute``'s   ``standalone_client``
``remote_cluster`` (``TF_CONFIG`` must name no cluster)
a ``train_distribute`` and a ``TF_CONFIG`` cluster with    ``independent_worker``
no ``master`` job
anything else (no cluster, a ``master`` job, or only an    None: Estimator runs as
``eval_distribute``)                                       without a coordinator
=========================================================  ======================

>>> class Config:  # what init_run_config reads and writes of a RunConfig
...   _experimental_distribute = None
...   _train_distribute, _eval_distribute = "a strategy", None
...   def _init_distributed_setting_from_environment_var(self, tf_config):
...     self.seen = tf_config
>>> config = Config()
>>> init_run_config(config, {"cluster": {"chief": ["h:1"], "ps": ["h:2"]},
...                          "task": {"type": "chief", "index": 0}})
>>> config._distribute_coordinator_mode, config._cluster_spec.as_dict()
('independent_worker', {'chief': ['h:1'], 'ps': ['h:2']})
>>> global_id_in_cluster(config._cluster_spec, "ps", 0)
1
"""
from __future__ import annotations

import copy
import types
from typing import Callable, Mapping, Optional, Protocol, Sequence

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.estimator.errors import (
    CoordinatorConfigError, EstimatorUnsupportedError)

# Task types, as TF_CONFIG and the coordinator spell them.
CHIEF = "chief"
WORKER = "worker"
PS = "ps"
EVALUATOR = "evaluator"
# The coordinator's two modes (its CoordinatorMode values).
STANDALONE_CLIENT = "standalone_client"
INDEPENDENT_WORKER = "independent_worker"
MODES = (STANDALONE_CLIENT, INDEPENDENT_WORKER)

_log = tf.compat.v1.logging


# -- Estimator's objects, as this glue sees them (it never imports Estimator) --

Strategy = tf.distribute.Strategy
Hooks = Sequence[tf.compat.v1.train.SessionRunHook]
TFConfig = Mapping[str, object]  # a parsed TF_CONFIG


class RunConfigLike(Protocol):
  """A ``RunConfig``: its public fields (the private ones it writes are
  the ones Estimator's own code writes)."""
  cluster_spec: Optional[tf.train.ClusterSpec]
  session_config: Optional[tf.compat.v1.ConfigProto]
  train_distribute: Optional[Strategy]
  eval_distribute: Optional[Strategy]


class EstimatorLike(Protocol):
  """An ``Estimator``, as ``train_and_evaluate`` and ``train`` use it."""
  config: RunConfigLike

  def train(self, input_fn: Callable[..., object], hooks: Hooks = ...,
            steps: Optional[int] = ...,
            max_steps: Optional[int] = ...) -> "EstimatorLike": ...


class WorkerContext(Protocol):
  """What the coordinator tells the task it runs about itself."""
  task_type: Optional[str]
  task_id: int
  cluster_spec: tf.train.ClusterSpec
  master_target: str
  is_chief: bool


# ``Estimator._actual_train_model_distributed`` / ``_actual_eval`` bound to
# their arguments: (estimator copy, strategy, hooks) -> result.
DistributedRun = Callable[[EstimatorLike, Strategy, Hooks], object]


# -- RunConfig -----------------------------------------------------------------

def _take_from_experimental(config: RunConfigLike, field: str) -> None:
  """Moves ``experimental_distribute.<field>`` to ``config._<field>``,
  refusing a strategy given both ways."""
  experimental = config._experimental_distribute  # pylint: disable=protected-access
  chosen = getattr(experimental, field, None) if experimental else None
  if not chosen:
    return
  if getattr(config, "_" + field):
    raise CoordinatorConfigError(
        f"RunConfig got `{field}` twice: as RunConfig({field}=...) and as "
        f"experimental_distribute.{field} ({chosen!r}). Pass it one way "
        "only.")
  setattr(config, "_" + field, chosen)


def init_run_config(config: RunConfigLike, tf_config: TFConfig) -> None:
  """Completes a ``RunConfig`` made with a distribution strategy.

  Args:
    config: the ``RunConfig`` being initialised.
    tf_config: the parsed ``TF_CONFIG`` (``{}`` without one).

  Raises:
    CoordinatorConfigError: a strategy given twice, or a remote cluster and
      a ``TF_CONFIG`` cluster together (a ``ValueError``).
  """
  # pylint: disable=protected-access
  _take_from_experimental(config, "train_distribute")
  _take_from_experimental(config, "eval_distribute")
  cluster = tf.train.ClusterSpec(tf_config.get("cluster", {}))
  config._init_distributed_setting_from_environment_var({})
  remote = getattr(config._experimental_distribute, "remote_cluster", None)
  if config._train_distribute and remote:
    if cluster:
      raise CoordinatorConfigError(
          "RunConfig got a cluster twice: TF_CONFIG names one "
          f"({cluster.as_dict()}) and experimental_distribute.remote_cluster "
          f"is {remote!r}. Unset TF_CONFIG's cluster to run as a client of "
          "the remote cluster, or drop remote_cluster.")
    config._distribute_coordinator_mode = STANDALONE_CLIENT
    config._cluster_spec = remote
    _log.info("RunConfig: the distribute coordinator will run Estimator as "
              "a standalone client of %s.", remote)
    return
  if cluster and "master" not in cluster.jobs and config._train_distribute:
    config._cluster_spec = cluster
    config._distribute_coordinator_mode = INDEPENDENT_WORKER
    _log.info("RunConfig: the distribute coordinator will run this task of "
              "the TF_CONFIG cluster (independent-worker mode).")
    return
  config._distribute_coordinator_mode = None
  config._init_distributed_setting_from_environment_var(tf_config)
  config._maybe_overwrite_session_config_for_distributed_training()
  _log.info("RunConfig: Estimator runs without the distribute coordinator.")


def should_run_distribute_coordinator(config: RunConfigLike) -> bool:
  """Whether ``train_and_evaluate`` should go through the coordinator."""
  mode = getattr(config, "_distribute_coordinator_mode", None)
  if mode is None:
    return False
  if not isinstance(mode, str) or mode not in MODES:
    _log.warning("RunConfig has an unknown distribute coordinator mode %r; "
                 "running without the coordinator.", mode)
    return False
  if not config.cluster_spec:
    _log.warning("RunConfig has coordinator mode %r but no cluster; "
                 "running train_and_evaluate locally.", mode)
    return False
  return True


# -- A task's config, from the coordinator's worker context --------------------

def _job_order(cluster: tf.train.ClusterSpec) -> list[str]:
  """The jobs in the order global ids count them: ``chief``, the others by
  name, ``ps`` last."""
  jobs = sorted(cluster.jobs)
  middle = [job for job in jobs if job not in (CHIEF, PS)]
  return ([CHIEF] if CHIEF in jobs else []) + middle + (
      [PS] if PS in jobs else [])


def global_id_in_cluster(cluster: tf.train.ClusterSpec,
                         task_type: Optional[str], task_id: int) -> int:
  """The task's position when all tasks are counted in ``_job_order``; 0
  without a task type."""
  if not task_type:
    return 0
  before = 0
  for job in _job_order(cluster):
    if job == task_type:
      return before + task_id
    before += len(cluster.job_tasks(job))
  raise CoordinatorConfigError(
      f"Task type {task_type!r} is not a job of the cluster "
      f"{cluster.as_dict()}; a task's TF_CONFIG must name one of its jobs.")


def apply_worker_context(config: RunConfigLike,
                         context: WorkerContext) -> None:
  """Points a (copied) ``RunConfig`` at the task the coordinator runs."""
  # pylint: disable=protected-access
  config._service = None
  config._cluster_spec = context.cluster_spec
  config._task_type = context.task_type
  config._task_id = context.task_id
  config._master = config._evaluation_master = context.master_target
  config._is_chief = context.is_chief
  if not config._cluster_spec:
    config._num_ps_replicas, config._num_worker_replicas = 0, 1
    config._global_id_in_cluster = 0
  elif config._task_type == EVALUATOR:
    # The evaluator works alone: it sees no cluster.
    config._cluster_spec = tf.train.ClusterSpec({})
    config._num_ps_replicas = config._num_worker_replicas = 0
    config._global_id_in_cluster = None
  else:
    jobs = config._cluster_spec.as_dict()
    config._num_ps_replicas = len(jobs.get(PS, []))
    config._num_worker_replicas = (len(jobs.get(WORKER, [])) +
                                   len(jobs.get(CHIEF, [])))
    config._global_id_in_cluster = global_id_in_cluster(
        config._cluster_spec, config._task_type, config._task_id)
  _log.info("The coordinator's task %s:%s has RunConfig %s",
            context.task_type, context.task_id, vars(config))


# -- Running through the coordinator -------------------------------------------

def _coordinator() -> tuple[types.ModuleType, types.ModuleType]:
  found = _tf_private.distribute_coordinator()
  if found is None:
    raise EstimatorUnsupportedError(
        tf.__version__, "TensorFlow's distribute coordinator",
        "runs each task of a TF_CONFIG cluster (train_and_evaluate with a "
        "distribution strategy on a cluster)")
  return found


def _task_copy(estimator: EstimatorLike, role: str,
               strategy: Optional[Strategy]) -> EstimatorLike:
  """A copy of ``estimator`` for this task, with ``strategy`` as its
  ``role`` (``"train"`` or ``"eval"``) strategy and the task's config."""
  # pylint: disable=protected-access
  local = copy.deepcopy(estimator)
  setattr(local._config, f"_{role}_distribute", strategy)
  apply_worker_context(local._config,
                       _coordinator()[1].get_current_worker_context())
  setattr(local, f"_{role}_distribution", strategy)
  return local


def train_and_evaluate(estimator: EstimatorLike, train_spec: object,
                       eval_spec: object,
                       executor_cls: Callable[..., object]) -> None:
  """Runs this task of ``train_and_evaluate`` through the coordinator.

  Raises:
    CoordinatorConfigError: the estimator's config has no coordinator mode.
  """
  # pylint: disable=protected-access
  config = estimator.config
  mode = config._distribute_coordinator_mode
  if not mode:
    raise CoordinatorConfigError(
        "train_and_evaluate through the distribute coordinator needs a "
        "RunConfig with a coordinator mode, got mode "
        f"{mode!r}. Make the RunConfig with a train_distribute strategy and "
        "a TF_CONFIG cluster (or experimental_distribute.remote_cluster).")
  dc = _coordinator()[0]

  def train_task(strategy: Optional[Strategy]) -> None:
    local = _task_copy(estimator, "train", strategy)
    chief = local._config._is_chief
    hooks = list(train_spec.hooks) if (
        mode == INDEPENDENT_WORKER or chief) else []
    local._config._distribute_coordinator_mode = None  # train directly
    local.train(input_fn=train_spec.input_fn, max_steps=train_spec.max_steps,
                hooks=hooks)

  def evaluate_task(strategy: Optional[Strategy]) -> None:
    local = _task_copy(estimator, "eval", strategy)
    local._config._distribute_coordinator_mode = None
    executor_cls(local, train_spec, eval_spec)._start_continuous_evaluation()

  dc.run_distribute_coordinator(
      train_task, config.train_distribute, evaluate_task,
      config.eval_distribute, mode=mode,
      cluster_spec=config.cluster_spec if mode == STANDALONE_CLIENT else None,
      session_config=config.session_config)


def _run_on_remote_cluster(estimator: EstimatorLike, role: str,
                           run: DistributedRun, hooks: Hooks) -> object:
  """``Estimator.train`` (role ``"train"``) or ``evaluate`` (``"eval"``)
  as a standalone client of the config's remote cluster."""
  # pylint: disable=protected-access
  config = estimator._config
  strategy = getattr(config, f"_{role}_distribute")
  method = "train" if role == "train" else "evaluate"
  mode = config._distribute_coordinator_mode
  if not (mode and config.cluster_spec and strategy):
    raise CoordinatorConfigError(
        f"Estimator.{method} through the distribute coordinator needs a "
        f"coordinator mode, a cluster and a {role}_distribute strategy; got "
        f"mode {mode!r}, cluster {config.cluster_spec!r}, strategy "
        f"{strategy!r}.")
  cluster = tf.train.ClusterSpec(config.cluster_spec)
  if EVALUATOR in cluster.jobs:
    raise CoordinatorConfigError(
        f"Estimator.{method} on a cluster with an 'evaluator' job "
        f"({cluster.as_dict()}): only train_and_evaluate runs an evaluator. "
        "Drop the evaluator job or call tf.estimator.train_and_evaluate.")
  if mode != STANDALONE_CLIENT:
    raise CoordinatorConfigError(
        f"Estimator.{method} through the distribute coordinator runs only "
        f"as a standalone client, got mode {mode!r}. Use "
        "tf.estimator.train_and_evaluate on a TF_CONFIG cluster.")
  if strategy.extended.experimental_between_graph:
    raise CoordinatorConfigError(
        f"Estimator.{method} as a standalone client cannot use "
        f"{type(strategy).__name__}: it trains between graphs, and the "
        "client cannot combine its tasks' results. Use "
        "tf.estimator.train_and_evaluate on a TF_CONFIG cluster.")

  def task(task_strategy: Strategy) -> object:
    local = _task_copy(estimator, role, task_strategy)
    result = run(local, task_strategy,
                 hooks if local._config._is_chief else [])
    return local if role == "train" else result

  return _coordinator()[0].run_distribute_coordinator(
      task, strategy, mode=mode, cluster_spec=cluster,
      session_config=config.session_config)


def estimator_train(estimator: EstimatorLike,
                    train_distributed_fn: DistributedRun,
                    hooks: Hooks) -> object:
  """``Estimator.train`` on a remote cluster (standalone client)."""
  return _run_on_remote_cluster(estimator, "train", train_distributed_fn,
                                hooks)


def estimator_evaluate(estimator: EstimatorLike,
                       evaluate_distributed_fn: DistributedRun,
                       hooks: Hooks) -> object:
  """``Estimator.evaluate`` on a remote cluster (standalone client)."""
  return _run_on_remote_cluster(estimator, "eval", evaluate_distributed_fn,
                                hooks)

