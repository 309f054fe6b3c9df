"""Cross-device reduction: reduce-to-one-device against collective ops.

All-reduce (MEAN) of four gradient-sized tensors (784x128, 128, 128x10, 10;
float32) over two replicas on logical CPUs, both implementations of
``compat_distribute.values.cross_device`` side by side, interleaved, medians:

* ``batch_reduce``: the implementation alone, called in cross-replica
  context on per-replica values (eager);
* ``run``: ``strategy.run`` of a step that all-reduces its four per-replica
  arguments with ``ReplicaContext.all_reduce`` (eager, and inside a
  ``tf.function``).

Run: ``python benchmarks/cross_device.py [--repeats 7] [--number 50]``.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # pylint: disable=g-import-not-at-top

SHAPES = ((784, 128), (128,), (128, 10), (10,))
DEVICES = ("/cpu:0", "/cpu:1")
COLLECTIVE_TIMEOUT = 10  # seconds; see the tf.function case below


def _setup_devices():
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * len(DEVICES))


def _median_us(fn, repeats, number):
  fn()  # warm up (and trace)
  samples = []
  for _ in range(repeats):
    start = time.perf_counter()
    for _ in range(number):
      fn()
    samples.append((time.perf_counter() - start) / number * 1e6)
  return statistics.median(samples)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--number", type=int, default=50)
  args = parser.parse_args(argv)
  _setup_devices()
  from compat_distribute.values import cross_device  # pylint: disable=g-import-not-at-top
  from compat_distribute import v2 as distribute  # pylint: disable=g-import-not-at-top
  from compat_distribute.values import distributed as values  # pylint: disable=g-import-not-at-top

  impls = {
      "reduce_to_one_device": cross_device.ReduceToOneDevice(),
      "collective_ops": cross_device.CollectiveOps(
          DEVICES, timeout_seconds=COLLECTIVE_TIMEOUT),
  }
  grads = []
  for shape in SHAPES:
    parts = []
    for device in DEVICES:
      with tf.device(device):
        parts.append(tf.random.normal(shape))
    grads.append(values.PerReplica(parts))
  pairs = [(g, g) for g in grads]
  mean = tf.distribute.ReduceOp.MEAN

  def step(*local_grads):
    return tf.distribute.get_replica_context().all_reduce(
        mean, list(local_grads))

  rows = []
  strategies = {}
  for name, impl in impls.items():
    strategy = distribute.experimental.CentralStorageStrategy(list(DEVICES))
    strategy.extended._cross_device_ops = impl  # pylint: disable=protected-access
    strategies[name] = strategy
  cases = {
      "batch_reduce (eager)": lambda name: (
          lambda: impls[name].batch_reduce(mean, pairs)),
      "run + all_reduce (eager)": lambda name: (
          lambda: strategies[name].run(step, args=grads)),
      "run + all_reduce (tf.function)": lambda name: tf.function(
          lambda: strategies[name].run(step, args=grads)),
  }
  for case, make in cases.items():
    row = [case]
    for name in impls:
      try:
        row.append(f"{_median_us(make(name), args.repeats, args.number):9.0f}")
      except (tf.errors.DeadlineExceededError, tf.errors.CancelledError,
              tf.errors.UnavailableError):
        row.append("  timeout")
    rows.append(row)
  print(f"TensorFlow {tf.__version__}, {len(DEVICES)} replicas on logical "
        f"CPUs, all-reduce MEAN of {len(SHAPES)} tensors "
        f"{[list(s) for s in SHAPES]}; median of {args.repeats} x "
        f"{args.number} calls, microseconds per call")
  print(f"{'case':34s} {'reduce_to_one_device':>21s} {'collective_ops':>15s}")
  for case, a, b in rows:
    print(f"{case:34s} {a:>21s} {b:>15s}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
