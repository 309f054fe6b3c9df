"""The chief of ``demo --cluster WxP --api v2 --kill_worker_after N``.

Run under ``python -m compat_distribute run --max-restarts 1`` as the
``chief`` of a loopback cluster (or, without ``TF_CONFIG``, on two logical
CPUs of this machine: the uninterrupted reference).  Keras ``fit`` of the
demo's model under ``CentralStorageStrategy``, saved after every epoch
with a ``tf.train.CheckpointManager`` (model, optimizer, epoch) and
resumed from it at start (``initial_epoch``).  With ``--hold_dir``, the
first run to finish epoch ``--hold_after`` writes ``hold`` there and waits
(at most 300 s) for ``release``: the moment the demo kills a worker.
Prints one JSON line: the final weights and the loss of each epoch run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str]) -> None:
  parser = argparse.ArgumentParser()
  for name in ("epochs", "seed", "batch_size", "samples", "hold_after"):
    parser.add_argument(f"--{name}", type=int, required=True)
  parser.add_argument("--checkpoint_dir", required=True)
  parser.add_argument("--hold_dir")
  args = parser.parse_args(argv)
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from compat_distribute.demo import common  # pylint: disable=g-import-not-at-top
  common.quiet_deprecations()
  if os.environ.get("TF_CONFIG"):
    strategy = tf.distribute.experimental.CentralStorageStrategy()
  else:
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.experimental.CentralStorageStrategy(
        ["/cpu:0", "/cpu:1"])
  x, y = common.make_data(args.seed, args.samples)
  with strategy.scope():
    model = keras.Sequential([
        keras.Input((common.FEATURES,)),
        keras.layers.Dense(common.HIDDEN, activation="relu"),
        keras.layers.Dense(common.HIDDEN, activation="relu"),
        keras.layers.Dense(common.CLASSES)])
    model.compile(
        optimizer=keras.optimizers.Adam(common.LEARNING_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if hasattr(model.optimizer, "build"):  # else its slots restore later
      model.optimizer.build(model.trainable_variables)
    epoch = tf.Variable(0, dtype=tf.int64, name="epoch")
  model.set_weights(common.initial_weights(args.seed))
  checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer,
                                   epoch=epoch)
  manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir,
                                       max_to_keep=1)
  checkpoint.restore(manager.latest_checkpoint)  # None: start afresh
  start = int(epoch.numpy())

  class SaveEachEpoch(keras.callbacks.Callback):

    def on_epoch_end(self, index, logs=None):
      epoch.assign(index + 1)
      manager.save(checkpoint_number=index + 1)
      print(f"epoch {index + 1}/{args.epochs}: loss {logs['loss']:.6f}, "
            "checkpoint saved", file=sys.stderr, flush=True)
      if index + 1 == args.hold_after and args.hold_dir:
        hold = os.path.join(args.hold_dir, "hold")
        if not os.path.exists(hold):
          open(hold, "w").close()
          release = os.path.join(args.hold_dir, "release")
          deadline = time.monotonic() + 300
          while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.05)

  history = model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs,
                      initial_epoch=start, shuffle=False, verbose=0,
                      callbacks=[SaveEachEpoch()])
  print(json.dumps({"start_epoch": start,
                    "losses": [float(v) for v in history.history["loss"]],
                    "weights": [w.tolist() for w in model.get_weights()]}),
        flush=True)


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__)))))
  main(sys.argv[1:])
