"""What a replica function sees of the calling thread's own state.

TensorFlow's CentralStorage strategy builds each replica on a thread of its
own, so state a library keeps per thread (tf-keras' seed generator, Keras
3's global state, a program's ``threading.local``) is fresh there.  Ours
must show replicas the same while building a graph: a Keras model cloned in
an Estimator ``model_fn`` (``model_to_estimator``) takes its initial
weights from that state (issue 42).  Eagerly, a plain function's replicas
run on the calling thread (docs/differences.md), and OneDevice runs its
replica on the calling thread, as TensorFlow's does.
"""
import threading

import numpy as np
import pytest
import tensorflow as tf

from fixtures import strategies
from support import keras as keras_support
from support import v1 as v1_support

_caller_local = threading.local()


def _sees_callers_local(strategy):
  """``strategy.run`` of a function that records, per replica, whether it
  sees a ``threading.local`` attribute the calling thread set."""
  seen = []

  def replica_fn():
    seen.append(getattr(_caller_local, "mark", None))
    return tf.constant(1.0)

  _caller_local.mark = "caller"
  try:
    strategy.run(replica_fn)
  finally:
    del _caller_local.mark
  return seen


@pytest.mark.parity
@pytest.mark.parametrize("facade", strategies.FACADES)
@pytest.mark.parametrize("kind,replicas", [("central_storage", 1),
                                           ("central_storage", 2),
                                           ("one_device", 1)])
@pytest.mark.parametrize("mode", ["function", "graph"])
def test_replicas_see_the_calling_threads_locals_as_native_does(
    facade, kind, replicas, mode):
  results = {}
  for impl in ("ours", "native"):
    strategy = strategies.strategy(impl, kind, replicas, facade=facade)
    with strategy.scope():
      seen = []

      def program():
        seen.extend(_sees_callers_local(strategy))
        return tf.constant(0.0)

      strategies.run_in(mode, program)
    results[impl] = seen
  expected = ["caller"] if kind == "one_device" else [None] * replicas
  assert results["native"] == expected
  assert results["ours"] == results["native"]


def _initial_kernel(strategy, keras):
  """A Dense layer's initial kernel, built inside the replica function in
  a v1 graph after ``keras.utils.set_random_seed(1)`` and a first model
  built on the calling thread (which advances the calling thread's seed
  generator, as the Keras model handed to ``model_to_estimator`` does)."""
  keras.utils.set_random_seed(1)
  keras.layers.Dense(3).build((None, 2))
  with tf.Graph().as_default():
    with strategy.scope():
      def replica_fn():
        layer = keras.layers.Dense(3)
        layer.build((None, 2))
        return tf.identity(layer.kernel)
      kernel = strategy.experimental_local_results(strategy.run(replica_fn))[0]
      with tf.compat.v1.Session(
          config=v1_support.native_session_config(strategy)) as session:
        session.run(tf.compat.v1.global_variables_initializer())
        return session.run(kernel)


@pytest.mark.parity
@pytest.mark.parametrize("replicas", [1, 2])
def test_a_keras_layer_built_in_a_v1_graph_replica_starts_as_native(replicas):
  keras = keras_support.keras_2()
  if keras is None:
    pytest.skip("no Keras 2 (tf-keras) beside this TensorFlow: Keras 3 "
                "does not build layers in a v1 graph")
  kernels = {
      impl: _initial_kernel(strategies.strategy(
          impl, "central_storage", replicas, facade="v1"), keras)
      for impl in ("ours", "native")}
  # On the calling thread the kernel would be drawn from the seed
  # generator set_random_seed made there, one layer further on.
  np.testing.assert_array_equal(kernels["ours"], kernels["native"])


@pytest.mark.parity
@pytest.mark.parametrize("replicas", [1, 2])
def test_names_made_in_a_graph_replica_and_its_merge_fn_are_natives(replicas):
  """Inside a v1 variable scope, what the replica and its ``merge_fn``
  create is named as on TensorFlow (the replica thread takes the caller's
  name and variable scope as they are)."""
  names = {}
  for impl in ("ours", "native"):
    strategy = strategies.strategy(impl, "central_storage", replicas,
                                   facade="v1")
    with tf.Graph().as_default(), strategy.scope(), \
        tf.compat.v1.variable_scope("outer"):
      made = []

      def replica_fn():
        made.append(tf.constant(1.0, name="in_replica").name)
        made.append(tf.compat.v1.get_variable("v", shape=()).name)

        def merge_fn(_):
          with tf.init_scope():
            made.append(tf.Variable(0.0, name="in_merge").name)
          made.append(tf.constant(2.0, name="merged").name)

        tf.distribute.get_replica_context().merge_call(merge_fn)
        return tf.constant(0.0)

      strategy.run(replica_fn)
    names[impl] = made
  assert names["ours"] == names["native"]
