"""docs/cluster.md's table of exit statuses names, on each row, tests that
exist and check that row.

Each row's tests are named in backquotes (``test_name`` or
``test_name[param]``); every one must be a test function of tests/, and a
``[param]`` one of its parametrized cases.  The table gives ``run``'s
lost-task status, ``supervisor.LOST_STATUS``, in its three meanings.
"""
import re

from compat_distribute.cluster import supervisor
import support

PAGE = (support.ROOT / "docs" / "cluster.md").read_text()
NAME = re.compile(r"`(test_\w+)(?:\[([^\]]+)\])?`")


def rows():
  """(first cell, tests named) of every row of the tables of the page's
  section "Exit statuses"."""
  match = re.search(r"^### Exit statuses\n(.*?)^### ", PAGE, re.M | re.S)
  assert match, "docs/cluster.md has no section 'Exit statuses'"
  found = []
  for line in match.group(1).splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if line.startswith("|") and cells[0] not in ("status", "---"):
      found.append((cells[0], NAME.findall(cells[-1])))
  return found


def test_every_row_names_tests_that_exist():
  sources = {path: path.read_text()
             for path in support.TESTS.rglob("test_*.py")}
  table = rows()
  assert len(table) > 10, table
  for status, tests in table:
    assert tests, f"the row of status {status} names no test"
    for name, param in tests:
      files = [text for text in sources.values()
               if re.search(rf"^def {name}\(", text, re.M)]
      assert files, f"{name} (row {status}) is not a test of tests/"
      if param:
        assert any(f'"{param}"' in text for text in files), (
            f"{name}[{param}]: no such case")


def test_the_table_gives_the_lost_task_status_in_its_three_meanings():
  statuses = [status for status, _ in rows()]
  lost = str(supervisor.LOST_STATUS)
  assert [s for s in statuses if s.split(",")[0] == lost] == [
      f"{lost}, restarted", lost, f"{lost}, the program's own"]
