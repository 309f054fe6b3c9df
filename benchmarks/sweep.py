"""How the cost grows: sweeps over the replica count and the model width.

Usage::

    python benchmarks/sweep.py OUTDIR            # the full sweep (1-2 min)
    python benchmarks/sweep.py OUTDIR --quick    # the short form (tox -e bench)

CentralStorageStrategy, native TensorFlow against ours, beside the same work
by hand (each replica under its own ``tf.device``, ``add_n`` on ``/cpu:0``;
where the workload has one) and with no strategy on one device:

* **replicas** 1, 2, 4, 8 (logical CPUs), the table's 32-64-10 MLP: eager
  ``run``, the ``tf.function`` step, its trace, the dataset per batch and
  the v1 ``Session.run`` step;
* **width** 32 ... 4096 (the MLP's hidden layer; the eager ``run``'s tensor
  and the dataset's rows are ``64 x width``) at 2 replicas: eager ``run``,
  the ``tf.function`` step, the dataset and the v1 step.

TensorFlow fixes its logical devices when it initialises, so every replica
count runs in a process of its own, configured with exactly that many
logical CPUs (what a user with N devices gets; a process made with 8 and
timing subsets would carry 8 devices into every v1 ``Session`` and every
eager context, and let one point's warm caches and traces flatter the
next).  The width sweep runs in one more process, at 2 replicas.  Inside a
process the variants are timed interleaved, as in ``run.py``.

Writes ``OUTDIR/sweep.json`` (the medians), ``OUTDIR/sweep.md`` (the
tables) and, with matplotlib installed (``pip install .[bench]``),
``OUTDIR/sweep.png``: time per unit against replicas and against width,
one line per variant, log axes.  Measurements, not tests.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
REPLICAS = (1, 2, 4, 8)
WIDTHS_FULL = (32, 128, 512, 2048, 4096)
WIDTHS_QUICK = (32, 512, 4096)
REPLICA_WORKLOADS = ("eager run (x + 1)", "tf.function MLP step",
                     "trace MLP step", "dataset, per batch",
                     "v1 Session.run MLP step")
WIDTH_WORKLOADS = ("eager run (x + 1)", "tf.function MLP step",
                   "dataset, per batch", "v1 Session.run MLP step")
VARIANTS = ("native", "ours", "by_hand", "none")
LABELS = {"native": "native TF", "ours": "compat_distribute",
          "by_hand": "by hand (no strategy, N devices)",
          "none": "no strategy (1 device)"}


def child(args: argparse.Namespace) -> None:
  """Times the workloads at one replica count (each width in turn); prints
  one JSON line per point."""
  sys.path.insert(0, HERE)
  import run  # pylint: disable=g-import-not-at-top
  import v1_step  # pylint: disable=g-import-not-at-top
  import workloads  # pylint: disable=g-import-not-at-top
  run.configure_logical_cpus(args.replicas)
  builders = dict(workloads.WORKLOADS, **{v1_step.NAME: v1_step.build})
  names = args.workloads.split("|")
  for width in [int(w) for w in args.widths.split(",")]:
    if args.widths == "0":
      workloads.configure(args.replicas)
    else:
      workloads.configure(args.replicas, hidden=width, width=width)
    for name in names:
      print(f"... {args.replicas} replicas, width {width}: {name}",
            file=sys.stderr, flush=True)
      r = run.measure("central_storage", name, builders[name], args.rounds,
                      args.scale, verbose=True)
      print(json.dumps({"replicas": args.replicas, "width": width,
                        "workload": name,
                        **{v: r[v] for v in VARIANTS}}), flush=True)


def _spawn(replicas: int, widths: str, names: tuple, rounds: int,
           scale: float) -> list[dict]:
  cmd = [sys.executable, os.path.abspath(__file__), "--child",
         "--replicas", str(replicas), "--widths", widths,
         "--workloads", "|".join(names), "--rounds", str(rounds),
         "--scale", str(scale)]
  out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True,
                       timeout=3600)
  return [json.loads(line) for line in out.stdout.splitlines()
          if line.startswith("{")]


def _fmt(seconds) -> str:
  if seconds is None:
    return "-"
  return (f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3
          else f"{seconds * 1e6:.1f} µs")


def tables(points: list[dict]) -> str:
  """Markdown: one table per sweep and workload."""
  out = []
  for sweep, key, names in (("replicas", "replicas", REPLICA_WORKLOADS),
                            ("width", "width", WIDTH_WORKLOADS)):
    for name in names:
      rows = sorted((p for p in points
                     if p["sweep"] == sweep and p["workload"] == name),
                    key=lambda p: p[key])
      if not rows:
        continue
      out.append(f"\n**{name}**, against {key}"
                 + (" (2 replicas)" if key == "width" else "") + "\n")
      out.append(f"| {key} | " + " | ".join(LABELS[v] for v in VARIANTS)
                 + " | ours/native | ours/by hand |")
      out.append("|---:|" + "---:|" * (len(VARIANTS) + 2))
      for p in rows:
        ratio = (f"{p['ours'] / p['native']:.2f}x"
                 if p["ours"] and p["native"] else "-")
        hand = (f"{p['ours'] / p['by_hand']:.2f}x"
                if p["ours"] and p["by_hand"] else "-")
        out.append(f"| {p[key]} | " + " | ".join(_fmt(p[v]) for v in VARIANTS)
                   + f" | {ratio} | {hand} |")
  return "\n".join(out).lstrip("\n") + "\n"


def plot(points: list[dict], path: str, title: str) -> bool:
  """The PNG: top row against replicas, bottom row against width."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  cols = len(REPLICA_WORKLOADS)
  fig, axes = plt.subplots(2, cols, figsize=(4 * cols, 7.5))
  styles = {"native": ("tab:red", "o"), "ours": ("tab:blue", "s"),
            "by_hand": ("tab:green", "^"), "none": ("tab:gray", "x")}
  for row, (sweep, key, names) in enumerate(
      (("replicas", "replicas", REPLICA_WORKLOADS),
       ("width", "width", WIDTH_WORKLOADS))):
    for col in range(cols):
      ax = axes[row][col]
      if col >= len(names):
        ax.axis("off")
        continue
      name = names[col]
      rows = sorted((p for p in points
                     if p["sweep"] == sweep and p["workload"] == name),
                    key=lambda p: p[key])
      for v in VARIANTS:
        xs = [p[key] for p in rows if p[v]]
        ys = [p[v] * 1e6 for p in rows if p[v]]
        if xs:
          color, marker = styles[v]
          ax.plot(xs, ys, marker=marker, color=color, label=LABELS[v])
      ax.set_xscale("log", base=2)
      ax.set_yscale("log")
      ticks = sorted({p[key] for p in rows})
      ax.set_xticks(ticks, [str(t) for t in ticks])
      ax.set_title(name + (" (2 replicas)" if key == "width" else ""),
                   fontsize=9)
      ax.set_xlabel("replicas (logical CPUs)" if key == "replicas"
                    else "MLP hidden width")
      if col == 0:
        ax.set_ylabel("µs per unit (median)")
      ax.grid(True, which="both", alpha=0.3)
  handles, labels = axes[0][0].get_legend_handles_labels()
  fig.legend(handles, labels, loc="lower right", fontsize=9,
             bbox_to_anchor=(0.98, 0.08))
  fig.suptitle(title, fontsize=10)
  fig.tight_layout(rect=(0, 0, 1, 0.96))
  fig.savefig(path, dpi=80)
  plt.close(fig)
  return True


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("outdir", nargs="?", default=None,
                      help="folder for sweep.json, sweep.md and sweep.png")
  parser.add_argument("--quick", action="store_true",
                      help="fewer widths, rounds and calls (tox -e bench)")
  parser.add_argument("--rounds", type=int, default=None,
                      help="interleaved rounds per point (default 7, quick 3)")
  parser.add_argument("--replicas", type=int, default=None,
                      help=argparse.SUPPRESS)
  parser.add_argument("--widths", default="0", help=argparse.SUPPRESS)
  parser.add_argument("--workloads", default="", help=argparse.SUPPRESS)
  parser.add_argument("--scale", type=float, default=1.0,
                      help=argparse.SUPPRESS)
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    child(args)
    return 0
  if not args.outdir:
    parser.error("name the output folder: python benchmarks/sweep.py OUTDIR")
  os.makedirs(args.outdir, exist_ok=True)
  rounds = args.rounds or (3 if args.quick else 7)
  scale = 0.2 if args.quick else 0.5
  widths = WIDTHS_QUICK if args.quick else WIDTHS_FULL
  start = time.monotonic()
  points = []
  for n in REPLICAS:
    print(f"== {n} replicas", file=sys.stderr, flush=True)
    points += [dict(p, sweep="replicas") for p in
               _spawn(n, "0", REPLICA_WORKLOADS, rounds, scale)]
  print(f"== widths {widths} at 2 replicas", file=sys.stderr, flush=True)
  points += [dict(p, sweep="width") for p in
             _spawn(2, ",".join(map(str, widths)), WIDTH_WORKLOADS, rounds,
                    scale)]
  import platform  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  title = (f"CentralStorageStrategy: median time per unit, TensorFlow "
           f"{tf.__version__}, {os.cpu_count()} cores, {rounds} rounds")
  meta = {"python": platform.python_version(), "tensorflow": tf.__version__,
          "cores": os.cpu_count(), "rounds": rounds, "scale": scale,
          "seconds": round(time.monotonic() - start)}
  with open(os.path.join(args.outdir, "sweep.json"), "w") as f:
    json.dump({"meta": meta, "points": points}, f, indent=1)
  text = f"{title}\n\n{tables(points)}"
  with open(os.path.join(args.outdir, "sweep.md"), "w") as f:
    f.write(text)
  print(text)
  png = os.path.join(args.outdir, "sweep.png")
  if plot(points, png, title):
    print(f"wrote {png}")
  else:
    print("matplotlib is not installed (pip install .[bench]): no plot")
  return 0


if __name__ == "__main__":
  sys.exit(main())
