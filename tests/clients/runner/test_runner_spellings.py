"""Every spelling of every name ``install()`` swaps gets our class.

TensorFlow's API holds one strategy class in many module objects (on 2.12-
2.14 ``tf.compat.v1.compat.v1.distribute`` and ``tf.compat.v1.distribute``
are different modules; from 2.15 the ``compat.v1`` modules are wrappers
around an inner module).  ``fixtures/spellings_probe.py`` walks every module
object reachable from ``tensorflow`` by attributes (loading each lazy
loader) and every ``tensorflow*`` entry of ``sys.modules``, in a fresh
process, and reports each module attribute that is TensorFlow's class or
ours.  The only modules allowed to keep TensorFlow's class while installed
are the ones that define it (``tensorflow.python.distribute.*``).  Last, a
TensorFlow 1 script of 2020 (``fixtures/tf1_2020_script.py``) runs under
``python -m compat_distribute run`` and trains as native TensorFlow does.
"""
import json
import os
import subprocess
import sys

import pytest
import support

pytestmark = [pytest.mark.parity, pytest.mark.subprocess]

TESTS = support.TESTS
PROBE = TESTS / "fixtures" / "spellings_probe.py"
KINDS = {"v2.OneDeviceStrategy", "v2.CentralStorageStrategy",
         "v1.OneDeviceStrategy", "v1.CentralStorageStrategy",
         "v1.ParameterServerStrategy"}
# The spellings of issue 20 (native on 2.12-2.14 before it was fixed).
ISSUE_SPELLINGS = [
    "tf.compat.v1.compat.v1.distribute.OneDeviceStrategy",
    "tf.compat.v1.compat.v2.distribute.OneDeviceStrategy",
    "tf.compat.v2.compat.v1.distribute.experimental.ParameterServerStrategy",
    "<import tensorflow.compat.v1>.compat.v1.distribute.OneDeviceStrategy",
    "<import tensorflow.compat.v1>.compat.v2.distribute.experimental."
    "CentralStorageStrategy",
    "<import tensorflow.compat.v1>.distribute.OneDeviceStrategy",
]


def run_python(*args):
  """Runs Python in a fresh process, from tests/ (so that the source
  directory does not shadow the installed package)."""
  return subprocess.run(
      [sys.executable, *map(str, args)], cwd=TESTS,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True,
      text=True, timeout=600)


def probe(*args):
  """The probe's report."""
  result = run_python(*args)
  assert result.returncode == 0, result.stderr[-4000:]
  return json.loads(result.stdout.splitlines()[-1])


def api_rows(rows):
  """Rows of modules other than the ones defining the class."""
  return [row for row in rows if not row[4]]


def check_installed(report):
  installed = report["installed"]
  native_left = [row for row in api_rows(installed) if row[2] != "ours"]
  assert not native_left, (
      f"TensorFlow {report['version']}: modules still holding TensorFlow's "
      f"class while installed: {native_left}")
  # Each of TensorFlow's classes is held by several API modules, and its
  # defining module keeps it.
  assert {row[3] for row in api_rows(installed)} == KINDS
  defining = [row for row in installed if row[4]]
  assert {row[3] for row in defining} == KINDS
  assert all(row[2] == "native" for row in defining), defining
  spellings = report["spellings"]
  assert len(spellings) >= 20, spellings
  assert {k: v for k, v in spellings.items() if v != "ours"} == {}
  for spelling in ISSUE_SPELLINGS:
    assert spellings.get(spelling) == "ours", (spelling, spellings)


def check_uninstalled(report):
  left = [row for row in report["uninstalled"] if row[2] != "native"]
  assert not left, f"still ours after uninstall(): {left}"


def test_every_module_holding_a_name_gets_ours_and_gets_it_back():
  report = probe(PROBE, "walk_first")
  before = report["before"]
  # Every API module that held TensorFlow's class before now holds ours.
  assert all(row[2] == "native" for row in before)
  assert len(api_rows(before)) >= 6  # tf.distribute{,.experimental} x 3 at least
  check_installed(report)
  assert ([row[:2] + row[3:] for row in report["installed"]]
          == [row[:2] + row[3:] for row in before])
  check_uninstalled(report)
  assert report["uninstalled"] == before


def test_modules_loaded_after_install_get_ours():
  """Lazy loaders loaded, import statements run and a module of the API
  loaded anew, all after install()."""
  report = probe(PROBE, "install_first")
  check_installed(report)
  assert all(module.startswith("compat_distribute.")
             for module in report["imported"]), report["imported"]
  assert report["fresh_installed"].startswith("compat_distribute.")
  # The rebinding loader hands the module back its own loader.
  assert report["fresh_loader_kept"] != "compat_distribute.install"
  check_uninstalled(report)
  assert report["fresh_uninstalled"].startswith("tensorflow.")


def test_runner_gives_ours_to_every_spelling():
  report = probe("-m", "compat_distribute", "run", PROBE, "runner")
  check_installed(report)
  # import tensorflow.compat.v1 as tf; tf.compat.v1.distribute....
  assert report["tf1_spelling"] == "ours"
  assert report["tf1_v2_spelling"] == "ours"
  assert report["has_experimental_run_v2"]


def test_tf1_script_of_2020_runs_under_the_runner_as_native_trains():
  """``import tensorflow.compat.v1 as tf``, then
  ``tf.compat.v1.distribute.OneDeviceStrategy`` and ``experimental_run_v2``:
  under the runner it gets our strategy and trains as native TensorFlow
  does when the script is changed to call ``run``."""
  script = TESTS / "fixtures" / "tf1_2020_script.py"
  ours = run_python("-m", "compat_distribute", "run", script)
  assert ours.returncode == 0, ours.stderr[-4000:]
  ours = json.loads(ours.stdout.splitlines()[-1])
  assert ours["strategy"].startswith("compat_distribute."), ours
  as_written = run_python(script)
  if as_written.returncode != 0:  # TensorFlow dropped experimental_run_v2
    assert "has no attribute 'experimental_run_v2'" in as_written.stderr, (
        as_written.stderr[-4000:])
    native = run_python(script, "--use-run")
    assert native.returncode == 0, native.stderr[-4000:]
  else:
    native = as_written
  native = json.loads(native.stdout.splitlines()[-1])
  assert native["strategy"].startswith("tensorflow."), native
  assert ours["losses"] == pytest.approx(native["losses"], rel=1e-6)
  assert ours["weights"] == pytest.approx(native["weights"], rel=1e-6)
  assert ours["losses"][-1] < ours["losses"][0] / 100
