"""The program of ``demo --cluster Wx0 --api v2 --multi_worker``: a Keras
program written for ``tf.distribute.MultiWorkerMirroredStrategy``, as
TensorFlow's multi-worker Keras tutorial has it -- the same script on every
task of a ``TF_CONFIG`` cluster, each task building the same dataset.

``demo.cluster_multi_worker`` runs it on a loopback cluster twice: every
task under ``python -m compat_distribute run`` (ours, Keras 3), then every
task under plain ``python`` with tf-keras (TensorFlow's own strategy,
Keras 2).  It uses TensorFlow and NumPy only: the data and the initial
weights come from the demo's ``data.npz``, so both Kerases start alike.

    python train.py DATA_NPZ EPOCHS BATCH_SIZE

(the demo copies it to ``train.py`` in a folder of its own, where it runs).

It prints one line per epoch on stderr, then its result as one JSON line.
"""
import importlib
import json
import sys
import time

import numpy as np
import tensorflow as tf


def main(data_file, epochs, batch_size):
  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  data = np.load(data_file)
  dataset = tf.data.Dataset.from_tensor_slices(
      (data["x"], data["y"])).batch(batch_size)
  sizes = [data[f"w{i}"].shape[-1] for i in range(0, 6, 2)]
  times = []

  class Progress(tf.keras.callbacks.Callback):
    """Times each step; says each epoch's loss."""

    def on_epoch_begin(self, epoch, logs=None):
      times.append([])

    def on_train_batch_begin(self, batch, logs=None):
      self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
      times[-1].append(time.perf_counter() - self.start)

    def on_epoch_end(self, epoch, logs=None):
      print(f"epoch {epoch + 1}: loss {logs['loss']:.6f}", file=sys.stderr,
            flush=True)

  with strategy.scope():
    model = tf.keras.Sequential(
        [tf.keras.Input((data["x"].shape[1],))] +
        [tf.keras.layers.Dense(n, activation="relu") for n in sizes[:-1]] +
        [tf.keras.layers.Dense(sizes[-1])])
    model.compile(
        optimizer=tf.keras.optimizers.Adam(float(data["learning_rate"])),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"])
  model.set_weights([data[f"w{i}"] for i in range(6)])
  history = model.fit(dataset, epochs=epochs, verbose=0,
                      callbacks=[Progress()])
  print(json.dumps({
      # tf.keras is keras (Keras 3) or tf_keras (Keras 2): its version.
      "keras": importlib.import_module(
          type(model).__module__.split(".")[0]).__version__,
      "replicas": strategy.num_replicas_in_sync,
      "losses": [float(v) for v in history.history["loss"]],
      "ms_per_step": [1000.0 * float(np.median(t)) for t in times],
      "accuracy": float(history.history["accuracy"][-1]),
      "weights": [w.tolist() for w in model.get_weights()]}), flush=True)


if __name__ == "__main__":
  main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
