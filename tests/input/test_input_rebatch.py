"""Splitting global batches over several replicas, against TensorFlow 2.21.

NATIVE_SPLITS was measured with ``tf.distribute.experimental.
CentralStorageStrategy`` over 1, 2 and 4 logical CPUs (MirroredStrategy gives
the same pieces): for ``Dataset.range(size).batch(batch)``, each step's
values per replica.  The rule behind it: a batch of ``b`` rows gives each
replica ``ceil(b / n)`` rows in replica order until the rows run out, later
replicas get empty batches.  ``test_split_matches_native_live`` re-measures
part of the table and some structured cases against native TensorFlow.
"""
import pytest
import tensorflow as tf

from compat_distribute import input as input_lib
from compat_distribute.input import rebatch
from conftest import cpu
from support.input import fake_workers
from support.input import devices_of
from support.input import local_values
from support.input import native
from support.input import native_local_values

NATIVE_SPLITS = {
    (8, 4, 1): [[[0, 1, 2, 3]], [[4, 5, 6, 7]]],
    (5, 4, 1): [[[0, 1, 2, 3]], [[4]]],
    (7, 3, 1): [[[0, 1, 2]], [[3, 4, 5]], [[6]]],
    (1, 4, 1): [[[0]]],
    (0, 3, 1): [],
    (8, 4, 2): [[[0, 1], [2, 3]], [[4, 5], [6, 7]]],
    (5, 4, 2): [[[0, 1], [2, 3]], [[4], []]],
    (7, 3, 2): [[[0, 1], [2]], [[3, 4], [5]], [[6], []]],
    (3, 3, 2): [[[0, 1], [2]]],
    (1, 4, 2): [[[0], []]],
    (6, 4, 2): [[[0, 1], [2, 3]], [[4], [5]]],
    (9, 4, 2): [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8], []]],
    (4, 1, 2): [[[0], []], [[1], []], [[2], []], [[3], []]],
    (10, 5, 2): [[[0, 1, 2], [3, 4]], [[5, 6, 7], [8, 9]]],
    (10, 8, 2): [[[0, 1, 2, 3], [4, 5, 6, 7]], [[8], [9]]],
    (13, 10, 2): [[[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]], [[10, 11], [12]]],
    (11, 6, 2): [[[0, 1, 2], [3, 4, 5]], [[6, 7, 8], [9, 10]]],
    (0, 3, 2): [],
    (2, 2, 2): [[[0], [1]]],
    (8, 4, 4): [[[0], [1], [2], [3]], [[4], [5], [6], [7]]],
    (5, 4, 4): [[[0], [1], [2], [3]], [[4], [], [], []]],
    (7, 3, 4): [[[0], [1], [2], []], [[3], [4], [5], []], [[6], [], [], []]],
    (1, 4, 4): [[[0], [], [], []]],
    (6, 4, 4): [[[0], [1], [2], [3]], [[4], [5], [], []]],
    (9, 4, 4): [[[0], [1], [2], [3]], [[4], [5], [6], [7]],
                [[8], [], [], []]],
    (4, 1, 4): [[[0], [], [], []], [[1], [], [], []], [[2], [], [], []],
                [[3], [], [], []]],
    (10, 5, 4): [[[0, 1], [2, 3], [4], []], [[5, 6], [7, 8], [9], []]],
    (10, 8, 4): [[[0, 1], [2, 3], [4, 5], [6, 7]], [[8], [9], [], []]],
    (13, 10, 4): [[[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]],
                  [[10], [11], [12], []]],
    (11, 6, 4): [[[0, 1], [2, 3], [4, 5], []], [[6, 7], [8, 9], [10], []]],
    (7, 7, 4): [[[0, 1], [2, 3], [4, 5], [6]]],
    (0, 3, 4): [],
    (2, 2, 4): [[[0], [1], [], []]],
}


def _ours(n, dataset, options=None):
  return input_lib.distribute_dataset(fake_workers(n), dataset, options)


def _steps_eager(dist, n):
  return [local_values(x, n) for x in dist]


def _steps_in_function(dist, n, count):
  """Reads ``count`` steps through a tf.function taking the iterator, then
  checks the next read is the end of input."""
  traces = []

  @tf.function
  def step(iterator):
    traces.append(1)
    return iterator.get_next()

  iterator = iter(dist)
  steps = [local_values(step(iterator), n) for _ in range(count)]
  with pytest.raises(tf.errors.OutOfRangeError):
    step(iterator)
  assert len(traces) <= 1, "the iterator argument must not cause retracing"
  return steps


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(NATIVE_SPLITS), ids=str)
def test_split_table(case, mode):
  size, batch, n = case
  dist = _ours(n, tf.data.Dataset.range(size).batch(batch))
  expected = NATIVE_SPLITS[case]
  if mode == "eager":
    assert _steps_eager(dist, n) == expected
  else:
    assert _steps_in_function(dist, n, len(expected)) == expected


def _ragged():
  return tf.data.Dataset.range(7).map(tf.range).ragged_batch(3)


LIVE_CASES = {
    "partial": lambda: tf.data.Dataset.range(9).batch(4),
    "drop_remainder_odd": lambda: tf.data.Dataset.range(9).batch(
        3, drop_remainder=True),
    "drop_remainder_even": lambda: tf.data.Dataset.range(8).batch(
        4, drop_remainder=True),
    "dict_tuple_strings": lambda: tf.data.Dataset.range(7).batch(3).map(
        lambda x: {"a": x, "b": (x * 10, tf.strings.as_string(x))}),
    "one_tuple": lambda: tf.data.Dataset.range(5).batch(3).map(lambda x: (x,)),
    "matrix": lambda: tf.data.Dataset.range(6).map(
        lambda x: tf.fill([2], x)).batch(3),
    "partial_batch_mid_stream": lambda: tf.data.Dataset.range(5).batch(
        4).concatenate(tf.data.Dataset.range(10, 14).batch(4)),
    "unknown_batch_size_filter": lambda: tf.data.Dataset.range(10).batch(
        4).filter(lambda x: tf.size(x) > 0),
    "unknown_batch_size_generator": lambda: tf.data.Dataset.from_generator(
        lambda: iter([[0, 1, 2, 3], [4, 5, 6]]),
        output_signature=tf.TensorSpec([None], tf.int64)),
    "from_tensors_not_divisible": lambda: tf.data.Dataset.from_tensors(
        tf.reshape(tf.range(6.), [3, 2])),
    "components_of_different_length": lambda: tf.data.Dataset.from_tensors(
        (tf.range(4), tf.range(6))),
    "unbatched_vectors": lambda: tf.data.Dataset.range(3).map(
        lambda x: tf.fill([2], x)),
    "ragged": _ragged,
    "empty": lambda: tf.data.Dataset.range(0).batch(2),
}


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("name", sorted(LIVE_CASES))
def test_split_matches_native_live(name, n):
  strategy = native(n)
  native_dist = strategy.experimental_distribute_dataset(LIVE_CASES[name]())
  expected = [native_local_values(strategy, x) for x in native_dist]
  dist = _ours(n, LIVE_CASES[name]())
  assert _steps_eager(dist, n) == expected
  assert repr(dist.element_spec) == repr(native_dist.element_spec)


@pytest.mark.parametrize("n", [2, 4])
def test_sparse_components_are_split_too(n):
  # Native TensorFlow fails on the empty pieces of a partial batch
  # ("Serialized sparse should have at least 1 serialized tensor"); we
  # split sparse components by the same rule as dense ones.
  dense = tf.reshape(tf.range(1, 15), [7, 2])
  dataset = tf.data.Dataset.from_tensor_slices(
      tf.sparse.from_dense(dense)).batch(3)
  steps = _steps_eager(_ours(n, dataset), n)
  dense_steps = _steps_eager(
      _ours(n, tf.data.Dataset.from_tensor_slices(dense).batch(3)), n)
  assert [[p if p else [] for p in step] for step in steps] == dense_steps


def test_piece_spec_rule():
  assert rebatch.piece_spec(tf.TensorSpec([8, 3]), 4).shape == [2, 3]
  assert rebatch.piece_spec(tf.TensorSpec([6, 3]), 4).shape.as_list() == [
      None, 3]
  assert rebatch.piece_spec(tf.TensorSpec(None), 2).shape.rank is None


@pytest.mark.parametrize("n", [2, 4])
def test_unbatched_scalars_error(n):
  with pytest.raises(IndexError):  # what native TensorFlow raises
    native(n).experimental_distribute_dataset(tf.data.Dataset.range(3))
  with pytest.raises(ValueError) as info:
    _ours(n, tf.data.Dataset.range(3))
  assert isinstance(info.value, IndexError)
  message = str(info.value)
  assert "not batched" in message and f"over {n} replicas" in message
  assert "dataset.batch(global_batch_size)" in message
  with pytest.raises(rebatch.UnbatchedDatasetError, match="'b'"):
    _ours(n, tf.data.Dataset.from_tensors({"a": [1, 2], "b": 3}))


def test_one_replica_does_not_split_or_need_batches():
  dist = _ours(1, tf.data.Dataset.range(3))
  assert _steps_eager(dist, 1) == [[0], [1], [2]]


@pytest.mark.parametrize("n", [2, 4])
def test_pieces_on_replica_devices_and_host_without_fetch(n, mode):
  dataset = tf.data.Dataset.range(8).batch(4).map(lambda x: {"x": x,
                                                             "y": (x,)})

  def first_devices(dist):
    if mode == "eager":
      return devices_of(next(iter(dist)), n)
    seen = []

    @tf.function
    def read(d):
      value = next(iter(d))
      seen.append(devices_of(value, n))  # graph tensors know their device
      return value

    read(dist)
    # Pieces that stay on the host carry no device annotation in the graph:
    # they are colocated with the host iterator, which lives on CPU:0.
    return [{d or cpu(0) for d in s} for s in seen[0]]

  assert first_devices(_ours(n, dataset)) == [{cpu(i)} for i in range(n)]
  options = tf.distribute.InputOptions(experimental_fetch_to_device=False)
  assert first_devices(_ours(n, dataset, options)) == [{cpu(0)}] * n


def test_host_device_is_used_for_the_pipeline():
  workers = fake_workers(2, host=3)
  dist = input_lib.distribute_dataset(
      workers, tf.data.Dataset.range(4).batch(2),
      tf.distribute.InputOptions(experimental_fetch_to_device=False))
  value = next(iter(dist))
  assert devices_of(value, 2) == [{cpu(3)}, {cpu(3)}]


@pytest.mark.parametrize("n", [2, 4])
def test_get_next_as_optional_matches_native(n, mode):
  strategy = native(n)
  it = iter(strategy.experimental_distribute_dataset(
      tf.data.Dataset.range(5).batch(4)))
  expected = []
  for _ in range(3):
    opt = it.get_next_as_optional()
    expected.append(native_local_values(strategy, opt.get_value())
                    if opt.has_value() else None)
  ours = iter(_ours(n, tf.data.Dataset.range(5).batch(4)))

  def read(iterator):
    opt = iterator.get_next_as_optional()
    return opt.has_value(), opt

  if mode == "tf_function":
    read = tf.function(read)
  got = []
  for _ in range(3):
    has, opt = read(ours)
    got.append(local_values(opt.get_value(), n) if has else None)
  assert got == expected


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
def test_reduce_and_for_loop_in_function_match_native(n):
  def total(strategy_or_none, dist):
    def add(state, x):
      parts = (strategy_or_none.experimental_local_results(x)
               if strategy_or_none else x.values)
      return state + tf.add_n([tf.reduce_sum(p) for p in parts])

    @tf.function
    def loop(d):
      s = tf.constant(0, tf.int64)
      for x in d:
        s = add(s, x)
      return s

    return (int(dist.reduce(tf.constant(0, tf.int64), add)),
            int(loop(dist)))

  strategy = native(n)
  dataset = tf.data.Dataset.range(11).batch(3)
  expected = total(strategy, strategy.experimental_distribute_dataset(dataset))
  assert total(None, _ours(n, dataset)) == expected == (55, 55)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("kind", ["split", "from_function"])
def test_eager_fast_path_equals_general_path(n, kind):
  # Eagerly, dense input is read with one raw IteratorGetNext per element
  # (fast_path.py); asynchronous eager execution uses tf.data's get_next
  # (fetch.py).  Both must give the same values, structures and devices.
  def make():
    dataset = tf.data.Dataset.range(11).batch(3).map(
        lambda x: {"b": (x, tf.strings.as_string(x)), "a": x * 2})
    if kind == "split":
      return _ours(n, dataset)
    return input_lib.distribute_datasets_from_function(
        fake_workers(n), lambda _: dataset, None)

  def read_all():
    it, out = iter(make()), []
    while True:
      try:
        value = it.get_next()
      except tf.errors.OutOfRangeError:
        return out
      out.append((local_values(value, n), devices_of(value, n),
                  list(value)))

  assert iter(make())._reader is not None  # pylint: disable=protected-access
  fast = read_all()
  tf.config.experimental.set_synchronous_execution(False)
  try:
    general = read_all()
  finally:
    tf.config.experimental.set_synchronous_execution(True)
  assert fast == general and fast
