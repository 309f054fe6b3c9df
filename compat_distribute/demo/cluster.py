"""``demo --cluster WxP``: the demo's v1 program on a loopback cluster;
with ``--api v2``, its Keras program under ``CentralStorageStrategy`` on a
cluster (``run_cluster_v2``).

The parent process starts ``W`` worker and ``P`` parameter-server
``tf.distribute.Server`` processes on 127.0.0.1 (``LocalCluster``), then runs
the training program once per worker with that worker's ``TF_CONFIG``,
first under TensorFlow's ``ParameterServerStrategyV1``, then under ours.
Each worker reads its own shard of the data (its ``InputContext``) and the
workers take turns through a counter on the parameter servers, so both runs
apply the same updates in the same order.  The parent prints one progress
line per task while they train, then the side-by-side table, and stops every
process it started.

Time per step is the worker's ``Session.run`` of its training step, not the
wait for its turn.

>>> progress_line("ours", {0: (1, 3, 8, 0.5), 1: (1, 2, 8, 0.7)})
'[ours] /job:worker/task:0 epoch 1 step 3/8 loss 0.5000 | /job:worker/task:1 epoch 1 step 2/8 loss 0.7000'
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import time
from typing import Any

import numpy as np

from compat_distribute.demo import common as demo_lib
from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import local_served

_PROGRESS = "progress "
# The signal that asks a stuck worker for its Python stack (none on Windows).
_STACK_SIGNAL = getattr(signal, "SIGUSR1", None)


def progress_line(label: str, progress: dict[int, tuple]) -> str:
  """One line: each worker's epoch, step and running loss."""
  parts = [f"/job:worker/task:{task} epoch {e} step {s}/{n} loss {loss:.4f}"
           for task, (e, s, n, loss) in sorted(progress.items())]
  return f"[{label}] " + " | ".join(parts)


def _read_progress(process: Any) -> Any:
  last = None
  for line in local_cluster.read_log(process.err).splitlines():
    if line.startswith(_PROGRESS):
      last = line
  return json.loads(last[len(_PROGRESS):]) if last else None


def ports_line(cluster: dict[str, list[str]]) -> str:
  """What ``demo --cluster`` says before it starts its servers: TensorFlow's
  servers listen on every interface, unauthenticated (docs/cluster.md).

  >>> ports_line({"worker": ["127.0.0.1:5001"], "ps": ["127.0.0.1:5002"]})
  'Opening TCP ports 5001, 5002 for 2 TensorFlow servers (gRPC, no authentication, listening on all interfaces); they close when the demo ends.'
  """
  ports = [a.rsplit(":", 1)[1] for job in ("worker", "ps")
           for a in cluster.get(job, [])]
  return (f"Opening TCP ports {', '.join(ports)} for {len(ports)} TensorFlow "
          "servers (gRPC, no authentication, listening on all interfaces); "
          "they close when the demo ends.")


def run_cluster(workers: int, ps: int, epochs: int, seed: int,
                batch_size: int, samples: int,
                stall_timeout: float = 180.0) -> tuple[Any, Any]:
  """Trains under native TensorFlow, then ours, on one local cluster;
  returns the two ``common.Result``s.

  A worker that fails stops the run at once (the others are stopped, its
  error is raised); so does a run in which no worker has reported a step
  for ``stall_timeout`` seconds (a worker's first step included).
  """
  results = {}
  cluster = local_cluster.LocalCluster(num_workers=workers, num_ps=ps)
  print(ports_line(cluster.cluster), flush=True)
  with cluster:
    print(f"cluster up: {cluster.cluster}", flush=True)
    for impl, label in (("native", "native TF"), ("ours", "compat_distribute")):
      print(f"\n== {label}: tf.compat.v1.distribute.experimental."
            f"ParameterServerStrategy, {workers} workers x {ps} ps ==",
            flush=True)
      processes = cluster.start_workers(
          "compat_distribute.demo.cluster",
          ["--impl", impl, "--run_id", impl, "--epochs", str(epochs),
           "--seed", str(seed), "--batch_size", str(batch_size),
           "--samples", str(samples)],
          launcher=["-m"])
      _follow(impl, processes, stall_timeout)
      outputs = [r.json() for r in _collect(cluster, label, processes,
                                            stall_timeout)]
      losses = np.mean([o["losses"] for o in outputs], axis=0).tolist()
      ms = np.median([o["ms_per_step"] for o in outputs], axis=0).tolist()
      results[impl] = demo_lib.Result(label, losses, ms,
                                      float(np.mean([o["accuracy"]
                                                     for o in outputs])))
  return results["ours"], results["native"]


def _follow(impl: str, processes: list[Any], stall_timeout: float) -> None:
  """Prints the workers' progress until they have all ended, one has failed,
  or none has moved for ``stall_timeout`` seconds."""
  last_line, last_move = "", time.monotonic()
  while any(p.poll() is None for p in processes):
    if any(p.poll() not in (None, 0) for p in processes):
      return
    progress = {i: tuple(v) for i, p in enumerate(processes)
                if (v := _read_progress(p)) is not None}
    line = progress_line(impl, progress) if progress else ""
    if line != last_line:
      print(line, flush=True)
      last_line, last_move = line, time.monotonic()
    elif time.monotonic() - last_move > stall_timeout:
      return
    time.sleep(0.5)


def _collect(cluster: Any, label: str, processes: list[Any],
             stall_timeout: float) -> list[Any]:
  """The workers' results; stops any still running and raises RuntimeError
  naming the first that failed (one that failed by itself before one that
  was stopped)."""
  stalled = (any(p.poll() is None for p in processes) and
             all(p.poll() in (None, 0) for p in processes))
  if stalled and _STACK_SIGNAL is not None:
    # Each stuck worker writes where it is to its stderr first
    # (worker_main's faulthandler).
    for process in processes:
      if process.poll() is None:  # not yet reaped: its pid is still its own
        os.kill(process.pid, _STACK_SIGNAL)
    time.sleep(1.0)
  finished = cluster.collect(processes, timeout=0.0)
  failed = sorted((r for r in finished if r.returncode != 0 or r.timed_out),
                  key=lambda r: r.timed_out)
  if failed:
    r = failed[0]
    why = (f"no worker reported a step for {stall_timeout:.0f} s; stopped"
           if r.timed_out else f"exit {r.returncode}")
    raise RuntimeError(f"{label}: {r.task} failed ({why}):\n"
                       f"{r.stderr[-3000:]}")
  return finished


def worker_main(argv: list[str]) -> None:
  """One worker's training program (run by ``run_cluster``)."""
  p = argparse.ArgumentParser()
  for name, kind in (("impl", str), ("run_id", str), ("epochs", int),
                     ("seed", int), ("batch_size", int), ("samples", int)):
    p.add_argument("--" + name, type=kind, required=True)
  args = p.parse_args(argv)
  # A worker the demo stops for making no progress first prints its stack.
  if _STACK_SIGNAL is not None:
    faulthandler.register(_STACK_SIGNAL)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  demo_lib.quiet_deprecations()
  v1 = tf.compat.v1
  v1.disable_eager_execution()
  if args.impl == "ours":
    from compat_distribute import v1 as distribute  # pylint: disable=g-import-not-at-top
  else:
    distribute = v1.distribute
  strategy = distribute.experimental.ParameterServerStrategy()
  extended = strategy.extended
  task_id = extended._task_id  # pylint: disable=protected-access
  num_workers = len(extended._cluster_spec.as_dict()["worker"])  # pylint: disable=protected-access
  x, y = demo_lib.make_data(args.seed, args.samples)
  steps = len(x) // num_workers // args.batch_size

  def input_fn(ctx):
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shard(
        ctx.num_input_pipelines, ctx.input_pipeline_id)
    return ds.repeat().batch(args.batch_size, drop_remainder=True)

  with strategy.scope(), v1.variable_scope(args.run_id):
    iterator = strategy.make_input_fn_iterator(input_fn)
    params = [v1.get_variable(f"p{i}", initializer=w) for i, w in
              enumerate(demo_lib.initial_weights(args.seed))]
    turn = v1.get_variable("turn", initializer=np.int64(0), trainable=False)
    optimizer = v1.train.AdamOptimizer(demo_lib.LEARNING_RATE)

    def step_fn(inputs):
      return demo_lib.v1_train_step(strategy, params, optimizer, inputs)

    # TensorFlow's run() returns None for this strategy; this call does not.
    per_replica = extended.call_for_each_replica(
        step_fn, args=(iterator.get_next(),))
    loss, correct = (strategy.reduce(tf.distribute.ReduceOp.MEAN, v,
                                     axis=None) for v in per_replica)
    next_turn = turn.assign_add(1)
    init = v1.global_variables_initializer()
    uninitialized = v1.report_uninitialized_variables()
  config = strategy.update_config_proto(v1.ConfigProto())
  if hasattr(extended, "wait_for_cluster"):  # ours: a bounded, named wait
    extended.wait_for_cluster()
  target = "grpc://" + extended._cluster_spec.task_address("worker", task_id)  # pylint: disable=protected-access
  losses, ms, accuracy = [], [], 0.0

  def wait_until(condition, what):
    # Polls the ps at 1 ms, then less often (up to every 50 ms): a worker
    # waiting for its turn must not take the CPU the other one needs.
    deadline, pause = time.monotonic() + 60, 0.001
    while not condition():
      if time.monotonic() > deadline:
        raise TimeoutError(f"worker {task_id}: {what} within 60 s")
      time.sleep(pause)
      pause = min(2 * pause, 0.05)

  with v1.Session(target, config=config) as session:
    if extended.experimental_should_init:
      session.run(init)
    else:
      wait_until(lambda: not len(session.run(uninitialized)),
                 "the chief did not initialise the variables")
    session.run(iterator.initializer)
    done = 0
    for epoch in range(args.epochs):
      step_losses, step_times, step_correct = [], [], []
      for step in range(steps):
        mine = done * num_workers + task_id
        wait_until(lambda: session.run(turn) == mine,
                   "another worker did not take its turn")
        start = time.perf_counter()
        loss_value, correct_value = session.run([loss, correct])
        step_times.append(time.perf_counter() - start)
        session.run(next_turn)
        done += 1
        step_losses.append(float(loss_value))
        step_correct.append(float(correct_value))
        print(_PROGRESS + json.dumps([epoch + 1, step + 1, steps,
                                      float(np.mean(step_losses))]),
              file=sys.stderr, flush=True)
      losses.append(float(np.mean(step_losses)))
      ms.append(1000.0 * float(np.median(step_times)))
      accuracy = float(np.mean(step_correct))
  print(json.dumps({"losses": losses, "ms_per_step": ms,
                    "accuracy": accuracy}))


if __name__ == "__main__":
  worker_main(sys.argv[1:])


def run_cluster_v2(workers: int, ps: int, epochs: int, seed: int,
                   batch_size: int, samples: int,
                   timeout: float = 900.0) -> tuple[Any, Any]:
  """``--api v2``: the Keras program on a loopback cluster, its chief
  (``demo/cluster_v2_chief.py``) under TensorFlow's CentralStorageStrategy
  with the remote devices by hand, then ours from ``TF_CONFIG``; every
  worker and ps task runs ``python -m compat_distribute serve``.  Returns
  the two ``common.Result``s."""
  cluster = local_served.ServedCluster(num_workers=workers, num_ps=ps)
  print(f"{ports_line(cluster.cluster)} The chief (the demo's training "
        f"program) listens on {cluster.cluster['chief'][0]}.", flush=True)
  chief = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "cluster_v2_chief.py")
  with cluster:
    print(f"cluster up: {cluster.cluster}", flush=True)
    result = cluster.run_chief(
        chief, ["--epochs", str(epochs), "--seed", str(seed),
                "--batch_size", str(batch_size), "--samples", str(samples)],
        timeout=timeout, installed=False)
    sys.stdout.write(result.stderr[result.stderr.find("\n== "):]
                     if "\n== " in result.stderr else "")
    if result.returncode != 0 or result.timed_out:
      raise RuntimeError(
          f"the chief failed (exit {result.returncode}"
          f"{', timed out' if result.timed_out else ''}):\n"
          f"{result.stderr[-3000:]}")
    cluster.wait_servers(timeout=60)
  out = result.json()
  return (demo_lib.Result(**out["ours"]), demo_lib.Result(**out["native"]))
