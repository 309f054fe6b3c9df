"""Benchmarks: native TensorFlow strategy vs compat_distribute vs no strategy.

Usage::

    python benchmarks/run.py            # the full run (a few minutes)
    python benchmarks/run.py --quick    # a short run, for checking it works
    python benchmarks/run.py --only "eager run" --strategies one_device

Everything runs in one process.  For each (strategy, workload) the
variants are built once, then timed in interleaved rounds, in orders where
each variant follows each other one equally often (``balanced_orders``),
so that drift in machine load, and work a variant leaves running after its
block, hit them alike.  Each round times one block of units per variant; the table
shows the median over rounds of the time per unit, and the ratios
ours/native and ours/none.  For CentralStorage's eager ``run``, training
step, trace and v1 step a fourth variant, the same two-replica work written
by hand without a strategy, shows the floor any two-replica strategy can
reach (column "by hand", ratio to native).  Column "ours/limit" divides ours
by the limit measured in the same rounds (``LIMITS``: the by-hand variant or
no strategy) next to its target.  These are measurements, not tests: nothing
here asserts a time.
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
import traceback
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # pylint: disable=g-import-not-at-top

NUM_LOGICAL_CPUS = 2


def configure_logical_cpus(count: int = NUM_LOGICAL_CPUS) -> None:
  """Splits the host CPU into ``count`` logical devices; must precede TF's
  init (``main`` calls it; ``sweep.py`` calls it with its replica count)."""
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * count)


tf.get_logger().setLevel("ERROR")  # TF's deprecation and eager-CS warnings
warnings.filterwarnings("ignore", module="tensorflow")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import v1_step  # pylint: disable=g-import-not-at-top,wrong-import-position
import workloads  # pylint: disable=g-import-not-at-top,wrong-import-position

STRATEGIES = {
    "one_device": "OneDeviceStrategy('/cpu:0')",
    "central_storage": "CentralStorageStrategy(2 logical CPUs)",
}
# (strategy kind, workload name, builder)
CASES = [(kind, name, build)
         for kind in STRATEGIES for name, build in workloads.WORKLOADS.items()]
CASES.append(("central_storage", v1_step.NAME, v1_step.build))
# ours/native targets from the issues (none set for OneDevice tracing).
TARGETS = {
    ("one_device", "eager run (x + 1)"): 0.5,
    ("one_device", "tf.function MLP step"): 1.0,
    ("one_device", "dataset, per batch"): 1.0,
    ("central_storage", "eager run (x + 1)"): 0.5,
    ("central_storage", "tf.function MLP step"): 1.0,
    ("central_storage", "trace MLP step"): 0.8,
    ("central_storage", "dataset, per batch"): 1.0,
    ("central_storage", v1_step.NAME): 1.0,
}
# The limit each case is held to (issue 22), measured in the same rounds:
# (variant that is the limit, largest ours/limit).
LIMITS = {
    ("central_storage", "eager run (x + 1)"): ("none", 3.0),
    ("central_storage", "tf.function MLP step"): ("by_hand", None),
    ("central_storage", "trace MLP step"): ("by_hand", 1.1),
    ("central_storage", "dataset, per batch"): ("none", 1.2),
    ("central_storage", v1_step.NAME): ("by_hand", 1.1),
}


def _time_block(unit: workloads.Unit, scale: float) -> float:
  """Seconds per unit over one block."""
  n = max(1, int(round(unit.per_block * scale)))
  call = unit.call
  start = time.perf_counter()
  for _ in range(n):
    call()
  unit.sync()
  return (time.perf_counter() - start) / n


def _build(kind: str, build, variant: str):
  try:
    unit = build(kind, variant)
    unit.call()
    unit.sync()
    return unit, None
  except workloads.NotApplicable:
    return None, None
  except Exception as e:  # pylint: disable=broad-except
    first_line = (str(e).splitlines() or [""])[0]
    return None, f"{type(e).__name__}: {first_line[:120]}"


def balanced_orders(n: int) -> list[list[int]]:
  """Orders of ``n`` variants in which each variant comes right after each
  other one equally often (a Williams design): a variant that leaves work
  behind (a session's threads still busy, a prefetch refilling) then slows
  every other variant alike, not the one that always follows it.

  >>> balanced_orders(4)
  [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
  """
  first, low, high = [0], 1, n - 1
  while len(first) < n:
    first.append(low)
    low += 1
    if len(first) < n:
      first.append(high)
      high -= 1
  orders = [[(i + shift) % n for i in first] for shift in range(n)]
  if n % 2:  # odd: the reversed orders balance the pairs
    orders += [order[::-1] for order in orders]
  return orders


def measure(kind: str, name: str, build, rounds: int, scale: float,
            verbose: bool) -> dict:
  """Medians (seconds per unit) for each variant, or the build error."""
  units, errors = {}, {}
  for variant in workloads.VARIANTS:
    units[variant], errors[variant] = _build(kind, build, variant)
    if errors[variant] and verbose:
      print(f"  [{kind} / {name} / {variant}] not measured: "
            f"{errors[variant]}", file=sys.stderr)
  live = [v for v in workloads.VARIANTS if units[v] is not None]
  samples = {v: [] for v in live}
  orders = balanced_orders(len(live)) if live else [[]]
  for r in range(rounds):
    for i in orders[r % len(orders)]:
      variant = live[i]
      samples[variant].append(_time_block(units[variant], scale))
  return {v: (statistics.median(samples[v]) if v in samples else None)
          for v in workloads.VARIANTS} | {"errors": errors}


def _fmt_time(seconds) -> str:
  if seconds is None:
    return "n/a"
  if seconds >= 1e-3:
    return f"{seconds * 1e3:.2f} ms"
  return f"{seconds * 1e6:.1f} µs"


def _fmt_ratio(a, b) -> str:
  if a is None or b is None:
    return "n/a"
  return f"{a / b:.2f}x"


def table(results: list, markdown: bool) -> str:
  header = ["strategy", "workload", "native TF", "ours", "no strategy",
            "ours/native", "target", "ours/none", "by hand",
            "by hand/native", "ours/limit", "limit target"]
  rows, notes = [], []
  for kind, name, r in results:
    target = TARGETS.get((kind, name))
    limit, limit_target = LIMITS.get((kind, name), (None, None))
    rows.append([STRATEGIES[kind], name, _fmt_time(r["native"]),
                 _fmt_time(r["ours"]), _fmt_time(r["none"]),
                 _fmt_ratio(r["ours"], r["native"]),
                 f"<= {target:.1f}x" if target else "-",
                 _fmt_ratio(r["ours"], r["none"]),
                 _fmt_time(r["by_hand"]) if r["by_hand"] else "-",
                 _fmt_ratio(r["by_hand"], r["native"]) if r["by_hand"]
                 else "-",
                 (_fmt_ratio(r["ours"], r[limit]) +
                  (" (by hand)" if limit == "by_hand" else " (none)"))
                 if limit else "-",
                 f"<= {limit_target:.1f}x" if limit_target else "-"])
    notes += [f"n/a: {STRATEGIES[kind]} / {name} / {v}: {e}"
              for v, e in r["errors"].items() if e]
  if markdown:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] * 2 + ["---:"] * 10) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
  else:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}"
                    for i, w in enumerate(widths))
    lines = [fmt.format(*header)] + [fmt.format(*row) for row in rows]
  return "\n".join(lines + ([""] + notes if notes else []))


def machine() -> str:
  return (f"Python {platform.python_version()}, TensorFlow {tf.__version__}, "
          f"{platform.machine()}, {os.cpu_count()} cores "
          f"({NUM_LOGICAL_CPUS} logical TF CPU devices)")


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="few rounds and short blocks (a smoke run)")
  parser.add_argument("--rounds", type=int, default=None,
                      help="interleaved rounds per case (default 15, quick 3)")
  parser.add_argument("--only", default="",
                      help="only workloads whose name contains this text")
  parser.add_argument("--strategies", default=",".join(STRATEGIES),
                      help="comma-separated subset of " + ",".join(STRATEGIES))
  parser.add_argument("--markdown", action="store_true",
                      help="print the table as Markdown")
  args = parser.parse_args(argv)
  configure_logical_cpus()
  rounds = args.rounds or (3 if args.quick else 15)
  scale = 0.2 if args.quick else 1.0
  kinds = [k.strip() for k in args.strategies.split(",") if k.strip()]
  for k in kinds:
    if k not in STRATEGIES:
      parser.error(f"unknown strategy {k!r}; choose from {list(STRATEGIES)}")
  print(f"# {machine()}")
  print(f"# command: python benchmarks/run.py "
        f"{shlex.join(sys.argv[1:] if argv is None else argv)}"
        f"  ({rounds} rounds, block scale {scale})")
  results = []
  for kind, name, build in CASES:
    if kind not in kinds or args.only not in name:
      continue
    print(f"... {STRATEGIES[kind]}: {name}", file=sys.stderr, flush=True)
    try:
      r = measure(kind, name, build, rounds, scale, verbose=True)
    except Exception:  # pylint: disable=broad-except
      traceback.print_exc()
      continue
    results.append((kind, name, r))
  print(table(results, args.markdown))
  return 0


if __name__ == "__main__":
  sys.exit(main())
