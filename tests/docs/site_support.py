"""Building the documentation site for the tests in this folder.

``mkdocs build --strict`` runs in a subprocess of this Python (which must
have the ``docs`` extra: ``pip install -e '.[docs]'``; ``tox`` installs it)
into ``$COMPAT_DISTRIBUTE_SITE_DIR``, else ``build/site`` in the checkout
(both outside the system temp folder, so the browser check's screenshot
stays there to be looked at).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
INSTALL_HINT = ("pip install -e '.[docs]' in the checkout (or run "
                "`tox -e docs`)")


@dataclasses.dataclass(frozen=True)
class BuiltSite:
  path: pathlib.Path
  output: str
  seconds: float

  def page(self, relative: str) -> str:
    """The HTML of the page built from ``docs/<relative>.md``."""
    return (self.path / (relative + ".html")).read_text(encoding="utf-8")


def site_dir() -> pathlib.Path:
  return pathlib.Path(os.environ.get("COMPAT_DISTRIBUTE_SITE_DIR",
                                     ROOT / "build" / "site"))


def build_site(destination: pathlib.Path) -> BuiltSite:
  """Builds the site into ``destination`` (replaced) with ``--strict``."""
  if importlib.util.find_spec("mkdocs") is None:
    pytest.fail(f"mkdocs is not installed in {sys.executable}; "
                f"{INSTALL_HINT}.", pytrace=False)
  shutil.rmtree(destination, ignore_errors=True)
  env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
  start = time.monotonic()
  result = subprocess.run(
      [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
       str(ROOT / "mkdocs.yml"), "--site-dir", str(destination)],
      cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
      check=False)
  seconds = time.monotonic() - start
  output = result.stdout + result.stderr
  assert result.returncode == 0, (
      f"mkdocs build --strict failed (exit {result.returncode}):\n{output}")
  return BuiltSite(destination, output, seconds)



_built: dict[pathlib.Path, BuiltSite] = {}


@pytest.fixture(scope="session")
def built_site() -> BuiltSite:
  """The site, built once per run (into ``site_dir()``) for every module
  that takes this fixture (``from site_support import built_site``)."""
  destination = site_dir()
  if destination not in _built:
    _built[destination] = build_site(destination)
  return _built[destination]
