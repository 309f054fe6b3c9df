"""The v1 input methods eagerly, against native ``tf.compat.v1.distribute``:
``make_dataset_iterator``, ``make_input_fn_iterator``,
``experimental_make_numpy_dataset``, ``experimental_run`` with an iterator
(also inside ``tf.function``) and the TF2 distributed datasets on v1
strategies.  Graph-mode input is in test_v1_graph.py.
"""
import warnings

import numpy as np
import pytest
import tensorflow as tf

from compat_distribute import v1
from support import v1 as sup
from support.v1 import CONFIGS, make_native, make_ours


# -- argument checks ----------------------------------------------------------

def test_make_input_fn_iterator_per_replica_is_rejected():
  s = v1.OneDeviceStrategy("/cpu:0")
  with pytest.raises(ValueError, match=r"supports only .*PER_WORKER.* got "
                     r"<InputReplicationMode.PER_REPLICA"):
    s.make_input_fn_iterator(lambda ctx: tf.data.Dataset.range(2),
                             v1.InputReplicationMode.PER_REPLICA)
  with pytest.raises(ValueError, match="Input replication mode"):
    make_native("one_device").make_input_fn_iterator(
        lambda ctx: tf.data.Dataset.range(2),
        v1.InputReplicationMode.PER_REPLICA)


def test_input_methods_reject_wrong_types():
  s = v1.OneDeviceStrategy("/cpu:0")
  with pytest.raises(TypeError, match="expects a callable"):
    s.make_input_fn_iterator(tf.data.Dataset.range(2))
  with pytest.raises(TypeError, match="expects a tf.data.Dataset"):
    s.make_dataset_iterator(np.arange(4))


# -- input iterators, eagerly ---------------------------------------------------

def _drain_eager(strategy, iterator, fn=None, limit=20):
  steps = []
  for _ in range(limit):
    try:
      if fn is None:
        value = iterator.get_next()
      else:
        value = strategy.experimental_run(fn, iterator)
    except (tf.errors.OutOfRangeError, StopIteration):
      return steps
    steps.append(sup.to_numpy(value, strategy))
  raise AssertionError(f"input did not end after {limit} steps")


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_dataset_iterator_eager_matches_native(config):
  results = []
  for s in (make_ours(config), make_native(config)):
    dataset = tf.data.Dataset.from_tensor_slices(
        np.arange(20, dtype=np.float32).reshape(10, 2)).batch(4)
    iterator = s.make_dataset_iterator(dataset)
    iterator.initialize()
    first = _drain_eager(s, iterator)
    iterator.initialize()  # restarts the input
    results.append((first, _drain_eager(s, iterator)))
  sup.assert_nested_equal(*results)
  assert len(results[0][0]) == 3  # 10 rows, global batch 4: 4 + 4 + 2


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_experimental_run_with_iterators_eager_matches_native(config):
  def input_fn(ctx):
    return tf.data.Dataset.range(12).batch(ctx.get_per_replica_batch_size(4))

  results = []
  for s in (make_ours(config), make_native(config)):
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      with s.scope():
        from_fn = s.make_input_fn_iterator(input_fn)
      from_dataset = s.make_dataset_iterator(
          tf.data.Dataset.range(8).batch(4))
      results.append((_drain_eager(s, from_fn, lambda x: x * 10),
                      _drain_eager(s, from_dataset, lambda x: x + 1)))
  sup.assert_nested_equal(*results)


@pytest.mark.parametrize("config", CONFIGS)
def test_numpy_dataset_eager_matches_native(config):
  arrays = (np.arange(12.0).reshape(6, 2), np.arange(6))
  results = []
  for s in (make_ours(config), make_native(config)):
    dataset = s.experimental_make_numpy_dataset(arrays)
    assert isinstance(dataset, tf.data.Dataset)
    iterator = s.make_dataset_iterator(dataset.batch(4))
    results.append(_drain_eager(s, iterator))
  sup.assert_nested_equal(*results)


@pytest.mark.parametrize("config", CONFIGS)
def test_experimental_run_inside_tf_function_matches_native(config):
  results = []
  for s in (make_ours(config), make_native(config)):
    iterator = s.make_dataset_iterator(tf.data.Dataset.range(8).batch(4))

    @tf.function
    def step(s=s, iterator=iterator):
      def fn(x):
        ctx = tf.distribute.get_replica_context()
        return ctx.all_reduce("SUM", x * 2)
      return s.experimental_run(fn, iterator)

    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      results.append([sup.to_numpy(step(), s), sup.to_numpy(step(), s)])
  sup.assert_nested_equal(*results)


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_distributed_datasets_eager_match_native(config):
  def dataset_fn(ctx):
    return tf.data.Dataset.range(8).batch(ctx.get_per_replica_batch_size(4))

  results = []
  for s in (make_ours(config), make_native(config)):
    with s.scope():
      split = [sup.to_numpy(s.run(lambda v: v + 1, args=(x,)), s)
               for x in s.experimental_distribute_dataset(
                   tf.data.Dataset.range(5).batch(2))]
    from_fn = [sup.to_numpy(x, s)
               for x in s.distribute_datasets_from_function(dataset_fn)]
    results.append((split, from_fn))
  assert [len(part) for part in results[0]] == [len(p) for p in results[1]]
  for ours_steps, native_steps in zip(results[0], results[1]):
    for a, b in zip(ours_steps, native_steps):
      assert [x.tolist() for x in a] == [x.tolist() for x in b]
