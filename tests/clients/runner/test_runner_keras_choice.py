"""``python -m compat_distribute run`` chooses ``tf.keras`` before the
program's first line: Keras 2 (tf-keras) for a program that uses Estimator,
even where it uses ``tf.keras`` first, said in one stderr line; Keras 3 for
every other program, also one that only checks whether Estimator is
installed, names it in a string, or uses it behind a TensorFlow version test
the running TensorFlow fails; ``run --keras`` and ``COMPAT_DISTRIBUTE_KERAS``
override it both ways (the flag first); ``run -m`` reads the module's
sources (compat_distribute/runner/keras_choice.py, docs/estimator.md).

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

from compat_distribute.runner import keras_choice
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


def _run(folder, source, *, runner=True, files=None, flags=(), module=None,
         **env):
  """(exit code, last JSON line or None, stderr) of ``source`` (as
  program.py) run under the runner with ``flags`` (or plain python); with
  ``module``, ``-m module`` is run from ``folder`` instead."""
  for name, text in {"program.py": source, **(files or {})}.items():
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
  target = ["-m", module] if module else [str(folder / "program.py")]
  argv = [sys.executable] + (["-m", "compat_distribute", "run", *flags]
                             if runner else []) + target
  result = subprocess.run(argv, cwd=folder if module else support.TESTS,
                          env=_env(**env), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
  lines = [l for l in result.stdout.splitlines() if l.startswith("{")]
  return (result.returncode, json.loads(lines[-1]) if lines else None,
          result.stderr)


def _said(err):
  """The lines the runner wrote to stderr."""
  return [l for l in err.splitlines() if l.startswith("compat_distribute run:")]


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


def _assert_keras_2_said(err, evidence):
  """Exactly one line says tf.keras was changed, why and how to undo it."""
  if TWO_KERASES:
    assert _said(err) == [
        "compat_distribute run: tf.keras is Keras 2 (tf-keras) for this "
        f"program, not Keras 3, because it uses Estimator at {evidence}; run "
        "--keras 3 to keep Keras 3"], err
  else:
    assert _said(err) == [], err


def test_program_without_estimator_keeps_keras_3(tmp_path):
  code, report, err = _run(tmp_path, KERAS_ONLY + REPORT,
                           **{keras_choice.EXPLAIN_VARIABLE: "1"})
  assert code == 0, err
  _assert_keras(report, want_2=False)
  if TWO_KERASES:
    assert _said(err) == [
        f"compat_distribute run: tf.keras for {tmp_path}/program.py: "
        "unchanged: no use of Estimator found: Keras 3 (1 files read)"], err


# The programs of issue 43: Keras 3 programs that mention Estimator without
# using it on the running TensorFlow.
MENTIONS_ESTIMATOR = {
    "find_spec": """
        import importlib.util
        import tensorflow as tf
        HAS_ESTIMATOR = importlib.util.find_spec("tensorflow_estimator") is not None
        """,
    "string": """
        import tensorflow as tf
        EXPORTED_AS = "tensorflow.estimator.Estimator"
        """,
    "version_test": """
        import tensorflow as tf
        if tf.__version__ < "2.16":
          RunConfig = tf.estimator.RunConfig
        """,
}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=[] if name == "find_spec" else support.MORE)
    for name in sorted(MENTIONS_ESTIMATOR)])
def test_programs_that_only_mention_estimator_keep_keras_3(tmp_path, name):
  """Under the runner they print the Keras plain python gives them: Keras
  3, and the runner says nothing."""
  source = textwrap.dedent(MENTIONS_ESTIMATOR[name]) + KERAS_ONLY + REPORT
  reports = {}
  for runner in (True, False):
    code, reports[runner], err = _run(tmp_path, source, runner=runner)
    assert code == 0, err
    _assert_keras(reports[runner], want_2=False)
    assert _said(err) == [], err
  assert reports[True] == reports[False]


@needs_estimator
def test_layer_subclass_and_seed_before_estimator_get_keras_2(tmp_path):
  code, report, err = _run(tmp_path, LAYER_THEN_ESTIMATOR + REPORT)
  assert code == 0, err
  _assert_keras(report, want_2=True)
  _assert_keras_2_said(err, f"{tmp_path}/program.py:12: tf.estimator")


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
                           files=files)
  assert code == 0, err
  _assert_keras(report, want_2=True)
  _assert_keras_2_said(err, f"{tmp_path}/ctrlib/heads.py:4: tf1.estimator")


@pytest.mark.parametrize("how", ["flag", pytest.param("variable",
                                                      marks=support.MORE)])
@pytest.mark.parametrize("value", ["2", "3"])
def test_override_chooses_either_keras(tmp_path, value, how):
  """``run --keras 2`` (or ``COMPAT_DISTRIBUTE_KERAS=2``) gives a Keras-only
  program Keras 2, said in one line; ``3`` keeps Keras 3 for an Estimator
  program, which then meets the clear error of Estimator after Keras 3,
  naming ``--keras 2`` (nothing to choose with one Keras: the override
  changes nothing, and says so)."""
  if how == "flag":
    asked, override = dict(flags=("--keras", value)), {}
  else:
    asked, override = {}, {keras_choice.OVERRIDE_VARIABLE: value}
  words = f"--keras {value}" if how == "flag" else (
      f"{keras_choice.OVERRIDE_VARIABLE}={value}")
  if value == "2":
    code, report, err = _run(tmp_path, KERAS_ONLY + REPORT, **asked,
                             **override)
    assert code == 0, err
    _assert_keras(report, want_2=True)
    assert _said(err) == [
        "compat_distribute run: tf.keras is Keras 2 (tf-keras) for this "
        f"program, not Keras 3, because of {words}; run --keras 3 to keep "
        "Keras 3" if TWO_KERASES else
        f"compat_distribute run: {words} changes nothing here: tf.keras has "
        "one Keras only (TensorFlow before 2.16, or tf-keras not installed)"]
    return
  if not HAS_ESTIMATOR:
    pytest.skip("tensorflow-estimator is not installed")
  code, report, err = _run(tmp_path, LAYER_THEN_ESTIMATOR + REPORT, **asked,
                           **override)
  if TWO_KERASES:
    assert code == 1 and report is None
    assert "KerasAlreadyLoadedError: TensorFlow Estimator needs tf.keras" in err
    assert "python -m compat_distribute run --keras 2 PROGRAM" in err
    assert _said(err) == []
  else:
    assert code == 0, err
    _assert_keras(report, want_2=False)


def test_the_flag_wins_over_the_variable(tmp_path):
  code, report, err = _run(tmp_path, KERAS_ONLY + REPORT,
                           flags=("--keras", "3"),
                           **{keras_choice.OVERRIDE_VARIABLE: "2"})
  assert code == 0, err
  _assert_keras(report, want_2=False)
  assert _said(err) == ([] if TWO_KERASES else [
      "compat_distribute run: --keras 3 changes nothing here: tf.keras has "
      "one Keras only (TensorFlow before 2.16, or tf-keras not installed)"])


# A module run with -m: what it sees of how it was started.
WHERE = """
import json, os, sys
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__,
                  "spec": __spec__.name, "package": __package__,
                  "cwd": os.getcwd()}))
"""


def test_run_m_runs_a_module_as_python_m_does(tmp_path):
  files = {"app/__init__.py": "", "app/helpers.py": "SCALE = 2\n",
           "app/main.py": "from .helpers import SCALE\n" + WHERE.replace(
               "json.dumps({", "json.dumps({'scale': SCALE, ")}
  seen = {}
  for runner in (True, False):
    code, seen[runner], err = _run(tmp_path, "", runner=runner, files=files,
                                   module="app.main")
    assert code == 0, err
  assert seen[True] == seen[False] == {
      "scale": 2, "argv": [str(tmp_path / "app" / "main.py")],
      "path0": str(tmp_path), "name": "__main__", "spec": "app.main",
      "package": "app", "cwd": str(tmp_path)}


@support.MORE  # test_run_m_runs_a_module_as_python_m_does is the default's
def test_run_m_of_a_missing_module_fails_as_python_m_does(tmp_path):
  for module, words in (("no_such_app", "No module named no_such_app"),
                        ("app", "No module named app.__main__; 'app' is a "
                         "package and cannot be directly executed")):
    code, _, err = _run(tmp_path, "", files={"app/__init__.py": ""},
                        module=module)
    assert code == 1 and err.endswith(f"compat_distribute run: {words}\n"), err


@needs_estimator
def test_run_m_reads_the_modules_sources_for_estimator(tmp_path):
  """``run -m trainer.task ARGS``: the module's package is read too; its
  use of Estimator after tf.keras gives Keras 2, said in one line."""
  files = {"trainer/__init__.py": "",
           "trainer/model.py": LAYER_THEN_ESTIMATOR,
           "trainer/task.py": "import sys\nimport tensorflow as tf\n"
                              "from trainer import model\n" + REPORT}
  code, report, err = _run(tmp_path, "", files=files, module="trainer.task")
  assert code == 0, err
  _assert_keras(report, want_2=True)
  _assert_keras_2_said(err, "trainer/model.py:12: tf.estimator")


def test_max_restarts_gives_the_child_the_flag_and_the_module(monkeypatch):
  """Under ``--max-restarts`` each restart runs ``run --keras K -m MODULE``
  again, so it chooses as the first run did."""
  runner = importlib.import_module("compat_distribute.__main__")
  seen = []
  monkeypatch.setattr(runner.supervisor, "supervise",
                      lambda script, args, plan, command: seen.append(
                          command) or 0)
  assert runner.main(["run", "--max-restarts", "1", "--keras", "2", "-m",
                      "trainer.task", "--epochs", "3"]) == 0
  assert seen == [[sys.executable, "-m", "compat_distribute", "run",
                   "--keras", "2", "-m", "trainer.task", "--epochs", "3"]]


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


def test_script_that_sets_legacy_keras_itself_gets_keras_2(tmp_path):
  """TensorFlow's recipe for Keras 2 on 2.16+: the script sets
  TF_USE_LEGACY_KERAS before its ``import tensorflow``.  Under the runner
  TensorFlow is imported first, so the runner sets it in advance; the
  script's ``from tensorflow.keras import layers`` is then Keras 2 as
  under plain python."""
  source = (
      "import os\n"
      "os.environ['TF_USE_LEGACY_KERAS'] = '1'\n"
      "import tensorflow as tf\n"
      "from tensorflow.keras import layers\n"
      "assert layers.Dense.__module__.split('.')[0] == (\n"
      "    tf.keras.layers.Layer.__module__.split('.')[0])\n"
      + KERAS_ONLY + REPORT)
  for runner in (False, True):
    code, report, err = _run(tmp_path, source, runner=runner)
    assert code == 0, err
    assert report["legacy"] == "1", report  # the script's own setting
    assert report["version"].startswith("2."), report
    if TWO_KERASES:
      assert report["keras"] == "tf_keras", report


ESTIMATOR_PAGE = (support.ROOT / "docs" / "estimator.md").read_text()
PAGE_EXAMPLE = re.search(
    r"```python\n(# keras_check\.py\n.*?)```.*?```sh\n(.*?)```.*?"
    r"```text\n(.*?)```", ESTIMATOR_PAGE, re.S)


@needs_two_kerases
def test_the_estimator_pages_keras_commands_print_what_it_shows(tmp_path):
  """docs/estimator.md's keras_check.py and its three commands, taken from
  the page and run as printed there (``python`` is this interpreter)."""
  assert PAGE_EXAMPLE, "docs/estimator.md: keras_check.py, its commands and output"
  program, commands, shown = PAGE_EXAMPLE.groups()
  (tmp_path / "keras_check.py").write_text(program)
  env = _env()
  env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]
  printed = []
  for command in commands.strip().splitlines():
    result = subprocess.run(command, shell=True, cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, (command, result.stderr[-3000:])
    printed += _said(result.stderr) + result.stdout.splitlines()
  assert printed == shown.strip().splitlines()


def test_run_help_and_the_readme_name_the_flag_and_the_variable(capsys):
  runner = importlib.import_module("compat_distribute.__main__")
  assert runner.main(["run", "--help"]) == 0
  usage = " ".join(capsys.readouterr().out.split())
  for text in ("run --keras 2|3|auto SCRIPT|-m MODULE", "-m MODULE",
               "--keras 2|3|auto which Keras tf.keras is",
               "or auto (the default)", "overrides COMPAT_DISTRIBUTE_KERAS"):
    assert text in usage, text
  readme = " ".join((support.ROOT / "README.md").read_text().split())
  for text in ("`run --keras 2`, `--keras 3` or `--keras auto` (the default)",
               "`COMPAT_DISTRIBUTE_KERAS`", "`run -m package.module ...`"):
    assert text in readme, text
