"""The suite leaves nothing in the system temp folder.

The test process ends with ``os._exit`` (tests/conftest.py), which skips
the clean-up TensorFlow does at exit (a run of ``tox`` used to leave about
a thousand ``__autograph_generated_file*.py`` in /tmp).  The conftest points
TMPDIR at a folder of the run's own and removes it at the end.  Here a small
session of its own (``fixtures/temp_files_session.py``: autograph files, a
subprocess, ``tmp_path``) runs with that conftest, in a subprocess whose
TMPDIR is an empty folder standing for the system temp folder: the folder is
empty again when the session has ended.
"""
import os
import subprocess
import sys
import tempfile

import pytest

import support

TESTS = support.TESTS
SESSION = TESTS / "fixtures" / "temp_files_session.py"


def test_the_suite_runs_in_a_temp_folder_of_its_own():
  run_dir = tempfile.gettempdir()
  assert os.path.basename(run_dir).startswith("compat_distribute-tests-")
  assert os.environ["TMPDIR"] == run_dir


@pytest.mark.subprocess
def test_a_session_leaves_nothing_in_the_system_temp_folder(tmp_path):
  system_temp = tmp_path / "system_temp"
  system_temp.mkdir()
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  for name in ("TMPDIR", "TEMP", "TMP"):
    env[name] = str(system_temp)
  result = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
       str(SESSION)], cwd=TESTS, env=env, capture_output=True, text=True,
      timeout=600)
  assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
  assert "2 passed" in result.stdout, result.stdout[-4000:]
  assert sorted(os.listdir(system_temp)) == []
