"""``run --max-restarts N``'s decisions (``cluster.supervisor``).

The supervisor's loop runs tiny child processes (plain Python, no
TensorFlow) that end with the status under test; the child runner's side
(which exception means a lost task) runs in-process.  The restart of a
real TensorFlow program on a cluster is tests/clients/cluster/
test_cluster_restart.py.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import tensorflow as tf

from compat_distribute import __main__ as runner
from compat_distribute.cluster import supervisor
import support

# A child that records its restart number and ends as given for that run
# (the last one repeated): a number is its own exit status; "lost" ends as
# the runner ends a program on a lost task (what was lost written into the
# supervisor's file, status 75); "killed" and "lost-killed" (after
# writing that file) die by SIGKILL.
CHILD = textwrap.dedent("""\
    import json, os, signal, sys
    with open(sys.argv[1], "a") as f:
      f.write(os.environ["COMPAT_DISTRIBUTE_RESTART"] + "\\n")
    runs = sum(1 for _ in open(sys.argv[1]))
    how = sys.argv[2:][min(runs, len(sys.argv) - 2) - 1]
    if how.startswith("lost"):
      with open(os.environ["COMPAT_DISTRIBUTE_LOSS_FILE"], "w") as f:
        json.dump({"error": "UnavailableError: Socket closed", "time": 0}, f)
    if how.endswith("killed"):
      os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(75 if how == "lost" else int(how))
    """)


@pytest.fixture
def listening():
  """An address that accepts connections (a task that answers)."""
  server = socket.socket()
  server.bind(("127.0.0.1", 0))
  server.listen(16)
  yield f"127.0.0.1:{server.getsockname()[1]}"
  server.close()


def tf_config(*addresses):
  return json.dumps({"cluster": {"chief": ["127.0.0.1:1"],
                                 "worker": list(addresses[:-1]),
                                 "ps": list(addresses[-1:])},
                     "task": {"type": "chief", "index": 0}})


def supervise(tmp_path, statuses, max_restarts, monkeypatch, addresses,
              task_wait=30.0):
  script = tmp_path / "child.py"
  script.write_text(CHILD)
  runs = tmp_path / "runs.txt"
  monkeypatch.setenv("TF_CONFIG", tf_config(*addresses))
  status = supervisor.supervise(
      str(script), [], supervisor.RestartPlan(max_restarts, task_wait),
      command=[sys.executable, str(script), str(runs),
               *map(str, statuses)])
  return status, runs.read_text().split()


@pytest.mark.subprocess
def test_lost_task_restarts_until_the_program_ends(tmp_path, monkeypatch,
                                                   capfd, listening):
  status, runs = supervise(tmp_path, ["lost", "lost", 0], 3, monkeypatch,
                           [listening, listening])
  assert status == 0
  assert runs == ["0/3", "1/3", "2/3"]
  err = capfd.readouterr().err
  assert "restart 1 of 3: waiting up to 30 s for every task" in err
  assert "starting the program again (restart 2 of 3)" in err
  assert "restart 3" not in err


@pytest.mark.subprocess
@pytest.mark.parametrize("status", [1, 2, 3, 130])
def test_the_programs_own_failure_is_final_with_its_status(
    tmp_path, monkeypatch, capfd, listening, status):
  assert supervise(tmp_path, [status], 3, monkeypatch,
                   [listening, listening]) == (status, ["0/3"])
  assert "restart" not in capfd.readouterr().err


@pytest.mark.subprocess
@pytest.mark.parametrize("how, status, said", [
    pytest.param(75, 75, "the program exited with status 75 itself, not on "
                 "a lost cluster task (the runner did not report one); not "
                 "restarting", id="own 75"),
    pytest.param("killed", 137, "the program was killed by signal 9: not a "
                 "lost cluster task; not restarting, exit status 137",
                 id="killed"),
    pytest.param("lost-killed", 137, "the program was killed by signal 9",
                 id="lost-killed"),
])
def test_an_end_the_runner_did_not_report_as_lost_is_final(
    tmp_path, monkeypatch, capfd, listening, how, status, said):
  """Not restarted, and said why: the program's own sys.exit(75) (status
  75 without the runner's report); a program killed by SIGKILL (the OOM
  killer, kill -9), 128 + 9 as a shell reports it (not 256 - 9), also
  after the runner reported a lost task."""
  assert supervise(tmp_path, [how, 0], 3, monkeypatch,
                   [listening, listening]) == (status, ["0/3"])
  err = capfd.readouterr().err
  assert said in err
  assert "restart 1" not in err


@pytest.mark.subprocess
def test_gives_up_after_max_restarts_with_a_clear_message(
    tmp_path, monkeypatch, capfd, listening):
  status, runs = supervise(tmp_path, ["lost"], 2, monkeypatch,
                           [listening, listening])
  assert (status, runs) == (75, ["0/2", "1/2", "2/2"])
  assert ("because a cluster task was lost: UnavailableError: Socket closed "
          "(not answering now: none); giving up after 2 restart(s) "
          "(--max-restarts 2); exit status 75") in capfd.readouterr().err


@pytest.mark.subprocess
def test_a_task_that_does_not_answer_is_named_and_ends_the_restarts(
    tmp_path, monkeypatch, capfd, listening):
  with socket.socket() as probe:  # a port nothing listens on
    probe.bind(("127.0.0.1", 0))
    dead = f"127.0.0.1:{probe.getsockname()[1]}"
  started = time.monotonic()
  status, runs = supervise(tmp_path, ["lost"], 3, monkeypatch,
                           [listening, dead], task_wait=0.5)
  assert (status, runs) == (75, ["0/3"])
  assert time.monotonic() - started < 30
  err = capfd.readouterr().err
  assert f"not answering now: /job:ps/task:0 at {dead}" in err
  assert (f"/job:ps/task:0 at {dead} did not answer within 0.5 s "
          "(--task-wait SECONDS)") in err


@pytest.mark.subprocess
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_stops_the_child_and_does_not_restart(tmp_path,
                                                            signum):
  child = tmp_path / "child.py"
  started, runs = tmp_path / "started", tmp_path / "runs.txt"
  child.write_text(textwrap.dedent(f"""\
      import os, time
      with open({str(runs)!r}, "a") as f:
        f.write(str(os.getpid()) + "\\n")
      open({str(started)!r}, "w").close()
      try:
        time.sleep(120)
      except KeyboardInterrupt:
        raise SystemExit(75)   # as if lost: must still not restart
      """))
  code = ("import sys\nfrom compat_distribute.cluster import supervisor\n"
          "sys.exit(supervisor.supervise('child.py', [], "
          "supervisor.RestartPlan(3), command=[sys.executable, "
          f"{str(child)!r}]))")
  process = subprocess.Popen(
      [sys.executable, "-c", code], stderr=subprocess.PIPE, text=True,
      env={**os.environ, "PYTHONPATH": str(support.ROOT), "TF_CONFIG": ""})
  try:
    deadline = time.monotonic() + 60
    while not started.exists():
      assert process.poll() is None and time.monotonic() < deadline
      time.sleep(0.02)
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  assert process.returncode == 128 + signum
  assert f"stopped by signal {int(signum)}; not restarting" in err
  pids = runs.read_text().split()
  assert len(pids) == 1
  with pytest.raises(ProcessLookupError):
    os.kill(int(pids[0]), 0)


# A program run by ``run --max-restarts 1``: its first run ends as the
# test says, a restart prints "restarted" and ends with 0.
ENDS = {
    "lost": "raise tf.errors.UnavailableError(None, None, 'Socket closed')",
    "own 75": "sys.exit(75)",
    "unrelated": "raise tf.errors.InvalidArgumentError(None, None, 'shape')",
    "interrupted": "raise KeyboardInterrupt",
}


@pytest.mark.subprocess
@pytest.mark.parametrize("end, status, runs", [
    ("lost", 0, 2), ("own 75", 75, 1), ("unrelated", 1, 1),
    ("interrupted", 130, 1)])
def test_run_restarts_only_what_its_runner_says_was_lost(tmp_path, end,
                                                         status, runs):
  """The whole way: ``python -m compat_distribute run --max-restarts 1``,
  its child runner and the program."""
  script = tmp_path / "program.py"
  script.write_text(textwrap.dedent(f"""\
      import os, sys
      import tensorflow as tf
      print("run", os.environ["{supervisor.RESTART_VARIABLE}"], flush=True)
      if os.environ["{supervisor.RESTART_VARIABLE}"].startswith("0/"):
        {ENDS[end]}
      print("restarted")
      """))
  result = subprocess.run(
      [sys.executable, "-m", "compat_distribute", "run", "--max-restarts",
       "1", str(script)], capture_output=True, text=True, timeout=300,
      env={**os.environ, "PYTHONPATH": str(support.ROOT), "TF_CONFIG": ""})
  assert result.returncode == status, result.stderr[-3000:]
  assert result.stdout.count("\nrun ") + result.stdout.startswith("run ") \
      == runs, result.stdout
  assert ("restarted" in result.stdout) == (runs == 2)


@pytest.mark.parametrize("error, status", [
    (tf.errors.UnavailableError(None, None, "recvmsg: reset"), 75),
    (tf.errors.DeadlineExceededError(None, None, "no answer"), 75),
    (tf.errors.AbortedError(None, None, "aborted"), 75),
    (tf.errors.InvalidArgumentError(None, None, "bad shape"), 1),
    (ValueError("the program's own bug"), 1),
])
def test_the_runner_maps_a_lost_task_to_its_own_status(tmp_path, capsys,
                                                       monkeypatch, error,
                                                       status):
  monkeypatch.setenv(supervisor.RESTART_VARIABLE, "0/2")
  loss = tmp_path / "loss.json"
  monkeypatch.setenv(supervisor.LOSS_FILE_VARIABLE, str(loss))
  script = tmp_path / "raises.py"
  # The program (and what it starts) does not see the loss file's name.
  script.write_text("import builtins, os\n"
                    f"assert {supervisor.LOSS_FILE_VARIABLE!r} not in "
                    "os.environ\nraise builtins.ERROR\n")
  monkeypatch.setattr("builtins.ERROR", error, raising=False)
  assert runner.run_script(str(script)) == status
  assert type(error).__name__ in capsys.readouterr().err
  if status == 75:
    assert json.loads(loss.read_text())["error"].startswith(
        type(error).__name__ + ": ")
  else:
    assert not loss.exists()


def test_without_a_supervisor_a_lost_task_is_status_1(tmp_path, capsys,
                                                     monkeypatch):
  monkeypatch.delenv(supervisor.RESTART_VARIABLE, raising=False)
  script = tmp_path / "raises.py"
  script.write_text("import tensorflow as tf\n"
                    "raise tf.errors.UnavailableError(None, None, 'reset')\n")
  assert runner.run_script(str(script)) == 1
  assert "UnavailableError: reset" in capsys.readouterr().err


def test_a_lost_task_under_another_exception_counts_as_lost():
  try:
    try:
      raise tf.errors.UnavailableError(None, None, "Connection reset")
    except tf.errors.UnavailableError as e:
      raise RuntimeError("the program's wrapper") from e
  except RuntimeError as wrapped:
    assert supervisor.is_task_loss(wrapped)
  assert not supervisor.is_task_loss(RuntimeError("alone"))


@pytest.mark.parametrize("argv, message", [
    (["run", "--max-restarts"], "run --max-restarts needs a value"),
    (["run", "--max-restarts", "-1", "x.py"], "got '-1'"),
    (["run", "--max-restarts", "many", "x.py"], "got 'many'"),
    (["run", "--task-wait", "0", "--max-restarts", "1", "x.py"], "got '0'"),
    (["run", "--task-wait", "5", "x.py"], "only applies with --max-restarts"),
])
def test_run_options_mistakes_exit_2(capsys, argv, message):
  assert runner.main(argv) == 2
  err = capsys.readouterr().err
  assert message in err and err.startswith("usage:")


def test_resume_point_names_the_checkpoint_and_its_counters(tmp_path):
  step = tf.Variable(40, dtype=tf.int64)
  epoch = tf.Variable(3, dtype=tf.int64)
  weights = tf.Variable([1.0, 2.0])
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(step=step, epoch=epoch, weights=weights),
      str(tmp_path), max_to_keep=1)
  path = manager.save(checkpoint_number=40)
  text = supervisor.resume_point(str(tmp_path))
  assert text.startswith(f"{path} (")
  assert "step 40" in text and "epoch 3" in text and "weights" not in text
  (tmp_path / "empty").mkdir()
  assert supervisor.resume_point(str(tmp_path / "empty")) == (
      f"no checkpoint in {tmp_path / 'empty'}: the program starts from "
      "scratch")


@pytest.mark.subprocess
@pytest.mark.cluster
def test_serve_waits_for_a_chief_to_come_back_then_ends(tmp_path):
  """A stand-in chief (a listening socket) comes, goes, comes back and
  goes for good: serve serves the second one and ends after its
  --chief-return-wait (10 s: the test reopens the port well within it,
  even on a loaded machine)."""
  from compat_distribute.cluster import local as local_cluster
  from compat_distribute.cluster import local_served
  ports = local_cluster.free_ports(3)
  cluster = {"chief": [f"127.0.0.1:{ports[0]}"],
             "worker": [f"127.0.0.1:{ports[1]}"],
             "ps": [f"127.0.0.1:{ports[2]}"]}

  chiefs = []

  class Chief:
    """Accepts (and closes) every connection until closed."""

    def __init__(self):
      self.listener = socket.socket()
      self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
      self.listener.bind(("127.0.0.1", ports[0]))
      self.listener.listen(64)
      self.listener.settimeout(0.1)
      self.open = True
      self.thread = threading.Thread(target=self.serve, daemon=True)
      self.thread.start()
      chiefs.append(self)

    def serve(self):
      while self.open:
        try:
          self.listener.accept()[0].close()
        except OSError:
          pass

    def close(self):
      if not self.open:
        return
      self.open = False
      self.thread.join(10)
      self.listener.close()

  chief = Chief

  logs = []
  first = chief()
  process = local_cluster.start_process(
      [sys.executable, "-m", "compat_distribute", "serve", "--client-wait",
       "120", "--chief-return-wait", "10"],
      {"TF_CONFIG": local_cluster.tf_config(cluster, "worker", 0)}, logs)
  process.task = "serve"
  try:
    local_served.wait_for_text(process, "serving at", 120, stream="out")
    assert "is gone" not in local_served.peek(process.out)
    first.close()
    local_served.wait_for_text(
        process, "is gone without saying its job is done; waiting up to 10 s "
        "for it to come back", 60, stream="out")
    second = chief()
    local_served.wait_for_text(process, "a chief is back at", 60,
                               stream="out")
    second.close()
    gone = time.monotonic()
    assert process.wait(timeout=60) == 1
    assert 10 < time.monotonic() - gone < 60
    out = local_served.peek(process.out)
    assert f"no chief came back to {cluster['chief'][0]} within 10 s" in out
  finally:
    local_cluster.stop_process(process)
    for log in logs:
      log.close()
    for stand_in in chiefs:
      stand_in.close()
