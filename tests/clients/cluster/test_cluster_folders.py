"""Where a served cluster's files go, what ``serve`` says, and IPv6.

* A relative checkpoint folder in the chief's program means the chief's
  folder, as on one machine, wherever each ``serve`` runs: the chief reads
  and writes the files of a checkpoint under a relative prefix itself
  (the ps tasks send it their values), so docs/cluster.md's
  ``train_fit.py`` (its default folder is the relative ``model``) saves
  into the chief's folder and resumes from it, and nothing lands in the
  folder the ps runs in.
* ``serve`` creates nothing in the system temp folder (``TMPDIR`` points
  at a folder of the test's), also when SIGKILLed, and removes a "done"
  file a killed ``serve`` of its task left.
* ``serve``'s output: its address and folder, the chief it waits for, the
  end and its status; TensorFlow's INFO lines (its server's start, the
  session-options dump) only with ``TF_CPP_MIN_LOG_LEVEL=0``.
* ``[::1]:port`` addresses in ``TF_CONFIG``: a cluster runs and ends as on
  127.0.0.1 (skipped where this machine has no IPv6 loopback).

Loopback ports picked free; every wait bounded; every process stopped.
"""
import os
import signal
import socket

import pytest

from compat_distribute.cluster import folders
from compat_distribute.cluster import local_served
import support
from test_cluster_v2 import doc_program  # pylint: disable=import-error

pytestmark = [pytest.mark.cluster, pytest.mark.subprocess, pytest.mark.slow]

ROOT = str(support.ROOT)
ENV = {"PYTHONPATH": ROOT, "COMPAT_DISTRIBUTE_CLUSTER_WAIT": "60"}
TIMEOUT = 240


def _folders(tmp_path):
  work, system_temp = tmp_path / "work", tmp_path / "system_temp"
  work.mkdir()
  system_temp.mkdir()
  return work, system_temp


def _ok(result):
  assert result.returncode == 0 and not result.timed_out, (
      f"{result.task} failed (exit {result.returncode}):\n"
      f"{result.stdout[-2000:]}\n{result.stderr[-5000:]}")
  return result


@support.MORE  # the default's: a relative folder wherever serve runs
def test_relative_checkpoint_folder_resolves_where_every_command_starts(
    tmp_path):
  work, system_temp = _folders(tmp_path)
  (work / "train_fit.py").write_text(doc_program("train_fit.py"))
  env = {**ENV, "TMPDIR": str(system_temp)}
  cluster = local_served.ServedCluster(num_workers=1, num_ps=1, env=env,
                                       cwd=str(work))
  try:
    # TensorFlow's INFO lines: off for the ps (TF_CPP_MIN_LOG_LEVEL unset),
    # on for the worker (0).
    cluster.start_server("ps", 0, env={"TF_CPP_MIN_LOG_LEVEL": None})
    cluster.start_server("worker", 0, env={"TF_CPP_MIN_LOG_LEVEL": "0"})
    cluster.wait_ready()
    first = _ok(cluster.run_chief("train_fit.py", ["model", "1"],
                                  timeout=TIMEOUT))
    servers = cluster.wait_servers(60)
  finally:
    cluster.stop()
  # The relative "model" is the chief's folder's: both parts and the index.
  saved = sorted(os.listdir(work / "model"))
  assert "ckpt-1.index" in saved and "checkpoint" in saved, saved
  assert len([n for n in saved if n.startswith("ckpt-1.data-")]) == 2, saved
  assert not [n for n in os.listdir(work)
              if n.startswith(folders.DONE_PREFIX)]
  assert _left_in(system_temp) == []
  chief = cluster.cluster["chief"][0]
  for (job, index), address in (
      (("ps", 0), cluster.cluster["ps"][0]),
      (("worker", 0), cluster.cluster["worker"][0])):
    result = servers[f"/job:{job}/task:{index}"]
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"compat_distribute serve: /job:{job}/task:{index} serving at "
        f"{address} (port {address.rsplit(':', 1)[1]} on every interface), "
        f"in {work} (relative paths of ops the chief runs here resolve "
        f"there); waiting up to {local_served.CLIENT_WAIT:g} s for the chief "
        f"at {chief}"), lines
    assert lines[-2:] == [
        "compat_distribute serve: the chief says its job is done; stopping",
        "compat_distribute serve: exit status 0"], lines
    assert all(line.startswith("compat_distribute serve: ")
               for line in lines), lines
  # TensorFlow's INFO lines of the server (its start, the session options
  # of the chief's context) only where asked for.  (TensorFlow's oneDNN
  # line at import shows at any level: it is written before its logging
  # reads the level.)
  # (Which INFO lines a server writes changes with the version: TensorFlow
  # 2.12's eager service logs no SessionOptions dump.)
  for text in ("SessionOptions", "Started server with target"):
    assert text not in servers["/job:ps/task:0"].stderr
  assert "Started server with target" in servers["/job:worker/task:0"].stderr


def test_a_relative_checkpoint_folder_is_the_chiefs_wherever_serve_runs(
    tmp_path):
  work, system_temp = _folders(tmp_path)  # where the ps and worker run
  chief_folder = tmp_path / "chief"
  chief_folder.mkdir()
  (chief_folder / "train_fit.py").write_text(doc_program("train_fit.py"))
  env = {**ENV, "TMPDIR": str(system_temp)}

  def run_chief(epochs):
    with local_served.ServedCluster(num_workers=1, num_ps=1, env=env,
                                    cwd=str(work)) as cluster:
      result = _ok(cluster.collect(
          cluster.start_chief("train_fit.py", ["model", epochs],
                              cwd=str(chief_folder)), TIMEOUT))
      cluster.wait_servers(60)
    return _final_weights(result)

  trained = run_chief("1")
  saved = sorted(os.listdir(chief_folder / "model"))
  assert "ckpt-1.index" in saved and "checkpoint" in saved, saved
  # Nothing of it where the ps runs (nor any file of serve's, at its end).
  assert os.listdir(work) == []
  # A fresh cluster, its tasks again in their own folder, restores it.
  assert run_chief("0") == trained
  assert os.listdir(work) == []
  assert _left_in(system_temp) == []


def _final_weights(result):
  lines = [line for line in result.stdout.splitlines()
           if line.startswith("final weights: ")]
  assert len(lines) == 1, result.stdout
  return lines[0]


def test_serve_killed_leaves_nothing_and_its_next_start_cleans_up(tmp_path):
  work, system_temp = _folders(tmp_path)
  cluster = local_served.ServedCluster(
      num_workers=1, num_ps=1, env={**ENV, "TMPDIR": str(system_temp)},
      cwd=str(work), client_wait=300)
  address = cluster.cluster["worker"][0]
  # What a serve SIGKILLed between the chief's "done" and its reading left:
  # its next start must not take it for this chief's.
  leftover = work / folders.done_file("worker", 0, address)
  leftover.write_text("done")
  try:
    process = cluster.start_server("worker", 0)
    local_served.wait_for_text(process, "waiting up to 300 s", 90,
                               stream="out")
    assert not leftover.exists()
    assert process.poll() is None  # still waiting for its chief
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
  finally:
    cluster.stop()
  assert _left_in(system_temp) == []
  assert os.listdir(work) == []


def _left_in(folder):
  """What is in ``folder`` but the bytecode cache Python writes beside the
  files TensorFlow 2.12's autograph generates there for the chief's
  ``tf.function`` (autograph removes its files, not their cache): what a
  ``serve`` could have left."""
  left = []
  for name in sorted(os.listdir(folder)):
    if name == "__pycache__" and all(
        entry.startswith("__autograph_generated_file")
        for entry in os.listdir(os.path.join(folder, name))):
      continue
    left.append(name)
  return left


def _has_ipv6_loopback():
  try:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
      s.bind(("::1", 0))
    return True
  except OSError:
    return False


@pytest.mark.skipif(not _has_ipv6_loopback(),
                    reason="this machine has no IPv6 loopback (::1)")
def test_an_ipv6_cluster_runs_and_ends_as_on_ipv4(tmp_path):
  work, _ = _folders(tmp_path)
  (work / "train_fit.py").write_text(doc_program("train_fit.py"))
  with local_served.ServedCluster(num_workers=1, num_ps=1, env=ENV,
                                  cwd=str(work), host="::1") as cluster:
    assert cluster.cluster["ps"][0].startswith("[::1]:")
    result = _ok(cluster.run_chief("train_fit.py", ["model", "1"],
                                   timeout=TIMEOUT))
    servers = cluster.wait_servers(60)
  assert "replicas: 1" in result.stdout
  assert "ckpt-1.index" in os.listdir(work / "model")
  for name, served in servers.items():
    assert served.returncode == 0, (name, served.stdout, served.stderr[-2000:])
    assert served.stdout.splitlines()[-1] == (
        "compat_distribute serve: exit status 0")
