"""The TF1 training-loop idiom, next to native ``tf.compat.v1.distribute``.

TensorFlow's TF1 tutorials build the training step once while the graph is
being built, from ``next(iterator)`` on a strategy's iterator, then run the
iterator's initializer and the variables' initializer, and run the step op
again and again in a ``Session``.  Here a small linear model is trained that
way under our strategies and under TensorFlow's, and the per-step losses and
the final variables must be the same numbers.  ``next(iterator)`` also works
eagerly and inside a ``tf.function``, as natively.

The same idiom on ``experimental_distribute_dataset`` (whose graph-mode
iterator natively exists only with all v2 behaviour off) is in
``v1_session_script.py``'s ``dataset+next`` case.
"""
import numpy as np
import pytest
import tensorflow as tf

from support.v1 import make_native, make_ours, native_session_config

pytestmark = pytest.mark.parity

ROWS = np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(12, 2)
LABELS = ROWS @ np.array([[1.5], [-0.5]], np.float32) + 0.25
BATCH = 4
CONFIGS = ["one_device", "central_storage/2"]


def _train_tf1_style(make, config, steps, use_method):
  """Builds ``loss = train_step(next(iterator))`` once; runs it ``steps``
  times.  Returns the losses and the trained weights and bias."""
  graph = tf.Graph()
  with graph.as_default():
    strategy = make(config)
    with strategy.scope():
      dataset = tf.data.Dataset.from_tensor_slices((ROWS, LABELS)).batch(BATCH)
      iterator = strategy.make_dataset_iterator(dataset)
      kernel = tf.compat.v1.get_variable(
          "kernel", shape=[2, 1], initializer=tf.compat.v1.zeros_initializer())
      bias = tf.compat.v1.get_variable(
          "bias", shape=[1], initializer=tf.compat.v1.zeros_initializer())
      optimizer = tf.compat.v1.train.GradientDescentOptimizer(0.2)

      def replica_step(batch):
        features, targets = batch
        error = tf.matmul(features, kernel) + bias - targets
        loss = tf.reduce_mean(tf.square(error))
        update = optimizer.minimize(loss)
        with tf.control_dependencies([update]):
          return tf.identity(loss)

      def train_step(step_input):
        losses = strategy.run(replica_step, args=(step_input,))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

      # The idiom under test: the step is built once, from next().
      loss = train_step(iterator.next() if use_method else next(iterator))
      initializers = [iterator.initializer,
                      tf.compat.v1.global_variables_initializer()]
    config_proto = (native_session_config(strategy) if make is make_native
                    else strategy.update_config_proto(
                        tf.compat.v1.ConfigProto()))
    with tf.compat.v1.Session(graph=graph, config=config_proto) as session:
      session.run(initializers)
      losses = [session.run(loss) for _ in range(steps)]
      with pytest.raises(tf.errors.OutOfRangeError):
        session.run(loss)  # 12 rows in batches of 4: three steps
      trained = session.run([kernel, bias])
  return losses, trained


@pytest.mark.parametrize("use_method", [False, True],
                         ids=["next(iterator)", "iterator.next()"])
@pytest.mark.parametrize("config", CONFIGS)
def test_step_built_from_next_trains_as_native(config, use_method):
  ours = _train_tf1_style(make_ours, config, 3, use_method)
  native = _train_tf1_style(make_native, config, 3, use_method)
  np.testing.assert_array_equal(np.array(ours[0]), np.array(native[0]))
  for mine, theirs in zip(ours[1], native[1]):
    np.testing.assert_array_equal(mine, theirs)
  assert np.all(ours[1][0] != 0)  # it did train


def _eager_reads(make, config):
  """What ``next`` gives on a v1 and a v2 iterator, eagerly and in a
  tf.function, as numpy per replica; then StopIteration at the end."""
  strategy = make(config)
  dataset = tf.data.Dataset.range(8).batch(4)
  values = []

  def local(value):
    return [np.asarray(v).tolist()
            for v in strategy.experimental_local_results(value)]

  v1_iterator = strategy.make_dataset_iterator(dataset)
  values.append(local(next(v1_iterator)))
  values.append(local(tf.function(lambda: next(v1_iterator))()))
  with pytest.raises(StopIteration):
    next(v1_iterator)
  v2_iterator = iter(strategy.experimental_distribute_dataset(dataset))
  values.append(local(next(v2_iterator)))
  values.append(local(tf.function(lambda: next(v2_iterator))()))
  with pytest.raises(StopIteration):
    next(v2_iterator)
  return values


@pytest.mark.parametrize("config", CONFIGS)
def test_next_eagerly_and_in_tf_function_as_native(config):
  assert _eager_reads(make_ours, config) == _eager_reads(make_native, config)
