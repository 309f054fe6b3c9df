"""``demo --cluster WxP --api v2 --kill_worker_after N``: a worker killed mid-run,
started again, and the run resumed from its checkpoint.

The demo's Keras program (``demo/cluster_v2_restart_chief.py``) trains
once on this machine without interruption (two replicas on two logical
CPUs: the reference), then on a loopback cluster with its chief under
``python -m compat_distribute run --max-restarts 1``.  After epoch
``hold_after`` the demo SIGKILLs the last worker's ``serve`` and, once the
chief's supervisor says the program ended on the lost task, starts it
again (as a cluster manager restarts a pod); the supervisor waits for it,
starts the program again, and the program resumes from its last
checkpoint.  The demo prints the supervisor's lines and the largest
difference between the resumed run's final weights and the reference's.

>>> max_difference([[1.0, 2.0]], [[1.0, 2.5]])
0.5
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import IO, Optional, Sequence

import numpy as np

from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import local_served

CHIEF = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "cluster_v2_restart_chief.py")
TIMEOUT = 600.0


def max_difference(ours: Sequence[object],
                   reference: Sequence[object]) -> float:
  """The largest absolute difference between two lists of weights."""
  return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
             for a, b in zip(ours, reference))


def check_flags(kill_after: Optional[int], cluster: Optional[str],
                api: Optional[str], epochs: int) -> None:
  """Raises ValueError if ``--kill_worker_after`` does not fit the others.

  >>> check_flags(1, "2x1", "v1", 3)
  Traceback (most recent call last):
  ...
  ValueError: --kill_worker_after needs --cluster WxP --api v2 (it kills a worker of the TF2 cluster program)
  """
  if not kill_after:
    return
  if not (cluster and api == "v2"):
    raise ValueError("--kill_worker_after needs --cluster WxP --api v2 (it "
                     "kills a worker of the TF2 cluster program)")
  if kill_after >= epochs:
    raise ValueError(
        f"--kill_worker_after {kill_after} must be below --epochs {epochs}: "
        "the worker is killed after that epoch and the run resumes for the "
        "rest")


def _result(result: local_cluster.TaskResult, what: str) -> dict:
  if result.returncode != 0 or result.timed_out:
    raise RuntimeError(
        f"{what} failed (exit {result.returncode}"
        f"{', timed out' if result.timed_out else ''}):\n"
        f"{result.stderr[-4000:]}")
  return json.loads(result.stdout.strip().splitlines()[-1])


def _reference(args: list[str], folder: str) -> dict:
  logs: list[IO[str]] = []
  try:
    process = local_cluster.start_process(
        [sys.executable, "-m", "compat_distribute", "run", CHIEF, *args,
         "--checkpoint_dir", os.path.join(folder, "reference")],
        {"TF_CONFIG": ""}, logs)
    process.task = "the uninterrupted run"  # type: ignore[attr-defined]
    return _result(local_served.collect(process, TIMEOUT),
                   "the uninterrupted run")
  finally:
    for log in logs:
      log.close()


def run_kill_worker(workers: int, ps: int, epochs: int, seed: int,
                    batch_size: int, samples: int,
                    hold_after: int = 1) -> float:
  """Runs the demo (see the module docstring); returns the largest weight
  difference from the uninterrupted run."""
  args = ["--epochs", str(epochs), "--seed", str(seed), "--batch_size",
          str(batch_size), "--samples", str(samples), "--hold_after",
          str(hold_after)]
  with tempfile.TemporaryDirectory(prefix="compat_distribute-demo-") as tmp:
    print("== the program uninterrupted, on this machine (2 replicas) ==",
          flush=True)
    reference = _reference(args, tmp)
    cluster = local_served.ServedCluster(num_workers=workers, num_ps=ps)
    victim = ("worker", workers - 1)
    checkpoints = os.path.join(tmp, "checkpoints")
    print(f"== the program on {workers} workers x {ps} ps (loopback), the "
          "chief under 'run --max-restarts 1'; /job:worker/task:"
          f"{victim[1]} killed after epoch {hold_after} and started again ==",
          flush=True)
    with cluster:
      chief = cluster.start_chief(
          CHIEF, [*args, "--checkpoint_dir", checkpoints, "--hold_dir", tmp],
          run_options=["--max-restarts", "1", "--checkpoint-dir",
                       checkpoints])
      local_served.wait_for_file(os.path.join(tmp, "hold"), chief, TIMEOUT)
      cluster.kill_server(*victim)
      print(f"killed /job:worker/task:{victim[1]} (SIGKILL) after epoch "
            f"{hold_after}", flush=True)
      open(os.path.join(tmp, "release"), "w").close()
      local_served.wait_for_text(chief, "restart 1 of 1: waiting up to",
                                 TIMEOUT)
      cluster.start_server(*victim)
      print(f"started /job:worker/task:{victim[1]} again", flush=True)
      result = cluster.collect(chief, TIMEOUT)
      cluster.wait_servers(timeout=60)
    for line in result.stderr.splitlines():
      if line.startswith(("compat_distribute run:", "epoch ")):
        print(f"  {line}")
    resumed = _result(result, "the chief")
  difference = max_difference(resumed["weights"], reference["weights"])
  same = all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(
      resumed["weights"], reference["weights"]))
  print(f"resumed at epoch {resumed['start_epoch'] + 1} of {epochs}; final "
        f"weights vs the uninterrupted run: largest difference "
        f"{difference:.1e} -> {'the same' if same else 'DIFFERENT'} "
        "(rtol 1e-5)", flush=True)
  if not same:
    raise RuntimeError("the resumed run did not end at the uninterrupted "
                       "run's weights")
  return difference
