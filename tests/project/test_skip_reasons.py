"""docs/architecture.md's table of skipped tests: tools/skip_reasons.py
makes it from JUnit files, every row names what runs the skipped tests, and
a default run (COMPAT_DISTRIBUTE_CHECK_SKIPS=1) fails on a skip the table
does not list while one it lists passes."""
import configparser
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

import support

ROOT = support.ROOT
TOOL = ROOT / "tools" / "skip_reasons.py"
PAGE = ROOT / "docs" / "architecture.md"
_spec = importlib.util.spec_from_file_location("skip_reasons", TOOL)
skip_reasons = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(skip_reasons)

LISTED = ("tests/estimator/test_estimator_path.py",
          "TensorFlow 2.16+ lacks the path; the tests below check what is "
          "supplied there")
JUNIT = """<testsuites><testsuite>
<testcase classname="tests.estimator.test_estimator_path" name="t1">
<skipped type="pytest.skip" message="{reason}">/x/{file}:45: {reason}</skipped>
</testcase>
<testcase classname="tests.a.test_b" name="t2"/>
</testsuite></testsuites>
"""


def tox_environments():
  ini = configparser.ConfigParser(interpolation=None)
  ini.read(ROOT / "tox.ini")
  names = {section.split(":", 1)[1] for section in ini.sections()
           if section.startswith("testenv:")}
  for value in (ini["tox"]["envlist"], ini["tox"]["labels"]):
    names |= set(re.findall(r"\b(?:tf|py)\d[\w-]*", value))
  return names


def test_every_row_names_an_existing_file_and_what_runs_it():
  rows = skip_reasons.rows(PAGE.read_text())
  assert rows, "docs/architecture.md has no table of skipped tests"
  environments = tox_environments()
  for row in rows:
    where, reason, *counts, run_by = row
    assert (ROOT / where).is_file(), where
    assert reason and all(count.isdigit() for count in counts), row
    named = re.findall(r"`([\w-]+)`", run_by)
    assert named and all(name in environments for name in named) or (
        run_by.startswith("none:")), row


def test_a_reason_is_generalized_and_matched():
  reason = ("tensorflow_ranking is not installed for /w/.tox/tf221/bin/"
            "python; tox -e estimator-libs installs the libraries")
  assert skip_reasons.generalize(reason) == (
      "tensorflow_ranking is not installed for …; tox -e estimator-libs "
      "installs the libraries")
  assert skip_reasons.covers(skip_reasons.generalize(reason), reason)
  assert not skip_reasons.covers(skip_reasons.generalize(reason),
                                 reason.replace("ranking", "privacy"))
  assert skip_reasons.skip_key("/w/tests/x/test_y.py", "TensorFlow 2.12.1 "
                               "has no z") == ("tests/x/test_y.py",
                                               "TensorFlow … has no z")


def test_unlisted_names_only_what_the_table_lacks():
  page = PAGE.read_text()
  assert skip_reasons.unlisted([LISTED], page) == []
  elsewhere = ("tests/a/test_b.py", LISTED[1])
  assert skip_reasons.unlisted([LISTED, elsewhere], page) == [elsewhere]


@pytest.mark.subprocess
def test_the_pages_command_makes_the_table_keeping_run_by(tmp_path):
  command = re.search(r"`(tools/skip_reasons\.py [^`]+)`",
                      " ".join(PAGE.read_text().split())).group(1)
  for folder in ("tools", "docs"):
    (tmp_path / folder).mkdir()
  shutil.copy(TOOL, tmp_path / "tools")
  shutil.copy(PAGE, tmp_path / "docs")
  for env in ("tf221", "tf212"):
    log = tmp_path / ".tox" / env / "log"
    log.mkdir(parents=True)
    reason = LISTED[1] if env == "tf221" else "a new reason in 2.12.1"
    (log / "junit.xml").write_text(JUNIT.format(reason=reason,
                                                file=LISTED[0]))
  result = subprocess.run([sys.executable, *command.split()], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
  assert result.returncode == 0, result.stderr
  run_by = next(row[-1] for row in skip_reasons.rows(PAGE.read_text())
                if tuple(row[:2]) == LISTED)
  assert result.stdout.splitlines() == [
      "| test file | reason | tf221 | tf212 | run by |",
      "|---|---|---:|---:|---|",
      f"| {LISTED[0]} | {LISTED[1]} | 1 | 0 | {run_by} |",
      f"| {LISTED[0]} | a new reason in … | 0 | 1 | ? |"]


@pytest.mark.subprocess
@pytest.mark.parametrize("reason, status", [
    (LISTED[1], 0), ("a reason no row lists", 1)])
def test_a_checked_run_fails_on_a_skip_the_table_lacks(tmp_path, reason,
                                                       status):
  test = tmp_path / LISTED[0]
  test.parent.mkdir(parents=True)
  test.write_text(f"import pytest\n\ndef test_skips():\n"
                  f"  pytest.skip({reason!r})\n")
  env = {**os.environ, "COMPAT_DISTRIBUTE_CHECK_SKIPS": "1",
         "PYTHONPATH": str(ROOT / "tests"), "TF_CPP_MIN_LOG_LEVEL": "3"}
  result = subprocess.run(
      [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
       "-p", "conftest", "--rootdir", str(tmp_path), str(test)],
      cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
  assert result.returncode == status, result.stdout[-3000:]
  assert "1 skipped" in result.stdout
  lacking = "skips docs/architecture.md does not list"
  assert (lacking in result.stdout) == bool(status), result.stdout[-3000:]
  if status:
    assert f"| {LISTED[0]} | {reason} |" in result.stdout


def test_the_tool_checks_its_example():
  import doctest  # pylint: disable=g-import-not-at-top
  assert doctest.testmod(skip_reasons).failed == 0
