"""Past one machine: the v1 ParameterServerStrategy step on loopback clusters.

Usage::

    python benchmarks/cluster.py          # 1x1, 2x1, 2x2: 2 epochs, 4 pairs
    python benchmarks/cluster.py --quick    # 1 run of 1 epoch per shape

For each shape (workers x parameter servers) a ``LocalCluster`` of
``tf.distribute.Server`` processes on 127.0.0.1 is started and the demo's v1
training program (``compat_distribute.demo.cluster``: an MLP, Adam, the
variables on the ps tasks, one ``Session`` per worker) is trained on it under
TensorFlow's ``ParameterServerStrategyV1`` and under ours, on the same
servers, with the same data, initial weights and update order.  The time per
step is the median of the workers' ``Session.run`` of one training step (not
the wait for a worker's turn), taken from the last epoch.  Each shape gets
one cluster and ``--runs`` pairs of runs on it, alternating which
implementation goes first (each run in its own variable scope); the table
shows the medians over runs, the median and the range of ours/native per
pair, and the largest difference of the per-epoch losses.  Measurements,
not tests.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHAPES = ((1, 1), (2, 1), (2, 2))


def _train(cluster: Any, impl: str, run_id: str, epochs: int,
           samples: int) -> tuple[float, list[float]]:
  """One training run of every worker: (median over workers of the last
  epoch's ms/step, the mean loss per epoch)."""
  results = cluster.run_workers(
      "compat_distribute.demo.cluster",
      ["--impl", impl, "--run_id", run_id, "--epochs", str(epochs),
       "--seed", "0", "--batch_size", "64", "--samples", str(samples)],
      timeout=600.0, launcher=["-m"])
  for r in results:
    if r.returncode != 0 or r.timed_out:
      raise RuntimeError(f"{impl}: {r.task} failed (exit {r.returncode}"
                         f"{', timed out' if r.timed_out else ''}):\n"
                         f"{r.stderr[-3000:]}")
  outputs = [r.json() for r in results]
  ms = statistics.median(o["ms_per_step"][-1] for o in outputs)
  losses = [statistics.fmean(o["losses"][e] for o in outputs)
            for e in range(epochs)]
  return ms, losses


def run_shape(workers: int, ps: int, runs: int, epochs: int, samples: int
              ) -> tuple[list[float], list[float], float]:
  """ms/step of ours and of native in each run, and the largest loss
  difference.  One cluster per shape; the runs alternate which
  implementation goes first (native, ours, then ours, native, ...)."""
  from compat_distribute.cluster import local  # pylint: disable=g-import-not-at-top
  ours, native, diff = [], [], 0.0
  with local.LocalCluster(num_workers=workers, num_ps=ps) as cluster:
    for r in range(runs):
      order = ("native", "ours") if r % 2 == 0 else ("ours", "native")
      out = {impl: _train(cluster, impl, f"{impl}{r}", epochs, samples)
             for impl in order}
      ours.append(out["ours"][0])
      native.append(out["native"][0])
      diff = max([diff] + [abs(a - b) for a, b in
                           zip(out["ours"][1], out["native"][1])])
  return ours, native, diff


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="one run of one epoch per shape")
  parser.add_argument("--runs", type=int, default=None,
                      help="pairs of runs per shape (default 4, quick 1)")
  parser.add_argument("--epochs", type=int, default=None,
                      help="epochs per run; the last is timed (default 2)")
  parser.add_argument("--samples", type=int, default=None,
                      help="training examples (default 4096, quick 1024)")
  args = parser.parse_args(argv)
  runs = args.runs or (1 if args.quick else 4)
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
    print(f"... {workers}x{ps}: {runs} run(s)", file=sys.stderr, flush=True)
    ours, native, diff = run_shape(workers, ps, runs, epochs, samples)
    ratios = [o / n for o, n in zip(ours, native)]
    rows.append(f"| {workers}x{ps} | {statistics.median(native):.3f} | "
                f"{statistics.median(ours):.3f} | "
                f"{statistics.median(ratios):.2f}x | "
                f"{min(ratios):.2f}-{max(ratios):.2f}x | {diff:.1e} |")
  print("| cluster (workers x ps) | ms/step native | ms/step ours | "
        "ours/native | range over runs | largest loss difference |")
  print("|---|---:|---:|---:|---:|---:|")
  print("\n".join(rows))
  return 0


if __name__ == "__main__":
  sys.exit(main())
