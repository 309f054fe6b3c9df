"""More Keras programs that must behave under our strategies as under
TensorFlow's: input given as a distributed dataset, and (one documented
difference) an optimizer that synchronises inside a branch on one replica.

Each case runs the same seeded program in the scope of TensorFlow's strategy
and of ours and compares losses, metrics, evaluation, predictions and
weights (test_keras.py covers NumPy input).
"""
import numpy as np
import pytest
import tensorflow as tf

from fixtures import strategies
from support.keras import KERAS_3
from support.keras import keras
from support.keras import optimizer_values
from support.keras import tf_variable

pytestmark = pytest.mark.slow

RTOL, ATOL = 1e-5, 1e-6
rng = np.random.RandomState(3)
X = rng.randn(32, 6).astype("float32")
Y = rng.randint(0, 3, 32).astype("int32")


def model():
  m = keras.Sequential([keras.Input((6,)),
                        keras.layers.Dense(8, activation="relu"),
                        keras.layers.Dense(3)])
  m.compile(optimizer=keras.optimizers.Adam(0.01),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"])
  return m


def distributed(strategy, how):
  # Both repeated: Keras does not restart an input of unknown cardinality
  # each epoch (Keras 2 restarts no distributed dataset), and the step that
  # finds it exhausted may or may not count in the optimizer's iterations
  # under TensorFlow's strategy itself.  steps_per_epoch bounds each epoch.
  if how == "experimental_distribute_dataset":
    return strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((X, Y)).batch(8).repeat())

  def dataset_fn(ctx):
    per_replica = ctx.get_per_replica_batch_size(8)
    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(
        per_replica).repeat()
  return strategy.distribute_datasets_from_function(dataset_fn)


def run_distributed_input(spec, how):
  strategy = strategies.make(spec)
  keras.backend.clear_session()  # same layer names in both runs
  keras.utils.set_random_seed(11)
  with strategy.scope():
    m = model()
  data = distributed(strategy, how)
  history = m.fit(data, epochs=2, steps_per_epoch=4, verbose=0)
  return {
      "history": history.history,
      "evaluation": m.evaluate(data, steps=4, verbose=0),
      "weights": m.get_weights(),
      "optimizer": optimizer_values(m.optimizer),
  }


@pytest.mark.parametrize("spec", ["one_device", "central_storage/2"])
@pytest.mark.parametrize("how", ["experimental_distribute_dataset",
                                 "distribute_datasets_from_function"])
def test_fit_evaluate_on_distributed_dataset_match_native(spec, how):
  """Keras 3 recognises a distributed dataset by the name and module of a
  class in its MRO; ours used to be refused ("Unrecognized data type")."""
  native = run_distributed_input("native/" + spec, how)
  ours = run_distributed_input("ours/" + spec, how)
  assert ours["history"].keys() == native["history"].keys()
  for key in native["history"]:
    np.testing.assert_allclose(ours["history"][key], native["history"][key],
                               rtol=RTOL, atol=ATOL, err_msg=key)
  assert len(native["history"]["loss"]) == 2
  np.testing.assert_allclose(ours["evaluation"], native["evaluation"],
                             rtol=RTOL, atol=ATOL)
  for a, b in zip(ours["weights"] + ours["optimizer"],
                  native["weights"] + native["optimizer"]):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def train_with_ema(spec):
  strategy = strategies.make(spec)
  keras.backend.clear_session()
  keras.utils.set_random_seed(11)
  with strategy.scope():
    m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)])
    m.compile(optimizer=keras.optimizers.SGD(0.1, use_ema=True,
                                             ema_overwrite_frequency=3),
              loss=keras.losses.SparseCategoricalCrossentropy(
                  from_logits=True))
  history = m.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0)
  return history.history["loss"], m.get_weights()


def test_one_replica_merge_call_in_a_branch_trains_like_one_device():
  """Keras 3's EMA optimizer calls merge_call inside a tf.cond.  TensorFlow's
  CentralStorageStrategy refuses that even with one replica; ours, whose
  single replica runs on the calling thread, trains and gives
  OneDeviceStrategy's results (docs/central_storage.md).  Keras 2's EMA
  synchronises outside the branch: there native CentralStorage trains too,
  and ours must give what it gives.  So does native on TensorFlow
  2.22.0rc0 with keras-nightly 3.16 (measured): where native trains, ours
  gives its values, whichever Keras."""
  native_loss, native_weights = train_with_ema("native/one_device")
  loss, weights = train_with_ema("ours/central_storage/1")
  np.testing.assert_allclose(loss, native_loss, rtol=RTOL, atol=ATOL)
  for a, b in zip(weights, native_weights):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
  try:
    central_loss, central_weights = train_with_ema("native/central_storage/1")
  except RuntimeError as e:
    assert "merge_call" in str(e)
    assert KERAS_3, "native refused merge_call in a branch under Keras 2"
  else:
    np.testing.assert_allclose(loss, central_loss, rtol=RTOL, atol=ATOL)
    for a, b in zip(weights, central_weights):
      np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def _layer_built_in_run(strategy, traced):
  keras.backend.clear_session()  # same layer names in every run
  with strategy.scope():
    layer = keras.layers.Dense(4, kernel_initializer="ones")
  step = lambda x: strategy.run(layer, args=(x,))
  step = tf.function(step) if traced else step
  outputs = strategy.experimental_local_results(step(tf.ones((2, 3))))
  return ([o.numpy().tolist() for o in outputs],
          [(w.name, tf_variable(w).device) for w in layer.weights])


def test_layer_first_built_inside_run_as_native_eagerly_and_when_traced():
  """A layer made in scope but built by its first call inside ``run``.
  Eagerly ours matches TensorFlow's.  In a ``tf.function`` with two replicas
  TensorFlow fails (it compares the new variables with ``==``); ours builds
  it as eagerly (docs/central_storage.md).  Under Keras 2 both build it."""
  ours, native = strategies.pair("central_storage", 2)
  eager = _layer_built_in_run(ours, traced=False)
  assert eager == _layer_built_in_run(native, traced=False)
  assert eager[0] == [[[3.0] * 4] * 2] * 2
  assert {device for _, device in eager[1]} == {
      "/job:localhost/replica:0/task:0/device:CPU:0"}
  assert _layer_built_in_run(
      strategies.strategy("ours", "central_storage", 2), traced=True) == eager
  # Keras 3 makes the variables in a way TensorFlow's CentralStorage fails
  # on; Keras 2's layers build there as eagerly.
  native_strategy = strategies.strategy("native", "central_storage", 2)
  if KERAS_3:
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError):
      _layer_built_in_run(native_strategy, traced=True)
  else:
    assert _layer_built_in_run(native_strategy, traced=True) == eager


def _custom_loop_lazy_model(spec, build_first):
  """A Keras 3 model and optimizer trained by a custom loop: ``run`` inside
  a ``tf.function``.  Unless ``build_first``, the model's and the
  optimizer's variables are first made inside that traced ``run``."""
  strategy = strategies.make(spec)
  keras.backend.clear_session()
  keras.utils.set_random_seed(7)
  with strategy.scope():
    net = keras.Sequential([keras.layers.Dense(4, activation="relu"),
                            keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.1)
    if build_first:
      net.build((None, 6))
      optimizer.build(net.trainable_variables)
  targets = X[:, :1] * 0.5 - 1.0
  data = strategy.experimental_distribute_dataset(
      tf.data.Dataset.from_tensor_slices((X[:16], targets[:16])).batch(8))

  @tf.function
  def train_step(features, labels):
    def replica_step(features, labels):
      with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(net(features) - labels)) / 8.0
      grads = tape.gradient(loss, net.trainable_variables)
      optimizer.apply_gradients(zip(grads, net.trainable_variables))
      return loss
    losses = strategy.run(replica_step, args=(features, labels))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

  losses = [float(train_step(*batch)) for _ in range(3) for batch in data]
  return losses, net.get_weights()


def test_model_built_lazily_in_traced_run_trains_as_native_prebuilt():
  """Issue 15 item 2 (docs/central_storage.md): under CentralStorage with two
  replicas a Keras 3 model first built inside a traced ``run`` trains, to
  exactly the losses and weights of TensorFlow's strategy training the same
  model built beforehand; TensorFlow's fails when it is built lazily (with
  Keras 2, TensorFlow 2.12-2.15, it builds and trains the same)."""
  losses, weights = _custom_loop_lazy_model("ours/central_storage/2", False)
  native_losses, native_weights = _custom_loop_lazy_model(
      "native/central_storage/2", True)
  assert losses == native_losses
  for mine, theirs in zip(weights, native_weights):
    np.testing.assert_array_equal(mine, theirs)
  if KERAS_3:
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError):
      _custom_loop_lazy_model("native/central_storage/2", False)
  else:  # Keras 2's variables build under native's traced run too
    lazy_losses, lazy_weights = _custom_loop_lazy_model(
        "native/central_storage/2", False)
    assert lazy_losses == losses
    for mine, theirs in zip(weights, lazy_weights):
      np.testing.assert_array_equal(mine, theirs)
