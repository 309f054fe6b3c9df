"""docs/cluster.md's TF1 cluster programs, as written there, on 127.0.0.1.

``server.py`` runs for each of the three tasks (ps 0, worker 0, worker 1)
and ``train_ps.py`` beside each worker's server, each process with its own
``TF_CONFIG``, as the page starts them.  The two workers update the
variables on the ps task asynchronously, so their losses depend on the
order of their updates; what does not is where training ends: the data
has no noise, and the bias is learnt to the 1.00 the page shows.  Every
process has a bounded wait and is stopped at the end, also on a failure.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from compat_distribute.cluster import local as local_cluster
import support

pytestmark = [pytest.mark.subprocess, pytest.mark.cluster]

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "cluster.md").read_text()
TIMEOUT = 300  # seconds for a worker; a busy 2-core run took 50 s


def program(name: str) -> str:
  return support.doc_program("cluster.md", name)


def test_the_page_shows_what_the_workers_print():
  shown = re.search(r"^```text\n(worker 0: loss .*?)^```$", PAGE,
                    re.M | re.S).group(1)
  assert re.fullmatch(r"worker 0: loss \d+\.\d{3} at its first step, "
                      r"0\.000 at its last\nworker 0: b = 1\.00\n", shown), \
      shown


def test_two_workers_and_a_ps_train_as_the_page_says(tmp_path):
  for name in ("server.py", "train_ps.py"):
    (tmp_path / name).write_text(program(name))
  ports = local_cluster.free_ports(3)
  cluster = {"worker": [f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"],
             "ps": [f"127.0.0.1:{ports[2]}"]}
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
         "PYTHONPATH": os.pathsep.join(
             [str(ROOT), os.environ.get("PYTHONPATH", "")])}

  def start(script, task_type, index):
    config = json.dumps({"cluster": cluster,
                         "task": {"type": task_type, "index": index}})
    return subprocess.Popen(
        [sys.executable, str(tmp_path / script)], cwd=str(tmp_path),
        env={**env, "TF_CONFIG": config}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)

  processes = []
  try:
    servers = [start("server.py", "ps", 0), start("server.py", "worker", 0),
               start("server.py", "worker", 1)]
    processes += servers
    workers = [start("train_ps.py", "worker", i) for i in range(2)]
    processes += workers
    outputs = []
    for i, worker in enumerate(workers):
      out, err = worker.communicate(timeout=TIMEOUT)
      assert worker.returncode == 0, f"worker {i}:\n{out}\n{err[-4000:]}"
      outputs.append(out)
    for server in servers:
      assert server.poll() is None, "a server.py ended before it was stopped"
  finally:
    for process in processes:
      local_cluster.stop_process(process)
      process.communicate()
  first_losses = []
  for i, out in enumerate(outputs):
    lines = out.strip().splitlines()
    assert len(lines) == 2, out
    first, last = map(float, re.fullmatch(
        rf"worker {i}: loss (\d+\.\d+) at its first step, (\d+\.\d+) at "
        r"its last", lines[0]).groups())
    assert last == 0.0, lines[0]
    assert lines[1] == f"worker {i}: b = 1.00", lines[1]
    first_losses.append(first)
  # Asynchronous steps: a worker that starts late (a loaded machine) may
  # find the shared variables trained already, so only the first step of
  # the earliest worker is sure to see the untrained model.
  assert max(first_losses) > 0.5, first_losses
