"""docs/cluster.md's one-machine restart recipe, run as printed.

``one_machine.sh`` (extracted from the page, run by ``sh`` unchanged, its
``PORTS`` and ``JOB`` given in the environment as the page says: four
free loopback ports and a folder of this test's own) starts 1 ps x 2
workers on 127.0.0.1, each ``serve`` under the page's bare-host restart
loop, runs the page's ``train_resume.py`` (Keras ``fit`` with
``BackupAndRestore``) under ``run --max-restarts 3``, kills worker 1's
``serve`` and then the ps's with ``kill -9``; the loops start them again,
the program resumes twice and ends.  Checked: the lines the page shows
after the script are in what it printed (times, ports, counts and the
folder aside; `` ... `` on the page stands for any text), every ``serve`` ended with status 0 once told the job was
done, and the program's end weights are those of native TensorFlow's
uninterrupted run (its own ``CentralStorageStrategy`` on two logical CPUs
of one machine: two replicas, as the cluster's two workers; ``rtol=1e-5``
as tests/clients/cluster/test_cluster_v2.py).

Every wait is bounded: the script's own waits end when ``run`` ends, and
the script as a whole has ``TIMEOUT`` seconds, after which its process
group is killed.
"""
import os
import re
import signal
import subprocess
import sys

import pytest

from compat_distribute.cluster import local as local_cluster
import support
from support import native_cluster

pytestmark = [pytest.mark.subprocess, pytest.mark.cluster]

PAGE = (support.ROOT / "docs" / "cluster.md").read_text()
TIMEOUT = 420  # seconds; a run on the shared 2-core machine took 85 s
# The page's example folder, in the lines it shows.
PAGE_JOB = "/home/me/job"
KERAS_REFUSES = "BackupAndRestore callback only supports"


def shown_lines():
  """The ```text block right after one_machine.sh: what the page says the
  script prints."""
  match = re.search(r"^```sh\n# one_machine\.sh\n.*?^```$.*?^```text\n(.*?)^```$",
                    PAGE, re.M | re.S)
  assert match, "docs/cluster.md shows no output after one_machine.sh"
  return match.group(1).splitlines()


def normal(line, job):
  """``line`` with what differs from run to run made the same: the folder,
  clock times, and every number (ports, seconds, epochs)."""
  line = line.replace(job, PAGE_JOB)
  line = re.sub(r"\d\d:\d\d:\d\d", "HH:MM:SS", line)
  return re.sub(r"\d+(\.\d+)?", "N", line)


def run_script(tmp_path):
  job = tmp_path / "job"
  job.mkdir()
  (job / "train_resume.py").write_text(
      support.doc_program("cluster.md", "train_resume.py"))
  script = tmp_path / "one_machine.sh"
  script.write_text(support.doc_program("cluster.md", "one_machine.sh", "sh"))
  env = {**os.environ, "PORTS": " ".join(map(str, local_cluster.free_ports(4))),
         "JOB": str(job), "PYTHONPATH": str(support.ROOT),
         # `python` on the page is this test's Python.
         "PATH": os.pathsep.join([os.path.dirname(sys.executable),
                                  os.environ.get("PATH", "")])}
  env.pop("TF_CONFIG", None)
  process = subprocess.Popen(["sh", str(script)], env=env, cwd=str(tmp_path),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)
  try:
    out, _ = process.communicate(timeout=TIMEOUT)
  except subprocess.TimeoutExpired:
    os.killpg(process.pid, signal.SIGKILL)
    out, _ = process.communicate()
    pytest.fail(f"one_machine.sh did not end within {TIMEOUT} s:\n{out}\n"
                f"{(job / 'chief.log').read_text()[-6000:]}")
  finally:
    try:  # the script's serve loops and programs, if any is left
      os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
  return job, process.returncode, out


def native_uninterrupted(tmp_path):
  """train_resume.py as printed, run by native TensorFlow alone, never
  killed: the reference weights (a skip where this Keras' BackupAndRestore
  refuses the strategy, as the page says of TensorFlow 2.12's)."""
  native = tmp_path / "native_train_resume.py"
  native.write_text(native_cluster.native_source(
      support.doc_program("cluster.md", "train_resume.py")))
  result = native_cluster.run_native(
      str(native), [str(tmp_path / "native_backup")], TIMEOUT)
  if KERAS_REFUSES in result.stderr:
    pytest.skip("this Keras' tf.keras.callbacks.BackupAndRestore refuses "
                "CentralStorageStrategy, TensorFlow's own too "
                "(NotImplementedError; docs/cluster.md says so); "
                "tests/clients/cluster/test_cluster_restart.py's custom "
                "loop covers the restart here")
  assert result.returncode == 0, result.stderr[-5000:]
  return native_cluster.final_weights(result.stdout, "native")


@support.MORE  # tests/clients/cluster/test_cluster_restart.py[loop] is the default run's restart
def test_one_machine_recipe_resumes_twice_at_native_uninterrupted_weights(
    tmp_path):
  reference = native_uninterrupted(tmp_path)
  job, status, out = run_script(tmp_path)
  chief_log = (job / "chief.log").read_text()
  assert status == 0 and "run ended with status 0" in out, (
      f"{out}\n{chief_log[-8000:]}")
  printed = [normal(line, str(job)) for line in out.splitlines()]
  for line in shown_lines():
    shown = re.compile(re.escape(normal(line, PAGE_JOB)).replace(
        re.escape(" ... "), " .* "))  # "..." on the page: text left out
    assert any(shown.fullmatch(p) for p in printed), (
        f"the page shows a line this run did not print:\n{line}\n\n{out}")
  # Both kills hit the program while it trained: it resumed twice.
  assert "restart 2 of 3: resuming from" in out, out
  for name in ("worker0.log", "worker1.log", "ps0.log"):
    log = (job / name).read_text()
    assert log.rstrip().endswith("ended with status 0"), log[-3000:]
    assert "the chief says its job is done" in log, log[-3000:]
  # The end weights: those of TensorFlow's own strategy, never interrupted.
  native_cluster.assert_same(
      native_cluster.final_weights(chief_log, "the restarted program"),
      reference)
