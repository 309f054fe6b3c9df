"""Builds docs/architecture.md's per-folder table of test times from a
pytest JUnit XML file.

    pytest --junitxml=times.xml -p no:cacheprovider tests
    pytest --collect-only -q -m "subprocess or cluster" tests > marked.txt
    python tools/test_times.py times.xml --marked marked.txt

One row per test folder (the folder of each test's file): the tests run
(skipped ones left out), their seconds (JUnit's ``time``: set-up, call and
tear-down), seconds per test, and the tests among them that start
processes (those marked ``subprocess`` or ``cluster``, read from the
``--collect-only -q`` listing).  The slowest folder first; a total line last.

>>> xml = ('<testsuites><testsuite>'
...        '<testcase classname="tests.cluster.test_a" name="t1" time="2.0"/>'
...        '<testcase classname="tests.cluster.test_a" name="t2" time="1.0"/>'
...        '</testsuite></testsuites>')
>>> print(table(times(xml), {"tests/cluster": 1}))
| folder | tests | seconds | seconds per test | tests starting processes |
|---|---:|---:|---:|---:|
| tests/cluster | 2 | 3.0 | 1.50 | 1 |
| all | 2 | 3.0 | 1.50 | 1 |
"""
from __future__ import annotations

import argparse
import collections
import posixpath
import sys
import xml.etree.ElementTree as ElementTree
from typing import Optional


def folder_of_classname(classname: str) -> str:
  """``tests.clients.keras.test_fit.TestX`` -> ``tests/clients/keras``."""
  parts = classname.split(".")
  for i, part in enumerate(parts):
    if part.startswith("test_") or part == "conftest":
      return "/".join(parts[:i]) or "."
  return "/".join(parts[:-1]) or "."


def node_id(classname: str, name: str) -> str:
  """JUnit's ``tests.a.test_b.TestC`` + ``t[x]`` ->
  ``tests/a/test_b.py::TestC::t[x]``, pytest's node id."""
  parts = classname.split(".")
  for i, part in enumerate(parts):
    if part.startswith("test_") or part == "conftest":
      return "::".join(["/".join(parts[:i + 1]) + ".py", *parts[i + 1:], name])
  return "::".join(["/".join(parts) + ".py", name])


def ran(junit_xml: str) -> set[str]:
  """The node ids of the tests that ran (not skipped)."""
  return {node_id(case.get("classname", ""), case.get("name", ""))
          for case in ElementTree.fromstring(junit_xml).iter("testcase")
          if case.find("skipped") is None}


def folder_of_node(node_id: str) -> str:
  """``tests/cluster/test_a.py::test_b[x]`` -> ``tests/cluster``."""
  return posixpath.dirname(node_id.split("::", 1)[0]) or "."


def times(junit_xml: str) -> dict[str, tuple[int, float]]:
  """{folder: (tests run, seconds)} from a JUnit XML document."""
  found: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
  for case in ElementTree.fromstring(junit_xml).iter("testcase"):
    if case.find("skipped") is not None:
      continue
    row = found[folder_of_classname(case.get("classname", ""))]
    row[0] += 1
    row[1] += float(case.get("time", 0.0))
  return {folder: (count, seconds) for folder, (count, seconds)
          in found.items()}


def marked(collect_only_output: str,
           only: Optional[set[str]] = None) -> dict[str, int]:
  """{folder: tests} from ``pytest --collect-only -q`` output; with
  ``only``, just the node ids in it (the tests that ran)."""
  counts: collections.Counter = collections.Counter()
  for line in collect_only_output.splitlines():
    if "::" in line and not line.startswith(" "):
      if only is None or line.strip() in only:
        counts[folder_of_node(line.strip())] += 1
  return dict(counts)


def table(by_folder: dict[str, tuple[int, float]],
          processes: dict[str, int]) -> str:
  """The Markdown table, slowest folder first, then the total."""
  def row(name: str, count: int, seconds: float, started: int) -> str:
    per_test = seconds / count if count else 0.0
    return f"| {name} | {count} | {seconds:.1f} | {per_test:.2f} | {started} |"
  lines = ["| folder | tests | seconds | seconds per test | "
           "tests starting processes |", "|---|---:|---:|---:|---:|"]
  for folder, (count, seconds) in sorted(by_folder.items(),
                                         key=lambda item: -item[1][1]):
    lines.append(row(folder, count, seconds, processes.get(folder, 0)))
  lines.append(row("all", sum(c for c, _ in by_folder.values()),
                   sum(s for _, s in by_folder.values()),
                   sum(processes.get(f, 0) for f in by_folder)))
  return "\n".join(lines)


def main(argv: list[str]) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("junit_xml", help="pytest --junitxml output")
  parser.add_argument("--marked", help="pytest --collect-only -q -m "
                      "'subprocess or cluster' output (default: none)")
  args = parser.parse_args(argv)
  with open(args.junit_xml, encoding="utf-8") as f:
    junit = f.read()
  by_folder = times(junit)
  processes = {}
  if args.marked:
    with open(args.marked, encoding="utf-8") as f:
      processes = marked(f.read(), ran(junit))
  print(table(by_folder, processes))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
