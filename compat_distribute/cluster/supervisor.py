"""``run --max-restarts N``: the chief's program run again after a lost task.

The supervisor (``supervise``, this process; it imports no TensorFlow)
runs the program as a child process, ``python -m compat_distribute run
SCRIPT ARGS``, and tells its endings apart:

* a lost task: the program ended on an uncaught TensorFlow error of the
  family a lost or stalled task raises -- ``tf.errors.UnavailableError``
  (connection closed or refused, the named ``TaskLostError``),
  ``DeadlineExceededError`` (no answer in time) or ``AbortedError`` --
  found on the exception or its ``__cause__`` / ``__context__`` chain
  (``is_task_loss``).  The child's runner, not the program, then writes
  what was lost into a file the supervisor named (``LOSS_FILE_VARIABLE``;
  the runner takes the name out of the environment before the program
  runs, ``take_loss_file``) and exits with ``LOST_STATUS`` (75,
  ``EX_TEMPFAIL``: "try again later"; ``child_status``; only under a
  supervisor: a plain ``run`` keeps status 1).  Only both together are a
  lost task: the supervisor waits, bounded and naming the tasks that do
  not answer, until every worker and ps task of ``TF_CONFIG`` accepts
  connections again, logs the restart and starts a NEW child process.  At
  most ``N`` times; then it gives up with a message and the status 75.
* any other end: passed through, no restart -- the program's own status
  (0, 1 for an uncaught exception, ``sys.exit(code)``, also its own
  ``sys.exit(75)``, said as such), or, for a child killed by signal n
  (SIGKILL, the OOM killer, a crash), 128 + n, as a shell reports it
  (``exit_status``): a killed program is not a lost task.

A child that will be restarted does not tell the ``serve`` tasks that the
job is done (they wait for the chief to come back, ``serve
--chief-return-wait``); the last one does, whatever its status, so every
task ends once the chief is done for good.  SIGTERM or Ctrl-C to the
supervisor stops the child (SIGINT, so it ends as on Ctrl-C and tells
the tasks it is done; SIGKILL after ``STOP_GRACE`` seconds) and ends with 128 + the signal's number, never restarting.

>>> plan = RestartPlan(max_restarts=2)
>>> plan.decide(0, False, 0), plan.decide(75, True, 0), plan.decide(75, False, 0)
('done', 'restart', 'done')
>>> plan.decide(LOST_STATUS, True, restarts_done=2)
'give up'
>>> exit_status(-9), exit_status(3)
(137, 3)
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional, Sequence

from compat_distribute.cluster import addresses
from compat_distribute.cluster import lifetime

# The child's exit status for "a cluster task was lost" (EX_TEMPFAIL).
LOST_STATUS = 75
# Set for the child: "<restart number>/<max restarts>" ("0/N": first run).
RESTART_VARIABLE = "COMPAT_DISTRIBUTE_RESTART"
# Set for the child: a file the child writes what was lost into.
LOSS_FILE_VARIABLE = "COMPAT_DISTRIBUTE_LOSS_FILE"
# Set for the child: the program's checkpoint folder (``--checkpoint-dir``).
CHECKPOINT_VARIABLE = "COMPAT_DISTRIBUTE_CHECKPOINT_DIR"
DEFAULT_TASK_WAIT = 30.0
STOP_GRACE = 10.0
POLL_SECONDS = 0.1
LOST_ERROR_NAMES = ("UnavailableError", "DeadlineExceededError",
                    "AbortedError")


def say(message: str) -> None:
  sys.stderr.write(f"compat_distribute run: {message}\n")
  sys.stderr.flush()


@dataclasses.dataclass(frozen=True)
class RestartPlan:
  """What ``run --max-restarts`` does after a child's exit."""
  max_restarts: int = 0
  task_wait: float = DEFAULT_TASK_WAIT
  checkpoint_dir: Optional[str] = None

  def decide(self, status: int, lost: bool, restarts_done: int) -> str:
    """``'restart'``, ``'give up'`` (lost, no restart left) or ``'done'``;
    ``lost``: the child's runner said it ended on a lost task."""
    if status != LOST_STATUS or not lost:
      return "done"
    return "restart" if restarts_done < self.max_restarts else "give up"


def exit_status(returncode: int) -> int:
  """``run``'s exit status for a child's ``returncode``: a signal's
  (``-n``) as a shell gives it, 128 + n."""
  return 128 - returncode if returncode < 0 else returncode


# --- the child's side (runs inside ``python -m compat_distribute run``) ---


def is_task_loss(error: BaseException) -> bool:
  """Whether ``error`` (or what caused it) is of the lost-task family."""
  tf = sys.modules.get("tensorflow")
  if tf is None:
    return False
  family = tuple(getattr(tf.errors, name) for name in LOST_ERROR_NAMES)
  seen = 0
  while error is not None and seen < 20:
    if isinstance(error, family):
      return True
    error = error.__cause__ or error.__context__
    seen += 1
  return False


def _telling_line(message: str) -> str:
  """The line of a TensorFlow error message that says what happened."""
  lines = [line.strip() for line in message.splitlines() if line.strip()]
  for line in lines:
    if any(word in line for word in ("UNAVAILABLE", "DEADLINE_EXCEEDED",
                                     "ABORTED")):
      return line
  return lines[0] if lines else ""


def restart_number(environ: Optional[dict] = None) -> tuple[int, int]:
  """``(this restart's number, max restarts)`` given by the supervisor;
  ``(0, 0)`` when not supervised."""
  text = (os.environ if environ is None else environ).get(RESTART_VARIABLE, "")
  number, _, most = text.partition("/")
  try:
    return int(number), int(most)
  except ValueError:
    return 0, 0


# The supervisor's loss file, out of the environment (``take_loss_file``).
_loss_file: list[str] = []


def take_loss_file() -> None:
  """Takes the name of the file a lost task is written into out of the
  environment, before the program runs: neither the program nor the
  processes it starts see it, so only this runner writes the file."""
  name = os.environ.pop(LOSS_FILE_VARIABLE, None)
  _loss_file[:] = [name] if name else []


def child_status(error: BaseException) -> Optional[int]:
  """The exit status for a program that raised ``error``, run by a
  supervisor: ``LOST_STATUS`` for a lost task (its description written
  where the supervisor reads it, which together with the status tells it
  to restart), else None (also when no supervisor runs this process).
  When a restart will follow, the ``serve`` tasks are not told the job
  is done."""
  if RESTART_VARIABLE not in os.environ or not is_task_loss(error):
    return None
  loss_file = (_loss_file or [os.environ.get(LOSS_FILE_VARIABLE)])[0]
  if loss_file:
    first_line = _telling_line(str(error))
    with open(loss_file, "w") as f:
      json.dump({"error": f"{type(error).__name__}: {first_line}"[:600],
                 "time": time.time()}, f)
  number, most = restart_number()
  remote = sys.modules.get("compat_distribute.cluster.remote")
  if number < most and remote is not None:
    import atexit  # pylint: disable=g-import-not-at-top
    atexit.unregister(remote.tell_servers_done)
  return LOST_STATUS


def resume_point(directory: str) -> str:
  """Where a program restarted with ``directory`` as its checkpoint folder
  resumes: the newest checkpoint there (also in a ``chief/`` subfolder, as
  Keras 2's ``BackupAndRestore`` writes), its time, and its epoch, step
  and iteration counters; or Keras 3's ``BackupAndRestore`` metadata."""
  metadata = os.path.join(directory, "training_metadata.json")
  if os.path.exists(metadata):
    with open(metadata) as f:
      values = json.load(f)
    return (f"{metadata} ({_clock(os.path.getmtime(metadata))}): " +
            ", ".join(f"{k} {v}" for k, v in sorted(values.items())))
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for folder in (directory, os.path.join(directory, "chief")):
    path = tf.train.latest_checkpoint(folder) if os.path.isdir(folder) else None
    if path:
      break
  else:
    return f"no checkpoint in {directory}: the program starts from scratch"
  counters = []
  reader = tf.train.load_checkpoint(path)
  for name, shape in tf.train.list_variables(path):
    short = name.split("/.ATTRIBUTES")[0]
    if shape == [] and any(w in short.lower() for w in
                           ("epoch", "step", "iter", "batch", "counter")):
      counters.append(f"{short} {reader.get_tensor(name)}")
  when = max(os.path.getmtime(p) for p in tf.io.gfile.glob(path + ".*"))
  return f"{path} ({_clock(when)}): {', '.join(counters) or 'no counters'}"


def report_resume() -> None:
  """On a restart, logs its number and where training resumes."""
  number, most = restart_number()
  if number == 0:
    return
  directory = os.environ.get(CHECKPOINT_VARIABLE)
  where = (resume_point(directory) if directory else
           "the program's own checkpoint decides (give --checkpoint-dir to "
           "see it here)")
  say(f"restart {number} of {most}: resuming from {where}")


# --- the supervisor's side ---


def _clock(when: float) -> str:
  return time.strftime("%H:%M:%S", time.localtime(when))


def served_tasks(tf_config: Optional[str]) -> list[tuple[str, str]]:
  """``(task name, address)`` of every worker and ps task of
  ``TF_CONFIG`` (without ps, a ``MultiWorkerMirroredStrategy`` cluster:
  every chief and worker task) but the one it names, this program's;
  empty when it names no cluster.

  >>> served_tasks('{"cluster": {"worker": ["a:1", "b:1"]}, '
  ...              '"task": {"type": "worker", "index": 0}}')
  [('/job:worker/task:1', 'b:1')]
  """
  try:
    config = json.loads(tf_config or "{}")
    cluster = config.get("cluster") or {}
    task = config.get("task") or {}
    me = (f"/job:{task.get('type')}/task:{task.get('index')}"
          if isinstance(task, dict) else None)
  except (ValueError, AttributeError):
    return []
  found = []
  for job in ("worker", "ps") if cluster.get("ps") else ("chief", "worker"):
    addresses = cluster.get(job) or []
    if isinstance(addresses, dict):
      addresses = [addresses[k] for k in sorted(addresses, key=int)]
    found += [(f"/job:{job}/task:{i}", a) for i, a in enumerate(addresses)
              if f"/job:{job}/task:{i}" != me]
  return found


def wait_for_tasks(tasks: Sequence[tuple[str, str]], timeout: float,
                   stopped: Callable[[], bool] = lambda: False
                   ) -> list[tuple[str, str]]:
  """Waits at most ``timeout`` seconds until every task accepts
  connections; returns those that still do not."""
  deadline = time.monotonic() + timeout
  missing = list(tasks)
  while True:
    missing = [(name, a) for name, a in missing if not addresses.accepts(a)]
    if not missing or stopped() or time.monotonic() > deadline:
      return missing
    time.sleep(POLL_SECONDS)


def _names(tasks: Sequence[tuple[str, str]]) -> str:
  return ", ".join(f"{name} at {address}" for name, address in tasks)


def supervise(script: str, args: Sequence[str], plan: RestartPlan,
              command: Optional[Sequence[str]] = None) -> int:
  """Runs ``script`` under ``run`` in a child process, again after each
  lost task (at most ``plan.max_restarts`` times); returns the status.

  ``command`` replaces the child's command line (``python -m
  compat_distribute run SCRIPT ARGS``), e.g. to run a program that is not
  a TensorFlow one."""
  if command is None:
    command = [sys.executable, "-m", "compat_distribute", "run", script,
               *args]
  stop: list[int] = []
  previous = {s: signal.signal(s, lambda n, f: stop.append(n))
              for s in (signal.SIGTERM, signal.SIGINT)}
  workdir = tempfile.mkdtemp(prefix="compat_distribute-run-")
  loss_file = os.path.join(workdir, "loss.json")
  tasks = served_tasks(os.environ.get("TF_CONFIG"))
  restarts = 0
  try:
    while True:
      env = {**os.environ, RESTART_VARIABLE: f"{restarts}/{plan.max_restarts}",
             LOSS_FILE_VARIABLE: loss_file,
             **lifetime.child_environment({})}
      if plan.checkpoint_dir:
        env[CHECKPOINT_VARIABLE] = os.path.abspath(plan.checkpoint_dir)
      child = subprocess.Popen(list(command), env=env, start_new_session=True)
      status = exit_status(_wait_child(child, stop))
      if stop:
        say(f"stopped by signal {stop[0]}; not restarting")
        return 128 + stop[0]
      loss = _read_loss(loss_file)
      decision = plan.decide(status, bool(loss), restarts)
      if decision == "done":
        _say_final(status, child.returncode)
        return status
      gone = [t for t in tasks if not addresses.accepts(t[1])]
      what = (f"{loss.get('error', 'a lost cluster task')} (not answering "
              f"now: {_names(gone) or 'none'})")
      when = _clock(loss.get("time", time.time()))
      if decision == "give up":
        say(f"the program ended at {when} because a cluster task was lost: "
            f"{what}; giving up after {restarts} restart(s) (--max-restarts "
            f"{plan.max_restarts}); exit status {LOST_STATUS}")
        return LOST_STATUS
      restarts += 1
      say(f"the program ended at {when} because a cluster task was lost: "
          f"{what}; restart {restarts} of {plan.max_restarts}: waiting up to "
          f"{plan.task_wait:g} s for every task to answer")
      started = time.monotonic()
      missing = wait_for_tasks(tasks, plan.task_wait, lambda: bool(stop))
      if stop:
        say(f"stopped by signal {stop[0]}; not restarting")
        return 128 + stop[0]
      if missing:
        say(f"{_names(missing)} did not answer within {plan.task_wait:g} s "
            "(--task-wait SECONDS); start them (python -m compat_distribute "
            f"serve); giving up, exit status {LOST_STATUS}")
        return LOST_STATUS
      say(f"every task answers (after {time.monotonic() - started:.1f} s); "
          f"starting the program again (restart {restarts} of "
          f"{plan.max_restarts})")
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
    if os.path.exists(loss_file):
      os.remove(loss_file)
    os.rmdir(workdir)


def _say_final(status: int, returncode: int) -> None:
  """Says why an end that looks like a loss is final."""
  if returncode < 0:
    say(f"the program was killed by signal {-returncode}: not a lost "
        f"cluster task; not restarting, exit status {status}")
  elif status == LOST_STATUS:
    say(f"the program exited with status {LOST_STATUS} itself, not on a "
        "lost cluster task (the runner did not report one); not restarting")


def _read_loss(loss_file: str) -> dict:
  """What the child's runner wrote of a lost task (removed once read);
  empty when it wrote nothing."""
  try:
    with open(loss_file) as f:
      loss = json.load(f)
  except (OSError, ValueError):
    loss = {}
  if os.path.exists(loss_file):
    os.remove(loss_file)
  return loss if isinstance(loss, dict) and loss else {}


def _wait_child(child: subprocess.Popen, stop: list[int]) -> int:
  """The child's exit status; on a stop signal, stops it (bounded)."""
  while True:
    try:
      return child.wait(timeout=POLL_SECONDS * 2)
    except subprocess.TimeoutExpired:
      pass
    if stop:
      child.send_signal(signal.SIGINT)
      try:
        return child.wait(timeout=STOP_GRACE)
      except subprocess.TimeoutExpired:
        child.kill()
        return child.wait(timeout=STOP_GRACE)
