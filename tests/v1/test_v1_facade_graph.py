"""The v1 facade in graph mode, driven by ``tf.compat.v1.Session``, against
native ``tf.compat.v1.distribute``.

Each program builds its own ``tf.Graph`` (so eager execution stays on for the
rest of the suite) and runs it in a Session.  Native strategies get
``device_count`` set by hand (native forgets it); ours get exactly what
``update_config_proto`` returns.  A script that disables eager execution
process-wide runs in a subprocess in test_v1_session_script.py.
"""
import numpy as np
import pytest
import tensorflow as tf

from support import v1 as sup
from support.v1 import CONFIGS, make_native, make_ours

OPTIMIZERS = {
    "sgd": lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
    "adam": lambda: tf.compat.v1.train.AdamOptimizer(0.05),
}
DATA = (np.arange(16, dtype=np.float32).reshape(8, 2) / 10.0)


def _run_both(config, program):
  """``program(strategy, graph)`` builds fetches; runs them under ours and
  native, each in a fresh graph and Session; returns both results."""
  results = []
  for make, session_config in (
      (make_ours, lambda s: s.update_config_proto(tf.compat.v1.ConfigProto())),
      (make_native, sup.native_session_config)):
    graph = tf.Graph()
    with graph.as_default():
      strategy = make(config)
      run = program(strategy)
      with tf.compat.v1.Session(graph=graph,
                                config=session_config(strategy)) as sess:
        results.append(run(sess))
  return results


def _replica_slice(data):
  ctx = tf.distribute.get_replica_context()
  per = data.shape[0] // ctx.num_replicas_in_sync
  start = ctx.replica_id_in_sync_group * per
  return tf.slice(data, tf.stack([start, 0]), [per, data.shape[1]])


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("config", CONFIGS)
def test_v1_optimizer_training_matches_native(config, optimizer):
  def program(strategy):
    with strategy.scope():
      w = tf.compat.v1.get_variable(
          "w", initializer=tf.constant([[1.0], [-1.0]]))
      b = tf.Variable(0.5, name="b")
      step_var = tf.compat.v1.train.get_or_create_global_step()
      opt = OPTIMIZERS[optimizer]()
      data = tf.constant(DATA)

      def step():
        x = _replica_slice(data)
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - 1.0))
        with tf.control_dependencies([loss]):
          train = opt.minimize(loss, global_step=step_var)
        with tf.control_dependencies([train]):
          return tf.identity(loss)

      per_replica_loss = strategy.experimental_run(step)
      mean_loss = strategy.reduce("MEAN", per_replica_loss)
      init = tf.compat.v1.global_variables_initializer()

    def run(sess):
      sess.run(init)
      losses = [sess.run(mean_loss) for _ in range(4)]
      return losses, sess.run([w, b, step_var])
    return run

  ours, native = _run_both(config, program)
  sup.assert_nested_equal(ours, native)
  assert ours[1][2] == 4  # global_step advanced once per step


@pytest.mark.parametrize("config", CONFIGS)
def test_merge_call_and_all_reduce_in_graph_replicas(config):
  def program(strategy):
    def fn():
      ctx = tf.distribute.get_replica_context()
      rid = tf.cast(ctx.replica_id_in_sync_group, tf.float32)
      total = ctx.all_reduce("SUM", rid + 1.0)
      mean = ctx.all_reduce(tf.distribute.ReduceOp.MEAN, [rid, 2 * rid])
      merged = ctx.merge_call(
          lambda s, v: s.reduce("SUM", v, axis=None), args=(rid * 10.0,))
      return total, mean, merged, rid

    with strategy.scope():
      out = strategy.experimental_run(fn)
    fetches = tf.nest.map_structure(
        lambda x: list(strategy.experimental_local_results(x)), out)
    return lambda sess: sess.run(fetches)

  ours, native = _run_both(config, program)
  sup.assert_nested_equal(ours, native)


@pytest.mark.parametrize("config", CONFIGS)
def test_variables_in_scope_with_initializers(config):
  def program(strategy):
    with strategy.scope():
      a = tf.compat.v1.get_variable(
          "a", shape=[2, 3], initializer=tf.compat.v1.ones_initializer())
      b = tf.Variable(tf.range(3.0), name="b")
      c = tf.compat.v1.get_variable("c", initializer=7, trainable=False)
      with tf.compat.v1.variable_scope("scope"):
        d = tf.compat.v1.get_variable(
            "d", shape=[2],
            initializer=tf.compat.v1.constant_initializer([3.0, 4.0]))
    init = tf.compat.v1.global_variables_initializer()
    # Sets: native CentralStorage lists a tf.Variable twice in the global
    # collection (its inner variable and the wrapper); ours lists it once.
    names = sorted({v.name for v in tf.compat.v1.global_variables()})
    trainable = sorted({v.name for v in tf.compat.v1.trainable_variables()})

    def run(sess):
      sess.run(init)
      values = sess.run([a, b, c, d])
      sess.run(tf.compat.v1.assign_add(b, [1.0, 1.0, 1.0]))
      return names, trainable, values, sess.run(b)
    return run

  ours, native = _run_both(config, program)
  assert ours[0] == native[0] and ours[1] == native[1]
  assert "scope/d:0" in ours[0] and "c:0" not in ours[1]
  sup.assert_nested_equal(ours[2:], native[2:])


@pytest.mark.parametrize("config", CONFIGS)
def test_reduce_and_local_results_in_graph(config):
  def program(strategy):
    with strategy.scope():
      out = strategy.experimental_run(
          lambda: tf.cast(tf.distribute.get_replica_context()
                          .replica_id_in_sync_group, tf.float32) * tf.ones([2]))
      fetches = [strategy.reduce("SUM", out),
                 strategy.reduce("MEAN", out, axis=0),
                 list(strategy.experimental_local_results(out))]
    return lambda sess: sess.run(fetches)

  ours, native = _run_both(config, program)
  sup.assert_nested_equal(ours, native)


def test_update_config_proto_lets_session_use_devices_native_cannot():
  # Native's config leaves device_count unset, so a Session cannot place a
  # variable on /cpu:3; ours counts the strategy's devices.
  from compat_distribute import v1  # pylint: disable=g-import-not-at-top
  for cls, works in ((v1.OneDeviceStrategy, True),
                     (sup.NATIVE_ONE_DEVICE, False)):
    graph = tf.Graph()
    with graph.as_default():
      strategy = cls("/cpu:3")
      with strategy.scope():
        v = tf.Variable(1.0)
      config = strategy.update_config_proto(tf.compat.v1.ConfigProto())
      with tf.compat.v1.Session(graph=graph, config=config) as sess:
        if works:
          sess.run(v.initializer)
          assert sess.run(v) == 1.0
        else:
          with pytest.raises(tf.errors.InvalidArgumentError,
                             match="Cannot assign a device"):
            sess.run(v.initializer)


# -- input iterators in a Session ---------------------------------------------

def _dataset(n=10, batch=4):
  return tf.data.Dataset.from_tensor_slices(
      np.arange(n * 2, dtype=np.float32).reshape(n, 2)).batch(batch)


def _drain(sess, fetches, limit=20):
  values = []
  for _ in range(limit):
    try:
      values.append(sess.run(fetches))
    except tf.errors.OutOfRangeError:
      return values
  raise AssertionError(f"no OutOfRangeError after {limit} steps")


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_dataset_iterator_contents_end_and_reinitialise(config):
  def program(strategy):
    iterator = strategy.make_dataset_iterator(_dataset())
    with strategy.scope():
      nxt = iterator.get_next()
    fetches = list(strategy.experimental_local_results(nxt))
    init = iterator.initialize()

    def run(sess):
      sess.run(init)
      first = _drain(sess, fetches)
      sess.run(iterator.initializer)  # again, from the start
      return first, _drain(sess, fetches)
    return run

  ours, native = _run_both(config, program)
  assert len(ours[0]) == len(native[0]) and ours[0]
  for a, b in zip(ours[0] + ours[1], native[0] + native[1]):
    assert len(a) == len(b)
    for x, y in zip(a, b):
      np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("config", CONFIGS)
def test_input_fn_iterator_with_experimental_run(config):
  def program(strategy):
    contexts = []

    def input_fn(input_context):
      contexts.append(input_context)
      batch = input_context.get_per_replica_batch_size(4)
      return tf.data.Dataset.range(12).batch(batch)

    with strategy.scope():
      iterator = strategy.make_input_fn_iterator(input_fn)
      out = strategy.experimental_run(lambda x: x * 2, iterator)
    fetches = list(strategy.experimental_local_results(out))
    ctx = contexts[0]
    info = (len(contexts), ctx.num_input_pipelines, ctx.input_pipeline_id,
            ctx.num_replicas_in_sync)

    def run(sess):
      sess.run(iterator.initializer)
      return info, _drain(sess, fetches)
    return run

  ours, native = _run_both(config, program)
  assert ours[0] == native[0]
  assert len(ours[1]) == len(native[1])
  for a, b in zip(ours[1], native[1]):
    for x, y in zip(a, b):
      np.testing.assert_array_equal(x, y)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_training_from_iterator_matches_native(config):
  def program(strategy):
    iterator = strategy.make_dataset_iterator(
        tf.data.Dataset.from_tensor_slices(DATA).batch(4).repeat(2))
    with strategy.scope():
      w = tf.compat.v1.get_variable("w", initializer=tf.constant([[0.5], [0.5]]))
      opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)

      def step(x):
        loss = tf.reduce_sum(tf.matmul(x, w))
        with tf.control_dependencies([loss]):
          train = opt.minimize(loss)
        with tf.control_dependencies([train]):
          return tf.identity(loss)

      loss = strategy.reduce("SUM", strategy.experimental_run(step, iterator))
      init = tf.compat.v1.global_variables_initializer()

    def run(sess):
      sess.run([init, iterator.initializer])
      return _drain(sess, loss), sess.run(w)
    return run

  ours, native = _run_both(config, program)
  assert len(ours[0]) == 4
  sup.assert_nested_equal(ours, native)


@pytest.mark.parametrize("config", CONFIGS)
def test_get_next_before_initialize_is_a_clear_error(config):
  graph = tf.Graph()
  with graph.as_default():
    strategy = make_ours(config)
    iterator = strategy.make_dataset_iterator(_dataset())
    with strategy.scope():
      nxt = list(strategy.experimental_local_results(iterator.get_next()))
    session_config = strategy.update_config_proto(tf.compat.v1.ConfigProto())
    session_config.operation_timeout_in_ms = 60_000  # fail, never hang
    with tf.compat.v1.Session(graph=graph, config=session_config) as sess:
      with pytest.raises(tf.errors.FailedPreconditionError,
                         match="not been initialized.*run the initializer"):
        sess.run(nxt)
      sess.run(iterator.initializer)  # and then it works
      assert len(sess.run(nxt)) == sup.replicas(config)


@pytest.mark.parametrize("config", CONFIGS)
def test_numpy_dataset_is_fed_not_embedded(config):
  big = np.arange(200_000, dtype=np.float32).reshape(-1, 4)
  graph = tf.Graph()
  with graph.as_default():
    strategy = make_ours(config)
    session_config = strategy.update_config_proto(tf.compat.v1.ConfigProto())
    with tf.compat.v1.Session(graph=graph, config=session_config) as sess:
      dataset = strategy.experimental_make_numpy_dataset(big, session=sess)
      iterator = strategy.make_dataset_iterator(dataset.batch(1000))
      with strategy.scope():
        nxt = list(strategy.experimental_local_results(iterator.get_next()))
      sess.run(iterator.initializer)
      first = np.concatenate(sess.run(nxt))
  np.testing.assert_array_equal(first, big[:1000])
  assert graph.as_graph_def().ByteSize() < big.nbytes // 10


@pytest.mark.parametrize("config", CONFIGS)
def test_distributed_dataset_cardinality_in_graph_is_unknown(config):
  # In a graph TensorFlow cannot evaluate the cardinality while building,
  # so its v1 distributed datasets report UNKNOWN; ours must too.
  def program(strategy):
    dataset = tf.data.Dataset.range(9).batch(4)
    cardinality = strategy.experimental_distribute_dataset(dataset).cardinality
    return lambda sess: cardinality

  ours, native = _run_both(config, program)
  assert ours == native == tf.data.UNKNOWN_CARDINALITY
