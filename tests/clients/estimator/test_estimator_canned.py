"""Canned estimators under OneDevice and CentralStorage end where they end
natively, or raise as natively (issue 42).

tests/fixtures/estimator_canned.py warm-starts each canned estimator and
runs ``train_and_evaluate`` under each strategy (v1 and v2 names).  Here it
runs under ``python -m compat_distribute run`` and natively: on TensorFlow
2.16+ natively on the Estimator oracle (TensorFlow 2.15), on 2.12-2.15 with
this same interpreter.  Where native runs, every per-step loss, evaluation
metric and checkpoint value is equal (rtol 1e-5); where native raises
(TensorFlow 2 canned estimators under CentralStorage with two replicas:
Keras optimizers' slots filed twice, the Saver refuses), ours raises the
same class, with TensorFlow's message first.

The default run takes one TensorFlow 2 and one v1 estimator;
``COMPAT_DISTRIBUTE_CANNED=all`` (``tox -e estimator-canned``) takes all
sixteen.  With ``COMPAT_DISTRIBUTE_PARITY_RESULTS=DIR`` the outcomes are
written to DIR for tools/parity_table.py; either way they must be what
docs/estimator.md's parity table says for this TensorFlow.
"""
import ast
import importlib.util
import json
import os
import re

import pytest
import tensorflow as tf

import support
from support import estimator as estimator_support

pytestmark = [estimator_support.needs_estimator, pytest.mark.parity,
              pytest.mark.subprocess]

_spec = importlib.util.spec_from_file_location(
    "parity_table",
    os.path.join(estimator_support.ROOT, "tools", "parity_table.py"))
parity_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parity_table)

SAVER_REFUSES = "At least two variables have the same name: "
DEFAULT = ("DNNLinearCombinedClassifier", "v1.DNNLinearCombinedClassifier")
PAGE = os.path.join(estimator_support.ROOT, "docs", "estimator.md")
RESULTS = "COMPAT_DISTRIBUTE_PARITY_RESULTS"
TF = ".".join(tf.__version__.split(".")[:2])
REGENERATE = (
    f"{RESULTS}=parity-results COMPAT_DISTRIBUTE_CANNED=all python -m pytest "
    "tests/clients/estimator/test_estimator_canned.py && python "
    "tools/parity_table.py parity-results --write docs/estimator.md")


def estimators():
  """DEFAULT, or with COMPAT_DISTRIBUTE_CANNED=all the fixture's sixteen
  (its KINDS, each also as v1.KIND; read from its source: importing it
  would configure this process's devices)."""
  if os.environ.get("COMPAT_DISTRIBUTE_CANNED") != "all":
    # The TF2 form (refused under CentralStorage) in the default run, the
    # v1 form (trained under every strategy) in tox -e more.
    return [pytest.param(name, marks=support.MORE) if name.startswith("v1.")
            else name for name in DEFAULT]
  path = os.path.join(estimator_support.FIXTURES, "estimator_canned.py")
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  kinds = next(ast.literal_eval(node.value) for node in tree.body
               if isinstance(node, ast.Assign)
               and getattr(node.targets[0], "id", "") == "KINDS")
  return kinds + tuple("v1." + kind for kind in kinds)


def outcome(case, ours, native):
  """``equal`` or ``raises as native``; fails the test on a difference."""
  if "raises" in native:
    assert "raises" in ours, (
        f"{case}: native raises {native['raises']}, ours runs")
    # The same built-in class; TensorFlow's message, then ours' advice.
    assert ours["raises"]["builtin"] == native["raises"]["builtin"], case
    assert ours["raises"]["message"].startswith(native["raises"]["message"])
    if native["raises"]["message"].startswith(SAVER_REFUSES):
      assert "v1 optimizer" in ours["raises"]["message"], case
    return "raises as native"
  assert "runs" in ours, f"{case}: native runs, ours raises {ours}"
  assert len(native["runs"]["losses"]) == 3, case
  estimator_support.assert_close(ours["runs"], native["runs"], case)
  return "equal"


@pytest.mark.parametrize("name", estimators())
def test_canned_estimator_warm_started_by_train_and_evaluate(name, tmp_path):
  ours, native = estimator_support.run_both(
      "estimator_canned.py", ["{dir}", name], tmp_path,
      native=estimator_support.native_estimator_python())
  # One case per strategy: OneDevice and CentralStorage, v1 and v2 names.
  assert sorted(ours) == sorted(native) and len(native) == 4
  assert all(key.startswith(name + " ") for key in native)
  rows = []
  for key in sorted(native):
    name, strategy = key.split(" ", 1)
    rows.append({"case": name, "strategy": strategy, "tf": TF,
                 "outcome": outcome(key, ours[key], native[key])})
  # TensorFlow 2 estimators (Keras optimizers) refuse CentralStorage with
  # two replicas; their v1 forms (v1 optimizers) run under every strategy.
  # (TensorFlow 2.12's Estimator on Python 3.11 fails before any strategy
  # for a TensorFlow 2 estimator with a default optimizer given by name:
  # inspect.getargspec is gone.)
  for row, key in zip(rows, sorted(native)):
    refused = (row["strategy"].startswith("CentralStorage")
               and not row["case"].startswith("v1."))
    python_311 = "getargspec" in str(native[key].get("raises"))
    assert (row["outcome"] == "raises as native") == (
        refused or python_311 and TF == "2.12" and "v1." not in name), row
  if os.environ.get(RESULTS):
    os.makedirs(os.environ[RESULTS], exist_ok=True)
    path = os.path.join(os.environ[RESULTS], f"canned-tf{TF}-{name}.json")
    with open(path, "w", encoding="utf-8") as f:
      json.dump(rows, f, indent=1)
  with open(PAGE, encoding="utf-8") as f:
    table = parity_table.read_table(f.read())
  drift = [row for row in rows if table.get(
      (row["case"], row["strategy"]), {}).get(TF) != row["outcome"]]
  assert not drift, (
      f"docs/estimator.md's parity table says otherwise for TF {TF}: "
      f"{drift}; regenerate it on this TensorFlow: {REGENERATE}")


def test_page_table_is_as_the_tool_renders_it():
  """The page's table is the tool's rendering of its own cells (nobody
  edited it by hand), and every cell is one of the tool's outcomes."""
  with open(PAGE, encoding="utf-8") as f:
    page = f.read()
  cells = parity_table.read_table(page)
  assert cells, "docs/estimator.md has an empty parity table"
  assert parity_table.render(cells) in page, REGENERATE
  assert {o for row in cells.values() for o in row.values()} <= set(
      parity_table.OUTCOMES)
  assert all(re.fullmatch(r"\d+\.\d+", v)
             for row in cells.values() for v in row)
