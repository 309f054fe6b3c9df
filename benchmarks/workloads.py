"""The workloads the benchmark times, each in three variants.

Every builder takes a variant -- ``"native"`` (TensorFlow's own strategy),
``"ours"`` (compat_distribute), ``"none"`` (the same work without any
strategy, on one device: the limit) or ``"by_hand"`` (CentralStorage's
two-replica training step written out without a strategy: the limit for
any two-replica strategy; other workloads raise ``NotApplicable``) -- and
returns a ``Unit``: a callable doing one unit of work (one ``run`` call, one
training step, one trace, one batch), plus how many units one timed block
should hold.  Building (strategy, variables, datasets, the first trace)
happens in the builder, outside the timings.

All strategies here are single-machine ones; ``CentralStorage`` computes on
the logical CPUs in ``DEVICES`` (two unless ``configure`` says otherwise;
``run.py`` and ``sweep.py`` create them before TensorFlow initialises).
``configure`` also sets the MLP's hidden width, which the eager ``run``'s
tensor and the dataset's rows share (``sweep.py`` varies both).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import tensorflow as tf

VARIANTS = ("native", "ours", "none", "by_hand")
GLOBAL_BATCH = 64
FEATURES, HIDDEN, CLASSES = 32, 64, 10
LEARNING_RATE = 0.1
DEVICES = ("/cpu:0", "/cpu:1")
WIDTH = 1  # eager run tensor and dataset rows: (GLOBAL_BATCH, WIDTH)


def configure(num_replicas: int = 2, hidden: int = 64,
              width: int = 1) -> None:
  """Replicas on ``/cpu:0`` .. ``/cpu:{num_replicas-1}``, the MLP's hidden
  width, and the width of the eager ``run``'s tensor and of the dataset's
  rows (``width=1``: a scalar ``x`` and ``FEATURES``-wide rows, as in
  ``run.py``'s table)."""
  global DEVICES, HIDDEN, WIDTH
  DEVICES = tuple(f"/cpu:{i}" for i in range(num_replicas))
  HIDDEN, WIDTH = hidden, width


class NotApplicable(Exception):
  """The workload has no such variant (``by_hand`` outside CentralStorage's
  training step)."""


@dataclasses.dataclass
class Unit:
  """One unit of work and the block size to time it in."""
  call: Callable[[], Any]
  per_block: int
  sync: Callable[[], Any] = lambda: None  # waits for queued work, if any


# -- strategies ---------------------------------------------------------------

def make_strategy(kind: str, variant: str) -> Any:
  """``kind`` is ``"one_device"`` or ``"central_storage"``."""
  if variant == "by_hand":
    raise NotApplicable(variant)
  if variant == "none":
    return None
  if variant == "native":
    module = tf.distribute
  else:
    from compat_distribute import v2 as module  # pylint: disable=g-import-not-at-top
  if kind == "one_device":
    strategy = module.OneDeviceStrategy("/cpu:0")
  else:
    strategy = module.experimental.CentralStorageStrategy(
        compute_devices=list(DEVICES), parameter_device="/cpu:0")
  if variant == "ours":
    check_ours(strategy)
  return strategy


def check_ours(strategy: Any) -> None:
  """Refuses to time TensorFlow's class under the name "ours".

  A facade resolves names the shim does not implement (yet) to TensorFlow's
  own, which would make the "ours" column a second "native" column.
  """
  module = type(strategy).__module__
  if not module.startswith("compat_distribute"):
    raise NotImplementedError(
        f"not implemented in compat_distribute yet (the facade gave "
        f"TensorFlow's {module}.{type(strategy).__name__})")


def _scope(strategy: Any) -> Any:
  return strategy.scope() if strategy is not None else _NullScope()


class _NullScope:

  def __enter__(self) -> None:
    return None

  def __exit__(self, *exc: Any) -> None:
    return None


# -- data -----------------------------------------------------------------------

def _data() -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(0)
  x = rng.standard_normal((GLOBAL_BATCH, FEATURES)).astype(np.float32)
  y = rng.integers(0, CLASSES, GLOBAL_BATCH).astype(np.int32)
  return x, y


def _split_batch(strategy: Any, x: np.ndarray, y: np.ndarray) -> Any:
  """The global batch as per-replica values (each replica its own slice)."""
  if strategy is None:
    return tf.constant(x), tf.constant(y)
  n = strategy.num_replicas_in_sync
  per = GLOBAL_BATCH // n

  def value_fn(ctx):
    i = ctx.replica_id_in_sync_group
    return (tf.constant(x[i * per:(i + 1) * per]),
            tf.constant(y[i * per:(i + 1) * per]))

  return strategy.experimental_distribute_values_from_function(value_fn)


# -- eager run overhead ---------------------------------------------------------

def eager_run(kind: str, variant: str) -> Unit:
  """One eager ``strategy.run`` of a trivial function (``x + 1``); by hand,
  the same op once per replica under each replica's ``tf.device``."""
  if variant == "by_hand":
    if kind != "central_storage":
      raise NotApplicable(variant)
    x = tf.constant(1.0) if WIDTH == 1 else tf.ones([GLOBAL_BATCH, WIDTH])
    devices = DEVICES

    def by_hand():
      out = []
      for device in devices:
        with tf.device(device):
          out.append(x + 1)
      return out

    return Unit(by_hand, per_block=200)
  strategy = make_strategy(kind, variant)
  x = tf.constant(1.0) if WIDTH == 1 else tf.ones([GLOBAL_BATCH, WIDTH])

  def add_one(t):
    return t + 1

  if strategy is None:
    return Unit(lambda: add_one(x), per_block=400)
  run = strategy.run
  args = (x,)
  return Unit(lambda: run(add_one, args=args), per_block=200)


# -- the MLP training step -------------------------------------------------------

class _Mlp:
  """A two-layer perceptron as bare variables, trained by SGD.

  The update follows the optimizer path: in replica context, gradients go
  through ``merge_call`` to ``extended.batch_reduce_to`` (SUM) and each
  variable is updated with ``extended.update``, as TensorFlow's optimizers
  do.  Without a strategy, the same gradients update the variables directly.
  """

  def __init__(self, strategy: Any) -> None:
    self.strategy = strategy
    init = np.random.default_rng(1)
    with _scope(strategy):
      self.variables = [
          tf.Variable(init.standard_normal((FEATURES, HIDDEN)).astype(
              np.float32) * 0.1, name="w1"),
          tf.Variable(tf.zeros([HIDDEN]), name="b1"),
          tf.Variable(init.standard_normal((HIDDEN, CLASSES)).astype(
              np.float32) * 0.1, name="w2"),
          tf.Variable(tf.zeros([CLASSES]), name="b2"),
      ]

  def loss_and_grads(self, x: tf.Tensor, y: tf.Tensor) -> Any:
    w1, b1, w2, b2 = self.variables
    with tf.GradientTape() as tape:
      hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
      logits = tf.matmul(hidden, w2) + b2
      per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
      loss = tf.reduce_sum(per_example) / GLOBAL_BATCH
    return loss, tape.gradient(loss, self.variables)

  def replica_step(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    loss, grads = self.loss_and_grads(x, y)
    ctx = tf.distribute.get_replica_context()
    ctx.merge_call(_apply_gradients, args=(list(zip(grads, self.variables)),))
    return loss

  def plain_step(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    loss, grads = self.loss_and_grads(x, y)
    for g, v in zip(grads, self.variables):
      v.assign_sub(LEARNING_RATE * g)
    return loss

  def by_hand_step(self, xs: list[tf.Tensor], ys: list[tf.Tensor]) -> Any:
    """What CentralStorage's step does, written out: each replica's
    forward and backward pass under its own device, then the gradients
    summed and applied (and the losses summed) on the parameter device."""
    grads, losses = [], []
    for device, x, y in zip(DEVICES, xs, ys):
      with tf.device(device):
        loss, replica_grads = self.loss_and_grads(x, y)
      losses.append(loss)
      grads.append(replica_grads)
    with tf.device(DEVICES[0]):
      for v, *per_replica in zip(self.variables, *grads):
        v.assign_sub(LEARNING_RATE * tf.math.add_n(per_replica))
      return tf.math.add_n(losses)

  def step_fn(self) -> Callable[..., Any]:
    """The Python training step (wrap it in a fresh ``tf.function``)."""
    strategy = self.strategy
    if strategy is None:
      return self.plain_step

    def step(x, y):
      losses = strategy.run(self.replica_step, args=(x, y))
      return strategy.reduce("SUM", losses, axis=None)

    return step


def _apply_gradients(strategy: Any, grads_and_vars: Any) -> None:
  extended = strategy.extended
  reduced = extended.batch_reduce_to(
      tf.distribute.ReduceOp.SUM, [(g, v) for g, v in grads_and_vars])
  for g, (_, v) in zip(reduced, grads_and_vars):
    extended.update(v, _sgd_update, args=(g,), group=True)


def _sgd_update(var: tf.Variable, grad: tf.Tensor) -> Any:
  return var.assign_sub(LEARNING_RATE * grad)


def _step_and_inputs(kind: str, variant: str) -> tuple[Any, Any, Any, Any]:
  """The model, its Python training step and the step's two inputs."""
  if variant == "by_hand":
    if kind != "central_storage":
      raise NotApplicable(variant)
    model = _Mlp(None)
    x, y = _data()
    per = GLOBAL_BATCH // len(DEVICES)
    xs = [tf.constant(x[i * per:(i + 1) * per]) for i in range(len(DEVICES))]
    ys = [tf.constant(y[i * per:(i + 1) * per]) for i in range(len(DEVICES))]
    return model, model.by_hand_step, xs, ys
  strategy = make_strategy(kind, variant)
  model = _Mlp(strategy)
  x, y = _split_batch(strategy, *_data())
  return model, model.step_fn(), x, y


def train_step(kind: str, variant: str) -> Unit:
  """One call of a traced ``tf.function`` training step."""
  model, python_step, x, y = _step_and_inputs(kind, variant)
  step = tf.function(python_step)
  step(x, y)  # trace outside the timings
  first = model.variables[0]
  return Unit(lambda: step(x, y), per_block=50, sync=first.numpy)


def trace(kind: str, variant: str) -> Unit:
  """Tracing the training step: a fresh ``tf.function`` each unit."""
  _, python_step, x, y = _step_and_inputs(kind, variant)

  def trace_once():
    return tf.function(python_step).get_concrete_function(x, y)

  trace_once()
  return Unit(trace_once, per_block=2)


# -- distributed dataset iteration -----------------------------------------------

def dataset(kind: str, variant: str) -> Unit:
  """One ``next()`` on an iterator over (distributed) global batches; by
  hand, ``next()`` on the plain iterator, each component cut with one
  ``tf.split`` on ``/cpu:0`` and each replica's pieces copied to its device
  with one ``IdentityN`` (the least an eager per-replica split can do)."""
  x, y = _data()
  if WIDTH != 1:
    x = np.ones((GLOBAL_BATCH, WIDTH), np.float32)
  rows = np.concatenate([x] * 8), np.concatenate([y] * 8)
  ds = tf.data.Dataset.from_tensor_slices(rows).repeat().batch(GLOBAL_BATCH)
  if variant == "by_hand":
    if kind != "central_storage":
      raise NotApplicable(variant)
    plain = iter(ds)
    devices = DEVICES

    def by_hand():
      with tf.device(devices[0]):
        pieces = [tf.split(t, len(devices)) for t in next(plain)]
      out = []
      for i, device in enumerate(devices):
        with tf.device(device):
          out.append(tf.identity_n([p[i] for p in pieces]))
      return out

    return Unit(by_hand, per_block=100)
  strategy = make_strategy(kind, variant)
  if strategy is not None:
    ds = strategy.experimental_distribute_dataset(ds)
  iterator = iter(ds)
  next(iterator)
  return Unit(lambda: next(iterator), per_block=100)


WORKLOADS: dict[str, Callable[[str, str], Unit]] = {
    "eager run (x + 1)": eager_run,
    "tf.function MLP step": train_step,
    "trace MLP step": trace,
    "dataset, per batch": dataset,
}
