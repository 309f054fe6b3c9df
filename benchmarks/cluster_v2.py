"""Past one machine, TF2: a CentralStorageStrategy training step on loopback
clusters, against the same program on one machine and against TensorFlow's
strategy given the remote devices by hand.

Usage::

    python benchmarks/cluster_v2.py            # 1ps x 2w, 2ps x 2w, 1ps x 4w
    python benchmarks/cluster_v2.py --quick    # fewer steps
    python benchmarks/cluster_v2.py --restart  # the cost of a restart
    python benchmarks/cluster_v2.py --cardinality  # unknown-length input

``--cardinality``: on a 1 ps x 2 workers cluster, the chief runs the
training step (a ``tf.function`` taking the batch) from an eager loop,
``next(iterator)`` on the distributed dataset outside the function, over
the same input with a known cardinality (``repeat``) and with an unknown
one (the same, through ``filter``, which keeps every element).  Over
unknown-length input the eager ``next`` must first learn from the workers
whether a batch is there (a round trip) before it hands the batch out;
printed: median ms/step of each, taking turns, and the difference -- the
cost of that round trip per step.

``--restart``: on a 1 ps x 2 workers cluster, a custom loop
(``tf.train.CheckpointManager`` every ``SAVE_EVERY`` steps) runs with its
chief under ``python -m compat_distribute run --max-restarts 1``; worker 1
is SIGKILLed once step ``KILL_AFTER`` is done and started again as soon as
the supervisor says the program ended (as a cluster manager restarts a
pod).  Printed, per run: seconds from the kill to the supervisor's notice,
to every task answering, to the restarted program's first step (training
again), and the steps run twice (done before the loss, after the
checkpoint the restart resumes from).

For each shape a ``ServedCluster`` is started (``python -m compat_distribute
serve`` per worker and ps task on 127.0.0.1) and this file runs as its chief
(``--chief``, plain ``python``: TensorFlow's names stay TensorFlow's), which times, in one process, rounds of ``--steps`` training
steps of the same ``tf.function`` step (an MLP, SGD, global batch 256) of:

* ``ours``: our v2 ``CentralStorageStrategy()`` from ``TF_CONFIG``, input
  read on the workers (``experimental_distribute_dataset``);
* ``ours_client_input``: the same strategy with the input pipeline on the
  client (what a pipeline that cannot leave the client gets);
* ``native``: TensorFlow's ``CentralStorageStrategy(compute_devices=<the
  workers' CPUs>, parameter_device=<ps 0's CPU>)`` in the same connected
  process, input on the client (its only way).

The variants take turns, round by round.  Then the same step runs on this
machine (``--local``: a process with as many logical CPUs as workers, our
strategy on them).  Printed: median ms/step of each, and the ratios.
Measurements, not tests; label results with the date and the machine's
state.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHAPES = ((1, 2), (2, 2), (1, 4))  # (ps, workers)
GLOBAL_BATCH = 256
FEATURES = 64


def _data():
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(0)
  x = rng.normal(size=(GLOBAL_BATCH * 16, FEATURES)).astype("float32")
  y = (x @ rng.normal(size=(FEATURES, 1))).astype("float32")
  return x, y


def _trainer(strategy, dataset_maker):
  """A function running ``n`` steps of the step on ``strategy``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  total = tf.VariableAggregation.SUM  # the replicas' gradients add up
  with strategy.scope():
    w1 = tf.Variable(tf.random.stateless_normal([FEATURES, 256], [1, 2]) * .1,
                     aggregation=total)
    w2 = tf.Variable(tf.random.stateless_normal([256, 256], [3, 4]) * .1,
                     aggregation=total)
    w3 = tf.Variable(tf.random.stateless_normal([256, 1], [5, 6]) * .1,
                     aggregation=total)
  weights = [w1, w2, w3]
  iterator = iter(dataset_maker(strategy))

  @tf.function
  def step(iterator):
    def fn(batch):
      x, y = batch
      with tf.GradientTape() as tape:
        h = tf.nn.relu(tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2))
        loss = tf.reduce_sum(tf.square(tf.matmul(h, w3) - y)) / GLOBAL_BATCH
      grads = tape.gradient(loss, weights)
      for w, g in zip(weights, grads):
        w.assign_sub(0.001 * g)
      return loss
    return strategy.reduce("SUM", strategy.run(fn, args=(next(iterator),)),
                           axis=None)

  def run(n):
    start = time.perf_counter()
    for _ in range(n):
      loss = step(iterator)
    float(loss)
    return (time.perf_counter() - start) / n * 1000.0
  return run


def _dataset(x, y):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(
      GLOBAL_BATCH)


def chief(steps: int, rounds: int) -> dict:
  """Runs as the cluster's chief; returns ms/step per variant."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from compat_distribute import input as input_lib  # pylint: disable=g-import-not-at-top
  from compat_distribute import v2 as distribute  # pylint: disable=g-import-not-at-top
  x, y = _data()
  ours = distribute.experimental.CentralStorageStrategy()
  workers = [d for d in ours.extended.worker_devices]
  native = tf.distribute.experimental.CentralStorageStrategy(
      compute_devices=workers,
      parameter_device=ours.extended.parameter_devices[0])

  def client_side(strategy):
    local = dataclasses.replace(strategy.extended._input_workers(),  # pylint: disable=protected-access
                                per_worker=())
    return input_lib.distribute_dataset(local, _dataset(x, y), None)

  variants = {
      "ours": _trainer(ours, lambda s: s.experimental_distribute_dataset(
          _dataset(x, y))),
      "ours_client_input": _trainer(
          distribute.experimental.CentralStorageStrategy(), client_side),
      "native": _trainer(native, lambda s: s.experimental_distribute_dataset(
          _dataset(x, y))),
  }
  times = {name: [] for name in variants}
  for run in variants.values():
    run(5)  # trace and warm up
  names = list(variants)
  for r in range(rounds):
    for name in names[r % len(names):] + names[:r % len(names)]:
      times[name].append(variants[name](steps))
  return {name: statistics.median(t) for name, t in times.items()}


def local(workers: int, steps: int, rounds: int) -> float:
  """ms/step of our strategy on ``workers`` logical CPUs of this machine."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.set_logical_device_configuration(
      tf.config.list_physical_devices("CPU")[0],
      [tf.config.LogicalDeviceConfiguration()] * workers)
  from compat_distribute import v2 as distribute  # pylint: disable=g-import-not-at-top
  x, y = _data()
  strategy = distribute.experimental.CentralStorageStrategy(
      [f"/cpu:{i}" for i in range(workers)])
  run = _trainer(strategy, lambda s: s.experimental_distribute_dataset(
      _dataset(x, y)))
  run(5)
  return statistics.median(run(steps) for _ in range(rounds))


def measure_shape(ps: int, workers: int, steps: int, rounds: int) -> dict:
  import subprocess  # pylint: disable=g-import-not-at-top
  from compat_distribute.cluster import local_served  # pylint: disable=g-import-not-at-top
  args = ["--steps", str(steps), "--rounds", str(rounds)]
  with local_served.ServedCluster(workers, ps, client_wait=600) as cluster:
    result = cluster.run_chief(os.path.abspath(__file__), ["--chief", *args],
                               timeout=1200, installed=False)
    cluster.wait_servers(timeout=60)
  if result.returncode != 0:
    raise RuntimeError(f"chief failed:\n{result.stderr[-4000:]}")
  out = result.json()
  done = subprocess.run(
      [sys.executable, os.path.abspath(__file__), "--local", str(workers),
       *args], capture_output=True, text=True, timeout=1200, check=True,
      env={**os.environ, "TF_CONFIG": ""})
  out["ours_local"] = json.loads(done.stdout.strip().splitlines()[-1])
  return out


def cardinality_chief(steps: int, rounds: int) -> dict:
  """The ``--cardinality`` chief: ms/step of an eager loop over input of
  known and of unknown cardinality."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from compat_distribute import v2 as distribute  # pylint: disable=g-import-not-at-top
  x, y = _data()
  strategy = distribute.experimental.CentralStorageStrategy()
  with strategy.scope():
    w = tf.Variable(tf.zeros([FEATURES, 1]),
                    aggregation=tf.VariableAggregation.SUM)

  @tf.function
  def step(batch):
    def fn(features, labels):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum((features @ w - labels) ** 2) / GLOBAL_BATCH
      w.assign_sub(0.001 * tape.gradient(loss, w))
      return loss
    return strategy.reduce("SUM", strategy.run(fn, args=batch), axis=None)

  known = _dataset(x, y)
  unknown = known.filter(lambda features, labels: True)
  assert int(unknown.cardinality()) == int(tf.data.UNKNOWN_CARDINALITY)
  iterators = {"known": iter(strategy.experimental_distribute_dataset(known)),
               "unknown": iter(strategy.experimental_distribute_dataset(
                   unknown))}

  def run(name: str, n: int) -> float:
    iterator = iterators[name]
    start = time.perf_counter()
    for _ in range(n):
      loss = step(next(iterator))
    float(loss)
    return (time.perf_counter() - start) / n * 1000.0

  times: dict[str, list[float]] = {name: [] for name in iterators}
  for name in iterators:
    run(name, 5)  # trace and warm up
  for r in range(rounds):
    for name in (["known", "unknown"] if r % 2 else ["unknown", "known"]):
      times[name].append(run(name, steps))
  return {name: statistics.median(t) for name, t in times.items()}


def measure_cardinality(steps: int, rounds: int) -> dict:
  """One ``--cardinality`` run on a 1 ps x 2 workers served cluster."""
  from compat_distribute.cluster import local_served  # pylint: disable=g-import-not-at-top
  with local_served.ServedCluster(2, 1, client_wait=600) as cluster:
    result = cluster.run_chief(
        os.path.abspath(__file__),
        ["--cardinality-chief", "--steps", str(steps), "--rounds",
         str(rounds)], timeout=1200, installed=False)
    cluster.wait_servers(timeout=60)
  if result.returncode != 0:
    raise RuntimeError(f"chief failed:\n{result.stderr[-4000:]}")
  return result.json()


SAVE_EVERY, KILL_AFTER, RESTART_STEPS = 50, 120, 300


def restart_chief(checkpoint_dir: str) -> None:
  """The ``--restart`` program: prints ``step S T`` (T: ``time.time()``)
  to stderr after each step."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  x, y = _data()
  strategy = tf.distribute.experimental.CentralStorageStrategy()
  with strategy.scope():
    layer = tf.keras.layers.Dense(1)
    layer.build((None, FEATURES))
    optimizer = tf.keras.optimizers.SGD(0.01)
    optimizer.build(layer.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64)
  checkpoint = tf.train.Checkpoint(layer=layer, optimizer=optimizer,
                                   step=step)
  manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, 1)
  checkpoint.restore(manager.latest_checkpoint)
  dataset = _dataset(x, y).skip(int(step.numpy()))
  iterator = iter(strategy.experimental_distribute_dataset(dataset))

  @tf.function
  def train(inputs):
    def fn(features, labels):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum((layer(features) - labels) ** 2) / GLOBAL_BATCH
      grads = tape.gradient(loss, layer.trainable_variables)
      optimizer.apply_gradients(zip(grads, layer.trainable_variables))
    strategy.run(fn, args=inputs)

  while int(step.numpy()) < RESTART_STEPS:
    train(next(iterator))
    step.assign_add(1)
    done = int(step.numpy())
    if done % SAVE_EVERY == 0:
      manager.save(checkpoint_number=done)
    print(f"step {done} {time.time():.3f}", file=sys.stderr, flush=True)


def measure_restart() -> dict:
  """One ``--restart`` run (see the module docstring)."""
  import tempfile  # pylint: disable=g-import-not-at-top
  from compat_distribute.cluster import local_served  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory(prefix="cluster_v2-restart-") as tmp:
    with local_served.ServedCluster(2, 1, client_wait=600) as cluster:
      chief = cluster.start_chief(
          os.path.abspath(__file__), ["--restart-chief", tmp],
          run_options=["--max-restarts", "1", "--checkpoint-dir", tmp],
          env={"PYTHONPATH": os.path.dirname(os.path.dirname(
              os.path.abspath(__file__)))})
      local_served.wait_for_text(chief, f"step {KILL_AFTER} ", 600)
      cluster.kill_server("worker", 1)
      killed = time.time()
      local_served.wait_for_text(chief, "restart 1 of 1: waiting", 600)
      noticed = time.time()
      cluster.start_server("worker", 1)
      local_served.wait_for_text(chief, "every task answers", 600)
      answered = time.time()
      result = cluster.collect(chief, 1200)
      cluster.wait_servers(timeout=60)
  if result.returncode != 0:
    raise RuntimeError(f"chief failed:\n{result.stderr[-4000:]}")
  before, after = result.stderr.split("restart 1 of 1: waiting", 1)
  steps_before = [int(l.split()[1]) for l in before.splitlines()
                  if l.startswith("step ")]
  resumed = [l.split() for l in after.splitlines() if l.startswith("step ")]
  first_step, first_time = int(resumed[0][1]), float(resumed[0][2])
  return {"noticed": noticed - killed, "answered": answered - killed,
          "training": first_time - killed,
          "repeated": max(steps_before) - (first_step - 1),
          "resumed_from": first_step - 1}


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--steps", type=int, default=None)
  parser.add_argument("--rounds", type=int, default=None)
  parser.add_argument("--chief", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--local", type=int, default=0, help=argparse.SUPPRESS)
  parser.add_argument("--restart", action="store_true")
  parser.add_argument("--runs", type=int, default=3)
  parser.add_argument("--restart-chief", help=argparse.SUPPRESS)
  parser.add_argument("--cardinality", action="store_true")
  parser.add_argument("--cardinality-chief", action="store_true",
                      help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.restart_chief:
    restart_chief(args.restart_chief)
    return 0
  if args.restart:
    print(f"{time.strftime('%Y-%m-%d')}, TensorFlow "
          f"{__import__('tensorflow').__version__}, 1 ps x 2 workers, "
          f"checkpoint every {SAVE_EVERY} steps, worker 1 killed after step "
          f"{KILL_AFTER}; seconds after the kill")
    print("| run | loss noticed | every task answers | training again | "
          "steps repeated (resumed from) |")
    print("| --- | --- | --- | --- | --- |")
    for run in range(args.runs):
      r = measure_restart()
      print(f"| {run + 1} | {r['noticed']:.1f} | {r['answered']:.1f} | "
            f"{r['training']:.1f} | {r['repeated']} ({r['resumed_from']}) |",
            flush=True)
    return 0
  steps = args.steps or (10 if args.quick else 30)
  rounds = args.rounds or (3 if args.quick else 7)
  if args.cardinality_chief:
    print(json.dumps(cardinality_chief(steps, rounds)))
    return 0
  if args.cardinality:
    r = measure_cardinality(steps, rounds)
    print(f"{time.strftime('%Y-%m-%d')}, TensorFlow "
          f"{__import__('tensorflow').__version__}, 1 ps x 2 workers, eager "
          f"loop, {steps} steps x {rounds} rounds; ms/step (median of "
          "rounds)")
    print("| input | known cardinality | unknown cardinality | difference |")
    print("| --- | --- | --- | --- |")
    print(f"| ms/step | {r['known']:.2f} | {r['unknown']:.2f} | "
          f"{r['unknown'] - r['known']:.2f} |", flush=True)
    return 0
  if args.chief:
    print(json.dumps(chief(steps, rounds)))
    return 0
  if args.local:
    print(json.dumps(local(args.local, steps, rounds)))
    return 0
  print(f"{time.strftime('%Y-%m-%d')}, TensorFlow "
        f"{__import__('tensorflow').__version__}, {steps} steps x {rounds} "
        "rounds; ms/step (median of rounds)")
  print("| cluster | ours | ours, client-side input | native, devices by hand "
        "| ours on one machine | ours/native | ours/one machine | "
        "client-side/worker-side input |")
  print("| --- | --- | --- | --- | --- | --- | --- | --- |")
  for ps, workers in SHAPES:
    r = measure_shape(ps, workers, steps, rounds)
    print(f"| {ps} ps x {workers} workers | {r['ours']:.2f} | "
          f"{r['ours_client_input']:.2f} | {r['native']:.2f} | "
          f"{r['ours_local']:.2f} | {r['ours'] / r['native']:.2f} | "
          f"{r['ours'] / r['ours_local']:.2f} | "
          f"{r['ours_client_input'] / r['ours']:.2f} |", flush=True)
  return 0


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
  sys.exit(main())
