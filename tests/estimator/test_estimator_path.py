"""TensorFlow 2.15's ``tensorflow.python.estimator`` path on TensorFlow 2.16+:
supplied by ``install()`` (and so by ``python -m compat_distribute run``),
module for module and name for name as TensorFlow 2.15 gave it, withdrawn by
``uninstall()``, and missing without ``install()`` as on native 2.16+.

The modules and names compared with come from the oracle at test time
(TensorFlow 2.15.1 with Estimator 2.15.0, ``$ESTIMATOR_ORACLE_PYTHON``):
tests/fixtures/estimator_path.py lists the package's files there and
imports each module, and runs a library-style program that imports ``_Head``
and ``get_optimizer_instance`` by that path and trains two estimators from
zeros (so the numbers are TensorFlow 2.15's, rtol 1e-5).

On TensorFlow 2.12 to 2.15 TensorFlow has the path itself: nothing is
registered, checked here, and the rest skips.
"""
import importlib.util
import os
import sys

import pytest

import compat_distribute
from compat_distribute import _tf_private
from compat_distribute import estimator
from compat_distribute.estimator import legacy_path
from support import estimator as estimator_support

ROOT = _tf_private.ESTIMATOR_PATH
NATIVE_PATH = _tf_private.has_estimator_path()
HAS_ESTIMATOR = importlib.util.find_spec("tensorflow_estimator") is not None
SCRIPT = "estimator_path.py"

supplied_only = pytest.mark.skipif(
    NATIVE_PATH, reason="TensorFlow 2.12-2.15 ship tensorflow.python."
    "estimator themselves; compat_distribute supplies it on 2.16+ only")
needs_estimator = pytest.mark.skipif(
    not HAS_ESTIMATOR, reason="tensorflow-estimator is not installed (pip "
    "install tensorflow-estimator==2.15.0; tox -e tf221 installs it)")


def _supplied():
  return sys.modules["compat_distribute.install"]._supplied  # pylint: disable=protected-access


@pytest.mark.skipif(not NATIVE_PATH, reason="TensorFlow 2.16+ lacks the "
                    "path; the tests below check what is supplied there")
def test_tensorflows_own_path_is_left_alone():
  with compat_distribute.install():
    assert _supplied().path_finder is None
    assert not any(isinstance(f, legacy_path.EstimatorPathFinder)
                   for f in sys.meta_path)
    package = importlib.import_module(ROOT)
    assert package.__file__.endswith("__init__.py")  # TensorFlow's file


@supplied_only
def test_without_install_the_path_is_missing_as_on_native_2_16():
  assert importlib.util.find_spec(ROOT) is None
  with pytest.raises(ModuleNotFoundError, match=ROOT):
    importlib.import_module(ROOT + ".canned.head")


@supplied_only
def test_install_supplies_the_packages_lazily_and_uninstall_withdraws():
  python = _tf_private.python_package()
  with compat_distribute.install():
    supplied = _supplied()
    assert f"modules {ROOT}.*" in supplied.names()
    # A package holds only submodules: importing one loads no Estimator
    # module (the test process's imports are unchanged otherwise).
    loaded = set(sys.modules)
    package = importlib.import_module(ROOT + ".inputs.queues")
    assert package.__path__ == [] and python.estimator.inputs.queues is package
    assert set(sys.modules) - loaded == {
        ROOT, ROOT + ".inputs", ROOT + ".inputs.queues"}
    assert importlib.util.find_spec(ROOT + ".canned.head") is not None
    assert importlib.util.find_spec(ROOT + ".canned.nothing") is None
  assert supplied.path_finder is None
  assert not {n for n in sys.modules if n.startswith(ROOT)}
  assert not hasattr(python, "estimator")
  assert importlib.util.find_spec(ROOT) is None


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """(ours under the runner, native 2.15, ours with install()/uninstall())."""
  tmp_path = tmp_path_factory.mktemp("estimator_path")
  withdraw = estimator_support.start(
      [sys.executable, os.path.join(estimator_support.FIXTURES, SCRIPT),
       "--install", "withdraw"], cwd=estimator_support.ROOT,
      # This checkout's package, as ``python -m`` from ROOT gives the runner.
      env=estimator_support.environment({"PYTHONPATH": estimator_support.ROOT}))
  try:
    ours, native = estimator_support.run_both(
        SCRIPT, ["modules", "train", "{dir}"], tmp_path)
    return ours, native, estimator_support.finish(withdraw, "withdraw")
  finally:
    if withdraw.poll() is None:
      withdraw.kill()
      withdraw.communicate()


@pytest.mark.subprocess
@supplied_only
@needs_estimator
def test_every_module_of_2_15_imports_with_its_names(runs):
  ours, native, _ = runs
  modules = native["modules"]
  # What TensorFlow 2.15 ships (read from its files), at least these.
  assert {"", "canned", "canned.head", "canned.optimizers", "estimator_lib",
          "export.export_lib", "inputs.queues.feeding_functions", "keras",
          "training"} <= set(modules)
  assert sorted(ours["modules"]) == sorted(modules)
  for name, native_entry in modules.items():
    assert ours["modules"][name] == native_entry, name
  # Each module with names holds Estimator's very objects, natively and here.
  for name, entry in ours["modules"].items():
    if entry["source"] is not None:
      assert entry["same_objects"], name
  head = ours["modules"]["canned.head"]
  assert {"_Head", "_binary_logistic_head_with_sigmoid_cross_entropy_loss",
          "_HAS_DYNAMIC_ATTRIBUTES", "head"} <= set(head["names"])
  assert "get_optimizer_instance" in ours["modules"]["canned.optimizers"][
      "names"]
  assert ours["modules"]["keras"]["source"].endswith(".keras_lib")


@pytest.mark.subprocess
@supplied_only
@needs_estimator
def test_library_program_under_the_runner_ends_as_on_2_15(runs):
  ours, native, _ = runs
  assert native["train"]["custom"]["eval"]["global_step"] == 4.0
  assert native["train"]["canned"]["eval"]["global_step"] == 4.0
  # Trained: the weights moved from zeros.
  assert all(w != 0.0 for w in native["train"]["custom"]["w"])
  estimator_support.assert_close(ours["train"], native["train"])


@pytest.mark.subprocess
@supplied_only
@needs_estimator
def test_uninstall_withdraws_every_module_it_loaded(runs):
  withdrawn = runs[2]["withdraw"]
  assert withdrawn["lazy"] is True  # packages imported, no Estimator yet
  assert {ROOT, ROOT + ".canned", ROOT + ".canned.head",
          ROOT + ".export"} <= set(withdrawn["during"])
  assert withdrawn["finder_during"] is True
  assert withdrawn["left"] == []
  assert withdrawn["attribute_left"] is False
  assert withdrawn["finder_left"] is False
  assert ROOT in withdrawn["import_after"]


def test_supply_registers_the_finder_only_where_tensorflow_lacks_the_path():
  supplied = estimator.supply()
  try:
    assert (supplied.path_finder is None) == NATIVE_PATH
    if not NATIVE_PATH:
      assert sys.meta_path.count(supplied.path_finder) == 1
      assert supplied.path_finder.root == ROOT
  finally:
    estimator.withdraw(supplied)
  assert not any(isinstance(f, legacy_path.EstimatorPathFinder)
                 for f in sys.meta_path)
