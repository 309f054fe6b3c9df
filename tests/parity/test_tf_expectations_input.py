"""TensorFlow's expectations for distributed input, checked on our strategies.

Each test states a behaviour that TensorFlow's own distribute tests rely on
for OneDeviceStrategy and CentralStorageStrategy, and compares our strategy
with the native one on the same input.
"""
import pytest
import tensorflow as tf
from fixtures import strategies

from compat_distribute import v2 as distribute_v2

pytestmark = pytest.mark.parity

# TensorFlow's distribute tests match this part of the error raised when a
# distributed dataset is iterated with iter() while building a TF1 graph.
GRAPH_ITER_PHRASE = "or when eager execution is enabled"


def _pair(api, kind):
  """(ours, native) strategies of one kind, built inside the current graph.

  Args:
    api: ``v2`` or ``v1``, the facade whose classes are built.
    kind: ``one_device`` (on ``/cpu:0``) or ``central_storage`` (on
      ``/cpu:0`` and ``/cpu:1``).

  Returns:
    ``(ours, native)``, from ``fixtures.strategies.pair``.
  """
  replicas = 1 if kind == "one_device" else 2
  return strategies.pair(kind, replicas, facade=api, device="/cpu:0")


@pytest.mark.parametrize("api", ["v2", "v1"])
@pytest.mark.parametrize("kind", ["one_device", "central_storage"])
def test_iter_while_building_graph_raises_runtime_error_with_tf_text(api, kind):
  messages = []
  with tf.Graph().as_default():
    for strategy in _pair(api, kind):
      dist = strategy.experimental_distribute_dataset(
          tf.data.Dataset.range(8).batch(2))
      with pytest.raises(RuntimeError) as info:
        iter(dist)
      messages.append(str(info.value))
  ours, native = messages
  assert GRAPH_ITER_PHRASE in native
  assert GRAPH_ITER_PHRASE in ours
  # Ours also says what to do instead.
  assert "make_initializable_iterator" in ours


def test_iteration_still_works_eagerly_and_in_tf_function():
  strategy = distribute_v2.OneDeviceStrategy("/cpu:0")
  dist = strategy.experimental_distribute_dataset(
      tf.data.Dataset.range(6).batch(3))
  assert [x.numpy().tolist() for x in dist] == [[0, 1, 2], [3, 4, 5]]

  @tf.function
  def total(d):
    result = tf.constant(0, tf.int64)
    for x in d:
      result += tf.reduce_sum(x)
    return result

  assert int(total(dist)) == 15


# --- Batch dimension of get_next_as_optional inside a tf.function ----------
#
# TensorFlow treats input that is not known to be infinite (or empty) as
# possibly ending in a partial batch: inside a graph, the Optional from
# get_next_as_optional -- and so the value a `for` loop over the dataset
# sees -- has an unknown batch dimension, even with drop_remainder=True.
# Known-infinite input keeps the static batch dimension.

def _strategies(kind):
  """(ours, native) strategies of one kind, of the v2 facade."""
  return _pair("v2", kind)


def _features(repeat, ragged=False):
  data = {"feature": tf.ones([8, 10]), "label": tf.ones([8])}
  if ragged:
    lengths = [i % 3 for i in range(8)]
    data["ragged"] = tf.RaggedTensor.from_row_lengths(
        tf.ones([sum(lengths)]), lengths)
    data["sparse"] = tf.sparse.from_dense(tf.eye(8))
  dataset = tf.data.Dataset.from_tensor_slices(data).batch(
      8, drop_remainder=True)
  return dataset.repeat() if repeat else dataset


def _local_shapes(strategy, value):
  return [[v.shape.as_list() for v in strategy.experimental_local_results(x)]
          for x in tf.nest.flatten(value)]


@pytest.mark.parametrize("kind", ["one_device", "central_storage"])
def test_for_loop_over_finite_dataset_sees_unknown_batch_dim(kind):
  def shapes_in_loop(strategy):
    dist = strategy.experimental_distribute_dataset(_features(repeat=False))
    shapes = []

    @tf.function
    def loop():
      for batch in dist:
        shapes.append(_local_shapes(strategy, batch))

    loop()
    return shapes

  ours, native = [shapes_in_loop(s) for s in _strategies(kind)]
  n = 1 if kind == "one_device" else 2
  assert native == [[[[None, 10]] * n, [[None]] * n]]
  assert ours == native


def _plain(spec):
  """Per-replica specs as a tuple of replica specs (ours and TensorFlow's
  PerReplicaSpec are different classes)."""
  def leaf(s):
    return tuple(getattr(s, "_value_specs", (s,)))  # pylint: disable=protected-access
  return tf.nest.map_structure(leaf, spec)


def _optional_spec(dist):
  """element_spec of get_next_as_optional() on an iterator of ``dist``
  passed to a tf.function."""
  box = []

  @tf.function
  def read(iterator):
    box.append(iterator.get_next_as_optional().element_spec)

  read(iter(dist))
  return box[0]


def _cond_drops_sparse_shape():
  """Whether this TensorFlow's tf.cond between two SparseTensors of shapes
  (8, 8) and (0, 8) forgets the static shape entirely (2.12 does)."""
  box = []

  @tf.function
  def choose(flag):
    full = tf.sparse.from_dense(tf.ones((8, 8)))
    empty = tf.sparse.from_dense(tf.ones((0, 8)))
    box.append(tf.cond(flag, lambda: full, lambda: empty).shape.as_list())

  choose(tf.constant(True))
  return box[0] == [None, None]


_COND_DROPS_SPARSE_SHAPE = _cond_drops_sparse_shape()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["one_device", "central_storage"])
@pytest.mark.parametrize("source", ["dataset", "dataset_fn"])
@pytest.mark.parametrize("repeat", [False, True])
def test_optional_element_spec_in_tf_function_matches_native(kind, source,
                                                             repeat):
  specs = []
  for strategy in _strategies(kind):
    if source == "dataset":
      dist = strategy.experimental_distribute_dataset(
          _features(repeat, ragged=True))
    else:
      dist = strategy.distribute_datasets_from_function(
          lambda ctx: _features(repeat, ragged=True))
    specs.append(_optional_spec(dist))
  ours, native = [_plain(spec) for spec in specs]
  if _COND_DROPS_SPARSE_SHAPE and ours["sparse"] != native["sparse"]:
    # TensorFlow 2.12's tf.cond forgets a SparseTensor's static shape, so
    # native's finite input gives (None, None) where ours keeps (None, 8)
    # (docs/compatibility.md).  Everything else is the same.
    assert not repeat
    for mine, theirs in zip(ours.pop("sparse"), native.pop("sparse")):
      assert theirs.shape.as_list() == [None, None]
      assert mine.shape.as_list() == [None, 8] and mine.dtype == theirs.dtype
  assert ours == native
  feature_specs = native["feature"]
  # Known-infinite input keeps the static batch dimension; finite input
  # gets an unknown one.
  # (A dataset's batches are split over the replicas; each element of a
  # dataset_fn's dataset goes whole to one replica.)
  per_replica = 8 // len(feature_specs) if source == "dataset" else 8
  assert feature_specs[0].shape[0] == (per_replica if repeat else None)


def test_infinite_iterator_keeps_static_batch_when_passed_to_tf_function():
  strategy = distribute_v2.OneDeviceStrategy("/cpu:0")
  iterator = iter(strategy.experimental_distribute_dataset(
      _features(repeat=True)))
  box = []

  @tf.function
  def read(it):
    value = it.get_next_as_optional().get_value()
    box.append(value["feature"].shape.as_list())
    return value["label"]

  assert read(iterator).numpy().tolist() == [1.0] * 8
  assert box == [[8, 10]]
