"""Floors under three of issue 22's limits, measured next to ours.

Usage::

    python benchmarks/floors.py              # about a minute
    python benchmarks/floors.py --rounds 41

``run.py`` holds CentralStorage's eager ``run`` to 3x the bare op, its
trace to 1.1x the by-hand trace and its v1 ``Session.run`` step to 1.1x the
by-hand v1 graph.  This measures what lies between: the least any strategy
must do there, written out, in the same process (two logical CPUs) and in
interleaved rounds (``run.balanced_orders``).

* **eager run**, per call, built up a layer at a time: the bare op
  (``x + 1``); by hand (the op under each replica's ``tf.device``); *devices
  only* (the same with the cheapest device entry compat_distribute has);
  *devices in scope* (and the strategy's scope around them); the *replica
  loop* (and each replica's context on TensorFlow's strategy stack, with
  its summary flag, each replica's arguments, the results regrouped);
  *+ what run must add* (``run``'s argument checks, the variable-creator
  check and the caller's summary state put back: the least a ``run`` can
  be, with no ``merge_call``, no shared variables, no caller state kept
  for worker threads or for recovering from an interrupt); and
  compat_distribute's ``run``.  Each step's cost is its difference from
  the one before.  Beside each time, the Python bytecodes one call
  executes: a count this host's speed does not move (the ops' C++ work is
  the same in every variant that runs two ops), so the layers can be
  compared when the times are noisy.
* **trace** of the CentralStorage MLP step (``workloads.trace``), built up
  the same way: by hand; by hand *in functions* (each replica's passes, the
  gradients' update and each variable's update a function of its own, as
  ours has them: AutoGraph converts each call of each, ten conversions per
  trace as for ours, where ``run``, ``merge_call`` and ``extended.update``
  have it convert the functions they are given); *+ replica 1 on a thread*
  (traced on a second thread, one hand-over there and back: what a
  strategy pays for letting a replica pause in ``merge_call`` while the
  next one runs); *+ a strategy current* on both threads (TensorFlow's
  graph-op builder asks, for every op it adds to a ``tf.function``'s graph
  while a strategy is current, whether execution outside functions is
  eager); compat_distribute's step; and by hand, in functions, and ours
  again with AutoGraph off (``tf.function(autograph=False)``).  Every
  variant traces the same graph (the same ops on the same devices).

* **v1 step** (``v1_step``): by hand (each global batch cut with
  ``tf.split`` into equal pieces, which fails on a batch that does not
  divide evenly); by hand with each global batch cut by TensorFlow's rule
  (``ceil(b / n)`` rows per replica in turn, ``input.rebatch``: what a
  strategy must do with a batch whose size is only known when it is
  read); and compat_distribute's step.

These are timings, not tests.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
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
  from compat_distribute.replicas import caller_state  # pylint: disable=g-import-not-at-top
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
    token = context.enter_scope(strategy, strategy.extended._scope_plan,  # pylint: disable=protected-access
                                variable_getter=False)
    try:
      return devices_only()
    finally:
      context.exit_scope(token)

  modes = [ctx._thread_context for ctx in contexts]  # pylint: disable=protected-access
  flags = [ctx._records_summaries for ctx in contexts]  # pylint: disable=protected-access
  strategy_creator = strategy.extended._variable_creator  # pylint: disable=protected-access

  def replica_loop(fn=add_one, args=args, kwargs=None, as_run=False):
    """The strategy's scope; in it, each replica's device and its context
    entered as ours enters it (its strategy-stack entry and summary flag
    set directly), its arguments picked; the results regrouped.

    ``as_run`` adds what ``strategy.run`` must do beyond that, and no more:
    its argument checks, the check that the strategy's variable creator is
    innermost, and the caller's summary state put back (a replica may set
    its step) -- no ``merge_call``, no run object kept between calls, no
    caller state kept for worker threads or for recovering from an
    interrupt, no dispatch through ``extended`` and the runner.
    """
    if as_run:
      if not callable(fn):
        raise TypeError(fn)
      if not isinstance(args, (list, tuple)):
        raise ValueError(args)
      if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(kwargs)
    kwargs = kwargs or {}
    token = context.enter_scope(strategy, strategy.extended._scope_plan,  # pylint: disable=protected-access
                                variable_getter=False)
    try:
      if as_run:
        caller_summary = caller_state.summary_snapshot()
        creators = _tf_private.variable_creators(
            tf.compat.v1.get_default_graph())
        if not creators or creators[-1][1] != strategy_creator:
          raise NotImplementedError("a creator above the strategy's")
      stack = _tf_private.strategy_stack()
      summary = _tf_private.summary_state()
      outer_flag = summary.is_recording_distribution_strategy
      results = []
      try:
        for i, device in enumerate(devices):
          entered = _tf_private.enter_eager_device(device)
          stack.append(modes[i])
          summary.is_recording_distribution_strategy = flags[i]
          try:
            results.append(fn(*values_lib.select_replica(i, args),
                              **values_lib.select_replica(i, kwargs)))
          finally:
            context.pop_from(stack, modes[i])
            _tf_private.exit_eager_device(entered)
      finally:
        summary.is_recording_distribution_strategy = outer_flag
        if as_run:
          caller_state.restore_summary(caller_summary)
      return values_lib.regroup(results)
    finally:
      context.exit_scope(token)

  def timed(variant: str) -> Callable[[], Any]:
    return workloads.eager_run("central_storage", variant).call

  return {"bare op": timed("none"), "by hand": timed("by_hand"),
          "devices only": devices_only, "devices in scope": devices_in_scope,
          "replica loop": replica_loop,
          "+ what run must add": lambda: replica_loop(add_one, args,
                                                      as_run=True),
          "ours": timed("ours")}


def _v1_variants() -> dict[str, Callable[[], Any]]:
  import v1_step  # pylint: disable=g-import-not-at-top
  from compat_distribute.input import rebatch  # pylint: disable=g-import-not-at-top

  def by_tensorflows_rule(t, n):
    return list(rebatch.split_element(t, n))

  return {
      "by hand": v1_step.build("central_storage", "by_hand").call,
      "by hand, split by TensorFlow's rule": v1_step.build(
          "central_storage", "by_hand", split=by_tensorflows_rule).call,
      "ours": v1_step.build("central_storage", "ours").call,
  }


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

  @tf.autograph.experimental.do_not_convert  # as a strategy's own code
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

  def replica_fn(x, y):
    return model.loss_and_grads(x, y)

  def apply_fn(grads):
    for v, *per_replica in zip(model.variables, *grads):
      workloads._sgd_update(v, tf.math.add_n(per_replica))  # pylint: disable=protected-access

  def in_functions_step(xs, ys):
    """``by_hand_step`` with its pieces in functions, as ours has them: each
    replica's function, the gradients' update and each variable's update.
    AutoGraph converts each call of each (ten conversions per trace, as for
    ours, where ``run``, ``merge_call`` and ``extended.update`` have it
    convert the functions they are given)."""
    grads, losses = [], []
    for device, xi, yi in zip(workloads.DEVICES, xs, ys):
      with tf.device(device):
        loss, replica_grads = replica_fn(xi, yi)
      losses.append(loss)
      grads.append(replica_grads)
    with tf.device(workloads.DEVICES[0]):
      apply_fn(grads)
      return tf.math.add_n(losses)

  def threaded_step(xs, ys, scope=contextlib.nullcontext):
    """``in_functions_step`` with replica 1 traced on ``helper``, each
    thread inside ``scope()``."""
    graph = tf.compat.v1.get_default_graph()
    grads, losses = [], []
    for i, (device, xi, yi) in enumerate(zip(workloads.DEVICES, xs, ys)):
      def replica(device=device, xi=xi, yi=yi):
        with graph.as_default(), scope(), tf.device(device):
          return replica_fn(xi, yi)
      loss, replica_grads = replica() if i == 0 else helper.call(replica)
      losses.append(loss)
      grads.append(replica_grads)
    with scope(), tf.device(workloads.DEVICES[0]):
      apply_fn(grads)
      return tf.math.add_n(losses)

  def traced(step, *inputs, autograph=True):
    return lambda: tf.function(step, autograph=autograph).get_concrete_function(
        *inputs)

  return {
      "by hand": traced(by_hand_step, xs, ys),
      "by hand, in functions": traced(in_functions_step, xs, ys),
      "+ replica 1 on a thread": traced(threaded_step, xs, ys),
      "+ a strategy current": traced(
          functools.partial(threaded_step, scope=strategy.scope), xs, ys),
      "ours": traced(ours_step, x, y),
      "by hand, AutoGraph off": traced(by_hand_step, xs, ys, autograph=False),
      "by hand, in functions, AutoGraph off": traced(
          in_functions_step, xs, ys, autograph=False),
      "ours, AutoGraph off": traced(ours_step, x, y, autograph=False),
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


def python_bytecodes(call: Callable[[], Any]) -> int:
  """The Python bytecodes one ``call()`` executes (``sys.settrace``'s
  opcode events), after a first call has warmed it up.

  >>> python_bytecodes(lambda: None) < python_bytecodes(lambda: [None] * 2)
  True
  """
  call()
  count = 0

  def trace(frame, event, arg):  # pylint: disable=unused-argument
    nonlocal count
    frame.f_trace_opcodes = True
    if event == "opcode":
      count += 1
    return trace

  sys.settrace(trace)
  try:
    call()
  finally:
    sys.settrace(None)
  return count


def _report(title: str, medians: dict[str, float], base: str,
            bytecodes: dict[str, int] | None = None) -> None:
  print(f"\n{title}\n")
  columns = f"| variant | time per call | / {base} |"
  rule = "|---|---:|---:|"
  if bytecodes:
    columns += f" Python bytecodes | / {base} |"
    rule += "---:|---:|"
  print(columns)
  print(rule)
  for name, seconds in medians.items():
    row = (f"| {name} | {run._fmt_time(seconds)} | "  # pylint: disable=protected-access
           f"{seconds / medians[base]:.2f}x |")
    if bytecodes:
      row += f" {bytecodes[name]} | {bytecodes[name] / bytecodes[base]:.2f}x |"
    print(row)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=21,
                      help="interleaved rounds per measurement (default 21)")
  args = parser.parse_args(argv)
  run.configure_logical_cpus()
  print(f"# {run.machine()}")
  eager = _eager_variants()
  _report("Eager run, CentralStorage with 2 replicas",
          _measure(eager, args.rounds, per_block=400), "bare op",
          {name: python_bytecodes(call) for name, call in eager.items()})
  _report("Trace of the CentralStorage MLP step, 2 replicas",
          _measure(_trace_variants(), args.rounds, per_block=2), "by hand")
  _report("v1 Session.run step, CentralStorage with 2 replicas",
          _measure(_v1_variants(), args.rounds, per_block=50), "by hand")
  return 0


if __name__ == "__main__":
  sys.exit(main())
