"""``python -m compat_distribute run`` chooses ``tf.keras`` before the
program's first line: Keras 2 (tf-keras) for a program that uses Estimator,
even where it uses ``tf.keras`` first; Keras 3 for every other program;
``COMPAT_DISTRIBUTE_KERAS`` overrides it both ways
(compat_distribute/runtime/keras_choice.py, docs/estimator.md).

Where TensorFlow has one Keras only (2.12-2.15: Keras 2) the runner changes
nothing, and these tests check exactly that there.  Each program is a
small script written into the test's folder and run in a fresh process.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from compat_distribute.runtime import keras_choice
import support

pytestmark = pytest.mark.subprocess

TWO_KERASES = keras_choice.two_kerases()
HAS_ESTIMATOR = importlib.util.find_spec("tensorflow_estimator") is not None
needs_estimator = pytest.mark.skipif(
    not HAS_ESTIMATOR, reason="tensorflow-estimator is not installed (pip "
    "install tensorflow-estimator==2.15.0; tox -e tf221 installs it)")
needs_two_kerases = pytest.mark.skipif(
    not TWO_KERASES, reason="tf.keras has one Keras only here (TensorFlow "
    "2.12-2.15, or no tf-keras): there is no Keras 3 to refuse")

# What every probe prints last: which Keras tf.keras is, and the switch.
REPORT = """
import json as _json, os as _os, sys as _sys
_top = tf.keras.layers.Layer.__module__.split(".")[0]
print(_json.dumps({
    "keras": _top, "version": _sys.modules[_top].__version__,
    "legacy": _os.environ.get("TF_USE_LEGACY_KERAS")}))
"""
KERAS_ONLY = """
import numpy as np
import tensorflow as tf

model = tf.keras.Sequential([tf.keras.layers.Dense(2)])
model.compile(optimizer="sgd", loss="mse")
model.fit(np.ones((4, 3)), np.ones((4, 2)), epochs=1, verbose=0)
"""
# tf.keras in use from the first lines (a Layer subclass at module level,
# the random seed), Estimator afterwards.
LAYER_THEN_ESTIMATOR = """
import tensorflow as tf


class Scale(tf.keras.layers.Layer):
  def call(self, inputs):
    return 2.0 * inputs


tf.keras.utils.set_random_seed(1)
assert float(Scale()(tf.ones(())).numpy()) == 2.0
config = tf.estimator.RunConfig(tf_random_seed=3)
assert config.tf_random_seed == 3
"""


def _env(**extra):
  env = {k: v for k, v in os.environ.items()
         if k not in ("TF_USE_LEGACY_KERAS", keras_choice.OVERRIDE_VARIABLE,
                      keras_choice.EXPLAIN_VARIABLE)}
  env.update(TF_CPP_MIN_LOG_LEVEL="3", PYTHONHASHSEED="0", **extra)
  return env


def _run(folder, source, *, runner=True, files=None, **env):
  """(exit code, last JSON line or None, stderr) of ``source`` run from
  ``folder`` under the runner (or plain python)."""
  for name, text in {"program.py": source, **(files or {})}.items():
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
  argv = [sys.executable] + (["-m", "compat_distribute", "run"]
                             if runner else []) + [str(folder / "program.py")]
  result = subprocess.run(argv, cwd=support.TESTS, env=_env(**env),
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
  lines = [l for l in result.stdout.splitlines() if l.startswith("{")]
  return (result.returncode, json.loads(lines[-1]) if lines else None,
          result.stderr)


def _assert_keras(report, want_2):
  """tf.keras is Keras 2 (tf-keras) if ``want_2``, else Keras 3; where only
  one Keras exists, it is that one and the switch was not touched."""
  if TWO_KERASES:
    assert report["keras"] == ("tf_keras" if want_2 else "keras"), report
    assert report["version"].startswith("2." if want_2 else "3."), report
    assert report["legacy"] == ("1" if want_2 else None), report
  else:
    assert report["keras"] in ("keras", "tf_keras"), report
    assert not report["version"].startswith("3."), report
    assert report["legacy"] is None, report


def test_program_without_estimator_keeps_keras_3(tmp_path):
  code, report, err = _run(tmp_path, KERAS_ONLY + REPORT,
                           **{keras_choice.EXPLAIN_VARIABLE: "1"})
  assert code == 0, err
  _assert_keras(report, want_2=False)
  if TWO_KERASES:
    assert re.search(r"compat_distribute run: tf\.keras for program\.py: "
                     r"unchanged: no use of Estimator found: Keras 3 \(\d+ "
                     r"files read in \d+ ms\)", err), err


@needs_estimator
def test_layer_subclass_and_seed_before_estimator_get_keras_2(tmp_path):
  code, report, err = _run(tmp_path, LAYER_THEN_ESTIMATOR + REPORT,
                           **{keras_choice.EXPLAIN_VARIABLE: "1"})
  assert code == 0, err
  _assert_keras(report, want_2=True)
  if TWO_KERASES:
    assert ("tf.keras for program.py: Keras 2 (tf-keras): Estimator in use "
            "(program.py line 12: tf.estimator)") in err, err


@needs_estimator
def test_library_that_uses_estimator_is_found_through_its_imports(tmp_path):
  """The program never names Estimator; a package it imports does, two
  modules down (a relative import, then a from-import of a submodule)."""
  files = {
      "ctrlib/__init__.py": "from .models import build\n",
      "ctrlib/models.py": "from ctrlib import heads\n\n"
                          "def build():\n  return heads.config()\n",
      "ctrlib/heads.py": "import tensorflow.compat.v1 as tf1\n\n"
                         "def config():\n"
                         "  return tf1.estimator.RunConfig(tf_random_seed=5)\n",
  }
  program = """
  import tensorflow as tf
  import ctrlib

  layer = tf.keras.layers.Dense(1)
  assert ctrlib.build().tf_random_seed == 5
  """
  code, report, err = _run(tmp_path, textwrap.dedent(program) + REPORT,
                           files=files,
                           **{keras_choice.EXPLAIN_VARIABLE: "1"})
  assert code == 0, err
  _assert_keras(report, want_2=True)
  if TWO_KERASES:
    assert "Estimator in use (module ctrlib.heads line 4: tf1.estimator)" in err


@pytest.mark.parametrize("value", ["2", "3"])
def test_override_chooses_either_keras(tmp_path, value):
  """``COMPAT_DISTRIBUTE_KERAS=2`` gives a Keras-only program Keras 2;
  ``=3`` keeps Keras 3 for an Estimator program, which then meets the
  clear error of Estimator after Keras 3 (nothing to choose with one
  Keras: the override changes nothing)."""
  override = {keras_choice.OVERRIDE_VARIABLE: value}
  if value == "2":
    code, report, err = _run(tmp_path, KERAS_ONLY + REPORT, **override)
    assert code == 0, err
    _assert_keras(report, want_2=True)
    return
  if not HAS_ESTIMATOR:
    pytest.skip("tensorflow-estimator is not installed")
  code, report, err = _run(tmp_path, LAYER_THEN_ESTIMATOR + REPORT, **override)
  if TWO_KERASES:
    assert code == 1 and report is None
    assert "KerasAlreadyLoadedError: TensorFlow Estimator needs tf.keras" in err
  else:
    assert code == 0, err
    _assert_keras(report, want_2=False)


@needs_estimator
@needs_two_kerases
def test_install_in_code_after_keras_3_still_raises_the_clear_error(tmp_path):
  program = """
  import tensorflow as tf
  layer = tf.keras.layers.Dense(1)   # Keras 3 in use
  import compat_distribute
  compat_distribute.install()
  try:
    import tensorflow_estimator
  except ImportError as e:
    import json
    print(json.dumps({"error": type(e).__name__,
                      "is_ours": isinstance(e, compat_distribute.Error),
                      "message": str(e)}))
  """
  code, report, err = _run(tmp_path, program, runner=False)
  assert code == 0, err
  assert report["error"] == "KerasAlreadyLoadedError" and report["is_ours"]
  assert "already loaded it as Keras 3 (tf.keras)" in report["message"]
  assert "TF_USE_LEGACY_KERAS=1" in report["message"]


def test_unparsable_program_fails_as_under_python_not_in_the_choice(tmp_path):
  code, report, err = _run(
      tmp_path, "import tensorflow as tf\nx = tf.estimator.(\n")
  assert code == 1 and report is None
  assert "SyntaxError" in err and "keras_choice" not in err, err
