"""``python -m compat_distribute serve``: the program of every worker and ps
task of a TF2 ``CentralStorageStrategy`` cluster.

It reads ``TF_CONFIG`` (this task's ``type`` must be ``worker`` or ``ps``,
the cluster must have ``chief``, ``worker`` and ``ps`` jobs), starts this
task's ``tf.distribute.Server``, prints its address, and serves the client
-- the ``chief``, which runs the training program -- until one of:

* the client says its job is done (at its exit it writes a file named
  after this task, ``folders.done_file``, by an op it runs on this task
  through TensorFlow's runtime, so into the folder this process was
  started in; this process removes it at once, and at its start removes
  one a killed ``serve`` of the same task left): exit status 0;
* the client came and is gone without saying so (its address stops
  accepting connections: it crashed, was killed, or ended because another
  task was lost and will be started again by ``run --max-restarts`` or a
  cluster manager), and no client came back within ``--chief-return-wait``
  seconds (default 60; ``COMPAT_DISTRIBUTE_CHIEF_RETURN_WAIT``): status 1
  (a client that comes back within that time -- a new chief process at
  the same address -- is served as the first was);
* no client came within ``--client-wait`` seconds (default 600; the
  ``COMPAT_DISTRIBUTE_CLIENT_WAIT`` environment variable): status 3;
* SIGTERM or Ctrl-C (SIGINT): status 128 + the signal's number.

For a ``MultiWorkerMirroredStrategy`` cluster (a ``worker`` job, maybe a
``chief``, no ``ps``) it serves every chief and worker task but the one
that runs the program -- the chief, else worker 0, which the messages call
"the chief" as TensorFlow does (``cluster.multi_worker_config``).  It
writes its cluster into its working folder, where that task reads it to
check that every task has the same cluster; when it does not, that task
refuses this one (a file beside it) and ``serve`` ends with status 2.

A mistake in ``TF_CONFIG`` or on the command line prints one error with the
value and the fix and exits with status 2.  The server is TensorFlow's gRPC
service, which answers anyone who reaches its port, unauthenticated, on
every interface: it says so when it starts.

``serve`` stays in the folder it was started in, as TensorFlow's own
server processes do, and creates nothing anywhere else (no temporary
folder): a relative path the chief's program hands to an op that runs on
this task -- a ps writes its own part of every checkpoint -- is resolved
in that folder.  Its output is its own lines (its address and folder, the
chief it waits for, the chief's coming and going, its end and exit
status); TensorFlow's INFO lines (its session options among them) show
only when ``TF_CPP_MIN_LOG_LEVEL`` is set to 0 (``serve`` sets 1, warnings
and errors, when it is unset).

>>> check_serve_config('{"cluster": {"chief": ["a:1"], "worker": ["b:1"], '
...                    '"ps": ["c:1"]}, "task": {"type": "chief", "index": 0}}')
Traceback (most recent call last):
...
ValueError: TF_CONFIG names this task 'chief', which serve does not run: serve runs the 'worker' and 'ps' tasks; the chief runs the training program (python -m compat_distribute run train.py). TF_CONFIG is '{"cluster": {"chief": ["a:1"], "worker": ["b:1"], "ps": ["c:1"]}, "task": {"type": "chief", "index": 0}}'. Set "task": {"type": "worker" or "ps", "index": N} for this task.
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from typing import Optional, Sequence

from compat_distribute.cluster import addresses
from compat_distribute.runtime.errors import Error

PROG = "python -m compat_distribute serve"
SHORT_USAGE = (f"usage: {PROG} [--client-wait SECONDS] "
               "[--chief-return-wait SECONDS]\n")
DEFAULT_CLIENT_WAIT = 600.0
CLIENT_WAIT_VARIABLE = "COMPAT_DISTRIBUTE_CLIENT_WAIT"
DEFAULT_RETURN_WAIT = 60.0
RETURN_WAIT_VARIABLE = "COMPAT_DISTRIBUTE_CHIEF_RETURN_WAIT"
# Seconds between two looks for a stop signal or the chief's "done" file
# (no network).
POLL_SECONDS = 0.2
# Seconds between two connections to the chief's address (is it there?).
CHECK_SECONDS = 1.0
# Failed connection checks in a row that mean the client is gone.
GONE_AFTER = 2
# TensorFlow's C++ log level for serve when TF_CPP_MIN_LOG_LEVEL is unset:
# warnings and errors, not its INFO lines (session options and the like).
TF_LOG_LEVEL = "1"
# Seconds to let the chief close its connections once it said it is done.
CLOSE_WAIT = 10.0
HELP = f"""\
{SHORT_USAGE}
Runs this task's TensorFlow server for a CentralStorageStrategy program on
a cluster.  TF_CONFIG names the cluster (jobs 'chief', 'worker' and 'ps')
and this task ('worker' or 'ps'); the chief runs the training program
('python -m compat_distribute run train.py' with its own TF_CONFIG).

Ends when the chief says its job is done (status 0), when the chief is
gone without saying so and did not come back within the return wait (1),
when no chief came within the client wait (3), or on SIGTERM / Ctrl-C
(128 + signal number).  A mistake in TF_CONFIG or on the command line:
status 2.  A chief that comes back (a new process at the chief's address,
e.g. started again by 'run --max-restarts') is served as the first was.

  --client-wait SECONDS        how long to wait for the chief to come
                               (default {DEFAULT_CLIENT_WAIT:g}, or
                               ${CLIENT_WAIT_VARIABLE})
  --chief-return-wait SECONDS  how long to wait for a chief that is gone
                               without saying it is done to come back
                               (default {DEFAULT_RETURN_WAIT:g}, or
                               ${RETURN_WAIT_VARIABLE})

The server answers anyone who can reach its port, without authentication,
on every network interface: run it only on a trusted network.

serve runs in the folder it is started in: a relative path in the chief's
program that a ps writes (its part of a checkpoint) is resolved there.
Give the program absolute folders on storage the chief and every ps can
write.  TensorFlow's own INFO lines: set TF_CPP_MIN_LOG_LEVEL=0.
"""


HELP_FLAGS = ("-h", "--help", "-help", "-?")


class UsageError(Error, ValueError):
  """A mistake on ``serve``'s command line (exit status 2)."""


@dataclasses.dataclass(frozen=True)
class ServedTask:
  """The task ``TF_CONFIG`` names, its cluster, and the task that runs the
  program (the client: the chief; for ``MultiWorkerMirroredStrategy`` the
  chief, else worker 0)."""
  cluster: dict
  job: str
  index: int
  client: tuple[str, int] = ("chief", 0)  # remote.CLIENT_JOB's task 0

  @property
  def address(self) -> str:
    from compat_distribute.cluster import tasks  # pylint: disable=g-import-not-at-top
    return tasks.task_addresses(self.cluster, self.job)[self.index]

  @property
  def client_address(self) -> str:
    from compat_distribute.cluster import tasks  # pylint: disable=g-import-not-at-top
    return tasks.task_addresses(self.cluster, self.client[0])[self.client[1]]

  @property
  def done_file(self) -> str:
    """Where the chief's "done" lands: this task's file in this folder."""
    return self.file("done")

  def file(self, kind: str) -> str:
    """This task's ``kind`` file in this folder (``folders.task_file``)."""
    from compat_distribute.cluster import folders  # pylint: disable=g-import-not-at-top
    return os.path.abspath(folders.task_file(kind, self.job, self.index,
                                             self.address))


def multi_worker_task(text: str) -> ServedTask:
  """The task ``serve`` runs for a ``MultiWorkerMirroredStrategy`` cluster
  (no ``ps`` job): a chief or worker task other than the driving one.

  Raises:
    ValueError: a bad cluster or task, or the driving task itself (which
      runs the program), naming the task and the fix.
  """
  from compat_distribute.cluster import multi_worker_config  # pylint: disable=g-import-not-at-top
  try:
    task = multi_worker_config.from_tf_config(text)
  except ValueError as e:
    raise type(e)(f"{e} TF_CONFIG is {text!r}.") from e
  if task is None:  # not reached: called for a cluster with workers
    raise ValueError(f"TF_CONFIG names no cluster: {text!r}.")
  if task.drives:
    raise multi_worker_config.MultiWorkerConfigError(
        f"TF_CONFIG names this task {task.name}, which runs the "
        f"MultiWorkerMirroredStrategy program itself (the chief, else worker "
        f"0), so serve does not run it. Start it with `"
        f"{multi_worker_config.RUN_COMMAND}`. TF_CONFIG is {text!r}.")
  return ServedTask(task.cluster, task.job, task.index, task.driver)


def check_serve_config(text: Optional[str]) -> ServedTask:
  """The task ``serve`` runs, from ``TF_CONFIG``'s value.

  Raises:
    ValueError: unset or not JSON, no ``chief``/``worker``/``ps`` job, a
      task type other than worker or ps, an index out of range.
  """
  # TensorFlow starts here: its log level first.
  from compat_distribute.cluster import remote, tasks  # pylint: disable=g-import-not-at-top
  example = ('{"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222"], '
             '"ps": ["host2:2222"]}, "task": {"type": "worker", "index": 0}}')
  if not text or not text.strip():
    raise ValueError(
        "TF_CONFIG is not set: serve reads the cluster and this task from it. "
        f"Set it to e.g. '{example}'.")
  config = tasks.load_tf_config(text)
  cluster = config.get("cluster")
  task = config.get("task")
  if isinstance(cluster, dict) and cluster.get("worker") and not cluster.get(
      "ps"):
    return multi_worker_task(text)
  missing = [job for job in (remote.CLIENT_JOB, *remote.SERVED_JOBS)
             if not isinstance(cluster, dict) or not cluster.get(job)]
  if missing:
    raise ValueError(
        f"TF_CONFIG's cluster has no {' or '.join(repr(j) for j in missing)} "
        f"job: serve runs a worker or ps task for a chief that runs the "
        f"training program. TF_CONFIG is {text!r}. Give the cluster all "
        f"three jobs, e.g. '{example}'.")
  job = task.get("type") if isinstance(task, dict) else None
  if job not in remote.SERVED_JOBS:
    where = ("the training program (python -m compat_distribute run "
             "train.py)" if job == remote.CLIENT_JOB else "nothing serve runs")
    raise ValueError(
        f"TF_CONFIG names this task {job!r}, which serve does not run: serve "
        f"runs the 'worker' and 'ps' tasks; the chief runs {where}. "
        f"TF_CONFIG is {text!r}. Set \"task\": {{\"type\": \"worker\" or "
        "\"ps\", \"index\": N} for this task.")
  tasks.check_cluster(cluster, job, task.get("index"), "TF_CONFIG")
  return ServedTask(cluster, job, int(task["index"]))


@dataclasses.dataclass(frozen=True)
class ServeOptions:
  """``serve``'s waits, in seconds."""
  client_wait: float = DEFAULT_CLIENT_WAIT
  return_wait: float = DEFAULT_RETURN_WAIT


def _seconds(text: str, source: str, default: float) -> float:
  try:
    return addresses.parse_seconds(text, source, default, above_zero=True)
  except ValueError as e:
    raise UsageError(str(e)) from e


def parse_args(argv: Sequence[str]) -> ServeOptions:
  """The waits from the command line (after ``serve``) and the environment.

  >>> parse_args(["--client-wait", "30"])
  ServeOptions(client_wait=30.0, return_wait=60.0)
  >>> parse_args(["--chief-return-wait=5"]).return_wait
  5.0

  Raises:
    UsageError: an unknown argument or a wait that is not above 0.
  """
  args = list(argv)
  texts = {"--client-wait": (os.environ.get(CLIENT_WAIT_VARIABLE, ""),
                             CLIENT_WAIT_VARIABLE),
           "--chief-return-wait": (os.environ.get(RETURN_WAIT_VARIABLE, ""),
                                   RETURN_WAIT_VARIABLE)}
  while args:
    arg = args.pop(0)
    flag, eq, value = arg.partition("=")
    if flag not in texts:
      raise UsageError(f"unknown argument {arg!r}")
    if not eq:
      if not args:
        raise UsageError(f"{flag} needs a number of seconds")
      value = args.pop(0)
    texts[flag] = (value, flag)
  return ServeOptions(
      _seconds(*texts["--client-wait"], DEFAULT_CLIENT_WAIT),
      _seconds(*texts["--chief-return-wait"], DEFAULT_RETURN_WAIT))


# The signal that asked this process to stop, once one did.
_stop_signal: list[int] = []


def _note_stop(signum: int, frame: object) -> None:
  del frame
  _stop_signal.append(signum)


def _say(message: str) -> None:
  sys.stdout.write(f"compat_distribute serve: {message}\n")
  sys.stdout.flush()


def quiet_tensorflow(environ: Optional[dict] = None) -> None:
  """TensorFlow's INFO lines off (``TF_LOG_LEVEL``) unless the user set
  ``TF_CPP_MIN_LOG_LEVEL``; before TensorFlow is imported."""
  environ = os.environ if environ is None else environ
  environ.setdefault("TF_CPP_MIN_LOG_LEVEL", TF_LOG_LEVEL)


def _take(path: str) -> bool:
  """Whether ``path`` exists; it is removed if so."""
  try:
    os.remove(path)
    return True
  except FileNotFoundError:
    return False


def serve(task: ServedTask, options: ServeOptions) -> None:
  """Runs ``task``'s server until the client is done, then ends the
  process with the exit status (see the module docstring): TensorFlow's
  server cannot be stopped, and its teardown at exit may block, so the
  process ends at once (``os._exit``) after flushing its output."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  signal.signal(signal.SIGTERM, _note_stop)
  signal.signal(signal.SIGINT, _note_stop)
  folder = os.getcwd()
  for kind in ("done", "refused"):
    _take(task.file(kind))  # a killed serve of this task left it
  # What a MultiWorkerMirroredStrategy client reads (by an op on this task)
  # to check the cluster (a cluster without ps); removed at the end, and
  # rewritten by the task's next start after a kill.
  cluster_file = None if task.cluster.get("ps") else task.file("cluster")
  if cluster_file:
    try:
      with open(cluster_file, "w", encoding="utf-8") as f:
        json.dump(task.cluster, f, sort_keys=True)
    except OSError:  # a folder it cannot write: said below
      cluster_file = None
  try:
    tf.distribute.Server(
        tf.train.ClusterSpec(task.cluster), job_name=task.job,
        task_index=task.index, protocol="grpc", start=True)
    _, port = addresses.split(task.address)
    _say(f"/job:{task.job}/task:{task.index} serving at {task.address} "
         f"(port {port} on every interface), in {folder} (relative paths of "
         f"ops the chief runs here resolve there); waiting up to "
         f"{options.client_wait:g} s for the chief at {task.client_address}")
    _say("WARNING: this server answers anyone who reaches its port, without "
         "authentication; run it only on a trusted network")
    if not os.access(folder, os.W_OK):
      _say(f"WARNING: this process cannot write to {folder}: the chief "
           "cannot tell it its job is done there, so it will end as on a "
           "chief gone (status 1); start serve in a folder it can write")
    status = _watch(task, options)
  finally:
    if cluster_file:
      _take(cluster_file)
  _say(f"exit status {status}")
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status)  # pylint: disable=protected-access


def _watch(task: ServedTask, options: ServeOptions) -> int:
  """Waits for the chief and its end; the exit status.  Connects to the
  chief's address at most once per ``CHECK_SECONDS``."""
  start = time.monotonic()
  came, misses = False, 0
  gone_since: Optional[float] = None
  next_check = start
  while True:
    if _stop_signal:
      _say(f"stopped by signal {_stop_signal[0]}")
      return 128 + _stop_signal[0]
    refused = task.file("refused")
    if os.path.exists(refused):
      with open(refused, encoding="utf-8") as f:
        sys.stderr.write(f"{PROG}: error: {f.read()}\n")
      _take(refused)
      return 2
    if _take(task.done_file):
      _say("the chief says its job is done; stopping")
      # Let the chief close its connections first (bounded).
      deadline = time.monotonic() + CLOSE_WAIT
      while (time.monotonic() < deadline and
             addresses.accepts(task.client_address)):
        time.sleep(CHECK_SECONDS)
      return 0
    now = time.monotonic()
    if now < next_check:
      time.sleep(min(POLL_SECONDS, next_check - now))
      continue
    next_check = now + CHECK_SECONDS
    if addresses.accepts(task.client_address):
      if gone_since is not None:
        _say(f"a chief is back at {task.client_address} after "
             f"{time.monotonic() - gone_since:.1f} s; serving it")
      elif not came:
        _say(f"the chief at {task.client_address} is up; serving it")
      came, misses, gone_since = True, 0, None
    elif came:
      misses += 1
      if misses == GONE_AFTER:
        gone_since = time.monotonic()
        _say(f"the chief at {task.client_address} is gone without saying "
             f"its job is done; waiting up to {options.return_wait:g} s for "
             "it to come back (--chief-return-wait)")
      elif (gone_since is not None and
            time.monotonic() - gone_since > options.return_wait):
        _say(f"no chief came back to {task.client_address} within "
             f"{options.return_wait:g} s; stopping")
        return 1
    elif time.monotonic() - start > options.client_wait:
      _say(f"no chief came to {task.client_address} within "
           f"{options.client_wait:g} s; stopping (wait longer with "
           "--client-wait SECONDS)")
      return 3


def main(argv: Sequence[str]) -> int:
  """``serve``'s entry point; returns the exit status."""
  if any(a in HELP_FLAGS for a in argv):
    sys.stdout.write(HELP)
    return 0
  quiet_tensorflow()
  try:
    options = parse_args(argv)
  except UsageError as e:
    sys.stderr.write(f"{SHORT_USAGE}{PROG}: error: {e}\n")
    return 2
  try:
    task = check_serve_config(os.environ.get("TF_CONFIG"))
  except ValueError as e:
    sys.stderr.write(f"{PROG}: error: {e}\n")
    return 2
  return serve(task, options)
