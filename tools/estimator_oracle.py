"""Makes the Estimator oracle: a virtual environment with TensorFlow 2.15.1
and tensorflow-estimator 2.15.0, Estimator's last supported pairing.

The tests that compare an Estimator program under compat_distribute with
the same program natively (tests/support/estimator.py) run the native side
with this environment's interpreter, named by ``ESTIMATOR_ORACLE_PYTHON``.
``tox -e tf221`` calls this script before its tests and sets the variable.

    python tools/estimator_oracle.py PATH     # makes PATH once; prints its python
    python tools/estimator_oracle.py --libraries PATH   # and the libraries

``--libraries`` adds the published Estimator libraries that
tests/clients/estimator/test_estimator_libraries.py runs (``tox -e
estimator-libs``), at the releases listed in LIBRARIES.

Idempotent: an environment at PATH that already imports both is kept (the
first run downloads about 250 MB; later ones take a second or two).
"""
from __future__ import annotations

import os
import subprocess
import sys
import venv

REQUIREMENTS = ("tensorflow-cpu==2.15.1", "tensorflow-estimator==2.15.0")
# The libraries built on Estimator that tests/clients/estimator/
# test_estimator_libraries.py compares (docs/estimator.md, "Libraries built
# on Estimator"), at their last releases.  --no-deps: TF-Ranking pins
# tensorflow<2.16 and TensorFlow Privacy tensorflow~=2.4, which pip would
# meet by installing the `tensorflow` distribution as a second TensorFlow
# beside tensorflow-cpu; their own dependencies follow in LIBRARY_DEPENDENCIES.
LIBRARIES = ("deepctr==0.9.4", "tensorflow-ranking==0.5.5",
             "tensorflow-serving-api==2.15.1", "tensorflow-privacy==0.9.0",
             "dp-accounting==0.4.3")
LIBRARY_DEPENDENCIES = ("tensorflow-probability~=0.22.0", "dm-tree", "scipy",
                        "scikit-learn", "mpmath", "attrs", "requests", "h5py",
                        "packaging")
_LIBRARIES_CHECK = ("import deepctr, tensorflow_ranking, tensorflow_privacy\n")
_CHECK = ("import tensorflow as tf, tensorflow_estimator\n"
          "assert tf.__version__.startswith('2.15.'), tf.__version__\n")


def interpreter(path: str) -> str:
  """The Python of the environment at ``path``."""
  return os.path.join(path, "Scripts" if os.name == "nt" else "bin",
                      "python")


def is_ready(path: str, libraries: bool = False) -> bool:
  python = interpreter(path)
  if not os.path.exists(python):
    return False
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  check = _CHECK + (_LIBRARIES_CHECK if libraries else "")
  return subprocess.run([python, "-c", check], env=env, check=False,
                        capture_output=True).returncode == 0


def make(path: str, libraries: bool = False) -> str:
  """Creates (or completes) the oracle at ``path``; returns its Python.

  With ``libraries``, it also holds LIBRARIES and their dependencies.
  """
  if not is_ready(path, libraries):
    if not (3, 9) <= sys.version_info[:2] <= (3, 11):
      # venv makes the environment with this interpreter.
      raise SystemExit(
          f"estimator_oracle: TensorFlow 2.15.1 has builds for Python 3.9 "
          f"to 3.11 only, and this is Python {sys.version.split()[0]}: run "
          f"this script with python3.11 (the tests may run on any Python; "
          f"the oracle is a separate interpreter)")
    venv.EnvBuilder(with_pip=True, clear=False).create(path)
    pip = [interpreter(path), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, *REQUIREMENTS], check=True)
    if libraries:
      subprocess.run([*pip, *REQUIREMENTS, *LIBRARY_DEPENDENCIES], check=True)
      subprocess.run([*pip, "--no-deps", *LIBRARIES], check=True)
    if not is_ready(path, libraries):
      raise SystemExit(f"estimator_oracle: {path} was made but does not "
                       f"import TensorFlow 2.15 and Estimator"
                       + (" and the libraries" if libraries else ""))
  return interpreter(path)


def main(argv: list[str]) -> int:
  libraries = argv[:1] == ["--libraries"]
  if libraries:
    argv = argv[1:]
  if len(argv) != 1:
    sys.stderr.write("usage: python tools/estimator_oracle.py "
                     "[--libraries] PATH\n")
    return 2
  print(make(os.path.abspath(argv[0]), libraries))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
