"""Checkpoints and SavedModels move between our strategies, TF's and none.

The program under test (``Program``) has plain variables (float, int64,
non-trainable with MEAN / ONLY_FIRST_REPLICA aggregation), a Keras 3 Adam and
a ``tf.compat.v1.train.AdamOptimizer`` (whose slot variables are saved under
``.OPTIMIZER_SLOT``).  The saving side trains one step, saves, then takes a
"probe" step with zero gradients; the restoring side builds everything
*after* calling ``restore()`` (deferred restoration), takes the same probe
step, and must end in the same state.  The probe step is what creates the
v1 optimizer's slots on the restoring side, so their restored values show
up in the result.
"""
import gc
import os
import traceback

import numpy as np
import pytest
import tensorflow as tf

from fixtures import strategies
from support.keras import KERAS_3
from support.keras import keras
from support.keras import optimizer_values
from support.keras import optimizer_variables

pytestmark = pytest.mark.parity

ReduceOp = tf.distribute.ReduceOp


class Program(tf.Module):
  """Variables made lazily, so a checkpoint can be restored before they
  exist."""

  def __init__(self):
    super().__init__(name="program")

  def build(self, strategy):
    with strategy.scope():
      # Keras optimizers bind to the strategy current when they are made.
      self.keras_opt = keras.optimizers.Adam(0.1)
      self.v1_opt = tf.compat.v1.train.AdamOptimizer(0.05)
      self.w = tf.Variable(tf.zeros((3, 2)), name="w")
      self.b = tf.Variable(tf.zeros((2,)), name="b")
      self.u = tf.Variable(tf.zeros((2, 2)), name="u")
      self.steps = tf.Variable(
          0, dtype=tf.int64, trainable=False, name="steps",
          aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
      self.mean = tf.Variable(
          tf.zeros((2,)), trainable=False, name="mean",
          aggregation=tf.VariableAggregation.MEAN)
      self.keras_opt.build([self.w, self.b])

  def step(self, strategy, scale):
    """One update of every variable; ``scale=0`` gives zero gradients."""
    def replica_fn():
      g = tf.constant(scale, tf.float32)
      self.keras_opt.apply_gradients(
          [(g * tf.ones((3, 2)), self.w), (g * tf.constant([1.0, -2.0]),
                                          self.b)])
      self.v1_opt.apply_gradients([(g * tf.ones((2, 2)), self.u)])
      self.steps.assign_add(1)
      self.mean.assign(self.mean + g * tf.constant([0.5, 1.5]))
    strategy.run(replica_fn)

  def state(self):
    """Every value the program holds, as numpy, in a fixed order."""
    values = [self.w, self.b, self.u, self.steps, self.mean,
              self.v1_opt.get_slot(self.u, "m"),
              self.v1_opt.get_slot(self.u, "v")]
    values += optimizer_variables(self.keras_opt)
    return [np.asarray(v.numpy() if hasattr(v, "numpy") else v.value)
            for v in values]

  def checkpoint(self):
    return tf.train.Checkpoint(program=self)


def assert_same_state(actual, expected):
  assert len(actual) == len(expected)
  for i, (a, e) in enumerate(zip(actual, expected)):
    assert a.dtype == e.dtype, (i, a.dtype, e.dtype)
    np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7, err_msg=str(i))


def save_then_probe(spec, path):
  """Saver side: build, train, save, probe.  Returns (path, probe state)."""
  strategy = strategies.make(spec)
  program = Program()
  program.build(strategy)
  with strategy.scope():
    program.w.assign(tf.reshape(tf.range(6, dtype=tf.float32), (3, 2)))
    program.u.assign([[1.0, 2.0], [3.0, 4.0]])
  program.step(strategy, 1.0)
  saved = program.checkpoint().save(path)
  program.step(strategy, 0.0)
  return saved, program.state()


def restore_then_probe(spec, path):
  """Restorer side: restore first, then build (deferred), then probe."""
  strategy = strategies.make(spec)
  program = Program()
  status = program.checkpoint().restore(path)
  program.build(strategy)
  program.step(strategy, 0.0)
  status.assert_consumed()
  return program.state()


PAIRS = [
    ("ours/one_device", "native/one_device"),
    ("native/one_device", "ours/one_device"),
    ("ours/one_device", "none"),
    ("none", "ours/one_device"),
    ("ours/central_storage/2", "native/central_storage/2"),
    ("native/central_storage/2", "ours/central_storage/2"),
    ("ours/central_storage/4", "none"),
    ("none", "ours/central_storage/4"),
    ("ours/central_storage/1", "ours/one_device"),
    ("ours/one_device", "ours/central_storage/2"),
    ("native/central_storage/4", "ours/central_storage/1"),
    ("ours_v1/one_device", "native/one_device"),
    ("native/central_storage/2", "ours_v1/central_storage/2"),
]


@pytest.mark.slow
@pytest.mark.parametrize("saver,restorer", PAIRS,
                         ids=[f"{a}->{b}" for a, b in PAIRS])
def test_round_trip_restore_before_create(tmp_path, saver, restorer):
  path, expected = save_then_probe(saver, str(tmp_path / "ckpt"))
  assert_same_state(restore_then_probe(restorer, path), expected)


def test_saved_slot_values_are_what_the_saver_had(tmp_path):
  """The checkpoint file itself holds ours' slot values, under TF's keys."""
  strategy = strategies.make("ours/central_storage/2")
  program = Program()
  program.build(strategy)
  program.step(strategy, 1.0)
  path = program.checkpoint().save(str(tmp_path / "ckpt"))
  keys = dict(tf.train.list_variables(path))
  slot_m = "program/u/.OPTIMIZER_SLOT/program/v1_opt/m/.ATTRIBUTES/VARIABLE_VALUE"
  assert keys[slot_m] == [2, 2]
  np.testing.assert_allclose(tf.train.load_variable(path, slot_m),
                             program.v1_opt.get_slot(program.u, "m").numpy())
  assert tf.train.load_variable(
      path, "program/steps/.ATTRIBUTES/VARIABLE_VALUE") == 1


def test_chain_ours_native_none_and_back(tmp_path):
  """ours -> native -> none -> ours, restoring into existing variables and
  changing them at each hop."""
  hops = ["ours/central_storage/2", "native/one_device", "none",
          "ours/one_device"]
  expected = None
  path = None
  for i, spec in enumerate(hops):
    strategy = strategies.make(spec)
    program = Program()
    program.build(strategy)
    program.step(strategy, 0.0)  # creates the v1 slots
    if path is not None:
      program.checkpoint().restore(path).assert_consumed()
      assert_same_state(program.state(), expected)
    with strategy.scope():
      program.w.assign_add(tf.fill((3, 2), float(i + 1)))
    program.step(strategy, 1.0)
    expected = program.state()
    path = program.checkpoint().save(str(tmp_path / f"hop{i}"))


@pytest.mark.parametrize("saver,restorer", [
    ("ours/central_storage/2", "native/central_storage/2"),
    ("native/one_device", "ours/one_device"),
])
def test_checkpoint_manager(tmp_path, saver, restorer):
  strategy = strategies.make(saver)
  program = Program()
  program.build(strategy)
  manager = tf.train.CheckpointManager(
      program.checkpoint(), str(tmp_path), max_to_keep=2)
  for _ in range(3):
    program.step(strategy, 1.0)
    manager.save()
  assert len(manager.checkpoints) == 2
  expected = program.state()

  strategy2 = strategies.make(restorer)
  program2 = Program()
  manager2 = tf.train.CheckpointManager(
      program2.checkpoint(), str(tmp_path), max_to_keep=2)
  assert manager2.latest_checkpoint == manager.latest_checkpoint
  status = manager2.restore_or_initialize()
  assert status is None or manager2.latest_checkpoint.endswith("-3")
  program2.build(strategy2)
  program2.step(strategy2, 0.0)
  program.step(strategy, 0.0)
  assert_same_state(program2.state(), program.state())
  assert not np.allclose(expected[0], np.zeros((3, 2)))


# -- SavedModel ---------------------------------------------------------------


class Affine(tf.Module):

  def __init__(self):
    super().__init__()
    self.w = tf.Variable([[1.0, -1.0], [2.0, 0.5]], name="w")
    self.b = tf.Variable([0.25, -0.75], name="b")

  @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
  def __call__(self, x):
    return tf.matmul(x, self.w) + self.b


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["ours/one_device", "ours/central_storage/2",
                                  "ours/central_storage/4"])
@pytest.mark.parametrize("save_in_scope", [False, True],
                         ids=["save_outside", "save_in_scope"])
def test_saved_model_round_trip(tmp_path, spec, save_in_scope):
  strategy = strategies.make(spec)
  with strategy.scope():
    module = Affine()
    module.w.assign_add(tf.ones((2, 2)))
  x = tf.constant([[1.0, 2.0], [3.0, -1.0]])
  expected = module(x).numpy()
  path = str(tmp_path / "saved")
  if save_in_scope:
    with strategy.scope():
      tf.saved_model.save(module, path)
  else:
    tf.saved_model.save(module, path)

  loaded = tf.saved_model.load(path)
  np.testing.assert_allclose(loaded.w.numpy(), module.w.numpy())
  np.testing.assert_allclose(loaded.b.numpy(), module.b.numpy())
  np.testing.assert_allclose(loaded(x).numpy(), expected, rtol=1e-6)

  with strategies.make(spec).scope():
    loaded_in_scope = tf.saved_model.load(path)
  np.testing.assert_allclose(loaded_in_scope(x).numpy(), expected, rtol=1e-6)


def _save_and_load(spec, path):
  """Trains a small model in ``spec``'s scope, saves it as ``.keras`` and
  loads it back in a new scope of the same kind; returns what a user sees
  of both: weights, optimizer values, predictions, and the predictions of
  the file loaded under native OneDevice."""
  strategy = strategies.make(spec)
  keras.backend.clear_session()  # the same layer names in every run
  keras.utils.set_random_seed(3)
  # Keras 3's BatchNormalization trains only with one replica (see
  # test_keras.py); a Dense-only model otherwise.
  middle = (keras.layers.BatchNormalization()
            if strategies.replicas(spec) == 1 else keras.layers.Dense(3))
  with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                              middle, keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
  x = np.random.RandomState(0).randn(16, 4).astype("float32")
  y = np.random.RandomState(1).randn(16, 2).astype("float32")
  model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  model.save(path)
  with strategies.make(spec).scope():
    loaded = keras.models.load_model(path)
  with strategies.make("native/one_device").scope():
    native_loaded = keras.models.load_model(path)
  return {
      "model": model.get_weights(),
      "loaded": loaded.get_weights(),
      "model_optimizer": optimizer_values(model.optimizer),
      "loaded_optimizer": optimizer_values(loaded.optimizer),
      "model_predictions": model.predict(x, verbose=0),
      "loaded_predictions": loaded.predict(x, verbose=0),
      "native_loaded_predictions": native_loaded.predict(x, verbose=0),
  }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["one_device", "central_storage/2"])
def test_keras_model_save_and_load_under_scope(tmp_path, kind):
  """A model saved as ``.keras`` and loaded in a strategy's scope is what
  the same program gives under TensorFlow's strategy, and what was saved.
  (Keras 2.14 and 2.15, after other tests in the process made models, load
  weights that differ from the saved ones under TensorFlow's strategies as
  under ours; then only the comparison with native applies.)"""
  ours = _save_and_load("ours/" + kind, str(tmp_path / "ours.keras"))
  native = _save_and_load("native/" + kind, str(tmp_path / "native.keras"))
  for key in ours:
    for a, b in zip(ours[key], native[key]):
      np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=key)
  round_trips = all(np.array_equal(a, b) for a, b in
                    zip(native["loaded"], native["model"]))
  if round_trips or KERAS_3:
    for a, b in zip(ours["loaded"] + ours["loaded_optimizer"],
                    ours["model"] + ours["model_optimizer"]):
      np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(ours["loaded_predictions"],
                               ours["model_predictions"], rtol=1e-6)
    np.testing.assert_allclose(ours["native_loaded_predictions"],
                               ours["model_predictions"], rtol=1e-6)


# -- bad input ----------------------------------------------------------------


def _restore_mismatched(spec, path):
  strategy = strategies.make(spec)
  with strategy.scope():
    w = tf.Variable(tf.zeros((2, 2)), name="w")
  with pytest.raises(Exception) as info:
    tf.train.Checkpoint(w=w).restore(path)
  # The failed restore leaves TF's restore coordinator with unused values; it
  # logs a warning when collected.  Collect it now, while pytest captures
  # logs, not at interpreter exit.
  error = info.value
  del info
  gc.collect()
  return error


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["ours/one_device", "ours/central_storage/2"])
def test_mismatched_shape_raises_tfs_own_error(tmp_path, spec):
  with strategies.make(spec).scope():
    w = tf.Variable(tf.ones((3, 2)), name="w")
  path = tf.train.Checkpoint(w=w).save(str(tmp_path / "ckpt"))
  ours = _restore_mismatched(spec, path)
  native = _restore_mismatched(
      spec.replace("ours", "native", 1) if spec.startswith("ours") else spec,
      path)
  assert type(ours) is type(native) is ValueError
  # TensorFlow's own message, raised by TensorFlow's own code.  Only the
  # name at the end may differ: TF's wrapper for central-storage variables
  # restores through a legacy SaveableObject named after the checkpoint key
  # ("w/.ATTRIBUTES/VARIABLE_VALUE"); ours restores through the wrapped
  # variable, named like any plain variable ("w:0").
  prefix = ("Received incompatible tensor with shape (3, 2) when attempting "
            "to restore variable with shape (2, 2) and name ")
  assert str(ours).startswith(prefix) and str(native).startswith(prefix)
  assert str(ours)[len(prefix):] in ("w:0.", "w/.ATTRIBUTES/VARIABLE_VALUE.")
  frame = traceback.extract_tb(ours.__traceback__)[-1]
  assert f"{os.sep}tensorflow{os.sep}" in frame.filename, frame
  assert os.path.exists(path + ".index")


def _initialized_from_checkpoint(spec, path):
  """Value of a variable made from a checkpoint's value, assigned, then
  attached to the checkpoint (which must not restore it a second time)."""
  with strategies.make(spec).scope():
    checkpoint = tf.train.Checkpoint()
    checkpoint.restore(path)
    variable = tf.Variable(checkpoint._preload_simple_restoration("v"))  # pylint: disable=protected-access
    initial = variable.numpy().tolist()
    variable.assign(tf.zeros([3]))
    checkpoint.v = variable
    return initial, variable.numpy().tolist()


@pytest.mark.parametrize("spec", ["one_device", "central_storage/1",
                                  "central_storage/2"])
def test_variable_initialized_from_checkpoint_is_not_restored_again(
    tmp_path, spec):
  path = tf.train.Checkpoint(v=tf.Variable(tf.ones([3]))).save(
      str(tmp_path / "ckpt"))
  ours = _initialized_from_checkpoint("ours/" + spec, path)
  assert ours == _initialized_from_checkpoint("native/" + spec, path)
  assert ours == ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
