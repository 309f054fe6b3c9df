"""A seeded Estimator program that uses ``tf.keras`` first ends where it
ends on TensorFlow 2.15.

tests/fixtures/estimator_keras_first.py defines a ``tf.keras.layers.Layer``
subclass at module level, calls ``tf.keras.utils.set_random_seed`` and
builds a Keras model before any Estimator, then trains and evaluates a
custom ``model_fn`` Estimator using the layer and a canned
``DNNRegressor``.  On TensorFlow 2.16+ only the runner's choice of Keras 2
before the program starts (compat_distribute/runner/keras_choice.py) lets
it run: it is compared, number for number, with the same program run
natively on TensorFlow 2.15 (the oracle, support/estimator.py).
"""
import json
import os
import sys

import pytest

from support import estimator as estimator_support

pytestmark = [
    estimator_support.needs_estimator,
    pytest.mark.subprocess, pytest.mark.parity]


def test_keras_layer_model_and_seed_before_estimator_match_tf_2_15(tmp_path):
  ours, native = estimator_support.run_both(
      "estimator_keras_first.py", ["{dir}"], tmp_path)
  assert len(native["keras_model"]) == 4
  for name in ("custom", "dnn"):
    assert len(native[name]["losses"]) == 4, name
    assert native[name]["eval"]["global_step"] == 4.0, name
  assert sorted(native["custom"]["checkpoint"]) == [
      "global_step", "scale/b", "scale/w"]
  estimator_support.assert_close(ours, native, skip=("tf_keras",))
  # tf.keras was Keras 2 in both: tf-keras under ours on TensorFlow 2.16+
  # (Keras 2 itself on 2.12-2.15), Keras 2.15 natively.
  assert (ours["tf_keras"], native["tf_keras"]) in (("tf_keras", "keras"),
                                                    ("keras", "keras"))


def test_the_runner_says_it_chose_keras_2_and_why_in_one_line(tmp_path):
  """The same program under the runner alone (no oracle needed): tf.keras
  is Keras 2 for it, and one stderr line says so, names the file and line
  of its first use of Estimator, and how to keep Keras 3."""
  from compat_distribute.runner import keras_choice  # pylint: disable=g-import-not-at-top
  if not keras_choice.two_kerases():
    pytest.skip("tf.keras has one Keras only here (TensorFlow 2.12-2.15, or "
                "no tf-keras): the runner has nothing to choose")
  script = os.path.join(estimator_support.FIXTURES, "estimator_keras_first.py")
  process = estimator_support.start(
      [sys.executable, "-m", "compat_distribute", "run", script,
       str(tmp_path)], cwd=estimator_support.ROOT,
      env=estimator_support.environment())
  out, err = estimator_support.communicate(process, "ours")
  assert process.returncode == 0, err[-4000:]
  assert json.loads(out.strip().splitlines()[-1])["tf_keras"] == "tf_keras"
  said = [l for l in err.splitlines() if l.startswith("compat_distribute run:")]
  assert said == [
      "compat_distribute run: tf.keras is Keras 2 (tf-keras) for this "
      "program, not Keras 3, because it uses Estimator at "
      "tests/fixtures/estimator_keras_first.py:49: tf.estimator; run --keras "
      "3 to keep Keras 3"], err[-4000:]
