"""The demo: one small classifier trained under compat_distribute and under
native TensorFlow, side by side.

``python -m compat_distribute demo [flags]`` splits the host CPU into
``--replicas`` logical devices, makes a seeded synthetic 3-class problem
(nothing is downloaded), trains the same model from the same initial weights
under TensorFlow's strategy and under ours, and prints loss per epoch and
median time per step for both.

* ``--api v2``: a Keras ``Sequential`` model, ``compile`` + ``fit`` in the
  strategy's scope (Keras' progress bar on a terminal; one plain line per
  epoch when the output goes to a file or a pipe).
* ``--api v1``: a TF1 graph-mode program -- ``tf.Graph``, v1 variables, a
  ``tf.compat.v1.train`` optimizer, ``make_dataset_iterator``,
  ``experimental_run`` and a ``tf.compat.v1.Session``.
* ``--cluster WxP``: the v1 program under ``ParameterServerStrategy`` on a
  loopback cluster of W workers and P parameter servers, each a
  ``tf.distribute.Server`` process (see ``compat_distribute.demo.cluster``);
  ``--api`` is v2 by default, v1 with ``--cluster``; ``--api v2`` there:
  the Keras program on a TF2 cluster; ``--kill_worker_after N`` kills a
  worker after epoch N and resumes (``demo.cluster_restart``);
  ``--cluster Wx0 --api v2 --multi_worker``: the Keras program written for
  ``MultiWorkerMirroredStrategy``, ours beside TensorFlow's own
  (``demo.cluster_multi_worker``).

Each run says first what it trains under:

>>> describe("central_storage", "v1", 2)
'tf.compat.v1.distribute.experimental.CentralStorageStrategy, 2 replicas on 2 logical CPUs'

The table and the result of a run are in ``compat_distribute.demo.common``.
"""
from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any, Optional, Sequence

import numpy as np
from absl import app
from absl import flags

from compat_distribute import command_line
from compat_distribute.cluster import local as local_cluster
from compat_distribute.demo import cluster as cluster_demo
from compat_distribute.demo import cluster_multi_worker as multi_worker_demo
from compat_distribute.demo import cluster_restart
from compat_distribute.demo import common
from compat_distribute.demo.common import CLASSES
from compat_distribute.demo.common import FEATURES
from compat_distribute.demo.common import HIDDEN
from compat_distribute.demo.common import LEARNING_RATE
from compat_distribute.demo.common import LEGEND
from compat_distribute.demo.common import Result
from compat_distribute.demo.common import format_table
from compat_distribute.demo.common import initial_weights
from compat_distribute.demo.common import make_data
from compat_distribute.demo.common import v1_train_step

FLAGS = flags.FLAGS
flags.DEFINE_enum("strategy", "central_storage",
                  ["one_device", "central_storage"],
                  "Which strategy to train under (ours and TensorFlow's).")
flags.DEFINE_integer(
    "replicas", None, "Logical CPUs to create and replicas to train on "
    "(central_storage; default 2). one_device always runs 1 replica.",
    lower_bound=1)
flags.DEFINE_integer("epochs", 3, "Epochs to train for.", lower_bound=1)
flags.DEFINE_enum("api", None, ["v1", "v2"],
                  "v2: Keras fit; v1: graph mode with a tf.compat.v1.Session "
                  "(default: v2; with --cluster, v1: the "
                  "ParameterServerStrategy program).")
flags.DEFINE_integer("seed", 0, "Seed for the data and the initial weights.")
flags.DEFINE_integer("batch_size", 64, "Global batch size (split over the "
                     "replicas).", lower_bound=1)
flags.DEFINE_integer("samples", 1024, "Training examples to generate.",
                     lower_bound=1)
flags.DEFINE_string("json_out", None,
                    "Also write the results as JSON to this file.")
flags.DEFINE_string(
    "cluster", None, "WxP: start W worker and P parameter-server "
    "tf.distribute.Server processes on 127.0.0.1 and train the v1 program "
    "under ParameterServerStrategy (v1) on them, e.g. --cluster 2x1; with "
    "--api v2, the Keras program under CentralStorageStrategy on a "
    "chief and W workers and P ps tasks running 'serve'. --strategy and "
    "--replicas do not apply.")
flags.DEFINE_integer(
    "kill_worker_after", None, "N: with --cluster WxP --api v2, run the "
    "Keras program with its chief under 'run --max-restarts 1', kill the "
    "last worker after epoch N and start it again; the program resumes "
    "from its checkpoint and must end at the weights of an uninterrupted "
    "run (N below --epochs).", lower_bound=1)
flags.DEFINE_bool(
    "multi_worker", False, "With --cluster Wx0 --api v2: the Keras program "
    "written for MultiWorkerMirroredStrategy on W workers, ours (under 'run',"
    " Keras 3) beside TensorFlow's own with tf-keras (Keras 2).")

@flags.multi_flags_validator(
    ["strategy", "replicas"],
    message="--strategy=one_device runs exactly one replica; drop --replicas "
    "or use --strategy=central_storage for several.")
def _one_device_has_one_replica(values: dict) -> bool:
  return values["strategy"] != "one_device" or values["replicas"] in (None, 1)


def configure_logical_cpus(count: int) -> None:
  """Splits the host CPU into ``count`` logical devices; must run before
  TensorFlow initialises its devices."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cpu = tf.config.list_physical_devices("CPU")[0]
  try:
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * count)
  except RuntimeError as e:
    have = len(tf.config.list_logical_devices("CPU"))
    if have < count:
      raise RuntimeError(
          f"The demo needs {count} logical CPUs but TensorFlow is already "
          f"initialised with {have} ({e}). Run the demo in a fresh process: "
          "python -m compat_distribute demo --replicas "
          f"{count}.") from e


def make_strategy(impl: str, api: str, kind: str, replicas: int) -> Any:
  """``impl`` "ours" or "native"; the v1 or v2 class of ``kind``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if impl == "ours":
    if api == "v1":
      from compat_distribute import v1 as module  # pylint: disable=g-import-not-at-top
    else:
      from compat_distribute import v2 as module  # pylint: disable=g-import-not-at-top
  else:
    module = tf.compat.v1.distribute if api == "v1" else tf.distribute
  if kind == "one_device":
    return module.OneDeviceStrategy("/cpu:0")
  return module.experimental.CentralStorageStrategy(
      compute_devices=[f"/cpu:{i}" for i in range(replicas)],
      parameter_device="/cpu:0")


def _epoch_summary(step_losses: list[float], step_times: list[float]):
  return float(np.mean(step_losses)), 1000.0 * float(np.median(step_times))


def train_v2(strategy: Any, label: str, data: tuple, epochs: int,
             batch_size: int, seed: int) -> Result:
  """Keras ``fit`` in ``strategy``'s scope, from seeded initial weights."""
  import keras  # pylint: disable=g-import-not-at-top
  x, y = data
  times: list[list[float]] = []

  class StepTimer(keras.callbacks.Callback):

    def on_epoch_begin(self, epoch, logs=None):
      times.append([])

    def on_train_batch_begin(self, batch, logs=None):
      self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
      times[-1].append(time.perf_counter() - self._start)

  keras.utils.set_random_seed(seed)
  with strategy.scope():
    model = keras.Sequential([
        keras.Input((FEATURES,)),
        keras.layers.Dense(HIDDEN, activation="relu"),
        keras.layers.Dense(HIDDEN, activation="relu"),
        keras.layers.Dense(CLASSES),
    ])
    model.compile(
        optimizer=keras.optimizers.Adam(LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"])
  history = model.fit(x, y, batch_size=batch_size, epochs=epochs,
                      shuffle=False, verbose=progress_verbosity(),
                      callbacks=[StepTimer()])
  ms = [1000.0 * float(np.median(t)) for t in times]
  return Result(label, [float(v) for v in history.history["loss"]], ms,
                float(history.history["accuracy"][-1]))


def train_v1(impl: str, kind: str, replicas: int, label: str, data: tuple,
             epochs: int, batch_size: int, seed: int) -> Result:
  """A TF1 graph-mode training program run with a ``Session``."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  v1 = tf.compat.v1
  x, y = data
  steps = len(x) // batch_size
  with tf.Graph().as_default():
    strategy = make_strategy(impl, "v1", kind, replicas)
    with strategy.scope():
      dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(
          batch_size, drop_remainder=True)
      iterator = strategy.make_dataset_iterator(dataset)
      params = [v1.get_variable(f"p{i}", initializer=w)
                for i, w in enumerate(initial_weights(seed))]
      optimizer = v1.train.AdamOptimizer(LEARNING_RATE)

      def step_fn(inputs):
        return v1_train_step(strategy, params, optimizer, inputs)

      per_replica = strategy.experimental_run(step_fn, iterator)
      mean_loss, mean_correct = (
          strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
          for v in per_replica)
      init = v1.global_variables_initializer()
    config = v1.ConfigProto(device_count={"CPU": max(replicas, 1)})
    config = strategy.update_config_proto(config)
    losses, ms, accuracy = [], [], 0.0
    with v1.Session(config=config) as session:
      session.run(iterator.initialize())
      session.run(init)
      for epoch in range(epochs):
        print(f"Epoch {epoch + 1}/{epochs}")
        bar = keras.utils.Progbar(steps, stateful_metrics=["loss"],
                                  verbose=progress_verbosity())
        step_losses, step_times, correct = [], [], []
        for step in range(steps):
          start = time.perf_counter()
          loss_value, correct_value = session.run([mean_loss, mean_correct])
          step_times.append(time.perf_counter() - start)
          step_losses.append(float(loss_value))
          correct.append(float(correct_value))
          bar.update(step + 1, [("loss", float(np.mean(step_losses)))])
        loss, step_ms = _epoch_summary(step_losses, step_times)
        losses.append(loss)
        ms.append(step_ms)
        accuracy = float(np.mean(correct))
  return Result(label, losses, ms, accuracy)


def progress_verbosity() -> int:
  """Keras' ``verbose`` for the demo's progress: the animated bar (1) on a
  terminal; otherwise (2) one plain line per epoch, since the bar redraws
  itself with backspaces and carriage returns that a captured file keeps."""
  isatty = getattr(sys.stdout, "isatty", None)
  return 1 if isatty is not None and isatty() else 2


def describe(kind: str, api: str, replicas: int) -> str:
  name = ("OneDeviceStrategy" if kind == "one_device" else
          "experimental.CentralStorageStrategy")
  module = "tf.compat.v1.distribute" if api == "v1" else "tf.distribute"
  return (f"{module}.{name}, {replicas} replica"
          f"{'s' if replicas != 1 else ''} on {replicas} logical CPU"
          f"{'s' if replicas != 1 else ''}")


def run(kind: str, replicas: int, epochs: int, api: str, seed: int,
        batch_size: int, samples: int) -> tuple[Result, Result]:
  """Trains under native TensorFlow, then under ours; returns both."""
  data = make_data(seed, samples)
  results = {}
  for impl, label in (("native", "native TF"), ("ours", "compat_distribute")):
    print(f"\n== {label}: {describe(kind, api, replicas)} ==", flush=True)
    if api == "v2":
      strategy = make_strategy(impl, "v2", kind, replicas)
      results[impl] = train_v2(strategy, label, data, epochs, batch_size,
                               seed)
    else:
      results[impl] = train_v1(impl, kind, replicas, label, data, epochs,
                               batch_size, seed)
  return results["ours"], results["native"]


def main(argv: Sequence[str]) -> int:
  """absl entry point: flags are parsed into ``FLAGS`` already."""
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}. "
                         "The demo takes only flags; see --help.")
  try:
    cluster_restart.check_flags(FLAGS.kill_worker_after, FLAGS.cluster,
                                FLAGS.api, FLAGS.epochs)
    workers = multi_worker_demo.check_flags(
        FLAGS.multi_worker, FLAGS.cluster, FLAGS.api, FLAGS.kill_worker_after)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  if workers:
    return multi_worker_demo.main(workers, FLAGS.epochs, FLAGS.seed,
                                  FLAGS.batch_size, FLAGS.samples, _report)
  if FLAGS.cluster:
    if FLAGS.api == "v2":
      return _main_cluster_v2(FLAGS.cluster)
    return _main_cluster(FLAGS.cluster)
  kind, api = FLAGS.strategy, FLAGS.api or "v2"
  replicas = 1 if kind == "one_device" else (FLAGS.replicas or 2)
  configure_logical_cpus(replicas)
  common.quiet_deprecations()
  print(f"compat_distribute demo: {FLAGS.samples} synthetic examples, "
        f"{CLASSES} classes, global batch {FLAGS.batch_size}, "
        f"{FLAGS.epochs} epoch{'s' if FLAGS.epochs != 1 else ''}, API {api}, "
        f"seed {FLAGS.seed}")
  ours, native = run(kind, replicas, FLAGS.epochs, api, FLAGS.seed,
                     FLAGS.batch_size, FLAGS.samples)
  return _report(
      f"{describe(kind, api, replicas)}: compat_distribute (ours) vs "
      "native TensorFlow, same data and initial weights", ours, native,
      {"strategy": kind, "api": api, "replicas": replicas})


def _report(title: str, ours: Result, native: Result, about: dict) -> int:
  """Prints the side-by-side table under ``title``, the largest loss
  difference, and (``--json_out``) writes both runs with ``about``."""
  print(f"\n{title}\n")
  print(format_table(ours, native))
  worst = max(abs(a - b) for a, b in zip(ours.losses, native.losses))
  print(f"largest loss difference: {worst:.1e}")
  if FLAGS.json_out:
    with open(FLAGS.json_out, "w") as f:
      json.dump({**about, "ours": dataclasses.asdict(ours),
                 "native": dataclasses.asdict(native)}, f, indent=2)
  return 0


def _main_cluster(shape: str) -> int:
  """``--cluster WxP``: the v1 program on a local cluster."""
  try:
    workers, ps = local_cluster.parse_shape(shape)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  common.quiet_deprecations()
  print(f"compat_distribute demo: {FLAGS.samples} synthetic examples, "
        f"{CLASSES} classes, batch {FLAGS.batch_size} per worker, "
        f"{FLAGS.epochs} epoch{'s' if FLAGS.epochs != 1 else ''}, API v1, "
        f"seed {FLAGS.seed}, cluster {workers}x{ps} on 127.0.0.1")
  ours, native = cluster_demo.run_cluster(
      workers, ps, FLAGS.epochs, FLAGS.seed, FLAGS.batch_size, FLAGS.samples)
  return _report(
      "tf.compat.v1.distribute.experimental.ParameterServerStrategy, "
      f"{workers} workers x {ps} ps (loopback): compat_distribute (ours) vs "
      "native TensorFlow, same data, initial weights and update order",
      ours, native, {"cluster": [workers, ps], "api": "v1"})


def _main_cluster_v2(shape: str) -> int:
  """``--cluster WxP --api v2``: Keras ``fit`` under CentralStorageStrategy
  on a local cluster."""
  try:
    workers, ps = local_cluster.parse_shape(shape)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  print(f"compat_distribute demo: {FLAGS.samples} synthetic examples, "
        f"{CLASSES} classes, global batch {FLAGS.batch_size}, "
        f"{FLAGS.epochs} epoch{'s' if FLAGS.epochs != 1 else ''}, API v2 "
        f"(Keras fit), seed {FLAGS.seed}, cluster {workers}x{ps} on "
        "127.0.0.1")
  if FLAGS.kill_worker_after:
    cluster_restart.run_kill_worker(
        workers, ps, FLAGS.epochs, FLAGS.seed, FLAGS.batch_size,
        FLAGS.samples, FLAGS.kill_worker_after)
    return 0
  ours, native = cluster_demo.run_cluster_v2(
      workers, ps, FLAGS.epochs, FLAGS.seed, FLAGS.batch_size, FLAGS.samples)
  return _report(
      f"tf.distribute.experimental.CentralStorageStrategy, {workers} workers "
      f"x {ps} ps (loopback, synchronous): compat_distribute from TF_CONFIG "
      "(ours) vs native TensorFlow with the remote devices by hand, same "
      "data and initial weights", ours, native,
      {"cluster": [workers, ps], "api": "v2"})


# How a flag's value is shown in the short usage (else N or the choices).
_METAVARS = {"json_out": "FILE", "cluster": "WxP"}
PROG = "python -m compat_distribute demo"


def short_usage(prog: str = PROG) -> str:
  """``usage: PROG [--strategy one_device|central_storage] ...``, wrapped."""
  return command_line.absl_short_usage(
      prog, FLAGS.get_key_flags_for_module(sys.modules[__name__]), _METAVARS)


# What the demo does, for a user: the part of ``--help`` above the flags.
# (The module docstring is for a reader of the code: it has an example and
# points at other modules, which a user does not need.)
HELP_SUMMARY = """\
Trains one small classifier twice, under compat_distribute's strategy and
under TensorFlow's own, from the same initial weights on the same seeded
synthetic 3-class data (nothing is downloaded), and prints the loss and the
median time per step of both, epoch by epoch, side by side. Progress is
Keras' bar on a terminal, one line per epoch otherwise."""


def usage(prog: str = PROG) -> str:
  """What ``demo --help`` prints: the short usage, what the demo does and
  its flags, as plain text; no example, no pointer into the code.

  >>> text = usage("demo")
  >>> text.startswith("usage: demo [--strategy one_device|central_storage]")
  True
  >>> ">>>" in text or "compat_distribute.demo" in text
  False
  """
  # module_help heads the flags with this module's name, an internal
  # pointer: dropped.
  flags_text = "\n".join(
      line for line in FLAGS.module_help(sys.modules[__name__]).splitlines()
      if line.strip() and line.rstrip() != f"{__name__}:")
  return f"{short_usage(prog)}\n{HELP_SUMMARY}\n\nflags:\n{flags_text}\n"


def run_from_command_line(argv: Optional[Sequence[str]] = None) -> int:
  """Parses absl flags from ``argv`` (``argv[0]`` is the program name) and
  runs the demo; exits the process like any absl program.

  ``--help`` prints ``usage()`` and returns 0.  A mistake on the command
  line (an unknown flag, a bad value, an argument, a bad ``--cluster``)
  prints the short usage and one message, and exits with status 2.
  """
  argv = list(sys.argv if argv is None else argv)
  return command_line.run_absl(main, argv, short_usage(argv[0]),
                               usage(argv[0]))
