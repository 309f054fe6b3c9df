"""Builds docs/architecture.md's table of skipped tests from the JUnit files
of the default environments' runs, and checks a run's skips against it.

    python tools/skip_reasons.py tf221=.tox/tf221/log/junit.xml \\
        tf212=.tox/tf212/log/junit.xml

One row per test file and reason: the tests each environment skipped for
it.  The parts of a reason that change from run to run or machine to
machine (a path, a TensorFlow version, a round number) are written ``…``,
which matches any text.  The last column, the environment that runs the
skipped tests instead, is kept from the table already in the page (a new
row gets ``?`` to fill in).

Where ``COMPAT_DISTRIBUTE_CHECK_SKIPS=1`` (tox sets it in ``tf221`` and
``tf212``), ``tests/conftest.py`` fails the run when a test skipped for a
reason no row of the table covers (``unlisted``).

>>> xml = ('<testsuites><testsuite><testcase classname="tests.a.test_b" '
...        'name="t"><skipped type="pytest.skip" message="TensorFlow 2.21.0 '
...        'lacks it">tests/a/test_b.py:7: TensorFlow 2.21.0 lacks it'
...        '</skipped></testcase></testsuite></testsuites>')
>>> skips(xml)
Counter({('tests/a/test_b.py', 'TensorFlow … lacks it'): 1})
>>> print(table({"tf221": skips(xml)}, {}))
| test file | reason | tf221 | run by |
|---|---|---:|---|
| tests/a/test_b.py | TensorFlow … lacks it | 1 | ? |
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import xml.etree.ElementTree as ElementTree
from typing import Iterable

ANY = "…"
# Variable parts of a reason, most specific first.
_VARIABLE = (
    re.compile(r"(?<![\w.])/[^\s;:,()]+"),           # an absolute path
    re.compile(r"\b\d+\.\d+\.\d+[\w.]*"),            # a version: 2.21.0
    re.compile(r"(?<=\bround )\d+(?= of \d+)"),      # round 3 of 40
)
TABLE_START = "| test file | reason |"
PAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), "docs", "architecture.md")

Skip = tuple[str, str]  # (test file, reason)


def generalize(reason: str) -> str:
  """A reason with its variable parts written ``…``.

  >>> generalize("deepctr is not installed for /x/bin/python; tox -e a")
  'deepctr is not installed for …; tox -e a'
  """
  for pattern in _VARIABLE:
    reason = pattern.sub(ANY, reason)
  return " ".join(reason.split())


def covers(listed: str, reason: str) -> bool:
  """Whether a row's reason (``…``: any text) matches a skip's reason."""
  parts = [re.escape(part) for part in listed.split(ANY)]
  return re.fullmatch(".*".join(parts), " ".join(reason.split()),
                      re.S) is not None


def skip_key(where: str, reason: str) -> Skip:
  """(test file from the checkout, generalized reason) of one skip."""
  return (re.sub(r"^(?:.*?/)?(?=tests/)", "", where), generalize(reason))


def skip_keys(found: Iterable[tuple[str, str]]) -> list[Skip]:
  """``skip_key`` of each (file, reason) pytest reported."""
  return [skip_key(where, reason) for where, reason in found]


def skipped_tests(junit_xml: str) -> dict[str, Skip]:
  """{test: (test file, generalized reason)} of a JUnit document's skips;
  the file as a path from the checkout (``tests/...``)."""
  found = {}
  for case in ElementTree.fromstring(junit_xml).iter("testcase"):
    skipped = case.find("skipped")
    if skipped is None:
      continue
    where = (skipped.text or "").split(":", 1)[0]
    test = f"{case.get('classname')}::{case.get('name')}"
    found[test] = skip_key(where, skipped.get("message", ""))
  return found


def skips(*junit_xml: str) -> collections.Counter:
  """Counter{(test file, generalized reason): tests} of JUnit documents
  (of one environment: a test in two of them counts once)."""
  found: dict[str, Skip] = {}
  for document in junit_xml:
    found.update(skipped_tests(document))
  return collections.Counter(found.values())


def rows(page: str) -> list[list[str]]:
  """The table's rows (cells, ``\\|`` unescaped) in a page's text."""
  lines = page.splitlines()
  start = next((i for i, line in enumerate(lines)
                if line.startswith(TABLE_START)), None)
  if start is None:
    return []
  header = _cells(lines[start])
  found = []
  for line in lines[start + 2:]:
    if not line.startswith("|"):
      break
    cells = _cells(line)
    assert len(cells) == len(header), f"a row of {len(header)} cells: {line}"
    found.append(cells)
  return found


def _cells(line: str) -> list[str]:
  return [cell.strip().replace("\\|", "|")
          for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def unlisted(found: Iterable[Skip], page: str) -> list[Skip]:
  """The skips no row of the page's table covers (same file, reason
  matched)."""
  table_rows = rows(page)
  return sorted({(where, reason) for where, reason in found
                 if not any(row[0] == where and covers(row[1], reason)
                            for row in table_rows)})


def table(by_env: dict[str, collections.Counter],
          run_by: dict[Skip, str]) -> str:
  """The Markdown table: a row per (file, reason), a column per env."""
  envs = list(by_env)
  keys = sorted({key for found in by_env.values() for key in found})
  lines = ["| test file | reason | " + " | ".join(envs) + " | run by |",
           "|---|---|" + "---:|" * len(envs) + "---|"]
  for where, reason in keys:
    counts = " | ".join(str(by_env[env].get((where, reason), 0))
                        for env in envs)
    lines.append(f"| {where} | {reason.replace('|', chr(92) + '|')} | "
                 f"{counts} | {run_by.get((where, reason), '?')} |")
  return "\n".join(lines)


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("runs", nargs="+", metavar="ENV=JUNIT_XML[,...]",
                      help="an environment and its run's JUnit files")
  args = parser.parse_args(argv)
  by_env = {}
  for run in args.runs:
    env, paths = run.split("=", 1)
    documents = []
    for path in paths.split(","):
      with open(path, encoding="utf-8") as f:
        documents.append(f.read())
    by_env[env] = skips(*documents)
  run_by = {}
  if os.path.exists(PAGE):
    with open(PAGE, encoding="utf-8") as f:
      run_by = {(row[0], row[1]): row[-1] for row in rows(f.read())}
  print(table(by_env, run_by))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
