"""tools/test_times.py: the per-folder table of docs/architecture.md from a
JUnit XML file and a ``--collect-only -q`` listing."""
import importlib.util
import subprocess
import sys

import pytest

import support

TOOL = support.ROOT / "tools" / "test_times.py"
_spec = importlib.util.spec_from_file_location("test_times", TOOL)
test_times = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(test_times)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.cluster.test_a" name="t1" time="2.5"/>
<testcase classname="tests.cluster.test_a" name="t2[x]" time="1.5"/>
<testcase classname="tests.clients.keras.test_fit.TestFit" name="t3"
          time="0.25"/>
<testcase classname="tests.clients.keras.test_fit" name="t4" time="0.0">
  <skipped message="no GPU"/></testcase>
<testcase classname="tests.api.test_b" name="t5" time="9.0">
  <failure message="x">boom</failure></testcase>
</testsuite></testsuites>
"""
COLLECTED = """tests/cluster/test_a.py::t1
tests/cluster/test_a.py::t2[x]
tests/clients/keras/test_fit.py::TestFit::t3
tests/clients/keras/test_fit.py::t4

4/6 tests collected (2 deselected) in 0.50s
"""


def test_folders_of_junit_classnames_and_node_ids():
  assert test_times.folder_of_classname(
      "tests.clients.keras.test_fit.TestFit") == "tests/clients/keras"
  assert test_times.folder_of_classname("tests.test_top") == "tests"
  assert test_times.folder_of_node(
      "tests/cluster/test_a.py::t2[a/b::c]") == "tests/cluster"


def test_times_count_run_tests_and_their_seconds():
  assert test_times.times(JUNIT) == {"tests/cluster": (2, 4.0),
                                     "tests/clients/keras": (1, 0.25),
                                     "tests/api": (1, 9.0)}
  assert test_times.marked(COLLECTED) == {"tests/cluster": 2,
                                          "tests/clients/keras": 2}
  # Only the tests that ran: t4 was skipped.
  assert test_times.ran(JUNIT) == {
      "tests/cluster/test_a.py::t1", "tests/cluster/test_a.py::t2[x]",
      "tests/clients/keras/test_fit.py::TestFit::t3",
      "tests/api/test_b.py::t5"}
  assert test_times.marked(COLLECTED, test_times.ran(JUNIT)) == {
      "tests/cluster": 2, "tests/clients/keras": 1}


@pytest.mark.subprocess
def test_table_slowest_first_with_a_total(tmp_path):
  junit, listing = tmp_path / "t.xml", tmp_path / "m.txt"
  junit.write_text(JUNIT)
  listing.write_text(COLLECTED)
  result = subprocess.run(
      [sys.executable, str(TOOL), str(junit), "--marked", str(listing)],
      capture_output=True, text=True, timeout=60)
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines() == [
      "| folder | tests | seconds | seconds per test | "
      "tests starting processes |",
      "|---|---:|---:|---:|---:|",
      "| tests/api | 1 | 9.0 | 9.00 | 0 |",
      "| tests/cluster | 2 | 4.0 | 2.00 | 2 |",
      "| tests/clients/keras | 1 | 0.2 | 0.25 | 1 |",
      "| all | 4 | 13.2 | 3.31 | 3 |"]


def test_the_tool_checks_its_example():
  import doctest  # pylint: disable=g-import-not-at-top
  assert doctest.testmod(test_times).failed == 0
