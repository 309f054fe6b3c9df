"""Task processes end when the process that started them is SIGKILLed.

A test's timeout or ``kill -9`` gives a ``ServedCluster`` / ``LocalCluster``
no chance to stop its tasks; they must not outlive it (a ``serve`` task
waiting for its chief, a chief stuck inside TensorFlow).
"""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from compat_distribute.cluster import lifetime
from compat_distribute.cluster import local

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc")

# The chief's script: says it is running, then blocks in C *holding the
# GIL* (PyDLL does not release it), as a chief stuck in TensorFlow can, so
# no Python thread of its own could end it.
STUCK_CHIEF = textwrap.dedent("""\
    import ctypes, sys
    open(sys.argv[1], "w").close()
    ctypes.PyDLL(None).sleep(120)
    """)

# The parent: starts a chief under `run` and a worker's `serve` the way the
# clusters do (local.start_process), prints their pids, then waits.
PARENT = textwrap.dedent("""\
    import json, sys, time
    from compat_distribute.cluster import local
    chief_script, started_file, tf_config = sys.argv[1:4]
    logs = []
    chief = local.start_process(
        [sys.executable, "-m", "compat_distribute", "run", chief_script,
         started_file], {}, logs)
    serve = local.start_process(
        [sys.executable, "-m", "compat_distribute", "serve",
         "--client-wait", "120"], {"TF_CONFIG": tf_config}, logs)
    print(json.dumps([chief.pid, serve.pid]), flush=True)
    time.sleep(120)
    """)


def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False


def _wait_until(predicate, timeout: float) -> bool:
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if predicate():
      return True
    time.sleep(0.1)
  return predicate()


def test_child_environment_names_this_process():
  env = lifetime.child_environment({"A": "1"})
  assert env["A"] == "1"
  assert env[lifetime.PARENT_VARIABLE] == f"{os.getpid()}:main"


def test_unmarked_process_is_left_alone():
  environ = {"OTHER": "x"}
  assert lifetime.end_with_parent(environ) is False
  assert environ == {"OTHER": "x"}


def test_mark_of_another_parent_is_removed_and_ignored():
  # Our parent is pytest's parent, not pid 2**22 + 1: a stale mark.
  environ = {lifetime.PARENT_VARIABLE: f"{2**22 + 1}:main"}
  assert lifetime.end_with_parent(environ) is False
  assert lifetime.PARENT_VARIABLE not in environ


@pytest.mark.subprocess
def test_tasks_end_when_their_starter_is_killed(tmp_path):
  chief_script = tmp_path / "stuck_chief.py"
  chief_script.write_text(STUCK_CHIEF)
  parent_script = tmp_path / "parent.py"
  parent_script.write_text(PARENT)
  started = tmp_path / "chief_started"
  worker_address = f"{local.LOOPBACK}:{local.free_ports(1)[0]}"
  spec = {"chief": [f"{local.LOOPBACK}:{local.free_ports(1)[0]}"],
          "worker": [worker_address],
          "ps": [f"{local.LOOPBACK}:{local.free_ports(1)[0]}"]}
  parent = subprocess.Popen(
      [sys.executable, str(parent_script), str(chief_script), str(started),
       local.tf_config(spec, "worker", 0)],
      stdout=subprocess.PIPE, text=True)
  pids = []
  try:
    pids = json.loads(parent.stdout.readline())
    assert _wait_until(started.exists, 60), "the chief never started"
    assert _wait_until(lambda: local.port_open(worker_address), 60), (
        "serve never listened")
    assert all(_alive(pid) for pid in pids)
    parent.kill()
    parent.wait(timeout=10)
    assert _wait_until(lambda: not any(_alive(pid) for pid in pids), 15), (
        f"tasks outlived their killed parent: "
        f"{[pid for pid in pids if _alive(pid)]}")
  finally:
    parent.kill()
    parent.wait(timeout=10)
    parent.stdout.close()
    for pid in pids:
      if _alive(pid):
        os.kill(pid, 9)
