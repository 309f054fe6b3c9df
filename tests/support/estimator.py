"""Running an Estimator program under ours and under the native oracle.

Estimator's last supported pairing is TensorFlow 2.15 with
``tensorflow-estimator`` 2.15.0.  Tests that compare with it run the same
fixture script twice, at the same time, in two processes:

* ours: ``python -m compat_distribute run SCRIPT ...`` with this
  interpreter (the TensorFlow under test, 2.16+ with Estimator installed);
* the oracle: ``$ESTIMATOR_ORACLE_PYTHON SCRIPT ...``, an interpreter with
  TensorFlow 2.15 and Estimator (tox's ``estimator-oracle`` environment;
  ``tox -e tf221`` sets the variable).  Without it those tests skip and say
  how to get one.

Both inherit the test run's TMPDIR; every process started is killed and
reaped before the helper returns.
"""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

needs_estimator = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow_estimator") is None,
    reason="tensorflow-estimator is not installed (pip install "
    "tensorflow-estimator==2.15.0; tox -e tf221 installs it)")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
ORACLE_VARIABLE = "ESTIMATOR_ORACLE_PYTHON"
TIMEOUT = 300.0


def oracle_python():
  """The oracle interpreter, or skip the test saying how to get one."""
  path = os.environ.get(ORACLE_VARIABLE)
  if not path:
    pytest.skip(f"{ORACLE_VARIABLE} is not set: point it at a Python with "
                "tensorflow-cpu==2.15.1 and tensorflow-estimator==2.15.0 "
                "(tox -e tf221 makes one, .tox/estimator-oracle)")
  if not os.path.exists(path):
    pytest.fail(f"{ORACLE_VARIABLE}={path!r} does not exist")
  return path


def native_estimator_python():
  """The interpreter that runs a program natively: this one where
  TensorFlow still bundles Estimator (2.12-2.15; ours then runs in the
  same environment, under the runner), else the oracle (or skip)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if tuple(int(p) for p in tf.__version__.split(".")[:2]) < (2, 16):
    return sys.executable
  return oracle_python()


def environment(extra=None):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("TF_USE_LEGACY_KERAS", None)  # as a new user's shell has it
  # The oracle must not import this checkout's package; ours runs it from
  # the checkout (python -m compat_distribute from ROOT).
  env.pop("PYTHONPATH", None)
  env.update(extra or {})
  return env


def start(argv, cwd, env):
  return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          text=True, start_new_session=True)


def communicate(process, who, timeout=TIMEOUT):
  """``(stdout, stderr)`` of ``process`` once it ended; kills it and fails
  the test if it did not end within ``timeout``."""
  try:
    return process.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    process.kill()
    process.communicate()
    pytest.fail(f"{who} did not end within {timeout:g} s")


def finish(process, who, timeout=TIMEOUT):
  """The JSON line ``process`` printed last; fails the test, with its
  stderr, if it failed or did not end within ``timeout``."""
  out, err = communicate(process, who, timeout)
  assert process.returncode == 0, (
      f"{who} failed (exit {process.returncode}):\n{err[-6000:]}")
  return json.loads(out.strip().splitlines()[-1])


def run_both(script, args, tmp_path, env=None, native=None):
  """(ours, native) results of ``script`` run with ``args`` (each in its
  own folder under ``tmp_path``); ``native``: the interpreter that runs it
  natively (default: the oracle)."""
  oracle = native or oracle_python()
  path = os.path.join(FIXTURES, script)
  processes = {}
  try:
    for who, argv in (
        ("native", [oracle, path]),
        ("ours", [sys.executable, "-m", "compat_distribute", "run", path])):
      folder = tmp_path / who
      folder.mkdir()
      processes[who] = start(argv + [a.format(dir=folder) for a in args],
                             cwd=ROOT if who == "ours" else str(folder),
                             env=environment(env))
    return tuple(finish(processes[who], f"{who} {script}")
                 for who in ("ours", "native"))
  finally:
    for process in processes.values():
      if process.poll() is None:
        process.kill()
        process.communicate()


def assert_close(ours, native, path="", rtol=1e-5, skip=()):
  """Every number of ``ours`` within ``rtol`` of ``native``, every other
  value equal, the same keys; ``skip`` names keys not compared."""
  if isinstance(native, dict):
    assert isinstance(ours, dict), f"{path}: {ours!r} is not a dict"
    keys = set(native) - set(skip)
    assert set(ours) - set(skip) == keys, (
        f"{path}: keys differ: ours {sorted(set(ours) - keys)}, native "
        f"{sorted(keys - set(ours))}")
    for key in sorted(keys):
      assert_close(ours[key], native[key], f"{path}/{key}", rtol, skip)
  elif isinstance(native, list):
    assert isinstance(ours, list) and len(ours) == len(native), (
        f"{path}: {ours!r} != {native!r}")
    for i, (a, b) in enumerate(zip(ours, native)):
      assert_close(a, b, f"{path}[{i}]", rtol, skip)
  elif isinstance(native, float) and not isinstance(ours, bool):
    assert ours == pytest.approx(native, rel=rtol, abs=1e-7), (
        f"{path}: ours {ours!r}, native {native!r}")
  else:
    assert ours == native, f"{path}: ours {ours!r}, native {native!r}"
