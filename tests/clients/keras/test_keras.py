"""Keras (2 up to TensorFlow 2.15, 3 from 2.16) under our strategies gives what it gives under TensorFlow's.

Each case builds the same tiny model twice from the same seed -- once in the
scope of TensorFlow's strategy, once in ours -- runs ``compile`` / ``fit`` /
``evaluate`` / ``predict`` on the same data, and compares the per-epoch
losses and metrics, the evaluation, the predictions, every model weight
(BatchNormalization's moving statistics included) and every optimizer
variable.
"""
import numpy as np
import pytest

from fixtures import strategies
import support
from support.keras import KERAS_3
from support.keras import keras
from support.keras import optimizer_values
from support.keras import tf_variable
from support.keras import weight_path

# slow: every case trains a model twice (~6 s of CPU each); out of `tox -e quick`.
pytestmark = [pytest.mark.parity, pytest.mark.slow]

RTOL, ATOL = 1e-5, 1e-6
SPECS = ["one_device", "central_storage/1", "central_storage/2",
         "central_storage/4"]


def batch_norm(enabled):
  """A BatchNormalization layer, or an identity when ``enabled`` is False.

  Keras 3 makes BatchNormalization's moving statistics with aggregation
  NONE, which TensorFlow's CentralStorageStrategy cannot update from several
  replicas (``test_batch_norm_with_several_replicas_like_native``), so the
  models use it only where there is one replica.
  """
  return keras.layers.BatchNormalization() if enabled else keras.layers.Identity()


def dense_sequential(bn=True):
  model = keras.Sequential([
      keras.Input((6,)),
      keras.layers.Dense(8, activation="relu"),
      batch_norm(bn),
      keras.layers.Dense(3),
  ])
  model.compile(
      optimizer=keras.optimizers.SGD(0.1, momentum=0.9),
      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=["accuracy"])
  return model


def conv_functional(bn=True):
  inputs = keras.Input((6, 6, 1))
  h = keras.layers.Conv2D(2, 3, activation="relu")(inputs)
  h = batch_norm(bn)(h)
  h = keras.layers.Flatten()(h)
  outputs = keras.layers.Dense(2)(h)
  model = keras.Model(inputs, outputs)
  model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse",
                metrics=["mae"])
  return model


def embedding_functional(bn=True):
  del bn
  tokens = keras.Input((5,), dtype="int32")
  h = keras.layers.Embedding(10, 4)(tokens)
  h = keras.layers.GlobalAveragePooling1D()(h)
  outputs = keras.layers.Dense(2, activation="softmax")(h)
  model = keras.Model(tokens, outputs)
  model.compile(optimizer=keras.optimizers.Adam(0.05),
                loss="sparse_categorical_crossentropy",
                metrics=["sparse_categorical_accuracy"])
  return model


def data(builder, n):
  rng = np.random.RandomState(7)
  if builder is dense_sequential:
    return (rng.randn(n, 6).astype("float32"),
            rng.randint(0, 3, n).astype("int32"))
  if builder is conv_functional:
    return (rng.randn(n, 6, 6, 1).astype("float32"),
            rng.randn(n, 2).astype("float32"))
  return rng.randint(0, 10, (n, 5)).astype("int32"), rng.randint(0, 2, n)


def train(spec, builder, n=32, batch_size=8, epochs=2):
  """Everything a user observes from one training run."""
  strategy = strategies.make(spec)
  keras.backend.clear_session()  # same layer names in both runs
  keras.utils.set_random_seed(11)
  with strategy.scope():
    model = builder(bn=strategies.replicas(spec) == 1)
  x, y = data(builder, n)
  history = model.fit(x, y, batch_size=batch_size, epochs=epochs,
                      shuffle=False, verbose=0)
  evaluation = model.evaluate(x, y, batch_size=batch_size, verbose=0)
  predictions = model.predict(x, batch_size=batch_size, verbose=0)
  return {
      "history": history.history,
      "evaluation": np.asarray(evaluation),
      "predictions": predictions,
      "weights": model.get_weights(),
      "weight_names": [weight_path(w) for w in model.weights],
      "optimizer": optimizer_values(model.optimizer),
  }


def assert_same_run(ours, native):
  assert ours["history"].keys() == native["history"].keys()
  for key in native["history"]:
    np.testing.assert_allclose(ours["history"][key], native["history"][key],
                               rtol=RTOL, atol=ATOL, err_msg=key)
  np.testing.assert_allclose(ours["evaluation"], native["evaluation"],
                             rtol=RTOL, atol=ATOL)
  assert ours["predictions"].shape == native["predictions"].shape
  np.testing.assert_allclose(ours["predictions"], native["predictions"],
                             rtol=RTOL, atol=ATOL)
  assert ours["weight_names"] == native["weight_names"]
  for name, a, b in zip(native["weight_names"], ours["weights"],
                        native["weights"]):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)
  assert len(ours["optimizer"]) == len(native["optimizer"])
  for a, b in zip(ours["optimizer"], native["optimizer"]):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


# Four replicas train the three models in `tox -e more`; two stay here.
@pytest.mark.parametrize("spec", [
    pytest.param(s, marks=support.MORE) if s == "central_storage/4" else s
    for s in SPECS])
@pytest.mark.parametrize("builder", [dense_sequential, conv_functional,
                                     embedding_functional],
                         ids=lambda b: b.__name__)
def test_fit_evaluate_predict_match_native(spec, builder):
  native = train("native/" + spec, builder)
  ours = train("ours/" + spec, builder)
  assert_same_run(ours, native)
  # The model learned something, so the comparison is not between two
  # untouched initialisations.
  assert not np.allclose(native["history"]["loss"][0],
                         native["history"]["loss"][-1])


@pytest.mark.parametrize("spec", ["one_device", "central_storage/2"])
def test_v1_strategies_match_native_v1(spec):
  """Keras also trains under the tf.compat.v1.distribute classes."""
  native = train("native_v1/" + spec, dense_sequential)
  ours = train("ours_v1/" + spec, dense_sequential)
  assert_same_run(ours, native)


@pytest.mark.parametrize("spec", ["one_device", "central_storage/4"])
def test_partial_last_batch_matches_native(spec):
  """30 examples in batches of 8: the last batch (6) does not split evenly
  over 4 replicas."""
  native = train("native/" + spec, dense_sequential, n=30, epochs=1)
  ours = train("ours/" + spec, dense_sequential, n=30, epochs=1)
  assert ours["predictions"].shape == (30, 3)
  assert_same_run(ours, native)


@pytest.mark.parametrize("spec", ["one_device", "central_storage/2"])
def test_variables_are_placed_like_native(spec):
  def devices(impl):
    strategy = strategies.make(f"{impl}/{spec}")
    keras.utils.set_random_seed(1)
    with strategy.scope():
      model = dense_sequential()
    return [tf_variable(w).device for w in model.weights]
  assert devices("ours") == devices("native")


def test_model_built_outside_scope_is_rejected_like_native():
  """Keras binds a model to the strategy current when it is built; using it
  under another strategy's scope fails under both.  Ours raises TensorFlow's
  ValueError for colocating with a variable made outside the scope; native
  TensorFlow 2.12-2.15 (Keras 2) reaches the same check and crashes in it
  with AttributeError instead (docs/compatibility.md)."""
  def error(impl):
    keras.utils.set_random_seed(1)
    model = dense_sequential()
    strategy = strategies.make(f"{impl}/central_storage/2")
    x, y = data(dense_sequential, 8)
    with strategy.scope():
      try:
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
      except Exception as e:  # pylint: disable=broad-except
        return e
    return None
  ours, native = error("ours"), error("native")
  if isinstance(native, AttributeError):
    assert "no attribute 'extended'" in str(native)
    assert isinstance(ours, ValueError)
    assert "colocate_vars_with" in str(ours)
  else:
    assert type(ours) is type(native), (ours, native)


def test_batch_norm_with_several_replicas_like_native():
  """BatchNormalization's moving statistics under two replicas.  Keras 3
  makes them with aggregation NONE, which TensorFlow's CentralStorageStrategy
  refuses to update from several replicas, and so do we (ValueError naming
  the aggregation); Keras 2 makes them MEAN and both train alike."""
  outcomes = {}
  for impl in ("native", "ours"):
    strategy = strategies.make(f"{impl}/central_storage/2")
    keras.utils.set_random_seed(1)
    with strategy.scope():
      model = dense_sequential(bn=True)
    x, y = data(dense_sequential, 16)
    try:
      model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
      outcomes[impl] = model.get_weights()
    except ValueError as e:
      outcomes[impl] = str(e)
  if KERAS_3:
    for impl, message in outcomes.items():
      assert isinstance(message, str) and "aggregation" in message, (impl,
                                                                     message)
  else:
    assert len(outcomes["ours"]) == len(outcomes["native"]) == 8
    for a, b in zip(outcomes["ours"], outcomes["native"]):
      np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
