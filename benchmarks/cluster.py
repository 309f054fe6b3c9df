"""Past one machine: the v1 ParameterServerStrategy step on loopback clusters.

Usage::

    python benchmarks/cluster.py            # 1x1, 2x1, 2x2; 2 epochs, 3 runs
    python benchmarks/cluster.py --quick    # 1 run of 1 epoch per shape

For each shape (workers x parameter servers) a ``LocalCluster`` of
``tf.distribute.Server`` processes on 127.0.0.1 is started and the demo's v1
training program (``compat_distribute.cluster.demo``: an MLP, Adam, the
variables on the ps tasks, one ``Session`` per worker) is trained on it under
TensorFlow's ``ParameterServerStrategyV1`` and under ours, on the same
servers, with the same data, initial weights and update order.  The time per
step is the median of the workers' ``Session.run`` of one training step (not
the wait for a worker's turn), taken from the last epoch; a shape is run
``--runs`` times, each time on a fresh cluster, and the table shows the
median over runs and the range of ours/native.  Measurements, not tests.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHAPES = ((1, 1), (2, 1), (2, 2))


def run_shape(workers: int, ps: int, epochs: int, samples: int
              ) -> tuple[float, float, float]:
  """(ms/step ours, ms/step native, largest loss difference) of one run."""
  from compat_distribute.cluster import demo  # pylint: disable=g-import-not-at-top
  with contextlib.redirect_stdout(io.StringIO()):  # the demo's progress lines
    ours, native = demo.run_cluster(workers, ps, epochs=epochs, seed=0,
                                    batch_size=64, samples=samples)
  diff = max(abs(a - b) for a, b in zip(ours.losses, native.losses))
  return ours.ms_per_step[-1], native.ms_per_step[-1], diff


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="one run of one epoch per shape")
  parser.add_argument("--runs", type=int, default=None,
                      help="fresh clusters per shape (default 3, quick 1)")
  parser.add_argument("--epochs", type=int, default=None,
                      help="epochs per run; the last is timed (default 2)")
  parser.add_argument("--samples", type=int, default=None,
                      help="training examples (default 4096, quick 1024)")
  args = parser.parse_args(argv)
  runs = args.runs or (1 if args.quick else 3)
  epochs = args.epochs or (1 if args.quick else 2)
  samples = args.samples or (1024 if args.quick else 4096)
  # The workers start with ``python -m``, which puts the current directory
  # first on sys.path: in a checkout, the source folder compat_distribute/
  # (without the v1/ and v2/ facades) would shadow the installed package.
  os.chdir(tempfile.gettempdir())
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  print(f"# TensorFlow {tf.__version__}, {os.cpu_count()} cores; loopback "
        f"clusters, {samples} examples, batch 64 per worker, epoch "
        f"{epochs} of {epochs} timed, {runs} run(s) per shape")
  rows = []
  for workers, ps in SHAPES:
    results = []
    for r in range(runs):
      print(f"... {workers}x{ps} run {r + 1}/{runs}", file=sys.stderr,
            flush=True)
      results.append(run_shape(workers, ps, epochs, samples))
    ours = statistics.median(o for o, _, _ in results)
    native = statistics.median(n for _, n, _ in results)
    ratios = [o / n for o, n, _ in results]
    rows.append(f"| {workers}x{ps} | {native:.3f} | {ours:.3f} | "
                f"{ours / native:.2f}x | {min(ratios):.2f}-{max(ratios):.2f}x "
                f"| {max(d for _, _, d in results):.1e} |")
  print("| cluster (workers x ps) | ms/step native | ms/step ours | "
        "ours/native | range over runs | largest loss difference |")
  print("|---|---:|---:|---:|---:|---:|")
  print("\n".join(rows))
  return 0


if __name__ == "__main__":
  sys.exit(main())
