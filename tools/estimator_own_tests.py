"""Runs Estimator's own distribute tests natively on TensorFlow 2.15 and under
compat_distribute on this TensorFlow, and prints their counts side by side.

The tests are not in the ``tensorflow-estimator`` wheel; they are in its
source repository at tag v2.15.0 (github.com/tensorflow/estimator), which CI
cannot reach.  A developer checks out that tag and points this script at
``tensorflow_estimator/python/estimator`` of the checkout:

    git clone --branch v2.15.0 --depth 1 https://github.com/tensorflow/estimator
    python tools/estimator_own_tests.py estimator/tensorflow_estimator/python/estimator \\
        --native-python .tox/estimator-oracle/bin/python

Each test file runs as a script (``tf.test.main``, as Estimator's CI ran
them), natively with ``--native-python`` and with this interpreter under
``python -m compat_distribute run``; both interpreters need ``portpicker``
(the multi-worker tests pick ports with it).  Results go to docs/estimator.md
by hand, with the date and versions.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = (
    "distribute_strategy_estimator_integration_test.py",
    "distribute_strategy_estimator_training_test.py",
    "canned/canned_estimator_ds_integration_test.py",
    "run_config_test.py",
    "training_test.py",
)
_RESULT = re.compile(r"^(Ran \d+ tests? in [\d.]+s|OK.*|FAILED.*)$",
                     re.MULTILINE)


def run(argv: list[str], folder: str) -> tuple[str, float]:
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TMPDIR=folder)
  env.pop("TF_USE_LEGACY_KERAS", None)
  start = time.monotonic()
  done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True,
                        text=True, timeout=3600, check=False)
  found = _RESULT.findall(done.stdout + done.stderr)
  summary = " ".join(found[-2:]) if found else f"exit {done.returncode}"
  return summary, time.monotonic() - start


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("source", help="tensorflow_estimator/python/estimator "
                      "of a v2.15.0 checkout")
  parser.add_argument("--native-python", required=True)
  args = parser.parse_args()
  print("| test file | native (TF 2.15) | ours (this TF, runner) |")
  print("| --- | --- | --- |")
  for name in FILES:
    path = os.path.join(args.source, name)
    with tempfile.TemporaryDirectory() as folder:
      native, _ = run([args.native_python, path], folder)
    with tempfile.TemporaryDirectory() as folder:
      ours, _ = run([sys.executable, "-m", "compat_distribute", "run", path],
                    folder)
    print(f"| {name} | {native} | {ours} |", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
