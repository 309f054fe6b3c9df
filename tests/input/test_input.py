"""Distributed input under OneDeviceStrategy, next to TensorFlow's, and the
API of distributed datasets, iterators and the input contexts.

Native behaviour asserted here (TF 2.21 OneDeviceStrategy): elements are the
dataset's own (no PerReplica), placed on the strategy's device, or left on
the host with ``experimental_fetch_to_device=False``; ``PER_REPLICA``
replication raises ``NotImplementedError``; ``dataset_fn`` gets
``InputContext(1, 0, 1)``; ``experimental_distribute_values_from_function``
returns ``value_fn``'s result as it is.
"""
import numpy as np
import pytest
import tensorflow as tf

from compat_distribute import v2 as distribute
from compat_distribute.input import DistributedDataset
from compat_distribute.input import DistributedIterator
from conftest import cpu
from fixtures import strategies
from support.input import to_list

DEVICE = "/cpu:1"


def _dataset():
  return tf.data.Dataset.range(7).batch(3).map(
      lambda x: {"x": x, "y": (tf.cast(x, tf.float32) * 2,)})


def _values(dist):
  return [tf.nest.map_structure(to_list, x) for x in dist]


# -- OneDevice against native ---------------------------------------------


@pytest.mark.parametrize("fetch", [True, False])
def test_one_device_elements_and_devices_match_native(fetch):
  ours, theirs = strategies.pair("one_device", device=DEVICE)
  options = tf.distribute.InputOptions(experimental_fetch_to_device=fetch)
  dist = ours.experimental_distribute_dataset(_dataset(), options)
  native_dist = theirs.experimental_distribute_dataset(_dataset(), options)
  assert _values(dist) == _values(native_dist)
  first, native_first = next(iter(dist)), next(iter(native_dist))
  assert isinstance(first["x"], tf.Tensor)
  devices = {t.device for t in tf.nest.flatten(first)}
  assert devices == {t.device for t in tf.nest.flatten(native_first)}
  assert devices == {cpu(1) if fetch else cpu(0)}
  assert dist.element_spec == native_dist.element_spec
  assert iter(dist).element_spec == native_dist.element_spec


def test_one_device_from_function_matches_native(mode):
  ours, theirs = strategies.pair("one_device", device=DEVICE)
  seen = []

  def dataset_fn(ctx):
    seen.append((ctx.num_input_pipelines, ctx.input_pipeline_id,
                 ctx.num_replicas_in_sync))
    return _dataset()

  dist = ours.distribute_datasets_from_function(dataset_fn)
  native_dist = theirs.distribute_datasets_from_function(dataset_fn)
  assert seen == [(1, 0, 1), (1, 0, 1)]
  if mode == "eager":
    assert _values(dist) == _values(native_dist)
  else:
    total = tf.function(lambda d: d.reduce(
        tf.constant(0, tf.int64), lambda s, x: s + tf.reduce_sum(x["x"])))
    assert int(total(dist)) == int(total(native_dist)) == 21


def test_values_from_function_returns_value_as_is():
  ours, theirs = strategies.pair("one_device", device=DEVICE)

  def value_fn(ctx):
    return (ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync, "x")

  assert (ours.experimental_distribute_values_from_function(value_fn) ==
          theirs.experimental_distribute_values_from_function(value_fn) ==
          (0, 1, "x"))


def test_numpy_dataset_matches_native_and_stays_on_host():
  ours = strategies.strategy("ours", "one_device", device=DEVICE)
  # TF2's native strategy dropped the method; the v1 class still has it.
  theirs = strategies.strategy("native", "one_device", facade="v1",
                               device=DEVICE)
  data = {"a": np.arange(6.).reshape(3, 2), "b": np.array([1, 2, 3])}
  dataset = ours.experimental_make_numpy_dataset(data)
  assert isinstance(dataset, tf.data.Dataset)
  native_dataset = theirs.experimental_make_numpy_dataset(data)
  assert _values(dataset) == _values(native_dataset)
  assert dataset.element_spec == native_dataset.element_spec
  assert {t.device for t in tf.nest.flatten(next(iter(dataset)))} == {cpu(0)}


# -- options and bad input -------------------------------------------------


def test_per_replica_mode_not_implemented_like_native():
  ours, theirs = strategies.pair("one_device", device=DEVICE)
  options = tf.distribute.InputOptions(
      experimental_replication_mode=tf.distribute.InputReplicationMode
      .PER_REPLICA)
  for strategy in (ours, theirs):
    with pytest.raises(NotImplementedError):
      strategy.experimental_distribute_dataset(_dataset(), options)
    with pytest.raises(NotImplementedError):
      strategy.distribute_datasets_from_function(lambda _: _dataset(), options)
  with pytest.raises(NotImplementedError, match="PER_WORKER"):
    ours.experimental_distribute_dataset(_dataset(), options)


def _per_replica_options(place, fetch):
  return tf.distribute.InputOptions(
      experimental_place_dataset_on_device=place,
      experimental_fetch_to_device=fetch,
      experimental_replication_mode=tf.distribute.InputReplicationMode
      .PER_REPLICA)


def test_per_replica_in_central_storage_from_function_as_native():
  # TensorFlow's CentralStorage rejects placing and fetching together
  # (ValueError, before anything else) and, fetching to the devices, builds
  # the one pipeline PER_WORKER builds.
  ours, theirs = strategies.pair("central_storage", 2)
  fn = lambda _: tf.data.Dataset.range(5)
  results = []
  for strategy in (ours, theirs):
    with pytest.raises(ValueError):
      strategy.distribute_datasets_from_function(
          fn, _per_replica_options(place=True, fetch=True))
    dist = strategy.distribute_datasets_from_function(
        fn, _per_replica_options(place=False, fetch=True))
    results.append([[(int(t), t.device) for t in
                     strategy.experimental_local_results(x)] for x in dist])
  assert results[0] == results[1] == [[(0, cpu(0)), (1, cpu(1))],
                                      [(2, cpu(0)), (3, cpu(1))]]
  # TensorFlow's other PER_REPLICA setting hands replica 1 nothing; ours
  # refuses it.
  with pytest.raises(NotImplementedError, match="PER_WORKER"):
    ours.distribute_datasets_from_function(
        fn, _per_replica_options(place=True, fetch=False))


@pytest.mark.parametrize("fetch", [True, False])
def test_place_dataset_on_device_like_native_one_device(fetch):
  # TensorFlow's OneDeviceStrategy ignores the option in
  # experimental_distribute_dataset and rejects it (ValueError) in
  # distribute_datasets_from_function; ours does the same.
  ours, theirs = strategies.pair("one_device", device=DEVICE)
  options = tf.distribute.InputOptions(
      experimental_place_dataset_on_device=True,
      experimental_fetch_to_device=fetch)
  results = []
  for strategy in (ours, theirs):
    dist = strategy.experimental_distribute_dataset(_dataset(), options)
    results.append([tf.nest.map_structure(lambda t: (to_list(t), t.device), x)
                    for x in dist])
    with pytest.raises(ValueError):
      strategy.distribute_datasets_from_function(lambda _: _dataset(), options)
  assert results[0] == results[1]
  assert results[0][0]["x"] == ([0, 1, 2], cpu(1) if fetch else cpu(0))
  with pytest.raises(ValueError, match="PER_REPLICA"):
    ours.distribute_datasets_from_function(lambda _: _dataset(), options)


def test_place_dataset_on_device_rejected_with_several_replicas():
  ours = distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
  options = tf.distribute.InputOptions(
      experimental_place_dataset_on_device=True,
      experimental_fetch_to_device=False)
  with pytest.raises(ValueError, match="PER_REPLICA"):
    ours.experimental_distribute_dataset(_dataset(), options)


def test_buffer_size_option():
  ours, _ = strategies.pair("one_device", device=DEVICE)
  for size in (0, 1, 4):
    options = tf.distribute.InputOptions(
        experimental_per_replica_buffer_size=size)
    assert _values(ours.experimental_distribute_dataset(
        tf.data.Dataset.range(3), options)) == [0, 1, 2]
  with pytest.raises(TypeError, match="must be an int.*2.5"):
    ours.experimental_distribute_dataset(
        _dataset(), tf.distribute.InputOptions(
            experimental_per_replica_buffer_size=2.5))


def test_bad_options_and_datasets():
  ours, _ = strategies.pair("one_device", device=DEVICE)
  with pytest.raises(TypeError, match="InputOptions or None.*dict"):
    ours.experimental_distribute_dataset(_dataset(), {"fetch": True})
  with pytest.raises(TypeError) as info:
    ours.experimental_distribute_dataset([1, 2, 3])
  message = str(info.value)
  assert "tf.data.Dataset" in message and "list" in message
  assert "from_tensor_slices" in message
  with pytest.raises(TypeError, match="must return a tf.data.Dataset.*int"):
    ours.distribute_datasets_from_function(lambda ctx: 3)


# -- iteration protocol ------------------------------------------------------


def test_reiteration_stop_and_out_of_range():
  ours, _ = strategies.pair("one_device", device=DEVICE)
  dist = ours.experimental_distribute_dataset(tf.data.Dataset.range(4).batch(2))
  first, second = iter(dist), iter(dist)
  assert to_list(next(first)) == [0, 1]
  assert to_list(next(second)) == [0, 1]  # each iterator starts over
  assert to_list(first.next()) == [2, 3]
  with pytest.raises(StopIteration):
    next(first)
  with pytest.raises(tf.errors.OutOfRangeError):
    first.get_next()
  assert not first.get_next_as_optional().has_value()
  assert iter(first) is first


def test_get_next_as_optional_value(mode):
  ours, _ = strategies.pair("one_device", device=DEVICE)
  it = iter(ours.experimental_distribute_dataset(_dataset()))

  def read():
    opt = it.get_next_as_optional()
    return opt.has_value(), opt.get_value()

  if mode == "tf_function":
    read = tf.function(read)
  has, value = read()
  assert bool(has)
  assert to_list(value["x"]) == [0, 1, 2]
  assert isinstance(it.get_next_as_optional(), tf.experimental.Optional)


def test_get_next_inside_run_is_an_error():
  ours, _ = strategies.pair("one_device", device=DEVICE)
  it = iter(ours.experimental_distribute_dataset(_dataset()))
  with pytest.raises(ValueError, match="outside"):
    ours.run(lambda: it.get_next())
  with ours.scope():
    assert to_list(it.get_next()["x"]) == [0, 1, 2]


def test_iter_in_tf1_graph_is_an_error():
  ours, _ = strategies.pair("one_device", device=DEVICE)
  dist = ours.experimental_distribute_dataset(_dataset())
  with tf.Graph().as_default():
    with pytest.raises(RuntimeError, match="make_dataset_iterator"):
      iter(dist)


# -- types, specs, tracing ---------------------------------------------------


def test_types_and_reprs():
  ours, _ = strategies.pair("one_device", device=DEVICE)
  dist = ours.experimental_distribute_dataset(_dataset())
  it = iter(dist)
  assert isinstance(dist, tf.distribute.DistributedDataset)
  assert isinstance(dist, DistributedDataset)
  assert isinstance(it, tf.distribute.DistributedIterator)
  assert isinstance(it, DistributedIterator)
  assert repr(dist).startswith("DistributedDataset(kind='whole', devices=(")
  assert "CPU:1" in repr(dist) and "element_spec=" in repr(dist)
  assert repr(it).startswith("DistributedIterator(kind='whole'")
  assert repr(tf.type_spec_from_value(dist)).startswith(
      "DistributedDatasetSpec(layout=('whole'")
  assert repr(tf.type_spec_from_value(it)).startswith(
      "DistributedIteratorSpec(layout=('whole'")


def test_no_retracing_for_datasets_and_iterators():
  ours, _ = strategies.pair("one_device", device=DEVICE)
  traces = []

  @tf.function
  def step(iterator):
    traces.append("step")
    return iterator.get_next()["x"]

  @tf.function
  def total(dataset):
    traces.append("total")
    s = tf.constant(0, tf.int64)
    for x in dataset:
      s += tf.reduce_sum(x["x"])
    return s

  dist = ours.experimental_distribute_dataset(_dataset())
  it = iter(dist)
  assert [to_list(step(it)) for _ in range(3)] == [[0, 1, 2], [3, 4, 5], [6]]
  assert to_list(step(iter(dist))) == [0, 1, 2]  # a new iterator, same trace
  other = ours.experimental_distribute_dataset(_dataset())
  assert [int(total(d)) for d in (dist, dist, other)] == [21, 21, 21]
  assert traces == ["step", "total"]


def test_input_signature_from_element_spec():
  ours, _ = strategies.pair("one_device", device=DEVICE)
  dist = ours.experimental_distribute_dataset(_dataset())
  f = tf.function(lambda x: x["y"][0] + 1.0,
                  input_signature=[dist.element_spec])
  assert [to_list(f(x)) for x in dist] == [[1., 3., 5.], [7., 9., 11.], [13.]]


def test_reduce():
  ours, _ = strategies.pair("one_device", device=DEVICE)
  dist = ours.experimental_distribute_dataset(_dataset())
  total = dist.reduce(tf.constant(0, tf.int64),
                      lambda s, x: s + tf.reduce_sum(x["x"]))
  assert int(total) == 21


# -- InputContext / ValueContext -------------------------------------------


def test_input_context_members():
  ctx = distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
                                num_replicas_in_sync=4)
  assert isinstance(ctx, tf.distribute.InputContext)
  assert (ctx.num_input_pipelines, ctx.input_pipeline_id,
          ctx.num_replicas_in_sync) == (2, 1, 4)
  assert ctx.get_per_replica_batch_size(64) == 16
  assert repr(ctx) == (
      "InputContext(num_input_pipelines=2, input_pipeline_id=1, "
      "num_replicas_in_sync=4)")
  # str() is TensorFlow's own text, e.g. for logs that print the context.
  assert str(ctx) == str(tf.distribute.InputContext(2, 1, 4)) == (
      "tf.distribute.InputContext(input pipeline id 1, total: 2)")
  value_ctx = distribute.experimental.ValueContext(1, 2)
  assert str(value_ctx) == str(tf.distribute.experimental.ValueContext(1, 2))
  default = distribute.InputContext()
  assert (default.num_input_pipelines, default.input_pipeline_id,
          default.num_replicas_in_sync) == (1, 0, 1)
  with pytest.raises(ValueError) as info:
    ctx.get_per_replica_batch_size(10)
  assert "10" in str(info.value) and "multiple of 4" in str(info.value)
  with pytest.raises(ValueError):  # native raises ValueError too
    tf.distribute.InputContext(1, 0, 4).get_per_replica_batch_size(10)


def test_context_arguments_checked():
  with pytest.raises(ValueError, match=r"input_pipeline_id.*\[0, 2\)"):
    distribute.InputContext(2, 2, 1)
  with pytest.raises(TypeError, match="num_replicas_in_sync.*int"):
    distribute.InputContext(1, 0, "4")
  with pytest.raises(ValueError, match="at least 1"):
    distribute.experimental.ValueContext(0, 0)
  with pytest.raises(ValueError, match="replica_id_in_sync_group"):
    distribute.experimental.ValueContext(3, 2)


def test_value_context_members():
  ctx = distribute.experimental.ValueContext(1, 2)
  assert isinstance(ctx, tf.distribute.experimental.ValueContext)
  assert (ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync) == (1, 2)
  assert repr(ctx) == (
      "ValueContext(replica_id_in_sync_group=1, num_replicas_in_sync=2)")
  default = distribute.experimental.ValueContext()
  assert (default.replica_id_in_sync_group,
          default.num_replicas_in_sync) == (0, 1)
  assert "InputContext" in distribute.__all__
  assert "ValueContext" in distribute.experimental.__all__


def test_enumerate_in_tf_function_raises_instead_of_hanging():
  ours, theirs = strategies.pair("one_device", device=DEVICE)
  for strategy in (ours, theirs):
    dist = strategy.experimental_distribute_dataset(_dataset())

    @tf.function
    def count(d):
      n = 0
      for i, _ in enumerate(d):
        n = i
      return n

    with pytest.raises(NotImplementedError, match="enumerate"):
      count(dist)
    with pytest.raises(NotImplementedError, match="enumerate"):
      count(iter(dist))
  assert [i for i, _ in enumerate(ours.experimental_distribute_dataset(
      _dataset()))] == [0, 1, 2]  # eagerly it is an ordinary loop
