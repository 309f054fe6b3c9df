"""Every example in the documentation runs, and prints what it says it prints.

Two kinds of doctests, one pytest case each so a failure names its source:

* each ``docs/*.md`` page, run with ``doctest.testfile`` (globals ``tf`` and
  ``np``);
* the ``>>>`` examples in the docstrings of every module of
  ``compat_distribute`` and of its ``v1`` / ``v2`` facades.

Both run in this pytest process, where ``conftest.py`` has already split the
host CPU into 4 logical devices.  ``test_docs_standalone.py`` runs each page
again in a fresh process with neither the globals nor the devices, as a
pasted script would.
"""
import doctest
import importlib
import pkgutil

import numpy as np
import pytest
import tensorflow as tf

import compat_distribute
import support

pytestmark = pytest.mark.parity

DOCS = support.ROOT / "docs"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
# Packages whose modules' docstrings are run.  In an editable install the
# facades live outside compat_distribute's own directory, so they are walked
# separately; names are de-duplicated.
ROOTS = ("compat_distribute", "compat_distribute.v1", "compat_distribute.v2")


def _doc_pages():
  return sorted(DOCS.glob("*.md"))


def _module_names():
  names = []
  for root in ROOTS:
    try:
      package = importlib.import_module(root)
    except ModuleNotFoundError as e:
      if e.name != root:
        raise
      continue  # a facade not written yet
    names.append(root)
    for info in pkgutil.walk_packages(package.__path__, root + "."):
      if info.name.endswith(".__main__"):
        continue  # importing it would run the command line
      names.append(info.name)
  return sorted(set(names))


@pytest.mark.parametrize("page", _doc_pages(), ids=lambda p: p.name)
def test_doc_page(page):
  result = doctest.testfile(
      str(page), module_relative=False, globs={"tf": tf, "np": np},
      optionflags=FLAGS, verbose=False, report=True, raise_on_error=False)
  assert result.failed == 0, (
      f"{result.failed} of {result.attempted} examples in docs/{page.name} "
      "failed; the doctest report above shows each one.")


@pytest.mark.parametrize("module_name", _module_names())
def test_module_docstrings(module_name):
  module = importlib.import_module(module_name)
  finder = doctest.DocTestFinder(exclude_empty=True)
  runner = doctest.DocTestRunner(optionflags=FLAGS, verbose=False)
  for test in finder.find(module, module_name,
                          globs={"tf": tf, "np": np, **vars(module)}):
    runner.run(test)
  result = runner.summarize(verbose=False)
  assert result.failed == 0, (
      f"{result.failed} of {result.attempted} docstring examples in "
      f"{module_name} failed; the doctest report above shows each one.")


def test_docs_exist():
  """Guards against a glob that silently finds nothing."""
  assert {"index.md", "strategy.md", "one_device.md"} <= {
      p.name for p in _doc_pages()}
