"""A TF1-style training script, run in a subprocess by
test_v1_session_script.py.

It disables eager execution for the whole process (so it cannot run inside
the pytest process), splits the CPU into 4 logical devices, and trains the
same small linear model under ``compat_distribute.v1`` and under native
``tf.compat.v1.distribute``.  It prints one JSON object: for each
implementation, the per-step losses, the final variables, and whether the
input ended with ``OutOfRangeError``.  All cases run in one process
(graphs are separate) to pay TensorFlow's start-up once.

Usage: python v1_session_script.py CONFIG:INPUT [CONFIG:INPUT ...]
  CONFIG: one_device | central_storage/N
  INPUT:  iterator (make_dataset_iterator) | input_fn (make_input_fn_iterator)
          | constant (no iterator; each replica slices a constant)
          | dataset (experimental_distribute_dataset, then
            tf.compat.v1.data.make_initializable_iterator)
          | dataset_fn (distribute_datasets_from_function, then
            tf.compat.v1.data.make_initializable_iterator)
          Any INPUT may end in "+next": the step is then built once from
          ``strategy.run(step, args=(next(iterator),))``, the TF1
          tutorials' idiom, instead of ``experimental_run(step, iterator)``.
Prints one JSON object keyed by "CONFIG:INPUT".

With V1_BEHAVIOR=1 in the environment the script calls
``tf.compat.v1.disable_v2_behavior()`` instead of only disabling eager
execution: TensorFlow's distributed datasets then are its v1 classes (the
``dataset`` inputs need that), and variables are reference variables.
"""
import json
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

if os.environ.get("V1_BEHAVIOR") == "1":
  tf.compat.v1.disable_v2_behavior()
else:
  tf.compat.v1.disable_eager_execution()
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * 4)

NATIVE = tf.compat.v1.distribute  # captured before importing the shim

from compat_distribute import v1 as ours  # pylint: disable=g-import-not-at-top

DATA = np.arange(32, dtype=np.float32).reshape(16, 2) / 10.0
TARGETS = (DATA @ np.array([[2.0], [-1.0]], np.float32)) + 0.5
GLOBAL_BATCH = 4


def make(module, config):
  if config == "one_device":
    return module.OneDeviceStrategy("/cpu:1")
  n = int(config.split("/")[1])
  return module.experimental.CentralStorageStrategy(
      compute_devices=[f"/cpu:{i}" for i in range(n)],
      parameter_device="/cpu:0")


def session_config(strategy, native):
  config = strategy.update_config_proto(tf.compat.v1.ConfigProto())
  if native:
    config.device_count["CPU"] = 4  # native leaves it out; ours sets it
  return config


def _devices(strategy, step_input):
  """The device of every tensor in every replica's part of one step."""
  return [t.device for t in tf.nest.flatten(
      strategy.experimental_local_results(step_input))]


def build(strategy, input_kind):
  """The graph: variables, an iterator, a step run per replica; and facts
  about the input to compare."""
  input_kind, _, idiom = input_kind.partition("+")
  dataset = tf.data.Dataset.from_tensor_slices((DATA, TARGETS))
  iterator = None
  facts = {}  # how the input was made: devices, one-shot iterator refused
  if input_kind == "iterator":
    iterator = strategy.make_dataset_iterator(dataset.batch(GLOBAL_BATCH))
  elif input_kind == "input_fn":
    def input_fn(ctx):
      return dataset.batch(ctx.get_per_replica_batch_size(GLOBAL_BATCH))
    iterator = strategy.make_input_fn_iterator(input_fn)
  elif input_kind in ("dataset", "dataset_fn"):
    if input_kind == "dataset":
      distributed = strategy.experimental_distribute_dataset(
          dataset.batch(GLOBAL_BATCH))
    else:
      distributed = strategy.distribute_datasets_from_function(
          lambda ctx: dataset.batch(ctx.get_per_replica_batch_size(
              GLOBAL_BATCH)))
    iterator = tf.compat.v1.data.make_initializable_iterator(distributed)
    try:
      tf.compat.v1.data.make_one_shot_iterator(distributed)
      facts["one_shot"] = "made"
    except Exception as e:  # pylint: disable=broad-except
      facts["one_shot"] = type(e).__name__
    # Not fetched to the devices: where each replica's input is then.
    on_host = strategy.distribute_datasets_from_function(
        lambda ctx: dataset.batch(2),
        options=tf.distribute.InputOptions(experimental_fetch_to_device=False))
    facts["host_input_devices"] = _devices(
        strategy,
        tf.compat.v1.data.make_initializable_iterator(on_host).get_next())
  if iterator is not None:
    facts["input_devices"] = _devices(strategy, iterator.get_next())

  with strategy.scope():
    w = tf.compat.v1.get_variable("w", shape=[2, 1],
                                  initializer=tf.compat.v1.zeros_initializer())
    b = tf.Variable(0.0, name="b")
    global_step = tf.compat.v1.train.get_or_create_global_step()
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.05)

    def step(inputs):
      x, y = inputs
      loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
      with tf.control_dependencies([loss]):
        train = optimizer.minimize(loss, global_step=global_step)
      with tf.control_dependencies([train]):
        return tf.identity(loss)

    if iterator is None:
      data = tf.constant(DATA)
      targets = tf.constant(TARGETS)

      def step_on_constant():
        ctx = tf.distribute.get_replica_context()
        per = GLOBAL_BATCH // ctx.num_replicas_in_sync
        start = ctx.replica_id_in_sync_group * per
        return step((tf.slice(data, tf.stack([start, 0]), [per, 2]),
                     tf.slice(targets, tf.stack([start, 0]), [per, 1])))
      per_replica_loss = strategy.experimental_run(step_on_constant)
    elif idiom == "next":
      per_replica_loss = strategy.run(step, args=(next(iterator),))
    else:
      per_replica_loss = strategy.experimental_run(step, iterator)
    loss = strategy.reduce("MEAN", per_replica_loss)
  init = tf.compat.v1.global_variables_initializer()
  return iterator, init, loss, [w, b, global_step], facts


def train(module, config, input_kind, native):
  graph = tf.Graph()
  with graph.as_default():
    strategy = make(module, config)
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      iterator, init, loss, variables, facts = build(strategy, input_kind)
    with tf.compat.v1.Session(
        graph=graph, config=session_config(strategy, native)) as sess:
      sess.run(init)
      if iterator is not None:
        sess.run(iterator.initialize())
      losses, ended = [], False
      for _ in range(16 // GLOBAL_BATCH + 2 if iterator is not None else 5):
        try:
          losses.append(float(sess.run(loss)))
        except tf.errors.OutOfRangeError:
          ended = True
          break
      final = [np.asarray(v).tolist() for v in sess.run(variables)]
      again = None
      if iterator is not None:
        sess.run(iterator.initializer)  # re-initialise: starts over
        again = float(sess.run(loss))
  return {"losses": losses, "variables": final, "ended": ended,
          "again": again, "type": type(strategy).__module__, **facts}


def main():
  results = {}
  for case in sys.argv[1:]:
    config, input_kind = case.split(":")
    results[case] = {"ours": train(ours, config, input_kind, native=False),
                     "native": train(NATIVE, config, input_kind, native=True)}
  print(json.dumps(results))


if __name__ == "__main__":
  main()
