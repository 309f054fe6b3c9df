"""Task processes end when the process that started them is SIGKILLed.

A test's timeout or ``kill -9`` gives a ``ServedCluster`` / ``LocalCluster``
no chance to stop its tasks; they must not outlive it (a ``serve`` task
waiting for its chief, a chief stuck inside TensorFlow).

``end_with_parent`` itself runs only in child processes here, never in
the pytest process: its parent-is-gone path ends the calling process, and
where pytest's parent is PID 1 (a container's init) a stale mark would
take that path and end the session.
"""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from compat_distribute.cluster import addresses
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


# A child process: loads lifetime.py by its path (no TensorFlow import),
# calls end_with_parent with the mark in its environment, prints the result
# and what is left of the mark, then sleeps (so it ends only if the call
# armed the end).  argv[1]: the poll interval.
CHILD = textwrap.dedent("""\
    import importlib.util, json, os, sys, time
    spec = importlib.util.spec_from_file_location("lifetime", {path!r})
    lifetime = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lifetime)
    acted = lifetime.end_with_parent(poll_seconds=float(sys.argv[1]))
    print(json.dumps([acted, os.environ.get(lifetime.PARENT_VARIABLE)]),
          flush=True)
    time.sleep(120)
    """).format(path=lifetime.__file__)

# The parent: starts one child marked as started from its main thread
# (kernel signal and watcher) and one marked as started from another
# thread (watcher only), waits until each has called end_with_parent,
# prints their pids and what they said, and exits.
EXITING_PARENT = textwrap.dedent("""\
    import json, os, subprocess, sys
    child_script = sys.argv[1]
    children = []
    for started_from in ("main", "thread"):
      env = dict(os.environ)
      env[{variable!r}] = f"{{os.getpid()}}:{{started_from}}"
      children.append(subprocess.Popen(
          [sys.executable, child_script, "0.05"], env=env,
          stdout=subprocess.PIPE, text=True))
    said = [json.loads(child.stdout.readline()) for child in children]
    print(json.dumps([[c.pid for c in children], said]), flush=True)
    os._exit(0)
    """).format(variable=lifetime.PARENT_VARIABLE)


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


@pytest.mark.subprocess
def test_mark_of_another_parent_is_removed_and_ignored(tmp_path):
  # In a child of pytest (never pytest itself): its parent is pytest, not
  # pid 2**22 + 1, a stale mark; it returns False and lives on.
  child_script = tmp_path / "child.py"
  child_script.write_text(CHILD)
  child = subprocess.Popen(
      [sys.executable, str(child_script), "0.05"], stdout=subprocess.PIPE,
      text=True, env={**os.environ,
                      lifetime.PARENT_VARIABLE: f"{2**22 + 1}:main"})
  try:
    assert json.loads(child.stdout.readline()) == [False, None]
    assert child.poll() is None, "a stale mark ended the process"
  finally:
    child.kill()
    child.wait(timeout=10)
    child.stdout.close()


@pytest.mark.subprocess
def test_children_end_by_themselves_when_their_parent_exits(tmp_path):
  child_script = tmp_path / "child.py"
  child_script.write_text(CHILD)
  parent_script = tmp_path / "exiting_parent.py"
  parent_script.write_text(EXITING_PARENT)
  parent = subprocess.Popen(
      [sys.executable, str(parent_script), str(child_script)],
      stdout=subprocess.PIPE, text=True)
  pids = []
  try:
    pids, said = json.loads(parent.stdout.readline())
    # Each acted and took the mark out of its environment.
    assert said == [[True, None], [True, None]]
    assert parent.wait(timeout=30) == 0
    assert _wait_until(lambda: not any(_alive(pid) for pid in pids), 30), (
        f"children outlived their exited parent: "
        f"{[pid for pid in pids if _alive(pid)]}")
  finally:
    parent.kill()
    parent.wait(timeout=10)
    parent.stdout.close()
    for pid in pids:
      if _alive(pid):
        os.kill(pid, 9)


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
    assert _wait_until(lambda: addresses.accepts(worker_address), 60), (
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
