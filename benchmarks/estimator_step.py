"""Benchmark: an Estimator training step, TensorFlow 2.21 under
compat_distribute against TensorFlow 2.15 natively.

Usage::

    python benchmarks/estimator_step.py --native-python PY215 [--rounds 6]
    python benchmarks/estimator_step.py --native-python PY215 --quick

The workload: a custom ``model_fn`` Estimator (an MLP, v1 Adagrad) with
``RunConfig(train_distribute=CentralStorageStrategy)`` over two logical
CPUs, by TensorFlow's v1 name -- under compat_distribute the runner makes it
ours.  Each run is its own process: ``python -m compat_distribute run`` with
this interpreter (TensorFlow 2.16+ with Estimator installed) for ours,
``PY215`` (TensorFlow 2.15 with Estimator, e.g. tox's
``.tox/estimator-oracle/bin/python``) for native, and, to separate the
strategy from the TensorFlow version, this interpreter with only
Estimator's pieces supplied (TensorFlow's own strategy on the new
TensorFlow), and the same step with no strategy on each TensorFlow (the
floor each strategy adds to).  Runs rotate which goes first; each times its training steps after a warm-up (a hook timing
``before_run`` to ``after_run`` of each ``Session.run``) and reports the
median.  The table gives the median of those medians and the ratio.  A
measurement, not a test: nothing asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The program each process runs (argv: steps, warm-up steps).
WORKER = r'''
import os, sys, tempfile, time, json
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
v1 = tf.compat.v1
STEPS, WARMUP = int(sys.argv[1]), int(sys.argv[2])
WIDTH, BATCH = 256, 64


def input_fn():
  rng = np.random.RandomState(0)
  x = rng.normal(size=(1024, 32)).astype(np.float32)
  y = rng.normal(size=(1024, 1)).astype(np.float32)
  return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH)


def model_fn(features, labels, mode):
  hidden = features
  for i in range(2):
    hidden = tf.nn.relu(v1.layers.dense(hidden, WIDTH, name=f"h{i}"))
  loss = tf.reduce_mean(tf.square(v1.layers.dense(hidden, 1) - labels))
  train_op = v1.train.AdagradOptimizer(0.01).minimize(
      loss, global_step=v1.train.get_global_step())
  return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


class Timer(v1.train.SessionRunHook):
  def __init__(self):
    self.times = []
  def before_run(self, run_context):
    self.start = time.perf_counter()
  def after_run(self, run_context, run_values):
    self.times.append(time.perf_counter() - self.start)


strategy = v1.distribute.experimental.CentralStorageStrategy(
    ["/cpu:0", "/cpu:1"])
if os.environ.get("ESTIMATOR_STEP_NO_STRATEGY") == "1":
  strategy = None  # the same step without a strategy: the floor
config = tf.estimator.RunConfig(
    model_dir=tempfile.mkdtemp(), train_distribute=strategy,
    save_summary_steps=None, save_checkpoints_steps=None,
    save_checkpoints_secs=None, log_step_count_steps=None)
timer = Timer()
tf.estimator.Estimator(model_fn, config=config).train(
    input_fn, steps=STEPS + WARMUP, hooks=[timer])
steps = sorted(timer.times[WARMUP:])
print(json.dumps({"median_ms": 1000 * steps[len(steps) // 2],
                  "tf": tf.__version__,
                  "strategy": type(strategy).__module__.split(".")[0]}))

'''


# TensorFlow 2.16+'s own strategy under Estimator: only Estimator's pieces
# are supplied (compat_distribute.estimator.supply, not install), so
# TensorFlow's strategy names stay TensorFlow's.
_SUPPLY_ONLY = ("import runpy, sys; from compat_distribute import estimator; "
                "estimator.supply(); sys.argv = sys.argv[1:]; "
                "runpy.run_path(sys.argv[0], run_name='__main__')")


def run_one(argv: list[str], steps: int, warmup: int, folder: str,
            no_strategy: bool = False) -> dict:
  script = os.path.join(folder, "estimator_worker.py")
  with open(script, "w", encoding="utf-8") as f:
    f.write(WORKER)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=folder,
             ESTIMATOR_STEP_NO_STRATEGY="1" if no_strategy else "0")
  env.pop("TF_USE_LEGACY_KERAS", None)
  done = subprocess.run(argv + [script, str(steps), str(warmup)], env=env,
                        cwd=ROOT, capture_output=True, text=True,
                        timeout=900, check=False)
  if done.returncode != 0:
    raise SystemExit(f"{argv[0]} failed:\n{done.stderr[-3000:]}")
  return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--native-python", required=True,
                      help="a Python with TensorFlow 2.15 and Estimator")
  parser.add_argument("--rounds", type=int, default=6)
  parser.add_argument("--steps", type=int, default=200)
  parser.add_argument("--quick", action="store_true",
                      help="2 rounds of 40 steps")
  args = parser.parse_args()
  rounds, steps = (2, 40) if args.quick else (args.rounds, args.steps)
  commands = {"ours": [sys.executable, "-m", "compat_distribute", "run"],
              "native": [args.native_python],
              "tf-new": [sys.executable, "-c", _SUPPLY_ONLY],
              "native-none": [args.native_python],
              "tf-new-none": [sys.executable, "-c", _SUPPLY_ONLY]}
  medians: dict[str, list[float]] = {who: [] for who in commands}
  names = list(commands)
  versions = {}
  with tempfile.TemporaryDirectory() as folder:
    for i in range(rounds):
      order = names[i % len(names):] + names[:i % len(names)]
      for who in order:
        result = run_one(commands[who], steps, 20, folder,
                         no_strategy=who.endswith("-none"))
        medians[who].append(result["median_ms"])
        versions[who] = (result["tf"], result["strategy"])
        print(f"round {i + 1}/{rounds} {who:6s} TF {result['tf']:8s} "
              f"{result['median_ms']:.3f} ms/step", flush=True)
  ours, native, tf_new, native_none, new_none = (
      statistics.median(medians[w]) for w in names)
  print()
  print("| Estimator training step (CentralStorage, 2 logical CPUs) | "
        "ms/step (median) |")
  print("| --- | --- |")
  print(f"| native: TensorFlow {versions['native'][0]}, TensorFlow's "
        f"strategy | {native:.3f} |")
  print(f"| ours: TensorFlow {versions['ours'][0]}, compat_distribute | "
        f"{ours:.3f} |")
  print(f"| TensorFlow {versions['tf-new'][0]}, TensorFlow's strategy "
        f"(Estimator's pieces supplied, strategy names not replaced) | "
        f"{tf_new:.3f} |")
  print(f"| no strategy, TensorFlow {versions['native'][0]} | "
        f"{native_none:.3f} |")
  print(f"| no strategy, TensorFlow {versions['tf-new'][0]} | "
        f"{new_none:.3f} |")
  print(f"| ratio ours/native | {ours / native:.2f} |")
  print(f"| ratio to each one's no-strategy step: ours {ours / new_none:.2f}, "
        f"native {native / native_none:.2f} |")
  print(f"| ratio ours/TensorFlow {versions['tf-new'][0]}'s strategy | "
        f"{ours / tf_new:.2f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
