"""Helpers the test folders share (no tests here), and the repository's paths.

``tests/`` is on ``sys.path`` while pytest runs (``tests/conftest.py`` sits in
a folder without ``__init__.py``), so every test file, in whatever folder,
imports these as ``from support import keras`` or
``from support.central_storage import pair``.

>>> (TESTS.name, FIXTURES.parent == TESTS, ROOT == TESTS.parent)
('tests', True, True)
>>> doc_program("cluster.md", "train_fit.py").splitlines()[0]
'# train_fit.py'
"""
import os
import pathlib
import re

import pytest

TESTS = pathlib.Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
# The cluster cases beyond one representative: `tox -e multi-worker` (which
# CI runs) sets the variable; the default environments skip them.
MULTI_WORKER_ALL = pytest.mark.skipif(
    os.environ.get("COMPAT_DISTRIBUTE_MULTI_WORKER_ALL") != "1",
    reason="several TensorFlow processes each: tox -e multi-worker "
    "(COMPAT_DISTRIBUTE_MULTI_WORKER_ALL=1)")
# A slow multi-process case beyond the default run's representative of its
# kind (a second shape, failure or form of what a test beside it runs):
# tests/conftest.py skips it unless COMPAT_DISTRIBUTE_MORE=1, which
# `tox -e more` sets (and runs only these, -m more); CI runs it after
# `tox p`.  Keeps the default run within its time (docs/architecture.md).
MORE = pytest.mark.more


def doc_program(page: str, name: str, lang: str = "python") -> str:
  """The ```python (or ```lang) block of ``docs/page`` whose first line is
  ``# name``, as printed there."""
  text = (ROOT / "docs" / page).read_text()
  match = re.search(rf"^```{lang}\n(# {re.escape(name)}\n.*?)^```$", text,
                    re.M | re.S)
  assert match, f"docs/{page} has no program {name}"
  return match.group(1)
