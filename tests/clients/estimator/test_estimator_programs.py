"""Unmodified Estimator programs end where they end on TensorFlow 2.15.

Each test runs one case of tests/fixtures/estimator_programs.py under
``python -m compat_distribute run`` on the TensorFlow under test and,
at the same time, natively on TensorFlow 2.15 with Estimator 2.15 (the
oracle, see estimator_support.py), and compares every per-step loss,
evaluation metric, prediction and checkpoint value (rtol 1e-5).

On TensorFlow 2.16+ this is Estimator running on the pieces
``compat_distribute.estimator`` supplies; on 2.12-2.15 (Estimator bundled)
it is Estimator on TensorFlow's own pieces with our strategies.
"""
import os
import re
import shlex
import sys

import pytest

import support
from support import estimator as estimator_support

pytestmark = [estimator_support.needs_estimator, pytest.mark.subprocess]


def test_custom_model_fn_train_resume_evaluate_predict_export_warm_start(
    tmp_path):
  ours, native = estimator_support.run_both(
      "estimator_programs.py", ["custom", "{dir}"], tmp_path)
  assert native["global_step"] == 6 and len(native["losses"]) == 6
  assert sorted(native["checkpoint"]) == [
      "b", "b/Adagrad", "global_step", "w", "w/Adagrad"]
  # The served SavedModel computes what predict gave for the same rows.
  assert native["served"] == pytest.approx(native["predict"][:4], rel=1e-6)
  # Warm start took w (not b) from the first model.
  assert native["warm_checkpoint"]["w"] != native["checkpoint"]["w"]
  estimator_support.assert_close(ours, native, skip=("tf_keras",))
  # tf.keras was Keras 2 in both: tf-keras under ours, Keras 2.15 natively.
  assert (ours["tf_keras"], native["tf_keras"]) in (("tf_keras", "keras"),
                                                    ("keras", "keras"))


# Canned estimators under strategies stay in the default run
# (test_estimator_canned.py); these, without one, in tox -e more.
@support.MORE
def test_canned_estimators_with_feature_columns(tmp_path):
  ours, native = estimator_support.run_both(
      "estimator_programs.py", ["canned", "{dir}"], tmp_path)
  assert sorted(native) == sorted([
      "DNNClassifier", "DNNRegressor", "LinearClassifier",
      "LinearRegressor", "DNNLinearCombinedClassifier", "tf_keras"])
  for name in ("DNNClassifier", "LinearRegressor"):
    assert len(native[name]["losses"]) == 4
    assert native[name]["eval"]["global_step"] == 4.0
  assert "accuracy" in native["DNNClassifier"]["eval"]
  estimator_support.assert_close(ours, native, skip=("tf_keras",))


def test_run_config_strategies_by_v1_and_v2_names(tmp_path):
  """RunConfig(train_distribute=..., eval_distribute=...) with OneDevice
  and CentralStorage (two logical CPUs), TensorFlow's names resolving to
  ours under the runner."""
  ours, native = estimator_support.run_both(
      "estimator_programs.py", ["strategies", "{dir}"], tmp_path)
  for name, result in native.items():
    if name == "tf_keras":
      continue
    assert result["strategy"] == "tensorflow"
    assert ours[name]["strategy"] == "compat_distribute", name
    assert result["replicas"] == (2 if "CentralStorage" in name else 1)
    assert len(result["losses"]) == len(result["dnn_losses"]) == 4
  estimator_support.assert_close(ours, native, skip=("tf_keras", "strategy"))


def _page():
  return open(os.path.join(estimator_support.ROOT, "docs", "estimator.md"),
              encoding="utf-8").read()


def _page_example():
  """The ``# train.py`` example of docs/estimator.md."""
  blocks = re.findall(r"```python\n(# train\.py\n.*?)```", _page(), re.DOTALL)
  assert len(blocks) == 1, "docs/estimator.md has one # train.py example"
  return blocks[0]


def _page_command():
  """The command of docs/estimator.md's "Run" section, as printed there."""
  run = re.search(r"^## Run\n(.*?)^## ", _page(), re.M | re.S).group(1)
  commands = re.findall(r"```sh\n(.*?)```", run, re.S)
  assert len(commands) == 1 and commands[0].count("\n") == 1, commands
  return shlex.split(commands[0])


def test_docs_page_example_prints_what_native_tensorflow_2_15_prints(
    tmp_path):
  script = tmp_path / "train.py"
  script.write_text(_page_example())
  command = _page_command()
  assert command[0] == "python" and "train.py" in command, command
  oracle = estimator_support.oracle_python()
  processes = {
      # As the page says: in the folder of train.py (this checkout's package).
      "ours": estimator_support.start(
          [sys.executable, *command[1:]], str(tmp_path),
          estimator_support.environment(
              {"PYTHONPATH": str(estimator_support.ROOT)})),
      "native": estimator_support.start([oracle, str(script)],
                                        str(tmp_path),
                                        estimator_support.environment())}
  outputs = {}
  try:
    for who, process in processes.items():
      out, err = process.communicate(timeout=estimator_support.TIMEOUT)
      assert process.returncode == 0, f"{who}: {err[-4000:]}"
      outputs[who] = [line for line in out.splitlines()
                      if line.startswith(("w =", "loss ="))]
  finally:
    for process in processes.values():
      if process.poll() is None:
        process.kill()
        process.communicate()
  assert len(outputs["native"]) == 2
  assert outputs["ours"] == outputs["native"]
