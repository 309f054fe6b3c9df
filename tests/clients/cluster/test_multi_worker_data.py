"""What each worker of a ``MultiWorkerMirroredStrategy`` cluster reads, ours
against TensorFlow's own strategy on the same two-task loopback cluster
(with tf-keras: TensorFlow's strategy trains Keras 2 programs).

TensorFlow's strategy runs the program on each task; each task prints its
replica's batches.  Ours (``run --multi-worker ours`` on every task) runs it
once, on worker 0, which prints every replica's batches, worker 0's first.
The batches of every step must be the same for every auto-shard policy
(tests/fixtures/mwms_shards.py; the measured table is in
tests/input/test_input_auto_shard.py and docs/cluster.md), and a Keras 2
``fit`` under DATA, FILE and OFF must end at the same per-epoch losses and
weights (``rtol=1e-5``).  Where the workers' shares hold different numbers
of steps (FILE over three files; a ``dataset_fn`` sharding three batches;
FILE over four files on three workers), both go on until every share ends,
a worker whose share ended giving its replica empty batches: every way of
reading gives the same values and shapes, and a Keras 2 ``fit`` the same
steps, losses and weights.  Several TensorFlow processes per case: these
run where ``COMPAT_DISTRIBUTE_MULTI_WORKER_ALL=1`` (``tox -e multi-worker``).
"""
import importlib.util
import json
import sys

import numpy as np
import pytest

from compat_distribute.cluster import local_served
import support
import test_multi_worker as mw

pytestmark = [pytest.mark.cluster, pytest.mark.subprocess, pytest.mark.slow,
              mw.ALL, pytest.mark.skipif(
                  not importlib.util.find_spec("tf_keras"),
                  reason="needs tf-keras beside Keras 3 (TensorFlow 2.16 "
                  "on)")]
KERAS_2 = {**mw.ENV, "TF_USE_LEGACY_KERAS": "1"}
SHARDS = str(support.FIXTURES / "mwms_shards.py")
CASES = ["auto slices", "data slices", "off slices", "file slices",
         "data partial", "auto files", "data files", "file files",
         "off files", "file list"]
UNEVEN = ["file uneven", "function uneven"]
READS = ["next", "function", "optional", "function optional"]
# Per step, [values, shape] of each worker's replica (TensorFlow 2.21's
# strategy, measured): worker 1's share ends first, then it gives empty
# batches until worker 0's ends.
UNEVEN_STEPS = {
    "file uneven": [[[[0, 1], [2]], [[100, 101], [2]]],
                    [[[2, 3], [2]], [[102, 103], [2]]],
                    [[[200, 201], [2]], [[], [0]]],
                    [[[202, 203], [2]], [[], [0]]]],
    "function uneven": [[[[0, 1], [2]], [[2, 3], [2]]],
                        [[[4, 5], [2]], [[], [0]]]],
}


def run_both(args, workers=2):
  """``python PROGRAM ARGS`` on ``workers`` workers under TensorFlow's
  strategy, then under ours: (native results, ours), each {task: result}."""
  runs = []
  for command in ([sys.executable], mw.RUN):
    with local_served.MultiWorkerCluster(workers, env=KERAS_2) as cluster:
      runs.append(cluster.start([*command, *args]).collect(mw.TIMEOUT))
  for results in runs:
    for task, result in results.items():
      assert result.returncode == 0 and not result.timed_out, (
          task, result.stderr[-4000:])
  return runs


def lines(result):
  """Each ``key: value`` line the program printed: {key: [value, ...]}."""
  found = {}
  for line in result.stdout.splitlines():
    key, sep, value = line.partition(": ")
    if sep:
      found.setdefault(key, []).append(value)
  return found


def test_each_worker_reads_what_tensorflows_strategy_gives_it(tmp_path):
  native, ours = run_both([SHARDS, str(tmp_path), *CASES, "function",
                           *UNEVEN])
  workers = [lines(native[("worker", i)]) for i in range(2)]
  driver = lines(ours[("worker", 0)])
  for case in CASES + ["function"]:
    if case == "file slices":  # FILE without files: TensorFlow's error
      for said in (workers[0][case][0], workers[1][case][0], driver[case][0]):
        assert said.startswith("error NotFoundError:"), said
        assert "Found an unshardable source dataset" in said, said
      continue
    steps = [json.loads(w[case][0]) for w in workers]
    assert len(steps[0]) == len(steps[1]) > 0, (case, steps)
    expected = [a + b for a, b in zip(*steps)]
    assert json.loads(driver[case][0]) == expected, case
  for case in UNEVEN:
    for read in READS:
      key = f"{case} {read}"
      steps = [json.loads(w[key][0]) for w in workers]
      assert [a + b for a, b in zip(*steps)] == UNEVEN_STEPS[case], key
      assert json.loads(driver[key][0]) == UNEVEN_STEPS[case], key
    # reduce: [steps, sum]; each worker sums its own replica's values.
    reduced = [json.loads(w[f"{case} reduce"][0]) for w in workers]
    assert json.loads(driver[f"{case} reduce"][0]) == [
        reduced[0][0], reduced[0][1] + reduced[1][1]] == [
            len(UNEVEN_STEPS[case]),
            sum(sum(v) for step in UNEVEN_STEPS[case] for v, _ in step)]
    # The element spec: each replica's, its batch dimension unknown; the
    # cardinality: the first worker's dataset's.
    assert json.loads(driver[f"{case} spec"][0]) == (
        json.loads(workers[0][f"{case} spec"][0]) +
        json.loads(workers[1][f"{case} spec"][0])), case
    assert driver[f"{case} cardinality"] == workers[0][
        f"{case} cardinality"], case
  # distribute_datasets_from_function: one InputContext per worker.
  assert [json.loads(w["context"][0]) for w in workers] == [
      json.loads(c) for c in driver["context"]] == [[0, 2, 2], [1, 2, 2]]


def test_four_files_on_three_workers_end_with_the_longest_share(tmp_path):
  # FILE: worker 0 reads files 0 and 3, each batch of 4 cut into 3 pieces
  # (6 steps), workers 1 and 2 one file each (3 steps, then empty batches).
  native, ours = run_both([SHARDS, str(tmp_path), "file four"], workers=3)
  workers = [lines(native[("worker", i)]) for i in range(3)]
  driver = lines(ours[("worker", 0)])
  for read in READS:
    key = f"file four {read}"
    steps = [json.loads(w[key][0]) for w in workers]
    expected = [a + b + c for a, b, c in zip(*steps)]
    assert json.loads(driver[key][0]) == expected, key
    assert len(expected) == 6, key
    assert [[shape for _, shape in step[1:]] for step in expected[3:]] == [
        [[0], [0]]] * 3, key
  assert json.loads(driver["file four reduce"][0]) == [
      6, sum(json.loads(w["file four reduce"][0])[1] for w in workers)]


def test_keras_2_fit_under_data_file_off_and_uneven_shares_equals_tf(
    tmp_path):
  rng = np.random.RandomState(0)
  for f in range(4):  # 32 rows in 4 files, 4 global batches of 8
    x = rng.normal(size=(8, 4))
    rows = np.hstack([x, x @ np.array([[1.0], [-2.0], [0.5], [3.0]])])
    (tmp_path / f"part-{f}.csv").write_text("".join(
        ",".join(f"{v:.6f}" for v in row) + "\n" for row in rows))
  # FILE3: FILE over three files: worker 0 reads two (4 steps of 4 rows),
  # worker 1 one (2 steps); every epoch has 4 steps, worker 1's replica
  # getting empty batches in the last 2.
  policies = ["DATA", "FILE", "OFF", "FILE3"]
  native, ours = run_both([str(support.FIXTURES / "mwms_keras_shards.py"),
                           str(tmp_path), *policies])
  driver, reference = ours[("worker", 0)], native[("worker", 0)]
  assert mw.printed(driver, "replicas") == 2
  losses = []
  for policy in policies:
    losses.append(mw.printed(driver, f"losses {policy}"))
    np.testing.assert_allclose(losses[-1],
                               mw.printed(reference, f"losses {policy}"),
                               rtol=1e-5)
    mw.assert_close(mw.printed(driver, f"final weights {policy}"),
                    mw.printed(reference, f"final weights {policy}"))
    assert mw.printed(driver, f"steps {policy}") == mw.printed(
        reference, f"steps {policy}"), policy
  assert mw.printed(driver, "steps FILE3") == 3 * 4
  # Each policy fed the model other batches (OFF: both workers the same).
  assert len({json.dumps(x) for x in losses}) == 4, losses
