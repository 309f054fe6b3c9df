"""``demo --cluster Wx0 --api v2 --multi_worker``: Keras on several machines
the way TensorFlow spells it, ``MultiWorkerMirroredStrategy``, ours beside
TensorFlow's own.

The demo's Keras program (``demo/multi_worker_program.py``, copied to
``train.py`` in a temporary folder with the data; the same script on every
task) runs twice on a loopback cluster of W workers and no ps:

* ours: every task under ``python -m compat_distribute run`` -- worker 0
  runs the program, the others serve it; ``tf.keras`` is Keras 3 where
  TensorFlow has it (2.16 on), whose ``fit`` fails on TensorFlow's strategy;
* native: every task under plain ``python`` with TensorFlow's own strategy
  and Keras 2 (tf-keras, ``TF_USE_LEGACY_KERAS=1``, where Keras 3 is
  TensorFlow's); without tf-keras beside Keras 3 there is no native run
  that trains, and the demo says so.

Both start from the same initial weights on the same data; the demo prints
the runner's lines, both results side by side, and the largest weight
difference.

>>> check_flags(True, "2x0", "v2", None)
2
>>> check_flags(True, "2x1", "v2", None)
Traceback (most recent call last):
...
ValueError: --multi_worker needs --cluster Wx0 (W workers, no parameter servers: MultiWorkerMirroredStrategy has none), got --cluster 2x1
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile
from typing import Callable, Optional

import numpy as np

from compat_distribute.cluster import local_served
from compat_distribute.demo import cluster_restart
from compat_distribute.demo import common

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "multi_worker_program.py")
TIMEOUT = 600.0
RUNNER_PREFIX = "compat_distribute run: "


def check_flags(multi_worker: bool, cluster: Optional[str],
                api: Optional[str], kill_after: Optional[int]
                ) -> Optional[int]:
  """The number of workers for ``--multi_worker`` (None without it).

  Raises:
    ValueError: the flags do not fit together (the message names the fix).
  """
  shape = (cluster or "").lower()
  if not multi_worker:
    if shape.endswith("x0"):
      raise ValueError(
          f"--cluster {cluster} has no parameter servers: that is the "
          "MultiWorkerMirroredStrategy demo, --cluster Wx0 --api v2 "
          "--multi_worker")
    return None
  workers, _, ps = shape.partition("x")
  if not (workers.isdigit() and int(workers) >= 1 and ps == "0"):
    raise ValueError(
        "--multi_worker needs --cluster Wx0 (W workers, no parameter "
        "servers: MultiWorkerMirroredStrategy has none), got --cluster "
        f"{cluster}")
  if api != "v2":
    raise ValueError("--multi_worker needs --api v2 (its program is Keras "
                     "fit)")
  if kill_after:
    raise ValueError("--kill_worker_after does not apply to --multi_worker")
  return int(workers)


def native_keras_2() -> Optional[dict[str, str]]:
  """The environment that gives TensorFlow's strategy Keras 2: nothing to
  add where the installed Keras is Keras 2, ``TF_USE_LEGACY_KERAS=1``
  where it is Keras 3 and tf-keras is installed too; None where neither."""
  try:
    keras_3 = importlib.metadata.version("keras").startswith("3.")
  except importlib.metadata.PackageNotFoundError:
    keras_3 = False
  if not keras_3:
    return {}
  if importlib.util.find_spec("tf_keras") is None:
    return None
  return {"TF_USE_LEGACY_KERAS": "1"}


def _run_on_cluster(workers: int, command: list[str], env: dict[str, str],
                    label: str, folder: str) -> tuple[dict, str]:
  """Runs ``command`` in ``folder`` on every task of a W-worker loopback
  cluster; returns worker 0's JSON result and its stderr."""
  # compat_distribute as this process has it, also from a checkout.
  root = os.path.dirname(os.path.dirname(os.path.dirname(PROGRAM)))
  path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH"))
                         if p)
  env = {**env, "PYTHONPATH": path}
  with local_served.MultiWorkerCluster(workers, env=env) as cluster:
    for task in cluster.tasks:
      cluster.start_task(*task, command, cwd=folder)
    results = cluster.collect(TIMEOUT)
  for task, result in sorted(results.items()):
    if result.returncode != 0 or result.timed_out:
      raise RuntimeError(
          f"{label}: /job:{task[0]}/task:{task[1]} failed (exit "
          f"{result.returncode}{', timed out' if result.timed_out else ''})"
          f":\n{result.stderr[-3000:]}")
  driver = results[("worker", 0)]
  return driver.json(), driver.stderr


def _said(stderr: str) -> None:
  """Prints the runner's lines and the program's epoch lines."""
  for line in stderr.splitlines():
    if line.startswith((RUNNER_PREFIX, "epoch ")):
      print(line, flush=True)


def run_multi_worker(workers: int, epochs: int, seed: int, batch_size: int,
                     samples: int) -> tuple[common.Result,
                                            Optional[common.Result], dict]:
  """Ours (Keras 3 where TensorFlow has it) and TensorFlow's own strategy
  (Keras 2) on W loopback workers; returns the two ``common.Result``s (the
  native one None when it cannot run here) and what the report adds."""
  native_env = native_keras_2()
  # Keras 3 for ours wherever it is installed, whatever the environment.
  ours_env = {} if native_env == {} else {"TF_USE_LEGACY_KERAS": "0"}
  print(f"cluster: {workers} workers, no ps, on 127.0.0.1 (TensorFlow "
        "servers, gRPC, no authentication, listening on all interfaces; "
        "they close when each run ends)", flush=True)
  with tempfile.TemporaryDirectory(prefix="compat_distribute-demo-") as tmp:
    shutil.copyfile(PROGRAM, os.path.join(tmp, "train.py"))
    x, y = common.make_data(seed, samples)
    weights = common.initial_weights(seed)
    np.savez(os.path.join(tmp, "data.npz"), x=x, y=y,
             learning_rate=common.LEARNING_RATE,
             **{f"w{i}": w for i, w in enumerate(weights)})
    args = ["train.py", "data.npz", str(epochs), str(batch_size)]
    out = {}
    print("\n== compat_distribute: tf.distribute.MultiWorkerMirroredStrategy"
          " under python -m compat_distribute run, every task ==", flush=True)
    # Where tf.keras is Keras 2 only (TensorFlow before 2.16), the runner
    # leaves TensorFlow's strategy unless asked: asked here.
    run = [sys.executable, "-m", "compat_distribute", "run",
           *(["--multi-worker", "ours"] if native_env == {} else []), *args]
    out["ours"], said = _run_on_cluster(workers, run, ours_env,
                                        "compat_distribute", tmp)
    _said(said)
    if native_env is not None:
      print("\n== native TF: tf.distribute.MultiWorkerMirroredStrategy with "
            "tf-keras (Keras 2), plain python, every task ==", flush=True)
      out["native"], said = _run_on_cluster(
          workers, [sys.executable, *args], native_env, "native TF", tmp)
      _said(said)
  results = {
      impl: common.Result(
          f"{label} (Keras {out[impl]['keras']})", out[impl]["losses"],
          out[impl]["ms_per_step"], out[impl]["accuracy"])
      for impl, label in (("ours", "compat_distribute"), ("native", "native TF"))
      if impl in out}
  about = {"cluster": [workers, 0], "api": "v2", "multi_worker": True,
           "replicas": out["ours"]["replicas"],
           "keras": {impl: out[impl]["keras"] for impl in out}}
  if "native" in out:
    about["largest_weight_difference"] = cluster_restart.max_difference(
        out["ours"]["weights"], out["native"]["weights"])
  return results["ours"], results.get("native"), about


def main(workers: int, epochs: int, seed: int, batch_size: int,
         samples: int,
         report: Callable[[str, common.Result, common.Result, dict], int]
         ) -> int:
  """The demo: the runs, then ``report`` (the demo's table, the largest
  loss difference, ``--json_out``) and the largest weight difference; with
  no native run, ours alone and why."""
  print(f"compat_distribute demo: {samples} synthetic examples, "
        f"{common.CLASSES} classes, global batch {batch_size}, {epochs} "
        f"epoch{'s' if epochs != 1 else ''}, API v2 (Keras fit), seed {seed}, "
        f"cluster {workers}x0 on 127.0.0.1")
  ours, native, about = run_multi_worker(workers, epochs, seed, batch_size,
                                         samples)
  if native is None:
    print(f"\n{ours.label} on {about['replicas']} replicas: losses "
          f"{', '.join(f'{v:.6f}' for v in ours.losses)}, final accuracy "
          f"{ours.accuracy:.4f}\nnative TF: not run -- tf.keras is Keras 3 "
          "here and tf-keras is not installed; TensorFlow's own strategy "
          "fails in Keras 3 fit (pip install tf-keras to see it with Keras "
          "2)", flush=True)
    return 0
  report(f"tf.distribute.MultiWorkerMirroredStrategy, {workers} workers "
         f"(loopback): {ours.label} vs {native.label}, same data and initial "
         "weights", ours, native, about)
  print(f"largest weight difference: "
        f"{about['largest_weight_difference']:.1e}", flush=True)
  return 0
