"""``strategy.configure(session_config, cluster_spec, task_type, task_id)``
with a cluster, ours against native, as TensorFlow's distribute coordinator
(Estimator's ``train_and_evaluate`` on a ``TF_CONFIG`` cluster) calls it on
every task.

TensorFlow 2.12 to 2.22 agree: ``OneDeviceStrategy`` ignores the cluster;
``CentralStorageStrategy`` made without devices becomes that task's part of
between-graph parameter-server training when the cluster has a ``ps`` job,
and raises ``ValueError`` when it has none.  Everything a program can see
is compared: the role properties, the devices, where variables and ops made
in scope afterwards go, the session config, and what a deep copy keeps.
No server is started: configuring needs none.
"""
import copy

import pytest
import tensorflow as tf

from compat_distribute import Error
from fixtures import strategies

pytestmark = [pytest.mark.parity,
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

V1 = tf.compat.v1
CLUSTER = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"],
           "ps": ["127.0.0.1:4", "127.0.0.1:5"]}
NO_PS = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}
SPEC_FORMS = {"dict": dict, "ClusterSpec": tf.train.ClusterSpec,
              "ClusterDef": lambda c: tf.train.ClusterSpec(c).as_cluster_def()}


def _strategy(impl, kind, facade):
  """``kind`` made as a program on a cluster makes it: CentralStorage
  without devices."""
  if kind == "one_device":
    return strategies.strategy(impl, kind, facade=facade)
  return strategies.strategy(impl, kind, None, facade=facade)


def _config_fields(config):
  """A session config without ``device_count`` (ours adds it on one
  machine: docs/deliberate-differences)."""
  config = copy.deepcopy(config)
  config.ClearField("device_count")
  return config.SerializeToString(deterministic=True)


def _observe(strategy):
  """What a program can see of a (configured) strategy."""
  extended = strategy.extended
  seen = {name: getattr(extended, name) for name in (
      "experimental_between_graph", "experimental_should_init",
      "should_checkpoint", "should_save_summary")}
  seen["worker_devices"] = list(extended.worker_devices)
  seen["parameter_devices"] = tuple(extended.parameter_devices)
  seen["replicas"] = strategy.num_replicas_in_sync
  seen["cluster_resolver"] = strategy.cluster_resolver
  seen["config"] = _config_fields(
      strategy.update_config_proto(V1.ConfigProto(allow_soft_placement=True)))
  with tf.Graph().as_default():
    with strategy.scope():
      made = [V1.get_variable("a", initializer=1.0), tf.Variable(2.0),
              V1.get_variable("c", initializer=3.0),
              V1.train.get_or_create_global_step()]
      op = tf.constant(1.0)
      result = strategy.run(lambda: made[0] * 2.0)
    seen["variables"] = [v.device for v in made]
    seen["op"] = op.device
    seen["run"] = [t.device for t in strategy.experimental_local_results(
        result)]
  return seen


def _configure(strategy, spec, task_type, task_id, session_config=None):
  strategy.configure(session_config, spec, task_type, task_id)
  return strategy


def _configured(kind, facade, spec, task_type, task_id):
  """{impl: (what the configured strategy shows, the session config it
  updated in place)} for ours and native."""
  seen = {}
  for impl in ("ours", "native"):
    strategy = _strategy(impl, kind, facade)
    config = V1.ConfigProto(allow_soft_placement=True)
    _configure(strategy, spec, task_type, task_id, session_config=config)
    seen[impl] = (_observe(strategy), _config_fields(config))
  return seen


# -- OneDeviceStrategy: the cluster is ignored --------------------------------

@pytest.mark.parametrize("facade", strategies.FACADES)
@pytest.mark.parametrize("cluster", [CLUSTER, NO_PS], ids=["ps", "no_ps"])
@pytest.mark.parametrize("task", [("chief", 0), ("worker", 1), ("ps", 0),
                                  (None, None)], ids=str)
def test_one_device_ignores_the_cluster_as_native(facade, cluster, task):
  seen = _configured("one_device", facade, cluster, *task)
  assert seen["ours"] == seen["native"]
  fresh = _observe(_strategy("ours", "one_device", facade))
  assert seen["ours"][0] == fresh
  assert seen["ours"][0]["experimental_between_graph"] is False


# -- CentralStorageStrategy with a ps job: between-graph PS training ----------

@pytest.mark.parametrize("facade", strategies.FACADES)
@pytest.mark.parametrize("task", [("chief", 0), ("worker", 1), ("ps", 1),
                                  ("evaluator", 0)], ids=str)
def test_central_storage_with_ps_becomes_ps_training_as_native(facade, task):
  seen = _configured("central_storage", facade, CLUSTER, *task)
  assert seen["ours"] == seen["native"]
  ours = seen["ours"][0]
  task_type, task_id = task
  assert ours["experimental_between_graph"] is True
  # Only the chief (and an evaluator, its own chief) saves and initialises.
  assert ours["should_checkpoint"] is (task_type in ("chief", "evaluator"))
  assert ours["worker_devices"] == [
      f"/job:{task_type}/replica:0/task:{task_id}/device:CPU:0"]
  assert ours["parameter_devices"] == ("/job:ps/task:0", "/job:ps/task:1")
  assert ours["variables"] == ["/job:ps/task:0", "/job:ps/task:1"] * 2
  assert ours["op"] == f"/job:{task_type}/task:{task_id}"


@pytest.mark.parametrize("form", sorted(SPEC_FORMS))
def test_every_form_of_cluster_spec_configures_as_native(form):
  seen = {}
  for impl in ("ours", "native"):
    strategy = _strategy(impl, "central_storage", "v1")
    _configure(strategy, SPEC_FORMS[form](CLUSTER), "worker", 0)
    seen[impl] = _observe(strategy)
  assert seen["ours"] == seen["native"]
  assert seen["ours"]["should_checkpoint"] is False  # a chief job exists


@pytest.mark.parametrize("cluster,task,chief", [
    ({"worker": ["h:1", "h:2"], "ps": ["h:3"]}, ("worker", 0), True),
    ({"worker": ["h:1", "h:2"], "ps": ["h:3"]}, ("worker", 1), False),
    ({"ps": ["h:3"]}, ("ps", 0), False),
    (CLUSTER, ("evaluator", 3), True),  # an evaluator the cluster omits
], ids=["worker0-no-chief", "worker1-no-chief", "ps-only", "evaluator"])
def test_other_cluster_shapes_configure_as_native(cluster, task, chief):
  seen = {}
  for impl in ("ours", "native"):
    strategy = _strategy(impl, "central_storage", "v1")
    seen[impl] = _observe(_configure(strategy, cluster, *task))
  assert seen["ours"] == seen["native"]
  assert seen["ours"]["experimental_should_init"] is chief


def test_the_coordinators_order_deep_copy_then_configure_and_copies_keep_it():
  seen = {}
  for impl in ("ours", "native"):
    copied = copy.deepcopy(_strategy(impl, "central_storage", "v1"))
    _configure(copied, CLUSTER, "worker", 1)
    again = copy.deepcopy(copied)
    seen[impl] = (_observe(copied), _observe(again))
  assert seen["ours"] == seen["native"]
  assert seen["ours"][1]["worker_devices"] == [
      "/job:worker/replica:0/task:1/device:CPU:0"]


def test_configuring_again_moves_to_the_new_task_and_no_cluster_keeps_it():
  seen = {}
  for impl in ("ours", "native"):
    strategy = _strategy(impl, "central_storage", "v1")
    _configure(strategy, CLUSTER, "chief", 0)
    _configure(strategy, CLUSTER, "worker", 1)
    moved = _observe(strategy)
    _configure(strategy, None, None, None)
    seen[impl] = (moved, _observe(strategy))
  assert seen["ours"] == seen["native"]
  assert seen["ours"][0] == seen["ours"][1]
  assert seen["ours"][1]["should_checkpoint"] is False


@pytest.mark.parametrize("kind", ["one_device", "central_storage"])
@pytest.mark.parametrize("arguments", [
    (None, None, None), ({}, None, None), (None, "worker", 1),
    (tf.train.ClusterSpec({}), "worker", 0)], ids=str)
def test_no_cluster_changes_only_the_session_config_as_native(kind, arguments):
  seen = _configured(kind, "v1", *arguments)
  assert seen["ours"] == seen["native"]
  assert seen["ours"][0] == _observe(_strategy("ours", kind, "v1"))


# -- what native refuses ------------------------------------------------------

def _devices_given(impl):
  return strategies.strategy(impl, "central_storage", 1, facade="v1")


# Each: the arguments, the value the error names, and its fix.
REFUSED = {
    "no-ps-chief": (NO_PS, "chief", 0, "without a 'ps' job: {'chief'",
                    'add e.g. "ps"'),
    "no-ps-worker": (NO_PS, "worker", 0, "without a 'ps' job: {'chief'",
                     'add e.g. "ps"'),
    "no-task": (CLUSTER, None, None, "task type None and task_id None",
                "Pass e.g. task_type='worker', task_id=0"),
    "no-task-id": (CLUSTER, "worker", None, "task_id None",
                   "Pass e.g. task_type"),
    "unknown-type": (CLUSTER, "trainer", 0, "task type 'trainer'",
                     "Set the task's type to the job"),
    "type-not-in-cluster": ({"worker": ["h:1"], "ps": ["h:2"]}, "chief", 0,
                            "no 'chief' job", "Add the job to the cluster"),
    "id-out-of-range": (CLUSTER, "worker", 5, "index 5 of job 'worker'",
                        r"Use an index in \[0, 1\]"),
    "id-a-string": (CLUSTER, "worker", "1", "got '1' of type str",
                    "Pass this task's index"),
    "spec-not-a-cluster": (5, "worker", 0, "got 5 of type int",
                           "Pass e.g."),
}


@pytest.mark.parametrize("facade", strategies.FACADES)
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_arguments_raise_natives_class_and_leave_ours_unchanged(
    case, facade):
  cluster, task_type, task_id, value, fix = REFUSED[case]
  native = _strategy("native", "central_storage", facade)
  with pytest.raises(Exception) as native_error:
    _configure(native, cluster, task_type, task_id)
  ours = _strategy("ours", "central_storage", facade)
  before = _observe(ours)
  config = V1.ConfigProto(allow_soft_placement=True)
  with pytest.raises(type(native_error.value),
                     match=f"{value}.*{fix}") as ours_error:
    _configure(ours, cluster, task_type, task_id, session_config=config)
  assert isinstance(ours_error.value, Error)
  # Native has moved some of its devices to the task by then; ours is as
  # it was, and the session config untouched.
  assert _observe(ours) == before
  assert config == V1.ConfigProto(allow_soft_placement=True)


@pytest.mark.parametrize("cluster", [CLUSTER, NO_PS], ids=["ps", "no_ps"])
def test_a_strategy_made_with_compute_devices_is_refused_as_native(cluster):
  with pytest.raises(Exception) as native_error:
    _configure(_devices_given("native"), cluster, "worker", 0)
  ours = _devices_given("ours")
  with pytest.raises(type(native_error.value),
                     match=r"made with compute_devices=\[.*Make it without "
                     r"compute_devices \(CentralStorageStrategyV1\(\)\)"
                     ) as ours_error:
    _configure(ours, cluster, "worker", 0)
  assert isinstance(ours_error.value, Error)
  assert ours.extended.experimental_between_graph is True  # CentralStorage's
  assert ours.extended.should_checkpoint is True



def test_a_session_config_that_is_not_one_raises_natives_class_first():
  native = _strategy("native", "central_storage", "v1")
  with pytest.raises(Exception) as native_error:
    _configure(native, CLUSTER, "worker", 1, session_config="allow: true")
  ours = _strategy("ours", "central_storage", "v1")
  with pytest.raises(type(native_error.value),
                     match=r"got 'allow: true' of type str\. Pass "
                     r"tf\.compat\.v1\.ConfigProto\(\)") as ours_error:
    _configure(ours, CLUSTER, "worker", 1, session_config="allow: true")
  assert isinstance(ours_error.value, Error)
  assert isinstance(ours_error.value, TypeError)  # what update_config_proto says
  assert ours.extended.experimental_should_init is True  # not configured
