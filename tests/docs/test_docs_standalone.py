"""Every docs page's examples run when pasted into a script (issue 15).

``test_docs.py`` runs the pages inside pytest, where ``tf`` and ``np`` are
given and ``conftest.py`` has split the CPU already.  Here each page runs in
a fresh process with neither (``fixtures/standalone_doc_page.py``), so a
page must show its own imports and device set-up.  Nothing it runs may log
TensorFlow warnings, or report a missing CPU (a sign of a device used before
the set-up made it); the warnings a page demonstrates on purpose are listed.
"""
import os
import re
import subprocess
import sys

import pytest
import support

ROOT = support.ROOT
RUNNER = ROOT / "tests" / "fixtures" / "standalone_doc_page.py"
PAGES = sorted(p for p in (ROOT / "docs").glob("*.md")
               if ">>> " in p.read_text())
# Lines on stderr a page shows on purpose.
EXPECTED = {
    # The missing-device warning, for a GPU the machine does not have.
    "one_device.md": [r"^WARNING:compat_distribute:OneDeviceStrategy: "
                      r"device \S+GPU:5 does not exist"],
    # The runner's error for a script that does not exist.
    "migration.md": [r"^compat_distribute run: can't open file"],
    # experimental_run is deprecated (warned once).
    "v1.md": [r"DeprecationWarning: Strategy.experimental_run is deprecated",
              r"^\s+per_replica_loss = strategy.experimental_run"],
}
# TensorFlow's start-up chatter from C++ (not silenced by every version).
NOISE = re.compile(r"^(W0000|I0000|WARNING: All log messages before absl|"
                   r"To enable the following instructions|.*oneDNN)")


def test_pages_found():
  assert {"strategy.md", "v1.md", "central_storage.md"} <= {
      p.name for p in PAGES}


@pytest.mark.subprocess
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_runs_as_a_script(page):
  done = subprocess.run(
      [sys.executable, str(RUNNER), str(page)], cwd=str(ROOT / "tests"),
      env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
      capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, (
      f"docs/{page.name} does not run on its own (no tf/np given, no devices "
      f"made beforehand):\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}")
  allowed = [re.compile(p) for p in EXPECTED.get(page.name, [])]
  unexpected = [line for line in done.stderr.splitlines()
                if line.strip() and not NOISE.match(line)
                and not any(p.search(line) for p in allowed)]
  assert not unexpected, (
      f"docs/{page.name} logs or warns when run as a script:\n" +
      "\n".join(unexpected[:20]))
