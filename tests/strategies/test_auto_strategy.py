"""``compat_distribute.v2.experimental.auto_strategy``: TensorFlow 2.23's
choice of strategy, with ours where that choice is ``OneDeviceStrategy``.

* The choice rules (``compat_distribute/strategies/auto.py``), on machines
  described by hand: TPUs, one or several GPUs, CPUs, ``TF_CONFIG`` and
  ``TPU_NAME``, and which choices give way to the next when they fail.
* On this machine, in fresh processes: ours against the documented answer
  on every TensorFlow (tests named ``..._documented_rules``), and against
  TensorFlow's own ``auto_strategy`` where it has one (tests named
  ``..._matches_tensorflows``, which run it; they skip, saying so, on a
  TensorFlow without it: everything before the 2.23 nightly), for the
  environments a CPU machine can show (``TF_CONFIG`` in its forms,
  ``TPU_NAME=local``, a multi-worker cluster of two processes on
  127.0.0.1, and that cluster asked for after the runtime started).
* ``install()`` and the runner: TensorFlow's name is ours where TensorFlow
  has one, and no name is added where it has none.
"""
import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import compat_distribute
from compat_distribute import v2
from compat_distribute.cluster.local import free_ports
from compat_distribute.strategies import auto
import support

pytestmark = pytest.mark.parity

install_lib = importlib.import_module("compat_distribute.install")
TESTS = support.TESTS
PROBE = TESTS / "fixtures" / "auto_strategy_probe.py"
NATIVE = getattr(tf.distribute.experimental, "auto_strategy", None)
needs_native = pytest.mark.skipif(
    NATIVE is None, reason=f"TensorFlow {tf.__version__} has no "
    "tf.distribute.experimental.auto_strategy (the 2.23 nightly has)")
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


# -- the rules, on machines described by hand ----------------------------------


class Machine:
  """A machine as ``auto.choices`` reads it; records what was read."""

  def __init__(self, env=None, tpus=0, gpus=0, logical_gpus=None, cpus=1,
               initialized_tpus=None):
    self.env = env or {}
    self.tpus, self.gpus, self.cpus = tpus, gpus, cpus
    self.logical_gpus = gpus if logical_gpus is None else logical_gpus
    self.initialized = initialized_tpus or {}
    self.read = []

  def environ(self, name):
    return self.env.get(name, "")

  def visible_devices(self, device_type):
    count = {"TPU": self.tpus, "GPU": self.gpus}[device_type]
    return [f"physical {device_type}:{i}" for i in range(count)]

  def logical_devices(self, device_type):
    self.read.append(f"logical {device_type}")
    count = {"GPU": self.logical_gpus, "CPU": self.cpus}[device_type]
    return [f"/job:localhost/replica:0/task:0/device:{device_type}:{i}"
            for i in range(count)]

  def initialized_tpu_systems(self):
    return dict(self.initialized)


def tf_config(task_type="worker", workers=2, chiefs=0, ps=0, **extra):
  cluster = {"worker": [f"127.0.0.1:{2000 + i}" for i in range(workers)]}
  if chiefs:
    cluster["chief"] = [f"127.0.0.1:{3000 + i}" for i in range(chiefs)]
  if ps:
    cluster["ps"] = [f"127.0.0.1:{4000 + i}" for i in range(ps)]
  return json.dumps({"cluster": cluster,
                     "task": {"type": task_type, "index": 0}, **extra})


C = auto.Choice
CPU_ONE_DEVICE = C(auto.ONE_DEVICE, device=CPU0)
GPU_ONE_DEVICE = C(auto.ONE_DEVICE,
                   device="/job:localhost/replica:0/task:0/device:GPU:0")

RULES = {
    # name: (machine, the choices in order)
    "cpus": (Machine(cpus=4), [CPU_ONE_DEVICE]),
    "no_logical_cpu": (Machine(cpus=0), [C(auto.ONE_DEVICE,
                                           device="/device:CPU:0")]),
    "one_gpu": (Machine(gpus=1), [GPU_ONE_DEVICE]),
    "several_gpus": (Machine(gpus=2), [C(auto.MIRRORED)]),
    "one_gpu_split_in_two": (Machine(gpus=1, logical_gpus=2),
                             [C(auto.MIRRORED)]),
    "gpu_visible_none_logical": (Machine(gpus=1, logical_gpus=0),
                                 [CPU_ONE_DEVICE]),
    "local_tpu": (Machine(tpus=8, gpus=2), [
        C(auto.TPU, local_tpu=True, initialize_tpu=True), C(auto.MIRRORED)]),
    "local_tpu_named_local": (Machine(tpus=1, env={"TPU_NAME": "Local"}), [
        C(auto.TPU, local_tpu=True, initialize_tpu=True), CPU_ONE_DEVICE]),
    "named_tpu": (Machine(env={"TPU_NAME": "my-tpu"}), [
        C(auto.TPU, local_tpu=False, initialize_tpu=True), CPU_ONE_DEVICE]),
    "visible_and_named_tpu": (Machine(tpus=1, env={"TPU_NAME": "my-tpu"}), [
        C(auto.TPU, local_tpu=False, initialize_tpu=True), CPU_ONE_DEVICE]),
    "tpu_name_local_no_tpu": (Machine(env={"TPU_NAME": "LOCAL"}),
                              [CPU_ONE_DEVICE]),
    "initialized_tpu": (Machine(initialized_tpus={"t": 1}), [
        C(auto.TPU, local_tpu=False, initialize_tpu=False), CPU_ONE_DEVICE]),
    "two_workers": (Machine(env={"TF_CONFIG": tf_config()}, gpus=2),
                    [C(auto.MULTI_WORKER), C(auto.MIRRORED)]),
    "chief_and_worker": (
        Machine(env={"TF_CONFIG": tf_config("chief", workers=1, chiefs=1)}),
        [C(auto.MULTI_WORKER), CPU_ONE_DEVICE]),
    "two_workers_and_a_tpu": (
        Machine(env={"TF_CONFIG": tf_config(), "TPU_NAME": "my-tpu"}),
        [C(auto.TPU, initialize_tpu=True), CPU_ONE_DEVICE]),
    "two_workers_tpu_local": (
        Machine(env={"TF_CONFIG": tf_config(), "TPU_NAME": "local"}),
        [C(auto.MULTI_WORKER), CPU_ONE_DEVICE]),
    "one_worker": (Machine(env={"TF_CONFIG": tf_config(workers=1)}),
                   [CPU_ONE_DEVICE]),
    "parameter_servers": (Machine(env={"TF_CONFIG": tf_config(ps=1)}),
                          [CPU_ONE_DEVICE]),
    "evaluator": (Machine(env={"TF_CONFIG": tf_config("evaluator")}),
                  [CPU_ONE_DEVICE]),
    "ps_task": (Machine(env={"TF_CONFIG": tf_config("ps")}),
                [CPU_ONE_DEVICE]),
    "no_task": (Machine(env={"TF_CONFIG": json.dumps(
        {"cluster": {"worker": ["a:1", "b:1"]}})}), [CPU_ONE_DEVICE]),
    "workers_not_a_list": (Machine(env={"TF_CONFIG": json.dumps(
        {"cluster": {"worker": "a:1,b:1", "chief": ["c:1"]},
         "task": {"type": "chief", "index": 0}})}), [CPU_ONE_DEVICE]),
    "not_json": (Machine(env={"TF_CONFIG": "{cluster"}), [CPU_ONE_DEVICE]),
    "not_an_object": (Machine(env={"TF_CONFIG": "[1, 2]"}), [CPU_ONE_DEVICE]),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_choices_follow_the_documented_rules(name):
  machine, expected = RULES[name]
  assert list(auto.choices(machine)) == expected


def test_devices_are_listed_only_after_the_cluster_and_tpu_choices():
  # Listing logical devices starts TensorFlow's runtime, after which a
  # multi-worker strategy can no longer be configured.
  machine = Machine(env={"TF_CONFIG": tf_config()})
  choices = auto.choices(machine)
  assert next(choices) == C(auto.MULTI_WORKER)
  assert machine.read == []
  assert next(choices) == CPU_ONE_DEVICE
  assert machine.read == ["logical CPU"]


def _maker_failing(failures):
  """A maker that raises ``failures[kind]`` for those kinds and otherwise
  returns the choice itself."""
  def maker(choice):
    if choice.kind in failures:
      raise failures[choice.kind]
    return choice
  return maker


@pytest.mark.parametrize("error", [ValueError("v"), TypeError("t"),
                                   KeyError("k")])
def test_a_failing_multi_worker_choice_gives_way(error):
  machine = Machine(env={"TF_CONFIG": tf_config()}, gpus=1)
  chosen = auto.choose(machine, _maker_failing({auto.MULTI_WORKER: error}))
  assert chosen == GPU_ONE_DEVICE


def test_other_multi_worker_errors_reach_the_caller():
  machine = Machine(env={"TF_CONFIG": tf_config()})
  error = RuntimeError("Collective ops must be configured at program startup")
  with pytest.raises(RuntimeError, match="program startup"):
    auto.choose(machine, _maker_failing({auto.MULTI_WORKER: error}))


@pytest.mark.parametrize("error", [
    ValueError("v"), RuntimeError("r"), ImportError("i"),
    tf.errors.NotFoundError(None, None, "no TPU devices")])
def test_a_failing_tpu_choice_gives_way_with_a_warning(error, caplog):
  machine = Machine(env={"TPU_NAME": "my-tpu"}, gpus=2)
  with caplog.at_level("WARNING", logger="compat_distribute"):
    chosen = auto.choose(machine, _maker_failing({auto.TPU: error}))
  assert chosen == C(auto.MIRRORED)
  assert [r.getMessage() for r in caplog.records] == [
      f"auto_strategy: no TPU strategy ({type(error).__name__}: {error}); "
      "choosing among the GPUs and CPUs instead."]


def test_other_tpu_errors_reach_the_caller():
  machine = Machine(tpus=1)
  with pytest.raises(KeyError):
    auto.choose(machine, _maker_failing({auto.TPU: KeyError("k")}))


# -- this machine, in this process --------------------------------------------


def _describe(strategy):
  return (type(strategy).__name__, list(strategy.extended.worker_devices),
          strategy.num_replicas_in_sync)


def test_this_machine_gets_our_one_device_strategy_on_the_first_cpu():
  strategy = v2.experimental.auto_strategy()
  assert type(strategy) is v2.OneDeviceStrategy
  assert isinstance(strategy, tf.distribute.OneDeviceStrategy)
  assert _describe(strategy) == ("OneDeviceStrategy", [CPU0], 1)
  assert repr(strategy) == f"OneDeviceStrategy(device='{CPU0}')"
  with strategy.scope():
    weight = tf.Variable(2.0)
  assert weight.device == CPU0
  result = strategy.run(lambda: weight * 3.0)
  assert float(strategy.reduce("SUM", result, axis=None)) == 6.0


@needs_native
def test_this_machine_choice_matches_tensorflows():
  native = NATIVE()
  assert type(native).__module__.startswith("tensorflow.")
  assert _describe(native) == _describe(v2.experimental.auto_strategy())


def test_takes_no_arguments():
  with pytest.raises(TypeError):
    v2.experimental.auto_strategy("/cpu:0")  # pylint: disable=too-many-function-args


@needs_native
def test_takes_no_arguments_as_tensorflows():
  with pytest.raises(TypeError):
    NATIVE("/cpu:0")  # pylint: disable=too-many-function-args


# -- this machine, in fresh processes: ours against TensorFlow's ----------------


def _run_probe(*args):
  result = subprocess.run(
      [sys.executable, str(PROBE), *map(str, args)], cwd=TESTS,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True,
      text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-4000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def _one_device(ours):
  return {"class": "OneDeviceStrategy", "ours": ours, "devices": [CPU0],
          "replicas": 1}


# Environments a CPU-only machine can show, run in one process in this
# order; the last asks for two workers after the runtime has started.
CASES = [
    ("nothing_set", {}, "one_device"),
    ("tf_config_not_json", {"TF_CONFIG": "{cluster"}, "one_device"),
    ("tf_config_not_an_object", {"TF_CONFIG": "[1]"}, "one_device"),
    ("one_worker", {"TF_CONFIG": tf_config(workers=1)}, "one_device"),
    ("parameter_servers", {"TF_CONFIG": tf_config(ps=1)}, "one_device"),
    ("evaluator_task", {"TF_CONFIG": tf_config("evaluator")}, "one_device"),
    ("tpu_name_local", {"TPU_NAME": "LOCAL"}, "one_device"),
    ("two_workers_after_the_runtime_started",
     {"TF_CONFIG": tf_config()}, "RuntimeError"),
]


@pytest.fixture(scope="module")
def cases_report():
  return _run_probe("cases", 4, json.dumps(
      [{"name": name, "env": env} for name, env, _ in CASES]))


@pytest.mark.subprocess
@pytest.mark.parametrize("name,expected", [(c[0], c[2]) for c in CASES])
def test_choice_on_this_machine_follows_the_documented_rules(
    cases_report, name, expected):
  report = cases_report["report"][name]
  assert set(report) == ({"ours", "native"} if cases_report["native"]
                         else {"ours"})
  assert cases_report["native"] == (NATIVE is not None)
  if expected == "one_device":
    assert report["ours"] == _one_device(ours=True)
  else:
    assert report["ours"]["error"] == expected
    assert "program startup" in report["ours"]["message"]


@needs_native
@pytest.mark.subprocess
@pytest.mark.parametrize("name,expected", [(c[0], c[2]) for c in CASES])
def test_choice_on_this_machine_matches_tensorflows(cases_report, name,
                                                     expected):
  report = cases_report["report"][name]
  ours, native = report["ours"], report["native"]
  if expected == "one_device":
    assert native == _one_device(ours=False)
    assert {**ours, "ours": False} == native
  else:
    assert native["error"] == ours["error"] == expected


def _cluster(impl):
  """Runs a two-worker cluster on 127.0.0.1, each task calling ``impl``'s
  auto_strategy first thing; returns each task's report."""
  workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
  tasks = []
  for index in range(2):
    config = json.dumps({"cluster": {"worker": workers},
                         "task": {"type": "worker", "index": index}})
    tasks.append(subprocess.Popen(
        [sys.executable, str(PROBE), "worker", impl, config], cwd=TESTS,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
  reports = []
  try:
    for task in tasks:
      out, err = task.communicate(timeout=180)
      assert task.returncode == 0, err[-4000:]
      reports.append(json.loads(out.strip().splitlines()[-1])["report"])
  finally:
    for task in tasks:
      if task.poll() is None:
        task.kill()
        task.communicate()
  return reports


def _multi_worker(index, ours):
  return {"class": "CollectiveAllReduceStrategy", "ours": ours,
          "devices": [f"/job:worker/replica:0/task:{index}/device:CPU:0"],
          "replicas": 2}


@pytest.mark.cluster
@pytest.mark.subprocess
def test_two_workers_get_tensorflows_multi_worker_strategy():
  # compat_distribute implements no multi-worker strategy: TensorFlow's.
  assert _cluster("ours") == [_multi_worker(0, False),
                              _multi_worker(1, False)]


@needs_native
@pytest.mark.cluster
@pytest.mark.subprocess
def test_two_workers_choice_matches_tensorflows():
  assert _cluster("native") == [_multi_worker(0, False),
                                _multi_worker(1, False)]


# -- install() and the runner --------------------------------------------------


def test_install_replaces_tensorflows_auto_strategy_where_it_has_one():
  names = ("tf.distribute.experimental.auto_strategy",
           "tf.compat.v2.distribute.experimental.auto_strategy")
  modules = (tf.distribute.experimental, tf.compat.v2.distribute.experimental)
  with compat_distribute.install():
    installed = install_lib.installed_names()
    held = [getattr(m, "auto_strategy", None) for m in modules]
  after = [getattr(m, "auto_strategy", None) for m in modules]
  if NATIVE is not None:
    assert held == [v2.experimental.auto_strategy] * 2
    assert {n: installed[n] for n in names} == {
        n: v2.experimental.auto_strategy for n in names}
    assert after == [NATIVE] * 2
  else:  # replaced, never added
    assert held == after == [None, None]
    assert not set(names) & set(installed)


RUNNER_SCRIPT = textwrap.dedent("""
    import json
    import tensorflow as tf
    has = hasattr(tf.distribute.experimental, "auto_strategy")
    strategy = tf.distribute.experimental.auto_strategy() if has else None
    print(json.dumps([has, type(strategy).__module__ if has else None]))
""")


@pytest.mark.subprocess
def test_runner_gives_ours_where_tensorflow_has_one(tmp_path):
  script = tmp_path / "uses_auto_strategy.py"
  script.write_text(RUNNER_SCRIPT)
  result = subprocess.run(
      [sys.executable, "-m", "compat_distribute", "run", str(script)],
      cwd=TESTS.parent, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
      capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-4000:]
  has, module = json.loads(result.stdout.strip().splitlines()[-1])
  assert has == (NATIVE is not None)
  assert module == (
      "compat_distribute.strategies.one_device" if has else None)
