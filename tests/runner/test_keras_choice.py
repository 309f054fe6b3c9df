"""The runner's choice of ``tf.keras`` (compat_distribute/runtime/keras_choice.py):
what counts as Estimator in use, how far the look goes through a program's
imports, the overrides, its cost, and that it never raises.

In this process: the choice is given a dictionary as its environment, so
nothing here changes the test run's own ``tf.keras``.  The subprocess
tests of the runner itself are tests/clients/runner/test_runner_keras_choice.py.
"""
import textwrap
import time
import types

import pytest
import tensorflow as tf

from compat_distribute.runtime import keras_choice
from compat_distribute.runtime import program_look

evidence = keras_choice.estimator_evidence
# TensorFlow 2.16+ routes tf.keras through a loader that reads
# TF_USE_LEGACY_KERAS; with tf-keras installed too, there is a choice.
LAZY_KERAS = (isinstance(tf.keras, types.ModuleType) and
              "_tfll_initialized" in vars(tf.keras))


@pytest.mark.parametrize("source,found", [
    ("import tensorflow as tf\ntf.estimator.Estimator", "line 2: tf.estimator"),
    ("import tensorflow.compat.v1 as tf\nc = tf.estimator.RunConfig()",
     "line 2: tf.estimator"),
    ("import tensorflow as tf\n\nx = tf.compat.v1.estimator.ModeKeys",
     "line 3: tf.compat.v1.estimator"),
    ("from tensorflow import compat\ncompat.v1.estimator.RunConfig",
     "line 2: compat.v1.estimator"),
    ("import tensorflow as tf\ntf.keras.estimator.model_to_estimator",
     "line 2: tf.keras.estimator"),
    ("import tensorflow_estimator as tfe", "line 1: import tensorflow_estimator"),
    ("from tensorflow import estimator",
     "line 1: from tensorflow import ..."),
    ("from tensorflow.python.estimator.canned.head import _Head",
     "line 1: from tensorflow.python.estimator.canned.head import ..."),
    ("from tensorflow.compat.v1 import estimator as est",
     "line 1: from tensorflow.compat.v1 import ..."),
    ("import importlib\nimportlib.import_module('tensorflow_estimator')",
     "line 2: 'tensorflow_estimator'"),
])
def test_estimator_uses_are_found_with_their_line(source, found):
  assert evidence(source.encode()) == found


@pytest.mark.parametrize("source", [
    "import tensorflow as tf\nm = tf.keras.Sequential()",
    "import tensorflow as tf\nself.estimator = tf.keras.Model()",  # not TF's
    "import sklearn\nsklearn.base.estimator = 1",                    # not TF's
    "# unlike tf.estimator, this is Keras\nimport tensorflow as tf",  # comment
    '"""Works like tf.estimator."""\nimport tensorflow as tf',       # docstring
    "import tensorflow as tf\nx = tf.estimator.(",                   # unparsable
    "\xff\xfe tf.estimator",                                          # not UTF-8 Python
])
def test_everything_else_is_not_estimator_and_never_raises(source):
  assert evidence(source.encode("latin-1")) is None


def _write(root, files):
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
  return str(root / "main.py")


def test_the_look_follows_imports_into_packages_without_running_them(tmp_path):
  """A package two modules down uses Estimator's TensorFlow path; its
  ``__init__`` would raise if executed, so finding it proves nothing ran."""
  script = _write(tmp_path, {
      "main.py": "import numpy\nfrom deeplib.models import wide as w\n",
      "deeplib/__init__.py": "raise RuntimeError('executed')\n",
      "deeplib/models/__init__.py": "from . import wide\n",
      "deeplib/models/wide.py": "from ..heads import make_head\n",
      "deeplib/heads.py":
          "from tensorflow.python.estimator.canned import head\n",
  })
  found, files, stopped = keras_choice.program_evidence(script)
  assert found == ("module deeplib.heads line 1: from "
                   "tensorflow.python.estimator.canned import ...")
  assert not stopped and 3 <= files <= 6


def test_a_program_without_estimator_reads_little_and_finds_nothing(tmp_path):
  script = _write(tmp_path, {
      "main.py": """\
          import json, os
          import numpy as np
          import tensorflow as tf
          import helpers
          model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
          """,
      "helpers.py": "import broken\nimport missing_module\n",
      "broken.py": "def estimator(:\n",   # unparsable, mentions estimator
  })
  assert keras_choice.program_evidence(script) == (None, 3, False)


def test_the_look_is_bounded(tmp_path, monkeypatch):
  files = {"main.py": "import m0\n"}
  files.update({f"m{i}.py": f"import m{i + 1}\n" for i in range(20)})
  files["m20.py"] = "import tensorflow_estimator\n"
  script = _write(tmp_path, files)
  assert keras_choice.program_evidence(script)[0] == (
      "module m20 line 1: import tensorflow_estimator")
  monkeypatch.setattr(program_look, "MAX_FILES", 10)
  assert keras_choice.program_evidence(script) == (None, 10, True)


def test_the_choice_costs_little_on_a_normal_script(tmp_path):
  """The decision's whole cost on a typical training script (the runner
  adds nothing else before TensorFlow starts): well under a second."""
  script = _write(tmp_path, {"main.py": """\
      import argparse, json, os
      import numpy as np
      import tensorflow as tf
      from absl import flags
      import data_utils
      model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
      """, "data_utils.py": "import numpy as np\nimport pandas_like\n",
      "pandas_like.py": "import csv\n" * 2000})
  took = []
  for _ in range(3):
    environ = {}
    start = time.perf_counter()
    choice = keras_choice.choose_for_script(script, environ)
    took.append(time.perf_counter() - start)
    assert choice.keras is None and environ == {}
  assert min(took) < 0.25, took


def _estimator_script(tmp_path):
  return _write(tmp_path, {"main.py": """\
      import tensorflow as tf
      layer = tf.keras.layers.Dense(1)
      est = tf.estimator.Estimator(lambda features, labels, mode: None)
      """})


def test_two_kerases_is_what_tensorflow_routes():
  assert keras_choice.two_kerases() == (
      LAZY_KERAS and keras_choice.importlib.util.find_spec("tf_keras")
      is not None)


@pytest.mark.parametrize("environ,keras_2,reason", [
    ({}, True, "Estimator in use (main.py line 3: tf.estimator)"),
    ({"COMPAT_DISTRIBUTE_KERAS": "3"}, False, "COMPAT_DISTRIBUTE_KERAS=3"),
    ({"COMPAT_DISTRIBUTE_KERAS": "auto"}, True, "Estimator in use"),
    ({"COMPAT_DISTRIBUTE_KERAS": "keras2"}, True, "Estimator in use"),
    ({"TF_USE_LEGACY_KERAS": "0"}, False, "TF_USE_LEGACY_KERAS=0 is set"),
    ({"TF_USE_LEGACY_KERAS": "0", "COMPAT_DISTRIBUTE_KERAS": "2"}, True,
     "COMPAT_DISTRIBUTE_KERAS=2"),
])
def test_overrides_and_the_environment(tmp_path, caplog, environ, keras_2,
                                       reason):
  script = _estimator_script(tmp_path)
  before = dict(environ)
  choice = keras_choice.choose_for_script(script, environ)
  if not keras_choice.two_kerases():
    # TensorFlow 2.12-2.15 (one Keras) or no tf-keras: nothing changes.
    assert choice.keras is None and environ == before
    assert choice.reason.startswith("one Keras only")
    return
  assert reason in choice.reason
  assert choice.keras == ("2" if keras_2 else None)
  assert environ.get("TF_USE_LEGACY_KERAS") == (
      "1" if keras_2 else before.get("TF_USE_LEGACY_KERAS"))
  if "keras2" in before.values():
    assert "is not one of 2, 3, auto" in caplog.text
  choice.undo(environ)
  assert environ == before


def test_a_failure_inside_the_choice_changes_nothing(tmp_path, monkeypatch):
  def broken(script):
    raise OSError("disk gone")
  monkeypatch.setattr(keras_choice, "program_evidence", broken)
  monkeypatch.setattr(keras_choice, "two_kerases", lambda: True)
  environ = {}
  choice = keras_choice.choose_for_script(_estimator_script(tmp_path), environ)
  assert choice.keras is None and environ == {}
  assert choice.reason == "no decision (OSError('disk gone'))"


@pytest.mark.parametrize("source,value", [
    ('import os\nos.environ["TF_USE_LEGACY_KERAS"] = "1"\nimport tensorflow',
     "1"),
    ("import os\nos.environ['TF_USE_LEGACY_KERAS'] = 'True'", "True"),
    ('import os\nos.environ.setdefault("TF_USE_LEGACY_KERAS", "1")', "1"),
    ("import os\nos.environ.update(TF_USE_LEGACY_KERAS='0')", "0"),
    ('import os\nos.putenv("TF_USE_LEGACY_KERAS", "1")', "1"),
    # Only what runs at start counts: not inside a function.
    ('import os\ndef f():\n  os.environ["TF_USE_LEGACY_KERAS"] = "1"', None),
    ('x = "TF_USE_LEGACY_KERAS"', None),
    ("os.environ[", None),
])
def test_the_scripts_own_legacy_keras_setting(source, value):
  assert keras_choice.script_keras_setting(source.encode()) == value


@pytest.mark.parametrize("value,keras_2", [("1", True), ("0", False)])
def test_the_scripts_own_setting_decides_before_the_environment(
    tmp_path, value, keras_2):
  script = tmp_path / "own.py"
  script.write_text(f'import os\nos.environ["TF_USE_LEGACY_KERAS"] = '
                    f'"{value}"\nimport tensorflow as tf\n')
  environ = {"TF_USE_LEGACY_KERAS": "1" if value == "0" else "0"}
  choice = keras_choice.choose_for_script(str(script), environ)
  if not keras_choice.two_kerases():
    assert choice.keras is None
    return
  assert f"the script sets TF_USE_LEGACY_KERAS={value!r} itself" in (
      choice.reason)
  assert choice.keras == ("2" if keras_2 else None)
