"""TensorFlow's expectations for distributed input, checked on our strategies.

Each test states a behaviour that TensorFlow's own distribute tests rely on
for OneDeviceStrategy and CentralStorageStrategy, and compares our strategy
with the native one on the same input.
"""
import pytest
import tensorflow as tf

from compat_distribute import v1 as distribute_v1
from compat_distribute import v2 as distribute_v2

V1 = tf.compat.v1

# TensorFlow's distribute tests match this part of the error raised when a
# distributed dataset is iterated with iter() while building a TF1 graph.
GRAPH_ITER_PHRASE = "or when eager execution is enabled"


def _pair(api, kind):
  """(ours, native) strategies of one kind, built inside the current graph."""
  if kind == "one_device":
    if api == "v2":
      return (distribute_v2.OneDeviceStrategy("/cpu:0"),
              tf.distribute.OneDeviceStrategy("/cpu:0"))
    return (distribute_v1.OneDeviceStrategy("/cpu:0"),
            V1.distribute.OneDeviceStrategy("/cpu:0"))
  devices = ["/cpu:0", "/cpu:1"]
  if api == "v2":
    return (distribute_v2.experimental.CentralStorageStrategy(devices),
            tf.distribute.experimental.CentralStorageStrategy(devices))
  return (distribute_v1.experimental.CentralStorageStrategy(devices),
          V1.distribute.experimental.CentralStorageStrategy(devices))


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
