"""Regenerates the version table of docs/compatibility.md.

Runs the test suite under tox on each TensorFlow minor and prints one
Markdown row per version: TensorFlow, the Keras it runs with, tf-keras,
which tests ran, and pytest's counts.

    python tools/compatibility_table.py                 # the full suite, all eleven
    python tools/compatibility_table.py tf213 tf214     # only these envs
    python tools/compatibility_table.py --core          # the differential core

Each environment is created by tox on first use (about 250 MB of TensorFlow
to download per minor); a full-suite row takes 5-10 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MINORS = range(12, 23)
_PROBE = ("import importlib.util, tensorflow as tf, keras\n"
          "legacy = importlib.util.find_spec('tf_keras')\n"
          "print(tf.__version__, keras.__version__,\n"
          "      __import__('tf_keras').__version__ if legacy else '-')\n")
_SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ (passed|failed).*) in "
                      r"(?P<seconds>[\d.]+)s", re.MULTILINE)


def _env_python(env: str) -> pathlib.Path:
  return ROOT / ".tox" / env / "bin" / "python"


def run_row(env: str) -> str:
  """Runs ``tox -e env`` and returns the table row for it."""
  result = subprocess.run(["tox", "-e", env, "--", "-q", "-p",
                           "no:cacheprovider", "-rfE"] + (
                               [] if env.endswith("-core") else ["tests"]),
                          cwd=ROOT, capture_output=True, text=True)
  output = result.stdout + result.stderr
  match = list(_SUMMARY.finditer(output))
  counts = match[-1].group("counts").strip(" =") if match else (
      f"no summary (tox exit {result.returncode})")
  seconds = f"{float(match[-1].group('seconds')):.0f} s" if match else "-"
  probe = subprocess.run([str(_env_python(env)), "-c", _PROBE],
                         capture_output=True, text=True,
                         env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": ""})
  versions = probe.stdout.split() or ["?", "?", "?"]
  tf_version, keras_version, tf_keras_version = versions[-3:]
  flavour = ("Keras 2 (tf.keras)" if keras_version.startswith("2.")
             else "Keras 3")
  suite = "differential core" if env.endswith("-core") else "full suite"
  return (f"| {tf_version} | {flavour} {keras_version} | {tf_keras_version} "
          f"| {suite} | {counts} | {seconds} |")


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("envs", nargs="*", help="tox envs (default: tf212..tf222)")
  parser.add_argument("--core", action="store_true",
                      help="run the differential core (tfNNN-core envs)")
  args = parser.parse_args(argv)
  envs = args.envs or [f"tf2{m}" + ("-core" if args.core else "")
                       for m in MINORS]
  print("| TensorFlow | Keras | tf-keras | tests run | result | time |")
  print("| --- | --- | --- | --- | --- | --- |")
  for env in envs:
    print(run_row(env), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
