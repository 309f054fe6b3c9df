"""Keras models turned into Estimators, and Keras in TF1 graphs, end where
they end on native TensorFlow (issue 42).

tests/fixtures/keras_estimator_programs.py runs under ``python -m
compat_distribute run`` and natively, at the same time (its Estimator
cases in one pair of processes for the module, graph-mode Keras in
another); each test compares one case's every per-step loss, evaluation
metric, prediction, served output and checkpoint value (rtol 1e-5) and,
where the native program raised, checks that ours raised the same class.
Natively is TensorFlow 2.15 with Estimator 2.15 (the oracle,
support/estimator.py) on TensorFlow 2.16+, and this environment's own
TensorFlow, with the Estimator it bundles, on 2.12-2.15.

With ``COMPAT_DISTRIBUTE_PARITY_RESULTS`` naming a folder, each test
writes there one small JSON file, a list of ``{"case", "strategy", "tf",
"native_tf", "outcome"}`` (outcome ``equal`` or ``raises as native``),
for the parity table.
"""
import json
import os

import pytest

from support import estimator as estimator_support

pytestmark = [
    estimator_support.needs_estimator,
    pytest.mark.parity, pytest.mark.subprocess]

SCRIPT = "keras_estimator_programs.py"
RESULTS_VARIABLE = "COMPAT_DISTRIBUTE_PARITY_RESULTS"
ESTIMATOR_CASES = "strategies,losses,optimizers"


def _minor(version):
  """``2.21.0`` -> ``2.21``: the parity table's columns are TF minors."""
  return ".".join(version.split(".")[:2])


def run_cases(cases, tmp_path):
  """(ours, native): what the fixture printed for ``cases`` each way."""
  return estimator_support.run_both(
      SCRIPT, [cases, "{dir}"], tmp_path,
      native=estimator_support.native_estimator_python())


@pytest.fixture(scope="module")
def estimator_runs(tmp_path_factory):
  """The Estimator cases, run once for the module's tests."""
  return run_cases(ESTIMATOR_CASES, tmp_path_factory.mktemp("keras_est"))


def compare(case, runs):
  """Asserts that ours equals native in ``case`` of ``runs`` (ours,
  native), variant by variant, and writes its parity rows; returns (ours,
  native) results of the case."""
  ours, native = (run["cases"][case] for run in runs)
  assert sorted(ours) == sorted(native)
  rows = []
  for key, expected in native.items():
    got = ours[key]
    if "raises" in expected:
      # Ours may raise a subclass (compat_distribute.Error beside it).
      assert "raises" in got, f"{key}: native raised {expected['raises'][0]}"
      assert expected["raises"][0] in got["raises"], (
          f"{key}: ours raised {got['raises'][0]}, native "
          f"{expected['raises'][0]}")
    else:
      estimator_support.assert_close(got, expected, key, skip=("strategy",))
    variant, strategy = key.split(" / ")
    rows.append({"case": f"keras_estimator {case}: {variant}",
                 "strategy": strategy, "tf": _minor(runs[0]["tf"]),
                 "native_tf": runs[1]["tf"],
                 "outcome": "raises as native" if "raises" in expected
                 else "equal"})
  folder = os.environ.get(RESULTS_VARIABLE)
  if folder:
    os.makedirs(folder, exist_ok=True)
    name = f"keras_estimator-{case}-{_minor(runs[0]['tf'])}.json"
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=1)
  return ours, native


def test_issue_42_model_under_every_strategy_trains_exports_and_serves(
    estimator_runs):
  ours, native = compare("strategies", estimator_runs)
  assert sorted(native) == sorted(
      f"sgd / {s}" for s in ("none", "OneDevice v2", "OneDevice v1",
                             "CentralStorage v2", "CentralStorage v1"))
  for key, result in native.items():
    assert ours[key]["strategy"] == (
        "builtins" if key == "sgd / none" else "compat_distribute"), key
    assert len(result["losses"]) == 3, key
    # The SavedModel serves what predict gave for the same rows.
    assert result["served"] == pytest.approx(result["predict"][:4],
                                             rel=1e-6), key
  # Two replicas (each half the batch, losses averaged) train to other
  # weights than one device: the comparison is not blind to the strategy.
  assert (native["sgd / CentralStorage v1"]["losses"]
          != native["sgd / none"]["losses"])
  assert ours["sgd / CentralStorage v1"]["losses"] == pytest.approx(
      native["sgd / CentralStorage v1"]["losses"], rel=1e-5)


def test_loss_reductions_sample_weights_regularisers_and_metrics(
    estimator_runs):
  ours, native = compare("losses", estimator_runs)
  assert "auc" in native["sum_over_batch_size metrics / CentralStorage v1"][
      "eval"]
  # Each case trained three steps, or raised natively where TensorFlow
  # does: a per-example loss (reduction "none") Estimator cannot log, a
  # symbolic add_loss Keras cannot clone into the Estimator's graph.
  assert sorted(k for k, v in native.items() if "raises" in v) == [
      "none weighted / CentralStorage v2",
      "symbolic add_loss / CentralStorage v2"]
  assert all(len(v["losses"]) == 3 for v in native.values()
             if "raises" not in v)
  assert all(v.get("strategy", "compat_distribute") == "compat_distribute"
             for v in ours.values())


def test_each_optimizer_family_model_to_estimator_converts(estimator_runs):
  ours, native = compare("optimizers", estimator_runs)
  assert len(native) == 6 and not any("raises" in v for v in native.values())
  # The slots are in the compared checkpoints (Adam's m and v).
  assert any(name.endswith("/m/.ATTRIBUTES/VARIABLE_VALUE")
             for name in native["Adam / CentralStorage v1"]["checkpoint"])
  assert all(v["strategy"] == "compat_distribute" for v in ours.values())


def test_keras_in_v1_graphs_in_the_v1_strategies_scopes(tmp_path):
  ours, native = compare("graph", run_cases("graph", tmp_path))
  assert sorted(native) == sorted(
      f"{form} / {strategy}"
      for form in ("fit", "fit layer add_loss", "total_loss session",
                   "replica session")
      for strategy in ("none", "OneDevice v1", "CentralStorage v1"))
  # Natively, Keras' v1 loops take no target_tensors under a strategy, and
  # a layer's add_loss of its input does not reach its per-replica clones
  # (a placeholder left unfed); with no strategy both run.
  assert sorted(k for k, v in native.items() if "raises" in v) == [
      f"{form} / {strategy}"
      for form in ("fit layer add_loss", "total_loss session")
      for strategy in ("CentralStorage v1", "OneDevice v1")]
  assert len(native["fit / CentralStorage v1"]["history"]["loss"]) == 2
  assert len(native["replica session / CentralStorage v1"]["losses"]) == 3
