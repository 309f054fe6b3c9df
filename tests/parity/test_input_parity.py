"""Input details next to native TensorFlow that the other input tests do not
cover: static shapes of split sparse and ragged batches, the TF1 iterator
properties (``output_types`` / ``output_shapes`` / ``output_classes``,
``next()``), and ``experimental_per_replica_buffer_size=tf.data.AUTOTUNE``.
"""
import warnings

import pytest
import tensorflow as tf

from support import v1 as sup
from support.input import central_storage_class
from support.input import native
from support.input import native_local_values
from fixtures import strategies

pytestmark = pytest.mark.parity


def _sparse_rows(width, batch, drop):
  # Row i is a 1 x width (or 1 x unknown) sparse matrix with i % 3 + 1 values.
  def row(i):
    dense = tf.range(i % 3 + 1)
    if width is not None:
      dense = tf.pad(dense, [[0, width - i % 3 - 1]])
    return tf.sparse.from_dense(tf.reshape(dense, [1, -1]))
  return tf.data.Dataset.range(9).map(row).batch(batch, drop_remainder=drop)


def _ragged_rows(batch):
  return tf.data.Dataset.range(9).map(tf.range).ragged_batch(
      batch, drop_remainder=True)


# Batches TensorFlow itself can split (it fails on an empty sparse piece).
SPLIT_CASES = {
    "sparse_static_divisible": (lambda: _sparse_rows(3, 4, True), (2, 4)),
    "sparse_static_indivisible": (lambda: _sparse_rows(None, 3, True), (2,)),
    "sparse_unknown_batch": (lambda: _sparse_rows(None, 2, False), ()),
    "ragged_static_indivisible": (lambda: _ragged_rows(3), (2, 4)),
    "ragged_static_divisible": (lambda: _ragged_rows(4), (2, 4)),
}


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("case", sorted(SPLIT_CASES))
def test_split_sparse_and_ragged_specs_match_native(case, n):
  make, value_ns = SPLIT_CASES[case]
  ours = central_storage_class()([f"/cpu:{i}" for i in range(n)])
  theirs = native(n)
  results = []
  for s in (ours, theirs):
    dist = s.experimental_distribute_dataset(make())
    values = ([native_local_values(s, x) for x in dist] if n in value_ns
              else None)
    results.append((repr(dist.element_spec), repr(iter(dist).element_spec),
                    values))
  assert results[0] == results[1]
  # Every replica's piece has the same spec.
  spec = ours.experimental_distribute_dataset(make()).element_spec
  assert len({repr(s) for s in spec._value_specs}) == 1  # pylint: disable=protected-access


def _legacy(iterator):
  return [repr(getattr(iterator, name)) for name in
          ("output_types", "output_shapes", "output_classes")]


V1_DATASETS = {
    "nested": lambda: tf.data.Dataset.range(9).map(
        lambda i: (i, {"s": tf.strings.as_string(i)})).batch(4),
    "static": lambda: tf.data.Dataset.range(9).batch(3, drop_remainder=True),
    "sparse": lambda: _sparse_rows(None, 2, False),
    "ragged": lambda: _ragged_rows(4),
}


@pytest.mark.slow
@pytest.mark.parametrize("config", ["one_device", "central_storage/2"])
@pytest.mark.parametrize("data", sorted(V1_DATASETS))
def test_v1_iterator_output_properties_and_next_match_native(config, data):
  make = V1_DATASETS[data]
  results = []
  for s in (sup.make_ours(config), sup.make_native(config)):
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      from_dataset = s.make_dataset_iterator(make())
      from_fn = s.make_input_fn_iterator(lambda ctx: make())
      row = []
      for iterator in (from_dataset, from_fn):
        row.append(_legacy(iterator))
        iterator.initialize()
        row.append(native_local_values(s, iterator.next()))
    results.append(row)
  assert results[0] == results[1]


def test_v1_iterator_output_properties_in_graph_match_native():
  results = []
  for s in (sup.make_ours("central_storage/2"),
            sup.make_native("central_storage/2")):
    with tf.Graph().as_default():
      iterator = s.make_dataset_iterator(V1_DATASETS["nested"]())
      results.append(_legacy(iterator))
  assert results[0] == results[1]


def test_v1_iterator_of_a_callable_has_no_output_types():
  strategy = sup.make_ours("one_device")
  iterator = strategy.make_input_fn_iterator(lambda ctx: lambda: tf.ones([2]))
  with pytest.raises(AttributeError, match="callable"):
    iterator.output_types  # pylint: disable=pointless-statement


@pytest.mark.parametrize("size", [tf.data.AUTOTUNE, -3])
def test_negative_buffer_size_accepted_like_native(size):
  options = tf.distribute.InputOptions(
      experimental_per_replica_buffer_size=size)
  dataset = lambda *_: tf.data.Dataset.range(7).batch(2)
  results = []
  for s in strategies.pair("one_device", device="/cpu:0"):
    results.append(
        ([native_local_values(s, x) for x in
          s.experimental_distribute_dataset(dataset(), options)],
         [native_local_values(s, x) for x in
          s.distribute_datasets_from_function(dataset, options)]))
  assert results[0] == results[1]
  # TensorFlow's CentralStorageStrategy accepts it in
  # distribute_datasets_from_function (its other method fails on any options).
  results = []
  for s in (central_storage_class()(["/cpu:0", "/cpu:1"]), native(2)):
    results.append([native_local_values(s, x) for x in
                    s.distribute_datasets_from_function(dataset, options)])
  assert results[0] == results[1]


def _raised(thunk):
  try:
    thunk()
  except Exception as e:  # pylint: disable=broad-except
    return e
  raise AssertionError("no error raised")


def test_bad_dataset_arguments_raise_an_error_of_native_type():
  ours, theirs = strategies.pair("one_device", device="/cpu:0")
  dist = ours.experimental_distribute_dataset(tf.data.Dataset.range(2))
  cases = [
      lambda s: s.experimental_distribute_dataset(None),
      lambda s: s.experimental_distribute_dataset([1, 2]),
      lambda s: s.experimental_distribute_dataset(dist),
      lambda s: s.distribute_datasets_from_function(None),
      lambda s: s.distribute_datasets_from_function(tf.data.Dataset.range(2)),
      lambda s: list(s.distribute_datasets_from_function(lambda _: [1, 2])),
      lambda s: list(s.distribute_datasets_from_function(lambda _: None)),
      # options that are not InputOptions (TensorFlow: AttributeError)
      lambda s: s.experimental_distribute_dataset(
          tf.data.Dataset.range(2), tf.data.Options()),
      lambda s: s.distribute_datasets_from_function(
          lambda _: tf.data.Dataset.range(2),
          {"experimental_fetch_to_device": False}),
  ]
  for case in cases:
    native_error = _raised(lambda: case(theirs))
    our_error = _raised(lambda: case(ours))
    assert isinstance(our_error, type(native_error)), (our_error, native_error)
    assert isinstance(our_error, TypeError)


@pytest.mark.parametrize("config", ["v2_one_device", "v2_central_storage/1",
                                    "v1_one_device"])
def test_get_next_as_optional_in_a_single_replica_fn_like_native(config):
  if config == "v2_one_device":
    pair = strategies.pair("one_device", device="/cpu:0")
  elif config == "v1_one_device":
    pair = (sup.make_ours("one_device"), sup.make_native("one_device"))
  else:
    pair = (central_storage_class()(["/cpu:0"]), native(1))
  results = []
  for s in pair:
    dataset = tf.data.Dataset.range(5).batch(2)
    if config.startswith("v1"):
      iterator = s.make_dataset_iterator(dataset)
    else:
      iterator = iter(s.experimental_distribute_dataset(dataset))

    def read(iterator=iterator):
      optional = iterator.get_next_as_optional()
      return optional.has_value(), optional.get_value()

    results.append([native_local_values(s, s.run(read)) for _ in range(3)])
  assert results[0] == results[1]


def test_get_next_as_optional_in_a_replica_fn_of_two_replicas_raises():
  for s in (central_storage_class()(["/cpu:0", "/cpu:1"]), native(2)):
    iterator = iter(s.experimental_distribute_dataset(
        tf.data.Dataset.range(4).batch(2)))
    with pytest.raises(ValueError):
      s.run(lambda: iterator.get_next_as_optional().get_value())  # pylint: disable=cell-var-from-loop


@pytest.mark.parametrize("n", [1, 2])
def test_none_components_go_to_every_replica_like_native(n):
  def make(*_):
    return tf.data.Dataset.range(7).batch(2).map(
        lambda x: (x, None, {"none": None, "y": x * 2}))

  results = []
  for s in (central_storage_class()([f"/cpu:{i}" for i in range(n)]),
            native(n)):
    steps = []
    for dist in (s.experimental_distribute_dataset(make()),
                 s.distribute_datasets_from_function(make)):
      iterator = iter(dist)
      try:  # TensorFlow fails on None in an Optional of per-replica values
        first = native_local_values(
            s, iterator.get_next_as_optional().get_value())
      except ValueError:
        first = "ValueError"
      steps.append((repr(dist.element_spec), first,
                    [native_local_values(s, x) for x in iterator]))
    results.append(steps)
  assert results[0] == results[1]
  assert results[0][0][1] == ("ValueError" if n > 1 else
                              [([0, 1], None, {"none": None, "y": [0, 2]})])


@pytest.mark.parametrize("n", [1, 2])
def test_eager_optional_element_spec_matches_native(n):
  # Eagerly TensorFlow's Optional carries the value's static shapes; the
  # empty one at the end carries the dataset's.
  def make(*_):
    return tf.data.Dataset.range(5).map(
        lambda i: (tf.range(i % 2 + 1), tf.strings.as_string(i))).padded_batch(2)

  results = []
  pair = (strategies.pair("one_device", device="/cpu:0") if n == 1 else
          (central_storage_class()(["/cpu:0", "/cpu:1"]), native(2)))
  for s in pair:
    specs = []
    for dist in (s.experimental_distribute_dataset(make()),
                 s.distribute_datasets_from_function(make)):
      iterator = iter(dist)
      specs.append([repr(iterator.get_next_as_optional().element_spec)
                    for _ in range(4)])
    results.append(specs)
  assert results[0] == results[1]


@pytest.mark.parametrize("value_fn", [
    lambda ctx: {"a": 1} if ctx.replica_id_in_sync_group == 0 else (1,),
    lambda ctx: [1] * (ctx.replica_id_in_sync_group + 1),
], ids=["dict_then_tuple", "lengths"])
def test_values_from_function_of_mismatched_structures_raise_like_native(
    value_fn):
  # Ours used to keep replica 0's structure and drop the rest silently.
  for s in (central_storage_class()(["/cpu:0", "/cpu:1"]), native(2)):
    with pytest.raises(AssertionError):
      s.experimental_distribute_values_from_function(value_fn)
  with pytest.raises(ValueError, match="same structure.*replica 1"):
    central_storage_class()(["/cpu:0", "/cpu:1"]
                            ).experimental_distribute_values_from_function(
                                value_fn)
