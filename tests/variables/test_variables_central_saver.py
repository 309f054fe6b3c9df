"""A TF1 Saver over a graph built under CentralStorage with several
replicas, against TensorFlow's (issue 42): a ``tf.Variable`` made in a
graph -- as Keras optimizers make their slots, which is why TensorFlow 2
canned estimators cannot checkpoint under TensorFlow's CentralStorage -- is
filed in ``GLOBAL_VARIABLES`` as itself and as its wrapper, and the Saver
refuses with ``ValueError``; ``tf.compat.v1.get_variable`` variables save."""
import pytest
import tensorflow as tf

from compat_distribute.variables.aggregating import SameNameSavedTwiceError
from fixtures import strategies

pytestmark = pytest.mark.parity
v1 = tf.compat.v1


def _build(strategy, make):
  """(names in GLOBAL_VARIABLES, what ``v1.train.Saver()`` raised or None)."""
  with tf.Graph().as_default() as graph, strategy.scope():
    make()
    names = [v.name for v in graph.get_collection(
        v1.GraphKeys.GLOBAL_VARIABLES)]
    trainable = [v.name for v in v1.trainable_variables()]
    try:
      v1.train.Saver()
    except ValueError as e:
      return names, trainable, e
    return names, trainable, None


@pytest.mark.parametrize("facade", ["v2", "v1"])
def test_tf_variable_in_a_graph_is_filed_twice_and_the_saver_refuses(facade):
  ours, native = strategies.pair("central_storage", 2, facade=facade)
  make = lambda: tf.Variable(1.0, name="slot")
  ours_names, ours_trainable, ours_error = _build(ours, make)
  native_names, native_trainable, native_error = _build(native, make)
  assert native_names == ["slot:0", "slot:0"]
  assert ours_names == native_names
  assert ours_trainable == native_trainable == ["slot:0"]
  assert str(native_error) == "At least two variables have the same name: slot"
  assert isinstance(ours_error, SameNameSavedTwiceError)
  # Same class, TensorFlow's words first, then what runs instead.
  assert str(ours_error).startswith(str(native_error))
  assert "v1 optimizer" in str(ours_error)
  assert "OneDeviceStrategy" in str(ours_error)


@pytest.mark.parametrize("replicas", [1, 2])
def test_get_variable_and_one_replica_save_as_natively(replicas):
  ours, native = strategies.pair("central_storage", replicas, facade="v1")
  for make in (lambda: v1.get_variable("w", initializer=1.0),
               lambda: tf.Variable(1.0, name="w") if replicas == 1 else
               v1.get_variable("w", shape=(2,))):
    assert _build(ours, make) == _build(native, make)[:2] + (None,)
    assert _build(ours, make)[0] == ["w:0"]


def test_a_saver_of_the_wrappers_alone_saves_as_natively():
  """Saver(var_list=trainable_variables()) lists the wrapper, not the
  variable filed beside it: TensorFlow's saves, so ours does."""
  ours, native = strategies.pair("central_storage", 2, facade="v1")

  def build(strategy):
    with tf.Graph().as_default(), strategy.scope():
      tf.Variable(1.0, name="slot")
      v1.train.Saver(var_list=v1.trainable_variables())
      return [v.name for v in v1.global_variables()]

  assert build(ours) == build(native) == ["slot:0", "slot:0"]
