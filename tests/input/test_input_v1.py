"""v1 input: make_dataset_iterator / make_input_fn_iterator and
experimental_make_numpy_dataset, in a TF1 graph with a Session and eagerly,
against TensorFlow 2.21's v1 strategies.

Several replicas are tested through ``compat_distribute.input`` with a fake
extended (logical CPUs 0..n-1) next to native v1 CentralStorageStrategy.
"""
import numpy as np
import pytest
import tensorflow as tf

from compat_distribute import input as input_lib
from compat_distribute import v1 as distribute_v1
from conftest import cpu
from fixtures import strategies
from support.input import fake_workers

V1 = tf.compat.v1
PER_WORKER = tf.distribute.InputReplicationMode.PER_WORKER


def _config():
  return V1.ConfigProto(device_count={"CPU": 4})


def _native(n):
  """TensorFlow's v1 strategy with ``n`` replicas (OneDevice on /cpu:1 for
  one, else CentralStorage on /cpu:0../cpu:<n-1>)."""
  kind = "one_device" if n == 1 else "central_storage"
  return strategies.strategy("native", kind, n, facade="v1")


def _ours(n, dataset=None, input_fn=None):
  """Our iterator: the v1 OneDeviceStrategy for one replica, else the input
  package with fake InputWorkers."""
  if n == 1:
    strategy = distribute_v1.OneDeviceStrategy("/cpu:1")
    if dataset is not None:
      return strategy.make_dataset_iterator(dataset)
    return strategy.make_input_fn_iterator(input_fn)
  if dataset is not None:
    return input_lib.make_dataset_iterator(fake_workers(n), dataset)
  return input_lib.make_input_fn_iterator(fake_workers(n), input_fn, PER_WORKER)


def _local(value, n):
  leaves = [value] if n == 1 else list(value.values)
  return leaves


def _run_all(make_iterator, local_results, n, steps=6):
  """Builds the iterator in a fresh graph; returns per-step per-replica
  lists, ending with 'end' at OutOfRangeError, read twice (re-initialised)."""
  with tf.Graph().as_default(), V1.Session(config=_config()) as sess:
    iterator = make_iterator()
    parts = local_results(iterator.get_next())
    outputs = []
    for initializer in (iterator.initialize(), iterator.initializer):
      sess.run(initializer)
      out = []
      for _ in range(steps):
        try:
          out.append([np.asarray(v).tolist() for v in sess.run(list(parts))])
        except tf.errors.OutOfRangeError:
          out.append("end")
          break
      outputs.append(out)
  assert outputs[0] == outputs[1], "re-initialising must restart the input"
  return outputs[0]


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("size,batch", [(5, 4), (8, 4), (7, 3)])
def test_dataset_iterator_in_session_matches_native(n, size, batch):
  def dataset():
    return tf.data.Dataset.range(size).batch(batch)

  def native_iterator():
    strategy = _native(n)
    iterator = strategy.make_dataset_iterator(dataset())
    native_iterator.strategy = strategy
    return iterator

  expected = _run_all(native_iterator,
                      lambda v: native_iterator.strategy
                      .experimental_local_results(v), n)
  got = _run_all(lambda: _ours(n, dataset=dataset()),
                 lambda v: _local(v, n), n)
  assert got == expected
  assert got[-1] == "end"


@pytest.mark.parametrize("n", [1, 2, 4])
def test_input_fn_iterator_in_session_matches_native(n):
  seen = []

  def input_fn(ctx):
    seen.append((ctx.num_input_pipelines, ctx.input_pipeline_id,
                 ctx.num_replicas_in_sync))
    return tf.data.Dataset.range(9).batch(2)

  def native_iterator():
    strategy = _native(n)
    native_iterator.strategy = strategy
    return strategy.make_input_fn_iterator(input_fn)

  expected = _run_all(native_iterator,
                      lambda v: native_iterator.strategy
                      .experimental_local_results(v), n)
  got = _run_all(lambda: _ours(n, input_fn=input_fn),
                 lambda v: _local(v, n), n)
  assert got == expected
  assert seen[0] == seen[1] == (1, 0, n)


def test_graph_reads_keep_replica_order():
  # Four reads of one iterator in a graph: without ordering they could run
  # in any order and replicas would swap elements.
  with tf.Graph().as_default(), V1.Session(config=_config()) as sess:
    iterator = _ours(4, input_fn=lambda _: tf.data.Dataset.range(40))
    parts = list(iterator.get_next().values)
    sess.run(iterator.initializer)
    for step in range(10):
      assert sess.run(parts) == [4 * step + i for i in range(4)]
    assert [t.device for t in parts] == [cpu(i) for i in range(4)]


def test_get_next_before_initializer_fails_fast():
  with tf.Graph().as_default(), V1.Session(config=_config()) as sess:
    iterator = _ours(2, dataset=tf.data.Dataset.range(4).batch(2))
    value = iterator.get_next()
    options = V1.RunOptions(timeout_in_ms=20000)  # a hang fails, not blocks
    with pytest.raises(tf.errors.FailedPreconditionError,
                       match="not been initialized"):
      sess.run(value.values[0], options=options)


def test_get_next_as_optional_in_graph():
  with tf.Graph().as_default(), V1.Session(config=_config()) as sess:
    iterator = _ours(2, dataset=tf.data.Dataset.range(5).batch(4))
    opt = iterator.get_next_as_optional()
    has, value = opt.has_value(), opt.get_value()
    sess.run(iterator.initializer)
    # Each run reads one step; has_value and the value come from the same one.
    steps = [sess.run([has, list(value.values)]) for _ in range(2)]
    assert [(bool(h), [v.tolist() for v in vs]) for h, vs in steps] == [
        (True, [[0, 1], [2, 3]]), (True, [[4], []])]
    assert not sess.run(has)


def test_input_fn_returning_a_callable():
  # As in native TensorFlow, input_fn may return a callable that produces
  # the next element; it is called once per replica per step.
  calls = []

  def next_element():
    calls.append(1)
    return tf.constant([1, 2])

  with tf.Graph().as_default(), V1.Session(config=_config()) as sess:
    iterator = _ours(2, input_fn=lambda _: next_element)
    value = iterator.get_next()
    init = iterator.initialize()
    assert isinstance(init, tf.Operation) and len(calls) == 2
    sess.run(init)
    assert [v.tolist() for v in sess.run(list(value.values))] == [[1, 2]] * 2
    assert [v.device for v in value.values] == [cpu(0), cpu(1)]


def test_replication_mode_and_bad_input_fn():
  with pytest.raises(ValueError, match="PER_WORKER"):
    input_lib.make_input_fn_iterator(
        fake_workers(2), lambda _: tf.data.Dataset.range(2),
        tf.distribute.InputReplicationMode.PER_REPLICA)
  with pytest.raises(ValueError, match="must return a tf.data.Dataset"):
    input_lib.make_input_fn_iterator(fake_workers(2), lambda _: [1], PER_WORKER)
  with pytest.raises(TypeError, match="make_dataset_iterator"):
    input_lib.make_dataset_iterator(fake_workers(2), [1, 2])


@pytest.mark.parametrize("n", [1, 2])
def test_eager_iterators(n):
  iterator = _ours(n, dataset=tf.data.Dataset.range(5).batch(4))
  assert iterator.initialize() is None
  assert [np.asarray(v).tolist() for v in _local(next(iterator), n)] == (
      [[0, 1, 2, 3]] if n == 1 else [[0, 1], [2, 3]])
  assert iterator.initializer is None  # restarts the input
  assert [np.asarray(v).tolist() for v in _local(iterator.get_next(), n)] == (
      [[0, 1, 2, 3]] if n == 1 else [[0, 1], [2, 3]])
  assert iterator.get_next_as_optional().has_value()
  assert not iterator.get_next_as_optional().has_value()
  assert repr(iterator).startswith("InputIterator(kind=")
  spec = iterator.element_spec
  assert (spec == tf.TensorSpec([None], tf.int64) if n == 1 else
          repr(spec).startswith("PerReplicaSpec("))


# -- experimental_make_numpy_dataset -----------------------------------------


def _big_constants(graph, size):
  return [op.name for op in graph.get_operations() if op.type == "Const" and
          op.outputs[0].shape.num_elements() is not None and
          op.outputs[0].shape.num_elements() >= size]


def test_numpy_dataset_fed_through_session():
  data = {"x": np.arange(2000, dtype=np.float32).reshape(1000, 2),
          "y": np.arange(1000)}
  with tf.Graph().as_default() as graph, V1.Session(config=_config()) as sess:
    strategy = distribute_v1.OneDeviceStrategy("/cpu:1")
    dataset = strategy.experimental_make_numpy_dataset(data, session=sess)
    assert not _big_constants(graph, 1000)  # not embedded in the graph
    assert not V1.global_variables() and not V1.local_variables()
    iterator = strategy.make_dataset_iterator(dataset.batch(400))
    value = iterator.get_next()
    sess.run(V1.global_variables_initializer())  # must not wipe the data
    sess.run(iterator.initializer)
    first = sess.run(value)
  np.testing.assert_array_equal(first["x"], data["x"][:400])
  np.testing.assert_array_equal(first["y"], data["y"][:400])


def test_numpy_dataset_matches_native_in_graph():
  data = (np.arange(12.).reshape(6, 2), np.arange(6, dtype=np.int32))

  def read(strategy):
    with tf.Graph().as_default(), V1.Session(config=_config()) as sess:
      dataset = strategy().experimental_make_numpy_dataset(data, session=sess)
      iterator = V1.data.make_initializable_iterator(dataset)
      sess.run(iterator.initializer)
      element = iterator.get_next()
      return [sess.run(element) for _ in range(6)], dataset.element_spec

  ours = read(lambda: strategies.strategy("ours", "one_device", facade="v1",
                                          device="/cpu:0"))
  theirs = read(lambda: strategies.strategy("native", "one_device",
                                            facade="v1", device="/cpu:0"))
  assert repr(ours) == repr(theirs)
  # Native cannot feed string arrays (it divides by the dtype's size, 0).
  data = (data[0], np.array(["a", "b", "c", "d", "e", "f"]))
  strings = [x[1] for x in read(
      lambda: distribute_v1.OneDeviceStrategy("/cpu:0"))[0]]
  assert strings == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_numpy_dataset_session_required_in_graph():
  strategy = distribute_v1.OneDeviceStrategy("/cpu:0")
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="session=sess"):
      strategy.experimental_make_numpy_dataset(np.ones([3]))
    with V1.Session(config=_config()).as_default() as sess:
      dataset = strategy.experimental_make_numpy_dataset(np.ones([3]))
      iterator = V1.data.make_initializable_iterator(dataset)
      sess.run(iterator.initializer)
      assert sess.run(iterator.get_next()) == 1.0
  with tf.Graph().as_default():
    other = V1.Session(graph=tf.Graph())
    with pytest.raises(ValueError, match="different graph"):
      strategy.experimental_make_numpy_dataset(np.ones([3]), session=other)
    other.close()


def test_distributed_dataset_initializable_iterator_in_graph():
  with tf.Graph().as_default(), V1.Session(config=_config()) as sess:
    dist = input_lib.distribute_dataset(
        fake_workers(2), tf.data.Dataset.range(6).batch(4), None)
    with pytest.raises(RuntimeError, match="make_initializable_iterator"):
      iter(dist)
    iterator = dist.make_initializable_iterator()
    parts = list(iterator.get_next().values)
    sess.run(iterator.initializer)
    assert [v.tolist() for v in sess.run(parts)] == [[0, 1], [2, 3]]
    assert [v.tolist() for v in sess.run(parts)] == [[4], [5]]
    with pytest.raises(tf.errors.OutOfRangeError):
      sess.run(parts)


@pytest.mark.parametrize("n", [1, 2])
def test_eager_one_shot_iterator_and_refused_initializable_iterator(n):
  # TensorFlow's v1 distributed datasets (TF1 behaviour, eager) give a
  # ready iterator from make_one_shot_iterator() -- also through
  # tf.compat.v1.data -- and refuse make_initializable_iterator() with
  # ValueError, as there is nothing to initialize eagerly.
  dist = input_lib.distribute_dataset(
      fake_workers(n), tf.data.Dataset.range(8).batch(4), None)
  for make in (dist.make_one_shot_iterator,
               lambda: tf.compat.v1.data.make_one_shot_iterator(dist)):
    iterator = make()
    steps = [[v.numpy().tolist() for v in _local(iterator.get_next(), n)]
             for _ in range(2)]
    assert steps == ([[[0, 1, 2, 3]], [[4, 5, 6, 7]]] if n == 1 else
                     [[[0, 1], [2, 3]], [[4, 5], [6, 7]]])
    with pytest.raises(tf.errors.OutOfRangeError):
      iterator.get_next()
  for make in (dist.make_initializable_iterator,
               lambda: tf.compat.v1.data.make_initializable_iterator(dist)):
    with pytest.raises(ValueError, match="Eager mode.*iter"):
      make()
