"""Installs the newest TensorFlow nightly with the Keras nightlies that go
with it, into the running Python (what ``tox -e nightly`` runs first).

    python tools/install_nightly.py            # install
    python tools/install_nightly.py --dry-run  # only print what it would

TensorFlow publishes two nightly distributions, ``tf-nightly`` (the full
build, which also runs on CPU) and ``tf-nightly-cpu``; which of them is
ahead changes over time, so the one with the newer version wins.  pip
installs it with its requirements, which bring ``keras-nightly``; then the
newest ``keras-nightly`` and the newest ``tf-keras-nightly`` of the same
TensorFlow minor.  tf-keras is installed with ``--no-deps``: it requires the
``tf-nightly`` distribution, and would add a second TensorFlow build beside
``tf-nightly-cpu``.  Where no tf-keras nightly of that minor exists, none
is installed (``tests/clients/keras/test_keras_legacy.py`` then skips, saying why).

Each distribution's versions come from one ``pip index versions`` look-up.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from typing import Optional

from packaging.version import Version  # pytest requires packaging

TENSORFLOW_NIGHTLIES = ("tf-nightly", "tf-nightly-cpu")


def versions(distribution: str) -> list[Version]:
  """Every version of ``distribution`` on the package index, newest first
  (an empty list if the index has none)."""
  result = subprocess.run(
      [sys.executable, "-m", "pip", "index", "versions", "--pre",
       distribution], capture_output=True, text=True, check=False)
  match = re.search(r"^Available versions:(.*)$", result.stdout, re.MULTILINE)
  if match is None:
    return []
  return sorted((Version(v.strip()) for v in match.group(1).split(",")
                 if v.strip()), reverse=True)


def newest_tensorflow() -> tuple[str, Version]:
  """The TensorFlow nightly distribution with the newest version, and it.

  Raises:
    SystemExit: the index has neither distribution.
  """
  found = [(found[0], name) for name in TENSORFLOW_NIGHTLIES
           if (found := versions(name))]
  if not found:
    raise SystemExit("install_nightly: the package index lists none of "
                     f"{', '.join(TENSORFLOW_NIGHTLIES)}; is it reachable?")
  version, name = max(found)
  return name, version


def tf_keras_for(tensorflow: Version) -> Optional[Version]:
  """The newest tf-keras nightly of ``tensorflow``'s minor, or None."""
  minor = tensorflow.release[:2]
  return next((v for v in versions("tf-keras-nightly")
               if v.release[:2] == minor), None)


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--dry-run", action="store_true",
                      help="print the pip commands instead of running them")
  args = parser.parse_args(argv)
  name, version = newest_tensorflow()
  pip = [sys.executable, "-m", "pip", "install", "-q"]
  commands = [pip + [f"{name}=={version}"],
              pip + ["--pre", "--upgrade", "keras-nightly"]]
  tf_keras = tf_keras_for(version)
  if tf_keras is not None:
    commands.append(pip + ["--no-deps", f"tf-keras-nightly=={tf_keras}"])
  else:
    print(f"install_nightly: no tf-keras-nightly of TensorFlow "
          f"{version.major}.{version.minor}; tf-keras tests will skip")
  for command in commands:
    print("install_nightly:", " ".join(command[1:]), flush=True)
    if not args.dry_run:
      subprocess.run(command, check=True)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
