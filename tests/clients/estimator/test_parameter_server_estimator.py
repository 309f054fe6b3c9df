"""TensorFlow Estimator on a loopback parameter-server cluster, under
TensorFlow's v1 ParameterServerStrategy and under ours, end to end -- and
under the v1 CentralStorageStrategy, which the distribute coordinator's
``configure`` turns into the same parameter-server training.

Estimator ships with TensorFlow 2.12-2.15 (``tensorflow_estimator``); there
both runs use the TensorFlow under test.  From 2.16 on, Estimator runs on
the pieces ``compat_distribute.estimator`` supplies: ours runs under
``python -m compat_distribute run``, and the native run is the same program
on TensorFlow 2.15 (the oracle interpreter, ``ESTIMATOR_ORACLE_PYTHON``; see
estimator_support.py).  Each run starts its tasks as subprocesses of
tests/fixtures/estimator_ps.py on free 127.0.0.1 ports, with bounded
timeouts; every process started is killed in ``finally``.

Between-graph PS training with two trainers is asynchronous: which trainer's
update lands first, and so the final variables, would differ from run to run
(and so between native and ours).  The fixture fixes the order -- the chief
and the worker take turns through a counter on the ps, and the chief ends
only after the worker's last step -- with fixed data and initial values, so
both strategies must give the same losses, step by step, and the same final
checkpoint (every variable, Adam's slots included), exactly.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import importlib.util

import pytest

from support import estimator as estimator_support
from compat_distribute import estimator as estimator_layer
from compat_distribute.cluster import local as local_cluster
import support

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow_estimator") is None,
    reason="tensorflow-estimator is not installed (it ships with TensorFlow "
    "2.12-2.15; from 2.16: pip install tensorflow-estimator==2.15.0)")
pytestmark = [pytestmark, pytest.mark.parity, pytest.mark.subprocess, pytest.mark.cluster]

SCRIPT = str(support.FIXTURES / "estimator_ps.py")
TIMEOUT = 240.0
# Estimator is TensorFlow's own here (2.12-2.15), or supplied (2.16+).
NATIVE_ESTIMATOR = estimator_layer.has_estimator_support()


def _command(impl):
  """(argv prefix, working directory) of a task of ``impl``: ours under
  the runner; native with this interpreter where TensorFlow has Estimator,
  else with the TensorFlow 2.15 oracle."""
  if impl == "ours":
    return ([sys.executable, "-m", "compat_distribute", "run", SCRIPT],
            estimator_support.ROOT)
  if NATIVE_ESTIMATOR:
    return [sys.executable, SCRIPT], None
  return [estimator_support.oracle_python(), SCRIPT], None


def _run_tasks(impl, model_dir, cluster, tasks, strategy):
  """Starts one process per (type, index) of ``tasks`` with its TF_CONFIG;
  returns {type: (returncode, stdout, stderr)} of the ones that end (the ps
  serves until it is killed)."""
  processes = {}
  try:
    for task_type in tasks:
      if task_type == "worker":
        _wait_for_first_checkpoint(model_dir, processes["chief"])
      env = estimator_support.environment(dict(
          TF_CONFIG=local_cluster.tf_config(cluster, task_type, 0),
          COMPAT_DISTRIBUTE_CLUSTER_WAIT="120"))
      argv, cwd = _command(impl)
      processes[task_type] = subprocess.Popen(
          argv + ["--impl", impl, "--form", "tf_config", "--model_dir",
                  model_dir, "--strategy", strategy], env=env, cwd=cwd, stdout=subprocess.PIPE,
          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
          start_new_session=True)
    results = {}
    for task_type in ("chief", "worker", "evaluator"):
      try:
        out, err = processes[task_type].communicate(timeout=TIMEOUT)
      except subprocess.TimeoutExpired:
        pytest.fail(f"{impl}: the {task_type} did not end within "
                    f"{TIMEOUT:g} s")
      results[task_type] = (processes[task_type].returncode, out, err)
    return results
  finally:
    for process in processes.values():
      if process.poll() is None:
        process.kill()
      process.communicate()


def _wait_for_first_checkpoint(model_dir, chief):
  """Until the chief has initialised the variables (it saves step 0 then):
  a worker started earlier checks only every 30 s (Estimator's session
  manager), which would add half a minute to each run."""
  path = os.path.join(model_dir, "model.ckpt-0.index")
  deadline = time.monotonic() + TIMEOUT
  while not os.path.exists(path):
    if chief.poll() is not None or time.monotonic() > deadline:
      return  # the worker's own wait (or the chief's result) says why
    time.sleep(0.2)


def _final_eval_loss(model_dir):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  eval_dir = os.path.join(model_dir, "eval")
  losses = {}
  for name in sorted(os.listdir(eval_dir)):
    for event in tf.compat.v1.train.summary_iterator(
        os.path.join(eval_dir, name)):
      for value in event.summary.value:
        if value.tag == "loss":
          losses[event.step] = value.simple_value
  return losses[max(losses)], max(losses)


def _json(result, who):
  code, out, err = result
  assert code == 0, f"{who} failed (exit {code}):\n{err[-4000:]}"
  return json.loads(out.strip().splitlines()[-1])


# The strategy in RunConfig(train_distribute=...), and the module of ours
# the chief reports.  CentralStorage becomes parameter-server training when
# the coordinator configures it with the cluster (as TensorFlow's does);
# that run is the slower half, so it is left out of `tox -e quick`.
STRATEGIES = {
    "parameter_server": "compat_distribute.cluster.parameter_server",
    "central_storage": "compat_distribute.cluster.central_storage",
}


@pytest.mark.parametrize("strategy", [
    "parameter_server",
    pytest.param("central_storage", marks=[pytest.mark.slow, support.MORE])])
def test_train_and_evaluate_with_tf_config_trains_to_natives_checkpoint(
    strategy):
  """``tf.estimator.train_and_evaluate`` with chief, worker, ps and
  evaluator as separate processes: TensorFlow's distribute coordinator
  configures the strategy before each task's server exists (ours used to
  wait there for ever)."""
  outputs = {}
  with tempfile.TemporaryDirectory() as root:
    for impl in ("native", "ours"):
      ports = [f"127.0.0.1:{p}" for p in local_cluster.free_ports(4)]
      cluster = {"chief": ports[:1], "worker": ports[1:2], "ps": ports[2:3],
                 "evaluator": ports[3:]}
      model_dir = os.path.join(root, impl)
      results = _run_tasks(impl, model_dir, cluster,
                           ["ps", "chief", "evaluator", "worker"], strategy)
      chief = _json(results["chief"], f"{impl} chief")
      worker = _json(results["worker"], f"{impl} worker")
      _json(results["evaluator"], f"{impl} evaluator")
      outputs[impl] = (chief, worker, _final_eval_loss(model_dir))
  (chief, worker, evaluated), native = outputs["ours"], outputs["native"]
  assert chief["strategy"] == STRATEGIES[strategy]
  assert native[0]["checkpoint"]["global_step"] == 8
  # Exactly equal on the same TensorFlow; within rtol 1e-5 of TensorFlow
  # 2.15's where Estimator is supplied.
  close = estimator_support.assert_close
  close(chief["checkpoint"], native[0]["checkpoint"], "chief checkpoint")
  close(chief["losses"], native[0]["losses"], "chief losses")
  close(worker["losses"], native[1]["losses"], "worker losses")
  close(list(evaluated), list(native[2]), "final evaluation (loss, step)")


@pytest.mark.parametrize("strategy", [
    "parameter_server",
    pytest.param("central_storage", marks=pytest.mark.slow)])
def test_independent_worker_coordinator_in_process_matches_native(strategy):
  """The coordinator's independent-worker mode, every task a thread of one
  process: it deep-copies the strategy and calls configure before starting
  each task's server, then runs ``worker_fn`` with the copy."""
  outputs = {}
  with tempfile.TemporaryDirectory() as root:
    for impl in ("native", "ours"):
      ports = [f"127.0.0.1:{p}" for p in local_cluster.free_ports(3)]
      cluster = {"chief": ports[:1], "worker": ports[1:2], "ps": ports[2:]}
      argv, cwd = _command(impl)
      process = subprocess.Popen(
          argv + ["--impl", impl, "--form", "in_process",
                  "--model_dir", os.path.join(root, impl), "--cluster",
                  json.dumps(cluster), "--timeout", str(TIMEOUT - 20),
                  "--strategy", strategy],
          env=estimator_support.environment(), cwd=cwd,
          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
          stdin=subprocess.DEVNULL, text=True, start_new_session=True)
      try:
        out, err = process.communicate(timeout=TIMEOUT)
      except subprocess.TimeoutExpired:
        pytest.fail(f"{impl}: the in-process cluster did not end within "
                    f"{TIMEOUT:g} s")
      finally:
        if process.poll() is None:
          process.kill()
          process.communicate()
      outputs[impl] = _json((process.returncode, out, err), impl)
  assert outputs["native"]["checkpoint"]["global_step"] == 8
  estimator_support.assert_close(outputs["ours"], outputs["native"])
