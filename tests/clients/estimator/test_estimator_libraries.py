"""Published libraries built on Estimator run as they ran on TensorFlow 2.15.

Each library is installed at its last release (``tox -e estimator-libs``
installs them here and in the oracle; docs/estimator.md, "Libraries built
on Estimator", says which and why).  Two kinds of check, each run under
``python -m compat_distribute run`` on the TensorFlow under test and,
at the same time, natively on TensorFlow 2.15 (the oracle,
tests/support/estimator.py):

* tests/fixtures/estimator_libraries.py uses each library's estimator as
  its documentation shows, seeded through ``RunConfig(tf_random_seed=...)``,
  with no strategy and with TensorFlow's v1 ``OneDeviceStrategy`` and
  ``CentralStorageStrategy`` in ``RunConfig(train_distribute=...)``: the
  evaluation metrics and predictions agree (rtol 1e-5);
* the library's own tests, where its release ships them (TensorFlow
  Privacy's estimator tests), read from each side's installed package and
  run as their own scripts: the same tests run and pass.

A library missing on either side skips its tests, naming the command that
installs it.
"""
import functools
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from support import estimator as estimator_support

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow_estimator") is None,
        reason="tensorflow-estimator is not installed (tox -e estimator-libs "
        "installs it with the libraries)"),
    pytest.mark.subprocess, pytest.mark.slow, pytest.mark.parity]

# Case of the fixture -> the package it uses.
LIBRARIES = {"deepctr": "deepctr", "privacy": "tensorflow_privacy",
             "privacy_v1": "tensorflow_privacy",
             "ranking": "tensorflow_ranking"}
STRATEGIES = ("none", "one_device", "central_storage")
OWN_TESTS_TIMEOUT = 900.0
INSTALL = ("tox -e estimator-libs installs the libraries in both "
           "(tools/estimator_oracle.py --libraries makes such an oracle)")


@functools.lru_cache(maxsize=None)
def _oracle_package_folder(oracle, package):
  """Where ``package`` is installed for the oracle, or None."""
  found = subprocess.run(
      [oracle, "-c", "import importlib.util, sys\n"
       f"spec = importlib.util.find_spec({package!r})\n"
       "print(spec.submodule_search_locations[0] if spec else '')"],
      capture_output=True, text=True, check=True,
      env=estimator_support.environment())
  return found.stdout.strip() or None


def _package_folder(package):
  spec = importlib.util.find_spec(package)
  return spec.submodule_search_locations[0] if spec else None


def _both_folders(package):
  """(ours, native) folders of ``package``, or skip saying what is missing."""
  ours = _package_folder(package)
  if ours is None:
    pytest.skip(f"{package} is not installed for {sys.executable}; "
                f"{INSTALL}")
  oracle = estimator_support.oracle_python()
  native = _oracle_package_folder(oracle, package)
  if native is None:
    pytest.skip(f"{package} is not installed in the oracle {oracle}; "
                f"{INSTALL}")
  return ours, native


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("library", sorted(LIBRARIES))
def test_documented_use_gives_native_numbers(library, strategy, tmp_path):
  _both_folders(LIBRARIES[library])
  ours, native = estimator_support.run_both(
      "estimator_libraries.py", [library, strategy, "{dir}"], tmp_path)
  assert native["global_step"] == 12
  assert native["eval"]["loss"] > 0 and len(native["predictions"]) == 8
  estimator_support.assert_close(ours, native)


def _own_tests(package, under):
  folder = _package_folder(package)
  if folder is None:
    return [pytest.param(None, marks=pytest.mark.skip(
        reason=f"{package} is not installed; {INSTALL}"))]
  root = os.path.join(folder, under)
  return sorted(os.path.relpath(os.path.join(path, name), folder)
                for path, _, names in os.walk(root) for name in names
                if name.endswith("_test.py"))


def _run_script(argv, who, timeout):
  process = estimator_support.start(argv, cwd=estimator_support.ROOT,
                                    env=estimator_support.environment())
  _, err = estimator_support.communicate(process, who, timeout)
  ran = re.findall(r"^Ran (\d+) tests? in", err, re.MULTILINE)
  return process.returncode, (int(ran[-1]) if ran else None), err


@pytest.mark.parametrize(
    "test_file", _own_tests("tensorflow_privacy", "privacy/estimators"))
def test_privacy_own_estimator_tests(test_file):
  ours_folder, native_folder = _both_folders("tensorflow_privacy")
  oracle = estimator_support.oracle_python()
  native = _run_script([oracle, os.path.join(native_folder, test_file)],
                       f"native {test_file}", OWN_TESTS_TIMEOUT)
  assert native[0] == 0 and native[1], (
      f"native {test_file} failed:\n{native[2][-4000:]}")
  ours = _run_script([sys.executable, "-m", "compat_distribute", "run",
                      os.path.join(ours_folder, test_file)],
                     f"ours {test_file}", OWN_TESTS_TIMEOUT)
  assert ours[:2] == native[:2], (
      f"ours {test_file}: exit {ours[0]}, {ours[1]} tests; native: "
      f"{native[1]} tests passed\n{ours[2][-6000:]}")
