"""``benchmarks/multi_worker.py`` runs: its ``--quick`` form on two loopback
workers, ours (Keras 3 under ``python -m compat_distribute run``) beside
TensorFlow's own ``MultiWorkerMirroredStrategy`` (tf-keras) and no
strategy, and prints its table.  No time is asserted: the numbers are
measurements; the test checks that every variant ran its rounds, that
every process ended by itself and that the ratios are those of the
printed rates.

Several TensorFlow processes at once (two clusters of two and two single
processes): it runs where ``COMPAT_DISTRIBUTE_MULTI_WORKER_ALL=1`` (``tox
-e multi-worker``), as ``tox -e bench`` runs the same command.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

import support
from test_multi_worker import ALL  # pylint: disable=import-error

pytestmark = [
    pytest.mark.cluster, pytest.mark.subprocess, pytest.mark.slow, ALL,
    pytest.mark.skipif(not importlib.util.find_spec("tf_keras"),
                       reason="needs tf-keras beside Keras 3 (TensorFlow "
                       "2.16 on)"),
]

SCRIPT = os.path.join(str(support.ROOT), "benchmarks", "multi_worker.py")


def test_quick_run_prints_every_variant_and_the_ratios(tmp_path):
  done = subprocess.run(
      [sys.executable, SCRIPT, "--quick", "--workers", "2", "--steps", "3"],
      capture_output=True, text=True, timeout=900, cwd=tmp_path,
      env={**os.environ, "TF_CONFIG": ""}, check=False)
  assert done.returncode == 0, done.stderr[-6000:]
  assert os.listdir(tmp_path) == []  # its control files went with it
  rows = [line.split("|")[1:-1] for line in done.stdout.splitlines()
          if line.startswith("| 2 |")]
  assert [row[1].strip() for row in rows] == ["fit", "loop"], done.stdout
  for row in rows:
    ours, native, none_3, none_2 = (float(cell) for cell in row[2:6])
    assert min(ours, native, none_3, none_2) > 0, row
    # The rates are printed to 0.1, the ratios to 0.01.
    (ratio,), (lowest, highest), (ours_none,), (native_none,) = (
        [float(x.strip().rstrip("x")) for x in cell.split(",")]
        for cell in row[6:10])
    assert [ratio, ours_none, native_none] == pytest.approx(
        [ours / native, ours / none_3, native / none_2], rel=0.03, abs=0.006), row
    # One round: its own ratio is the median's.
    assert lowest == highest == pytest.approx(ratio, abs=0.006), row
  assert "3 steps x 1 rounds" in done.stdout
