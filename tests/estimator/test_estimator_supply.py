"""``install()`` supplies what Estimator needs only where TensorFlow lacks
it, ``uninstall()`` takes it out again, and what cannot work says so.

* On a TensorFlow with Estimator's pieces (2.12-2.15) ``install()`` leaves
  every one of them -- TensorFlow's ``estimator_training``, its TPU modules,
  its export registry, ``tf.estimator`` -- the very object it was.
* On one without (2.16+) each piece is put in place and taken out, leaving
  ``sys.modules``, ``sys.meta_path``, TensorFlow's API modules, its export
  registry and ``TF_USE_LEGACY_KERAS`` as they were.
* A missing Estimator, a missing tf-keras, a ``tf.keras`` already used as
  Keras 3 and TPU functionality each give one error with the fix
  (subprocesses of tests/fixtures/estimator_errors.py).
"""
import importlib.util
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import compat_distribute
from compat_distribute import _tf_private
from compat_distribute import estimator
from compat_distribute.estimator import api
from compat_distribute.estimator import coordinator
import support

pytestmark = pytest.mark.parity

ROOT = str(support.ROOT)
ERRORS = str(support.FIXTURES / "estimator_errors.py")
HAS_ESTIMATOR = importlib.util.find_spec("tensorflow_estimator") is not None
NATIVE = estimator.has_estimator_support()


def _state():
  """Everything Estimator's pieces touch, by identity."""
  return {
      "modules": {name: sys.modules.get(name)
                  for name in _tf_private.ESTIMATOR_MODULES.values()},
      "meta_path": list(sys.meta_path),
      "api": {path: vars(api.api_module(path)).get("estimator")
              for path in api.API_PATHS},
      "export": _tf_private.has_estimator_api(),
      "legacy_keras": os.environ.get("TF_USE_LEGACY_KERAS"),
  }


def test_install_then_uninstall_restores_every_piece():
  before = _state()
  with compat_distribute.install():
    during = _state()
    supplied = sys.modules["compat_distribute.install"]._supplied  # pylint: disable=protected-access
    if NATIVE:
      # TensorFlow's own pieces are used; nothing is supplied or replaced.
      assert supplied.is_empty(), supplied
      assert during["modules"] == before["modules"]
      assert all(during["api"][p] is before["api"][p] for p in api.API_PATHS)
    else:
      assert not supplied.is_empty()
      training = _tf_private.ESTIMATOR_MODULES["estimator_training"]
      assert during["modules"][training] is coordinator
      assert isinstance(tf.estimator, api.LazyEstimatorAPI)
      assert tf.compat.v1.estimator.target == api.V1_API
      assert during["export"] is True
      assert repr(supplied).startswith("Supplied(module tensorflow.python.")
  assert _state() == before  # modules compare by identity
  assert supplied.is_empty() and repr(supplied) == "Supplied(nothing)"


@pytest.mark.skipif(NATIVE, reason="TensorFlow 2.12-2.15 have no TPU "
                    "stand-ins: their own TPU modules are used")
def test_supplied_modules_import_under_tensorflows_names():
  with compat_distribute.install():
    from tensorflow.python.distribute import estimator_training  # pylint: disable=g-import-not-at-top
    from tensorflow.python.tpu import tpu_embedding  # pylint: disable=g-import-not-at-top
    assert estimator_training.INDEPENDENT_WORKER == "independent_worker"
    assert _tf_private.distribute_coordinator()[0].CoordinatorMode.\
        INDEPENDENT_WORKER == estimator_training.INDEPENDENT_WORKER
    with pytest.raises(compat_distribute.Error, match="TPUEstimator"):
      tpu_embedding.FtrlParameters(0.1)
  with pytest.raises(ImportError):
    from tensorflow.python.tpu import tpu_embedding  # pylint: disable=g-import-not-at-top,reimported,unused-import


def _run_errors(scenario, extra_env=None):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(extra_env or {}))
  env.pop("TF_USE_LEGACY_KERAS", None)
  process = subprocess.run(
      [sys.executable, "-m", "compat_distribute", "run", ERRORS, scenario],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
      stdin=subprocess.DEVNULL, check=False)
  assert process.returncode == 0, process.stderr[-4000:]
  import json  # pylint: disable=g-import-not-at-top
  return json.loads(process.stdout.strip().splitlines()[-1])


pytestmark_supplied = pytest.mark.skipif(
    NATIVE or not HAS_ESTIMATOR,
    reason="needs a TensorFlow without Estimator's pieces (2.16+) and "
    "tensorflow-estimator installed")


@pytest.fixture(scope="module")
def refusals():
  # The refusals of install() itself: the runner does not choose Keras 2
  # before the program starts (it would, seeing Estimator in the fixture).
  return _run_errors("refusals", {"COMPAT_DISTRIBUTE_KERAS": "3"})


@pytest.fixture(scope="module")
def after_import():
  return _run_errors("tpu")


@pytest.mark.subprocess
@pytestmark_supplied
def test_estimator_not_installed_says_how_to_install_it(refusals):
  minor = ".".join(tf.__version__.split(".")[:2])
  for where in ("no_estimator", "no_estimator_attribute"):
    error = refusals[where]
    assert error["classes"][:3] == ["EstimatorNotInstalledError", "Error",
                                    "ModuleNotFoundError"], error
    assert "pip install tensorflow-estimator==2.15.0" in error["message"]
    assert f'"tf-keras~={minor}.0"' in error["message"]


@pytest.mark.subprocess
@pytestmark_supplied
def test_tf_keras_missing_names_the_matching_release(refusals):
  error = refusals["no_tf_keras"]
  minor = ".".join(tf.__version__.split(".")[:2])
  assert error["classes"][:3] == ["TfKerasMissingError", "Error",
                                  "ImportError"], error
  assert f'pip install --no-deps "tf-keras~={minor}.0"' in error["message"]


@pytest.mark.subprocess
@pytestmark_supplied
def test_keras_3_already_in_use_is_refused_with_the_fix(refusals):
  error = refusals["keras_first"]
  assert error["classes"][:3] == ["KerasAlreadyLoadedError", "Error",
                                  "ImportError"], error
  assert "TF_USE_LEGACY_KERAS=1" in error["message"]
  assert "tf.keras" in error["message"]


@pytest.mark.subprocess
@pytestmark_supplied
def test_tpu_functionality_is_refused_naming_tpu_estimator(after_import):
  error = after_import["optimizer"]
  assert error["classes"][:3] == ["TPUEstimatorUnsupportedError", "Error",
                                  "NotImplementedError"], error
  assert error["message"].startswith(
      "tpu_embedding.AdagradParameters is TPUEstimator functionality")
  assert "TensorFlow 2.16 removed" in error["message"]
  assert after_import["custom_still_works"] == "EstimatorV2"


@pytest.mark.subprocess
@pytestmark_supplied
def test_importing_estimator_makes_every_tf_keras_keras_2(after_import):
  """tf.keras and tf.compat.v1/v2.keras are tf-keras from Estimator's import
  on, even when first used on a thread with another os.environ."""
  assert after_import["keras"] == {"tf": "tf_keras", "v1": "tf_keras",
                                   "v2": "tf_keras", "variable": "1"}
