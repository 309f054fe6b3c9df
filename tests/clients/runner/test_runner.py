"""``python -m compat_distribute run script.py [args...]`` behaves like
``python script.py [args...]``, with TensorFlow's strategy names swapped.

Each behaviour is checked against plain ``python`` running the same fixture
(``fixtures/runner_probe.py``), so the reference is Python itself.
"""
import importlib
import json
import os
import re
import subprocess
import sys

import pytest
import support

FIXTURES = support.FIXTURES
PROBE = FIXTURES / "runner_probe.py"
# Subprocesses run from tests/, not the repository root: `python -m` puts the
# current directory first on sys.path, and the source directory
# compat_distribute/ there (without the v1/ and v2/ facades, which setup.py
# maps in) would shadow the installed package.
CWD = support.TESTS
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONHASHSEED": "0"}
runner = importlib.import_module("compat_distribute.__main__")
install_lib = importlib.import_module("compat_distribute.install")


# TensorFlow's C++ start-up lines, printed when it is imported whatever
# TF_CPP_MIN_LOG_LEVEL says; the runner imports TensorFlow, plain python
# running a script that does not import it prints none.
_TF_LOG_LINE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\).*|"
    r"[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] .*)\n", re.M)


def python(*args, cwd=CWD):
  result = subprocess.run([sys.executable, *map(str, args)], cwd=cwd,
                          env=ENV, capture_output=True, text=True,
                          timeout=300)
  result.stderr = _TF_LOG_LINE.sub("", result.stderr)
  return result


def shim(*args, cwd=CWD):
  return python("-m", "compat_distribute", "run", *args, cwd=cwd)


@pytest.mark.subprocess
def test_argv_name_path_and_strategy_classes_like_python():
  relative = os.path.relpath(PROBE, CWD)
  args = ["tf", "--flag", "two words", "-x"]
  native, ours = python(relative, *args), shim(relative, *args)
  assert native.returncode == ours.returncode == 0, (native.stderr,
                                                     ours.stderr)
  native_report = json.loads(native.stdout)
  ours_report = json.loads(ours.stdout)
  assert ours_report["argv"] == [relative, *args]
  assert ours_report["name"] == "__main__"
  assert ours_report["path0"] == str(FIXTURES)
  assert ours_report["pickled_class_module"] == "__main__"
  native_tf, ours_tf = native_report.pop("tf"), ours_report.pop("tf")
  assert ours_report == native_report

  for name, module in ours_tf["modules"].items():
    assert module.startswith("compat_distribute."), (name, module)
  for name, module in native_tf["modules"].items():
    assert module.startswith("tensorflow."), (name, module)
  assert ours_tf["is_strategy"] and native_tf["is_strategy"]
  assert ours_tf["doubled"] == native_tf["doubled"] == 6.0
  assert ours_tf["central_replicas"] == native_tf["central_replicas"]


@pytest.mark.subprocess
def test_script_exception_shows_the_scripts_traceback_and_exits_1():
  native, ours = python(PROBE, "raise"), shim(PROBE, "raise")
  assert native.returncode == ours.returncode == 1
  assert native.stdout == ours.stdout == ""
  # Python's traceback of the script, with nothing of the runner above it.
  assert ours.stderr == native.stderr
  assert ours.stderr.startswith("Traceback (most recent call last):\n"
                                f'  File "{PROBE}"')
  assert "runpy" not in ours.stderr
  assert "compat_distribute" not in ours.stderr
  assert ours.stderr.rstrip().endswith(
      "ValueError: probe failed on purpose")


@pytest.mark.parametrize("args,code", [
    (("exit", "3"), 3),
    (("exit", "0"), 0),
    (("exit_none",), 0),
    (("exit_message", "stopped early"), 1),
    (("report",), 0),
])
def test_exit_codes_in_process(capfd, args, code):
  """sys.exit inside the script propagates as under ``python``; a normal
  finish returns 0."""
  try:
    result = runner.run_script(str(PROBE), list(args))
  except SystemExit as e:
    result = e.code
  normalized = (0 if result is None else
                result if isinstance(result, int) else 1)
  assert normalized == code
  if args[0] == "exit_message":
    assert result == "stopped early"


@pytest.mark.subprocess
@pytest.mark.parametrize("args,code,stderr", [
    (("exit", "7"), 7, ""),
    (("exit_message", "stopped early"), 1, "stopped early\n"),
])
def test_exit_codes_in_subprocess(args, code, stderr):
  native, ours = python(PROBE, *args), shim(PROBE, *args)
  assert native.returncode == ours.returncode == code
  assert native.stderr == ours.stderr == stderr


def test_run_script_restores_argv_and_path_and_uninstalls(capsys):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  original = tf.distribute.OneDeviceStrategy
  argv, path0 = list(sys.argv), sys.path[0]
  assert runner.run_script(str(PROBE), ["report", "a"]) == 0
  report = json.loads(capsys.readouterr().out)
  assert report["argv"] == [str(PROBE), "report", "a"]
  assert report["path0"] == str(FIXTURES)
  assert report["name"] == "__main__"
  assert sys.argv == argv and sys.path[0] == path0
  assert tf.distribute.OneDeviceStrategy is original
  assert not install_lib.is_installed()


def test_run_script_in_process_exception_returns_1(capsys):
  assert runner.run_script(str(PROBE), ["raise"]) == 1
  err = capsys.readouterr().err
  assert err.startswith(
      f'Traceback (most recent call last):\n  File "{PROBE}"')
  assert "runpy" not in err and "__main__.py" not in err
  assert "ValueError: probe failed on purpose" in err


# -- bad input ----------------------------------------------------------------


@pytest.mark.subprocess
def test_missing_script_is_a_clear_error_with_exit_code_2(tmp_path):
  missing = tmp_path / "no_such_script.py"
  result = shim(missing)
  assert result.returncode == 2
  assert result.stdout == ""
  assert str(missing) in result.stderr
  assert "No such file or directory" in result.stderr
  assert "Traceback" not in result.stderr


def test_missing_script_in_process(capsys):
  assert runner.run_script("/nonexistent/dir/script.py") == 2
  assert "can't open file '/nonexistent/dir/script.py'" in (
      capsys.readouterr().err)


@pytest.mark.parametrize("argv,code,expected", [
    ([], 2, "python -m compat_distribute: error: a command is required: "
     "run, serve or demo"),
    (["run"], 2, "python -m compat_distribute: error: run needs the SCRIPT "
     "to run"),
    (["--help"], 0, "usage: python -m compat_distribute run SCRIPT"),
    (["run", "--help"], 0, "usage: python -m compat_distribute run SCRIPT"),
    (["frobnicate"], 2, "python -m compat_distribute: error: unknown command "
     "'frobnicate' (choose from 'run', 'serve', 'demo')"),
])
def test_command_line_usage(capsys, argv, code, expected):
  """A usage error: the short usage, then one message, status 2 (as
  argparse); --help: the usage and what each command does, plain text."""
  assert runner.main(argv) == code
  out = capsys.readouterr()
  if code == 0:
    assert out.err == ""
    assert out.out.startswith(runner.SHORT_USAGE)
    assert expected in out.out
    assert "demo --cluster 2x1" in out.out and "demo --help" in out.out
    assert "``" not in out.out and "`" not in out.out
  else:
    assert out.out == ""
    assert out.err == f"{runner.SHORT_USAGE}{expected}\n"


@pytest.mark.subprocess
def test_usage_error_in_a_subprocess_exits_2():
  result = python("-m", "compat_distribute", "frobnicate")
  assert result.returncode == 2
  assert result.stderr.startswith("usage: python -m compat_distribute run")
  assert result.stderr.endswith("error: unknown command 'frobnicate' (choose "
                                "from 'run', 'serve', 'demo')\n")
  assert "``" not in result.stderr
