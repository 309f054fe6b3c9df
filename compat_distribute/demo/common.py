"""What the single-machine and the cluster demo share: the synthetic data,
the model's initial weights and TF1 training step, the result of a run and
the side-by-side table.

>>> print(format_table(Result("ours", [0.5, 0.25], [1.0, 1.0], 0.9),
...                    Result("native", [0.5, 0.25], [2.0, 2.0], 0.9)),
...       end="")  # doctest: +ELLIPSIS
epoch  loss ours   loss native  |diff|    ms/step ours  ms/step native  ours/native
1      0.500000    0.500000     0.0e+00   1.000         2.000           0.50
2      0.250000    0.250000     0.0e+00   1.000         2.000           0.50
final accuracy: ours 0.9000, native 0.9000
ms/step in this table is the median duration of one training step, from
...
ours/native below 1 means ours is faster.
"""
from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any

import numpy as np

CLASSES = 3
FEATURES = 8
HIDDEN = 32
LEARNING_RATE = 0.01


@dataclasses.dataclass
class Result:
  """One training run: mean loss and median milliseconds per step for each
  epoch, and the final training accuracy."""
  label: str
  losses: list[float]
  ms_per_step: list[float]
  accuracy: float


def make_data(seed: int, samples: int) -> tuple[np.ndarray, np.ndarray]:
  """A seeded 3-class problem: Gaussian clusters in 8 dimensions, with a
  non-linear twist so that a hidden layer helps.

  >>> x, y = make_data(0, 6)
  >>> x.shape, x.dtype, y.shape, sorted(set(y.tolist())) <= [0, 1, 2]
  ((6, 8), dtype('float32'), (6,), True)
  """
  rng = np.random.RandomState(seed)
  centers = rng.normal(scale=2.0, size=(CLASSES, FEATURES))
  y = rng.randint(0, CLASSES, size=samples)
  x = centers[y] + rng.normal(size=(samples, FEATURES))
  x[:, 0] += np.sin(2.0 * x[:, 1])
  return x.astype(np.float32), y.astype(np.int32)


def initial_weights(seed: int) -> list[np.ndarray]:
  """Glorot-uniform kernels and zero biases for the v1 program's MLP."""
  rng = np.random.RandomState(seed + 1)
  sizes = [(FEATURES, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, CLASSES)]
  weights = []
  for fan_in, fan_out in sizes:
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    weights.append(rng.uniform(-limit, limit, (fan_in, fan_out)).astype(
        np.float32))
    weights.append(np.zeros(fan_out, np.float32))
  return weights


def v1_train_step(strategy: Any, params: list, optimizer: Any,
                  inputs: Any) -> tuple:
  """One replica's TF1 step of the demo's perceptron: ``optimizer``
  minimises the replica's share of the loss; returns (loss, accuracy),
  read after the update."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  features, labels = inputs
  h = features
  for i in range(0, len(params), 2):
    h = tf.matmul(h, params[i]) + params[i + 1]
    if i + 2 < len(params):
      h = tf.nn.relu(h)
  loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=h))
  correct = tf.reduce_mean(tf.cast(
      tf.equal(tf.argmax(h, axis=1, output_type=tf.int32), labels),
      tf.float32))
  train_op = optimizer.minimize(loss / strategy.num_replicas_in_sync)
  with tf.control_dependencies([train_op]):
    return tf.identity(loss), tf.identity(correct)


LEGEND = (
    "ms/step in this table is the median duration of one training step, from\n"
    "its start to its end, measured the same way for ours and native. Where a\n"
    "progress line above shows an ms/step too, that is Keras' own figure: the\n"
    "epoch's wall-clock time divided by its steps, which also counts the work\n"
    "around the steps (the first step's set-up, input, callbacks, the end of\n"
    "the epoch), so it is larger and varies more from run to run.\n"
    "ours/native below 1 means ours is faster.")


def format_table(ours: Result, native: Result) -> str:
  """The side-by-side table (loss and median ms/step per epoch)."""
  header = (f"{'epoch':<7}{'loss ours':<12}{'loss native':<13}{'|diff|':<10}"
            f"{'ms/step ours':<14}{'ms/step native':<16}ours/native")
  lines = [header]
  for i, (lo, ln, to, tn) in enumerate(zip(ours.losses, native.losses,
                                           ours.ms_per_step,
                                           native.ms_per_step)):
    ratio = to / tn if tn else float("nan")
    lines.append(f"{i + 1:<7}{lo:<12.6f}{ln:<13.6f}{abs(lo - ln):<10.1e}"
                 f"{to:<14.3f}{tn:<16.3f}{ratio:.2f}")
  lines.append(f"final accuracy: ours {ours.accuracy:.4f}, native "
               f"{native.accuracy:.4f}")
  lines.append(LEGEND)
  return "\n".join(lines)


def quiet_deprecations() -> None:
  """The v1 API is deprecated by design; its notices would drown the demo's
  output (both sides use the same calls)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.get_logger().setLevel(logging.ERROR)
  warnings.filterwarnings("ignore", category=DeprecationWarning)
  warnings.filterwarnings("ignore", message=".*tf.data options.*")
