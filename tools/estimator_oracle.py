"""Makes the Estimator oracle: a virtual environment with TensorFlow 2.15.1
and tensorflow-estimator 2.15.0, Estimator's last supported pairing.

The tests that compare an Estimator program under compat_distribute with
the same program natively (tests/support/estimator.py) run the native side
with this environment's interpreter, named by ``ESTIMATOR_ORACLE_PYTHON``.
``tox -e tf221`` calls this script before its tests and sets the variable.

    python tools/estimator_oracle.py PATH     # makes PATH once; prints its python

Idempotent: an environment at PATH that already imports both is kept (the
first run downloads about 250 MB; later ones take a second or two).
"""
from __future__ import annotations

import os
import subprocess
import sys
import venv

REQUIREMENTS = ("tensorflow-cpu==2.15.1", "tensorflow-estimator==2.15.0")
_CHECK = ("import tensorflow as tf, tensorflow_estimator\n"
          "assert tf.__version__.startswith('2.15.'), tf.__version__\n")


def interpreter(path: str) -> str:
  """The Python of the environment at ``path``."""
  return os.path.join(path, "Scripts" if os.name == "nt" else "bin",
                      "python")


def is_ready(path: str) -> bool:
  python = interpreter(path)
  if not os.path.exists(python):
    return False
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  return subprocess.run([python, "-c", _CHECK], env=env, check=False,
                        capture_output=True).returncode == 0


def make(path: str) -> str:
  """Creates (or completes) the oracle at ``path``; returns its Python."""
  if not is_ready(path):
    venv.EnvBuilder(with_pip=True, clear=False).create(path)
    subprocess.run([interpreter(path), "-m", "pip", "install", "-q",
                    *REQUIREMENTS], check=True)
    if not is_ready(path):
      raise SystemExit(f"estimator_oracle: {path} was made but does not "
                       f"import TensorFlow 2.15 and Estimator")
  return interpreter(path)


def main(argv: list[str]) -> int:
  if len(argv) != 1:
    sys.stderr.write("usage: python tools/estimator_oracle.py PATH\n")
    return 2
  print(make(os.path.abspath(argv[0])))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
