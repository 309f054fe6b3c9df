"""The runner's choice of ``tf.keras`` (compat_distribute/runner/): what
counts as Estimator in use (code that imports or reaches it, in a branch the
running TensorFlow takes; never a string), how far the look goes through a
program's imports, that it is bounded by files and bytes only, the
overrides, its cost, and that it never raises.

In this process: the choice is given a dictionary as its environment, so
nothing here changes the test run's own ``tf.keras``.  The subprocess
tests of the runner itself are tests/clients/runner/test_runner_keras_choice.py.
"""
import os
import subprocess
import sys
import textwrap
import time
import types

import pytest
import tensorflow as tf

import compat_distribute
from compat_distribute.runner import evidence as evidence_lib
from compat_distribute.runner import keras_choice
from compat_distribute.runner import program_look
from compat_distribute.runner import version_guards

evidence = evidence_lib.estimator_evidence
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
     "line 1: from tensorflow import estimator"),
    ("from tensorflow.python.estimator.canned.head import _Head",
     "line 1: from tensorflow.python.estimator.canned.head import _Head"),
    ("from tensorflow.compat.v1 import estimator as est",
     "line 1: from tensorflow.compat.v1 import estimator"),
    # An import by a call, with the name written out, is an import.
    ("import importlib\nimportlib.import_module('tensorflow_estimator')",
     "line 2: import_module('tensorflow_estimator')"),
    ("m = __import__('tensorflow.estimator')",
     "line 1: __import__('tensorflow.estimator')"),
    # The first use in the file, wherever the walk meets it.
    ("import tensorflow as tf\ndef f():\n  return tf.estimator\n"
     "import tensorflow_estimator", "line 3: tf.estimator"),
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
    # Strings are not uses: a check whether Estimator is installed, a
    # constant naming it, a name passed to something other than an import.
    "import importlib.util\nimport tensorflow as tf\n"
    "HAS = importlib.util.find_spec('tensorflow_estimator') is not None",
    "NAME = 'tensorflow.estimator.Estimator'\nimport tensorflow as tf",
    "import pkgutil\npkgutil.find_loader('tensorflow_estimator')",
    "x = {'module': 'tensorflow_estimator.python.estimator'}",
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
  found, files, stopped = program_look.program_evidence(script)
  assert found == (f"{tmp_path}/deeplib/heads.py:1: from "
                   "tensorflow.python.estimator.canned import head")
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
  assert program_look.program_evidence(script) == (None, 3, False)


def test_the_look_is_bounded(tmp_path, monkeypatch):
  files = {"main.py": "import m0\n"}
  files.update({f"m{i}.py": f"import m{i + 1}\n" for i in range(20)})
  files["m20.py"] = "import tensorflow_estimator\n"
  script = _write(tmp_path, files)
  assert program_look.program_evidence(script)[0] == (
      f"{tmp_path}/m20.py:1: import tensorflow_estimator")
  monkeypatch.setattr(program_look, "MAX_FILES", 10)
  assert program_look.program_evidence(script) == (None, 10, True)
  # Bytes bound the look too: a file that does not fit ends it.
  monkeypatch.setattr(program_look, "MAX_FILES", 300)
  monkeypatch.setattr(program_look, "MAX_BYTES", 5 * len("import m10\n"))
  assert program_look.program_evidence(script) == (None, 5, True)


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
    ({}, True, "Estimator in use ({dir}/main.py:3: tf.estimator)"),
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
  assert reason.format(dir=tmp_path) in choice.reason
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
  monkeypatch.setattr(program_look, "program_evidence", broken)
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
  assert f"the program sets TF_USE_LEGACY_KERAS={value!r} itself" in (
      choice.reason)
  assert choice.keras == ("2" if keras_2 else None)


# -- code in a branch the running TensorFlow cannot take ----------------------

GUARDED = "import tensorflow as tf\n{imports}\nif {test}:\n  {use}\n"


@pytest.mark.parametrize("imports,test,on_2_21", [
    ("", 'tf.__version__ < "2.16"', False),
    ("", 'tf.__version__ >= "2.16"', True),
    ("", "tf.version.VERSION.startswith('2.15')", False),
    ("", 'not tf.__version__.startswith("2.2")', False),
    ("from packaging import version",
     'version.parse(tf.__version__) < version.parse("2.16")', False),
    ("from packaging.version import Version",
     'Version(tf.__version__) >= Version("2.16.0")', True),
    ("import packaging.version",
     "packaging.version.parse(tf.__version__).release < (2, 16)", False),
    ("from distutils.version import LooseVersion",
     "LooseVersion(tf.__version__) < LooseVersion('2.16')", False),
    ("", "tuple(map(int, tf.__version__.split('.')[:2])) < (2, 16)", False),
    ("", "int(tf.__version__.split('.')[1]) < 16", False),
    ("from packaging import version\n"
     "TF_VERSION = version.parse(tf.__version__)",
     "TF_VERSION.major == 2 and TF_VERSION.minor <= 15", False),
    ("from tensorflow import __version__ as tf_version",
     'tf_version < "2.16"', False),
    ("import tensorflow.compat.v1 as tf1", "tf1.VERSION < '2.16'", False),
    ("from distutils.version import StrictVersion",
     "StrictVersion(tf.__version__) >= StrictVersion('2.16.0')", True),
    ("import pkg_resources",
     "pkg_resources.parse_version(tf.__version__).micro >= 0 and "
     "pkg_resources.parse_version(tf.__version__) < "
     "pkg_resources.parse_version('2.16')", False),
    ("from typing import TYPE_CHECKING", "TYPE_CHECKING", (False, False)),
    ("import typing", "typing.TYPE_CHECKING", (False, False)),
    # One part decides, the other unknown.
    ("import sys", "len(sys.argv) > 1 and tf.__version__ < '2.16'", False),
    ("import sys", "tf.__version__ >= '2.16' or len(sys.argv) > 1",
     (True, None)),
    # Not worked out: both branches count.
    ("import sys", "sys.argv[1] == 'old'", None),
    ("", "tf.__version__ < OTHER", None),
])
@pytest.mark.parametrize("use", ["import tensorflow_estimator",
                                 "est = tf.estimator.Estimator"])
def test_code_the_running_tensorflow_cannot_reach_is_not_a_use(
    imports, test, on_2_21, use):
  """``on_2_21``: whether the branch runs on TensorFlow 2.21 (None: not
  worked out), or (on 2.21, on 2.15) where 2.15 is not simply the other
  way."""
  on_2_21, on_2_15 = on_2_21 if isinstance(on_2_21, tuple) else (
      on_2_21, None if on_2_21 is None else not on_2_21)
  source = GUARDED.format(imports=imports, test=test, use=use).encode()
  line = source.decode().count("\n")
  what = use if use.startswith("import") else "tf.estimator"
  found = evidence(source, tf_version="2.21.0")
  assert found == (None if on_2_21 is False else f"line {line}: {what}")
  assert evidence(source, tf_version="2.15.1") == (
      None if on_2_15 is False else f"line {line}: {what}")
  # An unknown version: every branch that reads it counts.
  assert evidence(source) == (
      None if "TYPE_CHECKING" in test else f"line {line}: {what}")


def test_the_else_branch_and_an_if_expression_follow_the_version():
  source = (b"import tensorflow as tf\n"
            b"if tf.__version__ < '2.16':\n  import tensorflow_estimator\n"
            b"elif tf.__version__ < '2.17':\n  est = tf.estimator\n"
            b"else:\n  import keras\n"
            b"est = tf.estimator if tf.__version__ < '2.16' else None\n")
  assert evidence(source, tf_version="2.21.0") is None
  assert evidence(source, tf_version="2.16.2") == "line 5: tf.estimator"
  assert evidence(source, tf_version="2.15.1") == (
      "line 3: import tensorflow_estimator")


def test_an_import_in_a_branch_not_taken_is_not_followed(tmp_path):
  """The look does not read a module only a dead branch imports."""
  script = _write(tmp_path, {
      "main.py": "import tensorflow as tf\n"
                 "if tf.__version__ < '2.16':\n  import old_estimator_lib\n",
      "old_estimator_lib.py": "import tensorflow_estimator\n"})
  found = program_look.program_evidence(script)
  if version_guards.running_tensorflow_version() is None:
    pytest.skip("no TensorFlow distribution found to read the version of")
  on_old = version_guards.running_tensorflow_version() < "2.16"
  assert found == ((f"{tmp_path}/old_estimator_lib.py:1: import "
                    "tensorflow_estimator", 2, False) if on_old else
                   (None, 1, False))


def test_the_running_version_is_the_installed_tensorflow():
  assert version_guards.running_tensorflow_version() == tf.__version__


# -- the same answer at any load ---------------------------------------------

def _library_program(tmp_path):
  """A program whose use of Estimator is 60 modules down a chain of 200:
  the look reads 61 files to find it."""
  files = {"main.py": "import tensorflow as tf\nimport chain0\n"}
  files.update({f"chain{i}.py": f'"""{"x" * 2000}"""\nimport chain{i + 1}\n'
                for i in range(200)})
  files["chain60.py"] = "import tensorflow.compat.v1 as tf1\nc = tf1.estimator\n"
  return _write(tmp_path, files)


@pytest.mark.subprocess
def test_the_look_gives_the_same_answer_under_a_cpu_hog(tmp_path):
  """Busy processes on every core slow the look down, not its answer (no
  clock in it): the same evidence and files read as on an idle machine."""
  script = _library_program(tmp_path)
  quiet = program_look.program_evidence(script)
  assert quiet == (f"{tmp_path}/chain60.py:2: tf1.estimator", 62, False)
  hogs = [subprocess.Popen(
      [sys.executable, "-c", "print('busy', flush=True)\nwhile True: pass"],
      stdout=subprocess.PIPE, text=True)
          for _ in range(2 * (os.cpu_count() or 1))]
  try:
    for hog in hogs:  # each busy before the look starts
      assert hog.stdout.readline() == "busy\n"
    for _ in range(3):
      start = time.perf_counter()
      assert program_look.program_evidence(script) == quiet
      assert time.perf_counter() - start < 60  # bounded, however slow
  finally:
    for hog in hogs:
      hog.kill()
      hog.wait(timeout=30)
      hog.stdout.close()


def test_a_look_stopped_at_its_bound_says_the_default(tmp_path, monkeypatch,
                                                      capsys):
  """Beyond the bound: Keras 3 (the default), and one stderr line says so
  and how to ask for Keras 2."""
  monkeypatch.setattr(keras_choice, "two_kerases", lambda: True)
  monkeypatch.setattr(program_look, "MAX_FILES", 20)
  script = _library_program(tmp_path)
  environ = {}
  choice = keras_choice.choose_for_script(script, environ)
  assert choice.keras is None and environ == {}
  err = capsys.readouterr().err
  assert err == (
      "compat_distribute run: tf.keras stays Keras 3 (the default): the look "
      f"for Estimator in {script} stopped at its bound (20 files, 4000000 "
      "bytes) after 20 files without finding a use; run --keras 2 if the "
      "program uses Estimator\n")


# -- what the runner says, and the flag -----------------------------------------

@pytest.mark.parametrize("keras,environ,want,said", [
    (None, {}, "2", "because it uses Estimator at {dir}/main.py:3: "
     "tf.estimator; run --keras 3 to keep Keras 3"),
    ("3", {}, None, None),
    ("3", {"COMPAT_DISTRIBUTE_KERAS": "2"}, None, None),  # flag over env
    ("auto", {"COMPAT_DISTRIBUTE_KERAS": "3"}, None, None),  # auto: the env
    ("2", {"COMPAT_DISTRIBUTE_KERAS": "3"}, "2", "because of --keras 2; "
     "run --keras 3 to keep Keras 3"),
    (None, {"COMPAT_DISTRIBUTE_KERAS": "2"}, "2",
     "because of COMPAT_DISTRIBUTE_KERAS=2; run --keras 3 to keep Keras 3"),
    ("3", {"TF_USE_LEGACY_KERAS": "1"}, "3", "tf.keras is Keras 3 for this "
     "program, not Keras 2 as TF_USE_LEGACY_KERAS=1 in the environment asks, "
     "because of --keras 3; run --keras auto to leave TF_USE_LEGACY_KERAS as "
     "it is"),
])
def test_every_change_of_tf_keras_is_one_stderr_line(
    tmp_path, monkeypatch, capsys, keras, environ, want, said):
  monkeypatch.setattr(keras_choice, "two_kerases", lambda: True)
  script = _estimator_script(tmp_path)
  before = dict(environ)
  choice = keras_choice.choose_for_script(script, environ, keras=keras)
  assert choice.keras == want
  assert environ.get("TF_USE_LEGACY_KERAS") == {
      "2": "1", "3": None, None: before.get("TF_USE_LEGACY_KERAS")}[want]
  err = capsys.readouterr().err
  if said is None:
    assert err == "" and choice.message is None
    return
  assert err.count("\n") == 1 and err == choice.message + "\n"
  assert err.startswith("compat_distribute run: tf.keras is Keras ")
  assert said.format(dir=tmp_path) in err
  choice.undo(environ)
  assert environ == before


def test_the_module_program_is_found_without_running_it(tmp_path,
                                                        monkeypatch):
  """``run -m pkg.train``: the module's file, its package for relative
  imports, its parent read too, nothing executed."""
  _write(tmp_path, {
      "main.py": "",
      "pkg/__init__.py": "raise RuntimeError('executed')\n",
      "pkg/train.py": "from . import heads\n",
      "pkg/heads.py": "import tensorflow as tf\nh = tf.estimator.Head\n",
      "app/__init__.py": "", "app/__main__.py": "import tensorflow_estimator\n"})
  monkeypatch.chdir(tmp_path)
  program = program_look.module_program("pkg.train")
  assert program.source == str(tmp_path / "pkg" / "train.py")
  assert (program.package, program.parents) == ("pkg", ["pkg"])
  assert program.search_path[0] == str(tmp_path)
  assert program_look.program_evidence(program) == (
      "pkg/heads.py:2: tf.estimator", 3, False)
  assert program_look.program_evidence(
      program_look.module_program("app")) == (
          "app/__main__.py:1: import tensorflow_estimator", 2, False)
  assert program_look.module_program("no_such_module").source is None


def test_with_one_keras_only_an_explicit_choice_says_it_changes_nothing(
    tmp_path, monkeypatch, capsys):
  monkeypatch.setattr(keras_choice, "two_kerases", lambda: False)
  script = _estimator_script(tmp_path)
  for keras, said in ((None, ""), ("auto", ""), ("2", (
      "compat_distribute run: --keras 2 changes nothing here: tf.keras has "
      "one Keras only (TensorFlow before 2.16, or tf-keras not installed)\n"))):
    environ = {}
    choice = keras_choice.choose_for_script(script, environ, keras=keras)
    assert choice.keras is None and environ == {}
    assert capsys.readouterr().err == said


def test_a_keras_value_the_flag_refuses_is_refused():
  with pytest.raises(ValueError, match=r"keras must be '2', '3' or 'auto' "
                     r"\(as run --keras 2\|3\|auto\).*got 'keras2'") as caught:
    keras_choice.choose_for_script("main.py", {}, keras="keras2")
  assert isinstance(caught.value, compat_distribute.Error)
