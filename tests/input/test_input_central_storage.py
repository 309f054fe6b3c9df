"""Input under our CentralStorageStrategy next to TensorFlow's (1, 2 and 4
compute devices, eager and tf.function): distributed datasets consumed by
``run`` and ``reduce``, datasets from functions, per-replica values."""
import numpy as np
import pytest
import tensorflow as tf

from support.input import central_storage_class
from support.input import native
from support.input import native_local_values

NS = [1, 2, 4]


def _ours(n):
  return central_storage_class()([f"/cpu:{i}" for i in range(n)])


def _both(n):
  return _ours(n), native(n)


def _local(strategy, value):
  return native_local_values(strategy, value)


@pytest.mark.slow
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("size,batch", [(9, 4), (7, 3), (5, 5), (1, 4)])
def test_dataset_values_match_native(n, size, batch):
  ours, theirs = _both(n)
  results = []
  for s in (ours, theirs):
    dist = s.experimental_distribute_dataset(
        tf.data.Dataset.range(size).batch(batch))
    results.append(([_local(s, x) for x in dist], repr(dist.element_spec)))
  assert results[0] == results[1]


@pytest.mark.slow
@pytest.mark.parametrize("n", NS)
def test_training_style_loop_matches_native(n, mode):
  # Per-replica sums through run, then reduce(MEAN, axis=0) over partial
  # batches: the numbers a training loop computes.
  def program(s):
    dataset = tf.data.Dataset.range(11).map(
        lambda i: (tf.cast(i, tf.float32), i % 3)).batch(4)
    dist = s.experimental_distribute_dataset(dataset)

    def step(inputs):
      x, y = inputs
      per_replica = s.run(lambda a, b: a * 2.0 + tf.cast(b, tf.float32),
                          args=(x, y))
      return (s.reduce("SUM", s.run(tf.reduce_sum, args=(per_replica,)),
                       axis=None),
              s.reduce("MEAN", per_replica, axis=0))

    if mode == "eager":
      return [[float(v) for v in step(x)] for x in dist]

    @tf.function
    def loop(d):
      out = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
      i = 0
      for x in d:
        total, mean = step(x)
        out = out.write(i, tf.stack([total, mean]))
        i += 1
      return out.stack()

    return loop(dist).numpy().tolist()

  ours, theirs = _both(n)
  np.testing.assert_allclose(program(ours), program(theirs), rtol=1e-6)


@pytest.mark.parametrize("n", NS)
def test_iterator_through_tf_function_matches_native(n):
  def program(s):
    it = iter(s.experimental_distribute_dataset(
        tf.data.Dataset.range(10).batch(4)))

    @tf.function
    def step(iterator):
      return s.reduce("SUM", s.run(tf.reduce_sum, args=(next(iterator),)),
                      axis=None)

    return [int(step(it)) for _ in range(3)]

  ours, theirs = _both(n)
  assert program(ours) == program(theirs) == [6, 22, 17]


@pytest.mark.parametrize("n", NS)
def test_datasets_from_function_match_native(n):
  contexts = []

  def dataset_fn(ctx):
    contexts.append((ctx.num_input_pipelines, ctx.input_pipeline_id,
                     ctx.num_replicas_in_sync))
    return tf.data.Dataset.range(12).batch(
        ctx.get_per_replica_batch_size(4))

  results = []
  for s in _both(n):
    dist = s.distribute_datasets_from_function(dataset_fn)
    results.append([_local(s, x) for x in dist])
  assert results[0] == results[1]
  assert contexts == [(1, 0, n)] * 2


_CARDINALITY_SOURCES = {
    "finite": lambda: tf.data.Dataset.range(9).batch(4),
    "drop_remainder": lambda: tf.data.Dataset.range(9).batch(
        4, drop_remainder=True),
    "batch_of_one": lambda: tf.data.Dataset.range(9).batch(1),
    "infinite": lambda: tf.data.Dataset.range(9).batch(4).repeat(),
    "unknown": lambda: tf.data.Dataset.range(9).batch(4).filter(
        lambda x: True),
}


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("source", sorted(_CARDINALITY_SOURCES))
def test_cardinality_matches_native(n, source):
  # Keras and input pipelines read `cardinality` off distributed datasets.
  make = _CARDINALITY_SOURCES[source]

  @tf.function
  def inside(dist):
    return dist.cardinality

  results = []
  for s in _both(n):
    dist = s.experimental_distribute_dataset(make())
    from_fn = s.distribute_datasets_from_function(lambda ctx: make())
    results.append((type(dist.cardinality), int(dist.cardinality),
                    int(from_fn.cardinality), int(inside(dist))))
  assert results[0] == results[1]
  assert results[0][0] is np.int64
  assert results[0][3] == tf.data.UNKNOWN_CARDINALITY


@pytest.mark.parametrize("n", NS)
def test_values_from_function_match_native(n):
  def value_fn(ctx):
    return tf.constant([ctx.replica_id_in_sync_group,
                        ctx.num_replicas_in_sync])

  results = []
  for s in _both(n):
    value = s.experimental_distribute_values_from_function(value_fn)
    results.append((type(value).__name__, _local(s, value)))
    reduced = s.reduce("SUM", value, axis=None)
    results.append(reduced.numpy().tolist())
  assert results[:2] == results[2:]


@pytest.mark.parametrize("n", [2, 4])
def test_fetch_to_device_false_keeps_data_on_host(n):
  # Native CentralStorage crashes on any InputOptions (AttributeError
  # 'experimental_replication_moden' in TF 2.21); we honour them.
  options = tf.distribute.InputOptions(experimental_fetch_to_device=False)
  s = _ours(n)
  value = next(iter(s.experimental_distribute_dataset(
      tf.data.Dataset.range(8).batch(4), options)))
  assert {v.device for v in s.experimental_local_results(value)} == {
      "/job:localhost/replica:0/task:0/device:CPU:0"}
  default = next(iter(s.experimental_distribute_dataset(
      tf.data.Dataset.range(8).batch(4))))
  assert [v.device for v in s.experimental_local_results(default)] == [
      f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(n)]


def test_unbatched_dataset_error_names_replicas():
  with pytest.raises(ValueError, match="over 2 replicas"):
    _ours(2).experimental_distribute_dataset(tf.data.Dataset.range(3))
