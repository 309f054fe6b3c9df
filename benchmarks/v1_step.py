"""The v1 workload: a graph-mode training step driven by ``Session.run``.

The TF1 script shape: variables and a v1 ``GradientDescentOptimizer`` built in
a ``tf.Graph`` under the strategy's scope, an input iterator from
``make_dataset_iterator``, ``experimental_run`` of the step over the
replicas, and ``Session.run`` of the reduced loss.  CentralStorage over the
logical CPUs in ``workloads.DEVICES``; without a strategy, the same graph on
one device; by hand, the same replicas written out in the TF1 graph (one
``get_next`` from the dataset prefetched by one step, as the strategies'
iterators read it, split per replica, each replica's loss and gradients
(``optimizer.compute_gradients``, as ``minimize`` computes them) under its
own ``tf.device``, the gradients summed with ``add_n`` and applied
by the optimizer on ``/cpu:0``, each replica's loss read after the update on
its own device -- as the strategies' ``step_fn`` returns it -- and the losses
summed on ``/cpu:0``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import tensorflow as tf

import workloads

NAME = "v1 Session.run MLP step"
v1 = tf.compat.v1


def _strategy(variant: str) -> Any:
  if variant in ("none", "by_hand"):
    return None
  if variant == "native":
    module = v1.distribute
  else:
    from compat_distribute import v1 as module  # pylint: disable=g-import-not-at-top
  strategy = module.experimental.CentralStorageStrategy(
      compute_devices=list(workloads.DEVICES), parameter_device="/cpu:0")
  if variant == "ours":
    workloads.check_ours(strategy)
  return strategy


def _variables() -> list[tf.Variable]:
  init = np.random.default_rng(1)
  f, h, c = workloads.FEATURES, workloads.HIDDEN, workloads.CLASSES
  return [
      v1.get_variable("w1", initializer=init.standard_normal((f, h)).astype(
          np.float32) * 0.1),
      v1.get_variable("b1", initializer=tf.zeros([h])),
      v1.get_variable("w2", initializer=init.standard_normal((h, c)).astype(
          np.float32) * 0.1),
      v1.get_variable("b2", initializer=tf.zeros([c])),
  ]


def _loss(variables: list[tf.Variable], x: tf.Tensor,
          y: tf.Tensor) -> tf.Tensor:
  w1, b1, w2, b2 = variables
  hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
  logits = tf.matmul(hidden, w2) + b2
  per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
  return tf.reduce_sum(per_example) / workloads.GLOBAL_BATCH


def _by_hand_step(optimizer: Any, variables: list[tf.Variable], x: tf.Tensor,
                  y: tf.Tensor, split: Callable[..., Any]) -> tf.Tensor:
  devices = workloads.DEVICES
  with tf.device(devices[0]):
    xs, ys = split(x, len(devices)), split(y, len(devices))
  losses, grads = [], []
  for device, xi, yi in zip(devices, xs, ys):
    with tf.device(device):
      loss = _loss(variables, xi, yi)
      losses.append(loss)
      grads.append([g for g, _ in optimizer.compute_gradients(loss, variables)])
  with tf.device(devices[0]):
    summed = [tf.math.add_n(list(g)) for g in zip(*grads)]
    train_op = optimizer.apply_gradients(zip(summed, variables))
  updated = []
  for device, loss in zip(devices, losses):
    with tf.device(device), tf.control_dependencies([train_op]):
      updated.append(tf.identity(loss))
  with tf.device(devices[0]):
    return tf.math.add_n(updated)


def build(kind: str, variant: str,
          split: Callable[..., Any] = tf.split) -> workloads.Unit:
  """The step as ``variant``; ``split(t, n)`` cuts each global batch for the
  by-hand variant (``tf.split``: equal pieces)."""
  del kind  # always CentralStorage over workloads.DEVICES
  graph = tf.Graph()
  x, y = workloads._data()  # pylint: disable=protected-access
  with graph.as_default():
    strategy = _strategy(variant)
    ds = tf.data.Dataset.from_tensor_slices(
        (np.concatenate([x] * 8), np.concatenate([y] * 8))).repeat().batch(
            workloads.GLOBAL_BATCH)
    optimizer = v1.train.GradientDescentOptimizer(workloads.LEARNING_RATE)
    if variant == "by_hand":
      # One step read ahead, as both strategies' v1 iterators do
      # (TensorFlow's through its MultiDeviceIterator's buffer).
      iterator = v1.data.make_initializable_iterator(ds.prefetch(1))
      fetch = _by_hand_step(optimizer, _variables(), *iterator.get_next(),
                            split=split)
      init_iterator = iterator.initializer
    elif strategy is None:
      iterator = v1.data.make_initializable_iterator(ds)
      loss = _loss(_variables(), *iterator.get_next())
      train_op = optimizer.minimize(loss)
      with tf.control_dependencies([train_op]):
        fetch = tf.identity(loss)
      init_iterator = iterator.initializer
    else:
      with strategy.scope():
        variables = _variables()
        iterator = strategy.make_dataset_iterator(ds)

        def step_fn(inputs):
          loss = _loss(variables, *inputs)
          train_op = optimizer.minimize(loss)
          with tf.control_dependencies([train_op]):
            return tf.identity(loss)

        per_replica = strategy.experimental_run(step_fn, iterator)
        fetch = strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica)
      init_iterator = iterator.initializer
    init = v1.global_variables_initializer()
  config = v1.ConfigProto(device_count={"CPU": len(workloads.DEVICES)})
  if strategy is not None:
    config = strategy.update_config_proto(config)
  session = v1.Session(graph=graph, config=config)
  session.run(init)
  session.run(init_iterator)
  session.run(fetch)
  return workloads.Unit(lambda: session.run(fetch), per_block=50)
