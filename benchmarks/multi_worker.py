"""Keras on several machines: our ``MultiWorkerMirroredStrategy`` (Keras 3)
against TensorFlow's (tf-keras), steps per second on loopback clusters.

Usage::

    python benchmarks/multi_worker.py           # 2 and 3 workers
    python benchmarks/multi_worker.py --quick   # a short smoke run
    python benchmarks/multi_worker.py --workers 2 --steps 300 --rounds 9

For each cluster shape (2 and 3 workers, no chief) this file starts, at
once, every process of four variants of the same program (``--program``,
this file: a Keras MLP, 32-64-10, SGD, mean squared error, global batch
64, a dataset each process builds the same way):

* ``ours``: every task runs ``python -m compat_distribute run
  --multi-worker ours`` on it, with Keras 3 (what plain ``run`` gives
  there): the program runs on worker 0, the other workers serve it;
* ``native``: every task runs ``python`` on it with ``TF_USE_LEGACY_KERAS=1``
  (tf-keras, Keras 2), TensorFlow's own ``MultiWorkerMirroredStrategy``;
* ``none (Keras 3)`` and ``none (tf-keras)``: one process, no ``TF_CONFIG``,
  no strategy (``tf.distribute.get_strategy()``): the same model on this
  machine alone, each Keras, which tells the cost of the strategy from
  the difference between the two Kerases.

Then it times, in turns: round by round each variant runs ``--steps``
training steps while the others wait (each of their processes waits for a
file this file writes, and writes one when its round is done), in an order
that rotates every round, so that a change of the machine's load hits every
variant alike.  Two workloads, one after the other: ``model.fit`` (one epoch
of ``--steps`` steps per round, timed from the epoch's start to its end by
a callback) and a custom loop (a ``tf.function`` calling ``strategy.run``
on ``next`` of an ``experimental_distribute_dataset`` iterator, then
``strategy.reduce``).  The first round of each workload (tracing) is not
counted.  Printed: the median over rounds of steps/s of each variant, the
ratio ours/native (the target: at least 0.8x), the lowest and highest
ratio of one round's times, and the load average before and after.
Measurements, not tests; compare ratios within a run.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

GLOBAL_BATCH = 64
FEATURES, HIDDEN, OUTPUTS = 32, 64, 10
WORKLOADS = ("fit", "loop")
VARIANTS = ("ours", "native", "none_keras3", "none_tf_keras")
# Seconds a variant may take to start or to run one round.
START_WAIT, ROUND_WAIT = 600.0, 600.0


def _wait_go(control: str, workload: str, index: int) -> None:
  """Waits (bounded) for this file's go for round ``index``."""
  path = os.path.join(control, f"go-{workload}-{index}")
  deadline = time.monotonic() + START_WAIT + ROUND_WAIT * 4
  while not os.path.exists(path):
    if time.monotonic() > deadline:
      raise TimeoutError(f"no {path} within the benchmark's bounds")
    time.sleep(0.01)


def _report(control: str, workload: str, index: int, seconds: float) -> None:
  path = os.path.join(control, f"done-{workload}-{index}")
  with open(path + ".tmp", "w") as f:
    f.write(repr(seconds))
  os.replace(path + ".tmp", path)


def program(control: str, steps: int, rounds: int, reports: bool) -> None:
  """The benchmarked program (every task of a variant runs it; the task
  with ``reports`` writes the round times)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if os.environ.get("TF_CONFIG"):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
  else:
    strategy = tf.distribute.get_strategy()
  rng = np.random.RandomState(0)
  x = rng.normal(size=(GLOBAL_BATCH * 32, FEATURES)).astype("float32")
  y = (x @ rng.normal(size=(FEATURES, OUTPUTS))).astype("float32")
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(
      GLOBAL_BATCH)
  tf.keras.utils.set_random_seed(1)
  with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.Input((FEATURES,)),
        tf.keras.layers.Dense(HIDDEN, activation="relu"),
        tf.keras.layers.Dense(OUTPUTS)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
    optimizer = tf.keras.optimizers.SGD(0.01)

  class Rounds(tf.keras.callbacks.Callback):

    def on_epoch_begin(self, epoch, logs=None):
      _wait_go(control, "fit", epoch)
      self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
      if reports:
        _report(control, "fit", epoch, time.perf_counter() - self.start)

  model.fit(dataset, epochs=rounds + 1, steps_per_epoch=steps, verbose=0,
            callbacks=[Rounds()])

  iterator = iter(strategy.experimental_distribute_dataset(dataset))

  @tf.function
  def train_step(iterator):
    def replica_step(features, labels):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.reduce_mean(
            tf.square(model(features, training=True) - labels), axis=1)
                             ) / GLOBAL_BATCH
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss
    return strategy.reduce("SUM", strategy.run(replica_step,
                                               args=next(iterator)), axis=None)

  for index in range(rounds + 1):
    _wait_go(control, "loop", index)
    start = time.perf_counter()
    for _ in range(steps):
      loss = train_step(iterator)
    float(loss)
    if reports:
      _report(control, "loop", index, time.perf_counter() - start)


class _Variant:
  """The processes of one variant, started at once; ``run_round`` lets
  them run one round and gives its seconds."""

  def __init__(self, name: str, workers: int, control: str, steps: int,
               rounds: int, stack: contextlib.ExitStack) -> None:
    from compat_distribute.cluster import local  # pylint: disable=g-import-not-at-top
    from compat_distribute.cluster import local_served  # pylint: disable=g-import-not-at-top
    self.name, self.control = name, control
    os.makedirs(control)
    script = [os.path.abspath(__file__), "--program", control, "--steps",
              str(steps), "--rounds", str(rounds)]
    keras_2 = {"TF_USE_LEGACY_KERAS": "1"}
    if name in ("ours", "native"):
      cluster = stack.enter_context(local_served.MultiWorkerCluster(
          workers, env=keras_2 if name == "native" else {}))
      runner = (["-m", "compat_distribute", "run", "--multi-worker", "ours"]
                if name == "ours" else [])
      cluster.start([sys.executable, *runner, *script])
      self.processes = list(cluster.processes.values())
      self.reporter = cluster.processes[("worker", 0)]
    else:
      logs: list[object] = []
      self.reporter = local.start_process(
          [sys.executable, *script], {
              "TF_CONFIG": None,
              **(keras_2 if name == "none_tf_keras" else {})}, logs)
      self.reporter.task = name  # type: ignore[attr-defined]
      self.processes = [self.reporter]

      @stack.callback
      def stop() -> None:
        local.stop_process(self.reporter)
        for log in logs:
          log.close()  # type: ignore[attr-defined]

  def run_round(self, workload: str, index: int, timeout: float) -> float:
    from compat_distribute.cluster import local_served  # pylint: disable=g-import-not-at-top
    done = os.path.join(self.control, f"done-{workload}-{index}")
    with open(os.path.join(self.control, f"go-{workload}-{index}"), "w"):
      pass
    local_served.wait_for_file(done, self.reporter, timeout)
    with open(done) as f:
      return float(f.read())

  def check_ended(self, timeout: float) -> list[str]:
    """Waits (bounded) for every process to end; what went wrong (a
    process that failed, with its output and the reporting task's)."""
    from compat_distribute.cluster import local_served  # pylint: disable=g-import-not-at-top
    deadline = time.monotonic() + timeout
    results = [local_served.collect(process,
                                    max(0.0, deadline - time.monotonic()))
               for process in self.processes]
    failed = [r for r in results if r.returncode != 0]
    if failed and results[0] not in failed:
      failed.append(results[0])  # the task that ran the program
    return [f"{self.name} {r.task}: exit {r.returncode}\n"
            f"{r.stdout[-2000:]}\n{r.stderr[-4000:]}" for r in failed]


def measure(workers: int, steps: int, rounds: int) -> tuple[dict, list[str]]:
  """Steps/s (median of rounds) per workload and variant on ``workers``
  workers; and what went wrong when the processes ended."""
  times: dict = {w: {v: [] for v in VARIANTS} for w in WORKLOADS}
  with tempfile.TemporaryDirectory(prefix="bench-multi-worker-") as tmp, \
      contextlib.ExitStack() as stack:
    variants = [_Variant(name, workers, os.path.join(tmp, name), steps,
                         rounds, stack) for name in VARIANTS]
    for workload in WORKLOADS:
      for index in range(rounds + 1):
        turn = index % len(variants)
        for variant in variants[turn:] + variants[:turn]:
          seconds = variant.run_round(
              workload, index, START_WAIT if index == 0 else ROUND_WAIT)
          if index:  # round 0 traces and warms up
            times[workload][variant.name].append(seconds)
    problems = [problem for variant in variants
                for problem in variant.check_ended(120)]
  out = {workload: {name: statistics.median(steps / s for s in runs)
                    for name, runs in by_variant.items()}
         for workload, by_variant in times.items()}
  for workload, by_variant in times.items():  # ours/native of each round
    out[workload]["per_round"] = [n / o for o, n in zip(
        by_variant["ours"], by_variant["native"])]
  return out, problems


def _load() -> str:
  return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--workers", type=int, nargs="*", default=[2, 3])
  parser.add_argument("--steps", type=int, default=None)
  parser.add_argument("--rounds", type=int, default=None)
  parser.add_argument("--program", help=argparse.SUPPRESS)
  args = parser.parse_args()
  steps = args.steps or (5 if args.quick else 200)
  rounds = args.rounds or (1 if args.quick else 7)
  if args.program:
    from compat_distribute.cluster import lifetime  # pylint: disable=g-import-not-at-top
    lifetime.end_with_parent()  # a killed benchmark leaves no process
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = config.get("task", {})
    program(args.program, steps, rounds,
            reports=task.get("index", 0) == 0)
    return 0
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  print(f"{time.strftime('%Y-%m-%d %H:%M')}, TensorFlow {tf.__version__}, "
        f"{steps} steps x {rounds} rounds; steps/s (median of rounds); "
        "ratios ours/native, ours/none (Keras 3), native/none (tf-keras)")
  print("| workers | workload | ours | native | none, Keras 3 | none, "
        "tf-keras | ours/native | ours/native of each round: lowest, highest "
        "| ours/none | native/none | load 1/5/15 min before, after |")
  print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: "
        "| --- |")
  problems = []
  for workers in args.workers:
    before = _load()
    r, ended_badly = measure(workers, steps, rounds)
    problems += ended_badly
    after = _load()
    for workload in WORKLOADS:
      s = r[workload]
      print(f"| {workers} | {workload} | {s['ours']:.1f} | {s['native']:.1f} "
            f"| {s['none_keras3']:.1f} | {s['none_tf_keras']:.1f} | "
            f"{s['ours'] / s['native']:.2f}x | "
            f"{min(s['per_round']):.2f}x, {max(s['per_round']):.2f}x | "
            f"{s['ours'] / s['none_keras3']:.2f}x | "
            f"{s['native'] / s['none_tf_keras']:.2f}x | {before}, {after} |",
            flush=True)
  for problem in problems:  # the rounds ran; the ending did not go well
    print(f"failed at the end: {problem}", file=sys.stderr)
  return 1 if problems else 0


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
  sys.exit(main())
