"""RunConfig and the distribute-coordinator glue decide as TensorFlow 2.15's.

tests/fixtures/estimator_run_config.py builds ``tf.estimator.RunConfig`` for
a table of strategies (OneDevice, CentralStorage, ParameterServer; by v1 and
v2 names; through ``experimental_distribute=DistributeConfig``) and
``TF_CONFIG`` values (none, chief, worker, ps, evaluator, a ``master`` job, no
task, a remote cluster, strategies given twice), and points a RunConfig at
each task as the coordinator's worker context does.  Run natively on
TensorFlow 2.15 (the oracle: TensorFlow's own ``estimator_training``) and
under the runner (on 2.16+: ``compat_distribute.estimator.coordinator``),
every field and every error class must be the same.
"""
import importlib.util

import pytest

from support import estimator as estimator_support

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow_estimator") is None,
    reason="tensorflow-estimator is not installed")
pytestmark = [pytestmark, pytest.mark.subprocess]


def test_run_config_fields_match_native_for_every_case(tmp_path):
  ours, native = estimator_support.run_both(
      "estimator_run_config.py", [], tmp_path)
  # The table covers each coordinator mode and each refusal.
  modes = {case.get("_distribute_coordinator_mode") for case in
           native.values() if isinstance(case, dict)}
  assert {"independent_worker", "standalone_client", None} <= modes
  assert native["train_distribute twice"] == {"error": ["ValueError"]}
  assert native["remote cluster and TF_CONFIG"] == {"error": ["ValueError"]}
  assert native["chief, ParameterServer"]["should_run_coordinator"] is True
  assert native["worker contexts"]["evaluator:0"]["_num_worker_replicas"] == 0
  assert native["worker contexts"]["ps:0"]["_global_id_in_cluster"] == 4
  for name in native:
    assert ours[name] == native[name], name
