"""tf-keras (Keras 2, ``TF_USE_LEGACY_KERAS=1``) under our strategies gives
what it gives under TensorFlow's.  On TensorFlow 2.12-2.13, which have no
tf-keras release, the same programs run on the Keras 2 that TensorFlow
bundles as tf.keras.

Keras 2 must be chosen before TensorFlow is imported, so the runs happen in
one subprocess (``fixtures/tf_keras_fit.py``) that trains the same seeded
Dense + BatchNormalization model under every strategy named on its command
line.  Unlike Keras 3, tf-keras gives BatchNormalization's moving statistics
an aggregation, so it trains with several CentralStorage replicas too.
"""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import support

FIT = support.FIXTURES / "tf_keras_fit.py"
SPECS = ["one_device", "central_storage/1", "central_storage/2",
         "central_storage/4"]

def _bundled_keras_is_keras_2():
  """TensorFlow 2.12-2.15 bring Keras 2 as tf.keras themselves."""
  spec = importlib.util.find_spec("keras")
  if spec is None:
    return False
  import keras  # pylint: disable=g-import-not-at-top
  return not hasattr(keras, "Variable")  # Keras 3 has keras.Variable


LEGACY_PACKAGE = importlib.util.find_spec("tf_keras") is not None
pytestmark = pytest.mark.skipif(
    not LEGACY_PACKAGE and not _bundled_keras_is_keras_2(),
    reason="Keras 3 without tf-keras (tox installs the tf-keras release of "
    "each TensorFlow minor: pip install --no-deps tf-keras==2.MINOR.*)")
pytestmark = [pytestmark, pytest.mark.parity, pytest.mark.subprocess]


@pytest.fixture(scope="module")
def runs():
  env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
  args = [f"{impl}/{spec}" for spec in SPECS for impl in ("native", "ours")]
  result = subprocess.run([sys.executable, str(FIT), *args], env=env,
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-4000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def test_runs_used_keras_2(runs):
  # tf_keras where TF_USE_LEGACY_KERAS routes tf.keras to it (2.15 on),
  # else the Keras 2 that TensorFlow bundles as tf.keras.
  for spec, run in runs.items():
    assert run["keras"].startswith(("tf_keras", "keras")), (spec, run)
    assert run["keras_version"].startswith("2."), (spec, run)
    if LEGACY_PACKAGE and not _bundled_keras_is_keras_2():
      assert run["keras"].startswith("tf_keras"), (spec, run)


@pytest.mark.parametrize("spec", SPECS)
def test_fit_evaluate_predict_match_native(runs, spec):
  ours, native = runs[f"ours/{spec}"], runs[f"native/{spec}"]
  assert ours["history"].keys() == native["history"].keys()
  for key in native["history"]:
    np.testing.assert_allclose(ours["history"][key], native["history"][key],
                               rtol=1e-5, atol=1e-6, err_msg=key)
  np.testing.assert_allclose(ours["evaluation"], native["evaluation"],
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ours["predictions"], native["predictions"],
                             rtol=1e-5, atol=1e-6)
  assert len(ours["weights"]) == len(native["weights"]) == 8
  for a, b in zip(ours["weights"], native["weights"]):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert native["history"]["loss"][0] != native["history"]["loss"][-1]


TYPE_CHECKS = FIT.parent / "tf_keras_type_checks.py"
TYPE_CHECK_SPECS = ["one_device", "central_storage/1", "central_storage/2"]


def test_tf_keras_strategy_type_checks_match_native():
  # tf.keras decides on loss scaling, mixed precision, legacy clipping and
  # SAM's update path by isinstance against TensorFlow's strategy classes;
  # with only the import changed, ours must take the same branches.
  env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
  args = [f"{impl}/{spec}" for spec in TYPE_CHECK_SPECS
          for impl in ("native", "ours")]
  result = subprocess.run([sys.executable, str(TYPE_CHECKS), *args], env=env,
                          capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stderr[-4000:]
  runs = json.loads(result.stdout.strip().splitlines()[-1])
  for spec in TYPE_CHECK_SPECS:
    assert runs[f"ours/{spec}"] == runs[f"native/{spec}"], spec
  # The checks really branch: one device trains with loss scaling, two
  # replicas refuse it and clipnorm.
  assert isinstance(runs["native/one_device"]["loss_scale"], float)
  assert runs["native/central_storage/2"]["loss_scale"] == "ValueError"
  assert runs["native/central_storage/2"]["legacy_clipnorm"] == "ValueError"
