"""Everything the package registers in TensorFlow's namespace is listed in
``compat_distribute/_tf_private/__init__.py``'s docstring table, and
everything listed is registered.

A fresh process (``fixtures/tf_namespace_probe.py``) performs ``install()``
and uses what it supplies -- on a TensorFlow without Estimator's pieces
(2.16 on) with Estimator installed, ``tf.estimator`` and its import names
too -- and reports each ``sys.modules`` name, module attribute,
``sys.meta_path`` finder, export-registry entry and environment variable
that changed.  The loader and finder classes are found in the sources.

It runs three times: as installed, and with tensorflow-estimator, then
tf-keras, hidden from the import system (``--hide``: as where it is not
installed, e.g. TensorFlow 2.16 to 2.20 without Estimator).  Where one is
missing, the rows that need Estimator to import are not registered, and
every use of an Estimator name is refused with the package's error naming
what to install.
"""
import ast
import fnmatch
import json
import os
import re
import subprocess
import sys

import pytest

import support

TESTS = support.TESTS
PACKAGE = TESTS.parent / "compat_distribute"
PROBE = TESTS / "fixtures" / "tf_namespace_probe.py"
KINDS = ("module", "attribute", "meta_path", "loader", "tf_export",
         "environ")
WHEN = ("always", "supply", "estimator", "no_tensorboard", "unloaded",
        "auto_strategy", "checkout", "cluster")
# The packages the probe hides (none: as installed).
HIDDEN = ((), ("tensorflow_estimator",), ("tf_keras",))
# Each use of an Estimator name where the first of these is missing is
# refused with this error of the package's.
REFUSED_WITH = {"tensorflow_estimator": "EstimatorNotInstalledError",
                "tf_keras": "TfKerasMissingError"}


def listed():
  """The docstring table's rows: (kind, name pattern, when, by)."""
  source = (PACKAGE / "_tf_private" / "__init__.py").read_text()
  lines = ast.get_docstring(ast.parse(source)).splitlines()
  borders = [i for i, line in enumerate(lines) if line.startswith("=====")]
  assert len(borders) == 3, "the table: header and rows between 3 borders"
  rows = [tuple(re.split(r"\s{2,}", line.strip(), maxsplit=3))
          for line in lines[borders[1] + 1:borders[2]]]
  assert lines[borders[0] + 1].split() == ["kind", "name", "when", "by"]
  for row in rows:
    assert len(row) == 4 and row[0] in KINDS and row[2] in WHEN, row
  return rows


def loader_classes():
  """``module.Class`` of every import loader or finder in the sources."""
  found = set()
  for path in PACKAGE.rglob("*.py"):
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    module = module.removesuffix(".__init__")
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.ClassDef) and any(
          re.search(r"Loader|Finder", ast.unparse(base))
          for base in node.bases):
        found.add(f"{module}.{node.name}")
  return found


@pytest.fixture(scope="module", params=HIDDEN,
                ids=lambda hidden: "without-" + hidden[0] if hidden
                else "as-installed")
def hidden(request):
  return request.param


@pytest.fixture(scope="module")
def report(hidden):
  hide = [arg for name in hidden for arg in ("--hide", name)]
  result = subprocess.run(
      [sys.executable, str(PROBE), *hide], cwd=TESTS,
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True,
      text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-4000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


def observed(report):
  """{kind: names registered} from the probe's report."""
  return {
      "module": report["modules"], "attribute": report["attributes"],
      "meta_path": report["meta_path"], "environ": report["environ"],
      "tf_export": [f"{key}.{name}" for key, names in
                    report["tf_export"].items() for name in names],
  }


def applies(when, report):
  """Whether a row of this ``when`` can be registered in this run."""
  imports = report["supplied"] and report["estimator"]
  return {"supply": report["supplied"], "estimator": imports,
          "no_tensorboard": imports and not report["tensorboard"],
          "auto_strategy": report["auto_strategy"],
          # (The probe connects to no cluster.)
          "cluster": False}.get(when, True)


def _matches(pattern, names):
  return [name for name in names if fnmatch.fnmatchcase(name, pattern)]


def test_the_table_parses():
  rows = listed()
  assert {row[0] for row in rows} == set(KINDS)
  assert len({row[:2] for row in rows}) == len(rows), "a row twice"


@pytest.mark.subprocess
def test_every_name_registered_is_listed(report):
  rows = listed()
  unlisted = []
  for kind, names in observed(report).items():
    for name in names:
      if not any(k == kind and applies(when, report) and
                 fnmatch.fnmatchcase(name, pattern)
                 for k, pattern, when, _ in rows):
        unlisted.append(f"{kind} {name}")
  assert unlisted == [], (
      "registered in TensorFlow's namespace but not in the table of "
      "compat_distribute/_tf_private/__init__.py")


@pytest.mark.subprocess
def test_every_name_listed_is_registered_where_it_applies(report):
  names = observed(report)
  missing, out_of_place = [], []
  for kind, pattern, when, _ in listed():
    if kind == "loader" or when == "checkout":
      continue  # classes: test_every_loader_and_finder_class_is_listed
    found = _matches(pattern, names[kind])
    if not applies(when, report):
      if found:
        out_of_place.append((kind, pattern, when, found))
    elif when != "unloaded" or not _matches(pattern, report["before"]):
      if not found:
        missing.append((kind, pattern, when))
  assert missing == [], "listed but never registered"
  assert out_of_place == [], "registered where its row says it is not"
  if report["supplied"]:  # on TensorFlow 2.16+ the Estimator rows ran
    assert "compat_distribute.estimator.api.EstimatorImportFinder" in (
        names["meta_path"])


@pytest.mark.subprocess
def test_without_estimator_or_tf_keras_each_use_is_refused(report, hidden):
  assert set(hidden) <= set(report["missing"])
  if report["supplied"] and report["missing"]:
    expected = REFUSED_WITH[report["missing"][0]]
    assert set(report["refused"].values()) == {expected}
    assert len(report["refused"]) == 10  # 3 attribute reads, 7 imports
  else:  # Estimator imported (or TensorFlow's own, 2.12 to 2.15)
    assert report["refused"] == {}


def test_every_loader_and_finder_class_is_listed():
  rows = listed()
  classes = {name for kind, name, _, _ in rows
             if kind in ("loader", "meta_path")}
  assert loader_classes() == classes
