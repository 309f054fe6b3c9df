"""Floors under two of issue 22's limits, measured next to ours.

Usage::

    python benchmarks/floors.py              # about a minute
    python benchmarks/floors.py --rounds 41

``run.py`` holds CentralStorage's eager ``run`` to 3x the bare op and its
trace to 1.1x the by-hand trace.  This measures what lies between: the least
any strategy must do there, written out, in the same process (two logical
CPUs) and in interleaved rounds (``run.balanced_orders``).

* **eager run**, per call, built up a layer at a time: the bare op
  (``x + 1``); by hand (the op under each replica's ``tf.device``); *devices
  only* (the same with the cheapest device entry compat_distribute has);
  *devices in scope* (and the strategy's scope around them); the *replica
  loop*: what a strategy's ``run`` cannot leave out -- its scope, each
  replica's context on TensorFlow's strategy stack (with its summary flag)
  and its device, each replica's arguments, the results regrouped --
  and nothing else (no ``merge_call``, no shared variables, no caller state
  kept, no recovery from an interrupt); and compat_distribute's ``run``.
  Each step's cost is its difference from the one before.
* **trace** of the CentralStorage MLP step (``workloads.trace``): by hand;
  by hand with replica 1 traced on a second thread (one hand-over there and
  back: what a strategy pays for letting a replica pause in ``merge_call``
  while the next one runs); the same with a strategy current on both
  threads (TensorFlow's graph-op builder asks, for every op it adds to a
  ``tf.function``'s graph while a strategy is current, whether execution
  outside functions is eager: an ``init_scope`` per op);
  compat_distribute's step; and by hand and ours again with AutoGraph off
  (``tf.function(autograph=False)``): the API has AutoGraph convert each
  function a strategy is given -- ``fn``, ``merge_fn``, every
  ``extended.update`` function -- as TensorFlow does, where the by-hand
  step has fewer functions to convert.

These are timings, not tests.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
import time
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # pylint: disable=g-import-not-at-top

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # pylint: disable=g-import-not-at-top,wrong-import-position
import workloads  # pylint: disable=g-import-not-at-top,wrong-import-position


def _eager_variants() -> dict[str, Callable[[], Any]]:
  from compat_distribute import _tf_private  # pylint: disable=g-import-not-at-top
  from compat_distribute.replicas.context import ReplicaContext  # pylint: disable=g-import-not-at-top
  from compat_distribute.runtime import context  # pylint: disable=g-import-not-at-top
  from compat_distribute.values import distributed as values_lib  # pylint: disable=g-import-not-at-top

  devices = workloads.DEVICES
  strategy = workloads.make_strategy("central_storage", "ours")
  contexts = [ReplicaContext(strategy, i, len(devices))
              for i in range(len(devices))]
  args = (tf.constant(1.0),)

  def add_one(t):
    return t + 1

  def devices_only():
    results = []
    for device in devices:
      entered = _tf_private.enter_eager_device(device)
      try:
        results.append(add_one(*args))
      finally:
        _tf_private.exit_eager_device(entered)
    return results

  def devices_in_scope():
    token = context.enter_scope(strategy, variable_getter=False)
    try:
      return devices_only()
    finally:
      context.exit_scope(token)

  def replica_loop():
    token = context.enter_scope(strategy, variable_getter=False)
    try:
      results = []
      for i, device in enumerate(devices):
        entered = _tf_private.enter_eager_device(device)
        try:
          with contexts[i]:
            results.append(add_one(*values_lib.select_replica(i, args)))
        finally:
          _tf_private.exit_eager_device(entered)
      return values_lib.regroup(results)
    finally:
      context.exit_scope(token)

  def timed(variant: str) -> Callable[[], Any]:
    return workloads.eager_run("central_storage", variant).call

  return {"bare op": timed("none"), "by hand": timed("by_hand"),
          "devices only": devices_only, "devices in scope": devices_in_scope,
          "replica loop": replica_loop, "ours": timed("ours")}


class _Thread:
  """A thread that runs one job at a time for its caller, who waits."""

  def __init__(self) -> None:
    self._start = threading.Semaphore(0)
    self._done = threading.Semaphore(0)
    self._job: Callable[[], Any] = lambda: None
    self._result: Any = None
    threading.Thread(target=self._loop, daemon=True).start()

  def _loop(self) -> None:
    while True:
      self._start.acquire()
      self._result = self._job()
      self._done.release()

  def call(self, job: Callable[[], Any]) -> Any:
    self._job = job
    self._start.release()
    self._done.acquire()
    return self._result


def _trace_variants() -> dict[str, Callable[[], Any]]:
  model, by_hand_step, xs, ys = workloads._step_and_inputs(  # pylint: disable=protected-access
      "central_storage", "by_hand")
  _, ours_step, x, y = workloads._step_and_inputs(  # pylint: disable=protected-access
      "central_storage", "ours")
  strategy = workloads.make_strategy("central_storage", "ours")
  helper = _Thread()

  def threaded_step(xs, ys, scope=contextlib.nullcontext):
    """``by_hand_step`` with replica 1's passes traced on ``helper``, each
    thread inside ``scope()``."""
    graph = tf.compat.v1.get_default_graph()
    grads, losses = [], []
    for i, (device, xi, yi) in enumerate(zip(workloads.DEVICES, xs, ys)):
      def replica(device=device, xi=xi, yi=yi):
        with graph.as_default(), scope(), tf.device(device):
          return model.loss_and_grads(xi, yi)
      loss, replica_grads = replica() if i == 0 else helper.call(replica)
      losses.append(loss)
      grads.append(replica_grads)
    with scope(), tf.device(workloads.DEVICES[0]):
      for v, *per_replica in zip(model.variables, *grads):
        v.assign_sub(workloads.LEARNING_RATE * tf.math.add_n(per_replica))
      return tf.math.add_n(losses)

  def threaded_step_in_scope(xs, ys):
    return threaded_step(xs, ys, strategy.scope)

  return {
      "by hand": lambda: tf.function(by_hand_step).get_concrete_function(
          xs, ys),
      "by hand, replica 1 on a thread": lambda: tf.function(
          threaded_step).get_concrete_function(xs, ys),
      "by hand, replica 1 on a thread, a strategy current": lambda: tf.function(
          threaded_step_in_scope).get_concrete_function(xs, ys),
      "ours": lambda: tf.function(ours_step).get_concrete_function(x, y),
      "by hand, AutoGraph off": lambda: tf.function(
          by_hand_step, autograph=False).get_concrete_function(xs, ys),
      "ours, AutoGraph off": lambda: tf.function(
          ours_step, autograph=False).get_concrete_function(x, y),
  }


def _measure(variants: dict[str, Callable[[], Any]], rounds: int,
             per_block: int) -> dict[str, float]:
  """Median seconds per call of each variant over interleaved rounds."""
  names = list(variants)
  for call in variants.values():
    call()
  samples: dict[str, list[float]] = {name: [] for name in names}
  orders = run.balanced_orders(len(names))
  for r in range(rounds):
    for i in orders[r % len(orders)]:
      call = variants[names[i]]
      start = time.perf_counter()
      for _ in range(per_block):
        call()
      samples[names[i]].append((time.perf_counter() - start) / per_block)
  return {name: statistics.median(s) for name, s in samples.items()}


def _report(title: str, medians: dict[str, float], base: str) -> None:
  print(f"\n{title}\n")
  print(f"| variant | time per call | / {base} |")
  print("|---|---:|---:|")
  for name, seconds in medians.items():
    print(f"| {name} | {run._fmt_time(seconds)} | "  # pylint: disable=protected-access
          f"{seconds / medians[base]:.2f}x |")


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=21,
                      help="interleaved rounds per measurement (default 21)")
  args = parser.parse_args(argv)
  run.configure_logical_cpus()
  print(f"# {run.machine()}")
  _report("Eager run, CentralStorage with 2 replicas",
          _measure(_eager_variants(), args.rounds, per_block=400), "bare op")
  _report("Trace of the CentralStorage MLP step, 2 replicas",
          _measure(_trace_variants(), args.rounds, per_block=2), "by hand")
  return 0


if __name__ == "__main__":
  sys.exit(main())
