"""A TF2 ``CentralStorageStrategy`` cluster on this machine, for tests, the
demo and the benchmarks.

``ServedCluster`` reserves loopback ports for a ``chief``, ``num_workers``
workers and ``num_ps`` parameter servers, starts ``python -m
compat_distribute serve`` for every worker and ps task, runs a program as
the chief (``python -m compat_distribute run SCRIPT``, with the chief's
``TF_CONFIG``), and stops every process it started when it is closed --
also after an error, a timeout or Ctrl-C.  Each serve process ends by
itself once the chief says it is done (or is gone).

>>> cluster = ServedCluster(num_workers=2, num_ps=1)
>>> sorted(cluster.cluster), len(cluster.cluster["worker"])
(['chief', 'ps', 'worker'], 2)
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any, Callable, Optional, Sequence

from compat_distribute.cluster import addresses
from compat_distribute.cluster import local

# The serve processes wait this long for the chief by default here.
CLIENT_WAIT = 120.0
# ... and this long for a chief that is gone to come back.
RETURN_WAIT = 60.0


def peek(log: object) -> str:
  """What a running process wrote to its output file so far, without
  moving the file's offset (which the process shares)."""
  fileno = log.fileno()  # type: ignore[attr-defined]
  chunks, offset = [], 0
  while True:
    chunk = os.pread(fileno, 1 << 16, offset)
    if not chunk:
      return b"".join(chunks).decode("utf-8", "replace")
    chunks.append(chunk)
    offset += len(chunk)


def _wait_for(process: subprocess.Popen, ready: Callable[[], Any],
              what: str, timeout: float, log: object) -> Any:
  """Polls ``ready()`` until it gives something other than ``None`` and
  returns that; asks once more after ``process`` ended (what it did just
  before ending counts).

  Raises:
    TimeoutError: not within ``timeout`` seconds, or the process ended
      first; naming ``what`` and the process, with the end of ``log``.
  """
  deadline = time.monotonic() + timeout
  while True:
    found = ready()
    if found is not None:
      return found
    if process.poll() is not None or time.monotonic() > deadline:
      found = ready()
      if found is not None:
        return found
      raise TimeoutError(
          f"{getattr(process, 'task', process.args)} did not write {what} "
          f"within {timeout:g} s (exit {process.poll()}):\n"
          f"{peek(log)[-6000:]}")
    time.sleep(0.05)


def wait_for_text(process: subprocess.Popen, text: str, timeout: float,
                  stream: str = "err") -> str:
  """Waits (bounded) until ``process`` (of ``local.start_process``) has
  written ``text`` to its stdout (``stream='out'``) or stderr; returns
  that output.

  Raises:
    TimeoutError: not within ``timeout`` seconds, or the process ended
      first; with its output's end.
  """
  log = getattr(process, stream)

  def written() -> Optional[str]:
    seen = peek(log)
    return seen if text in seen else None

  return _wait_for(process, written, repr(text), timeout, log)


def wait_for_file(path: str, process: subprocess.Popen, timeout: float) -> None:
  """Waits (bounded) until ``path`` exists (a file ``process`` writes, e.g.
  at a point where a test or the demo acts on the cluster).

  Raises:
    TimeoutError: not within ``timeout`` seconds, or the process ended
      first; with the end of its stderr.
  """
  _wait_for(process, lambda: True if os.path.exists(path) else None, path,
            timeout, process.err)  # type: ignore[attr-defined]


def collect(process: subprocess.Popen, timeout: float) -> local.TaskResult:
  """Waits (bounded) for a process ``local.start_process`` started (with a
  ``task`` name); kills it if it overruns."""
  timed_out = False
  try:
    process.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    timed_out = True
    local.stop_process(process)
  return local.TaskResult(process.task, process.returncode,  # type: ignore[attr-defined]
                          local.read_log(process.out),  # type: ignore[attr-defined]
                          local.read_log(process.err), timed_out)  # type: ignore[attr-defined]


class ServedCluster:
  """Serve processes for the workers and ps tasks, and a chief program.

  Use it as a context manager; leaving it stops every process it started::

      with ServedCluster(num_workers=2, num_ps=1) as cluster:
        result = cluster.run_chief("train.py", ["--epochs", "2"])
  """

  def __init__(self, num_workers: int = 2, num_ps: int = 1,
               client_wait: float = CLIENT_WAIT,
               env: Optional[dict[str, str]] = None,
               return_wait: float = RETURN_WAIT,
               cwd: Optional[str] = None,
               host: str = local.LOOPBACK) -> None:
    self.num_workers, self.num_ps = num_workers, num_ps
    self.client_wait, self.return_wait = client_wait, return_wait
    ports = local.free_ports(1 + num_workers + num_ps, host)
    bracketed = f"[{host}]" if ":" in host else host
    addresses = [f"{bracketed}:{p}" for p in ports]
    self.cluster: dict[str, list[str]] = {
        "chief": addresses[:1], "worker": addresses[1:1 + num_workers],
        "ps": addresses[1 + num_workers:]}
    self._env = dict(env or {})
    self.cwd = cwd  # every process's folder (None: this process's)
    self._logs: list[object] = []
    self.servers: dict[tuple[str, int], subprocess.Popen] = {}
    self._chief: Optional[subprocess.Popen] = None
    self._ended: list[subprocess.Popen] = []

  def __repr__(self) -> str:
    return (f"ServedCluster(num_workers={self.num_workers}, "
            f"num_ps={self.num_ps}, cluster={self.cluster!r})")

  def tf_config(self, task_type: str, index: int) -> str:
    return local.tf_config(self.cluster, task_type, index)

  def _popen(self, args: list[str], task_type: str, index: int,
             env: Optional[dict[str, Optional[str]]] = None,
             cwd: Optional[str] = None) -> subprocess.Popen:
    extra = {**self._env, **(env or {}),
             "TF_CONFIG": self.tf_config(task_type, index)}
    process = local.start_process(args, extra, self._logs, cwd or self.cwd)
    process.task = f"/job:{task_type}/task:{index}"  # type: ignore[attr-defined]
    return process

  def start_server(self, task_type: str, index: int,
                   env: Optional[dict[str, Optional[str]]] = None
                   ) -> subprocess.Popen:
    """Starts ``serve`` for one task (not waiting for it; ``env``: more
    environment for it); a task started before is replaced (its old
    process must have ended: see ``kill_server``)."""
    process = self._popen(
        [sys.executable, "-m", "compat_distribute", "serve",
         "--client-wait", f"{self.client_wait:g}",
         "--chief-return-wait", f"{self.return_wait:g}"], task_type, index,
        env)
    old = self.servers.get((task_type, index))
    if old is not None:
      self._ended.append(old)
    self.servers[(task_type, index)] = process
    return process

  def start(self, skip: Sequence[tuple[str, int]] = ()) -> "ServedCluster":
    """Starts every worker and ps task's ``serve`` but those in ``skip``;
    waits (bounded) until each accepts connections."""
    for task_type in ("ps", "worker"):
      for index in range(len(self.cluster[task_type])):
        if (task_type, index) not in skip:
          self.start_server(task_type, index)
    return self.wait_ready()

  def wait_ready(self) -> "ServedCluster":
    """Waits (bounded) until every started ``serve`` accepts connections.

    Raises:
      RuntimeError: one ended, or is not up within 90 s, with its output.
    """
    deadline = time.monotonic() + 90
    for (task_type, index), process in self.servers.items():
      address = self.cluster[task_type][index]
      while not addresses.accepts(address):
        if process.poll() is not None or time.monotonic() > deadline:
          raise RuntimeError(
              f"serve for /job:{task_type}/task:{index} did not come up "
              f"(exit {process.poll()}):\n{local.read_log(process.err)[-3000:]}")
        time.sleep(0.05)
    return self

  def start_chief(self, script: str, args: Sequence[str] = (),
                  env: Optional[dict[str, str]] = None,
                  installed: bool = True,
                  run_options: Sequence[str] = (),
                  cwd: Optional[str] = None) -> subprocess.Popen:
    """Starts ``python -m compat_distribute run [RUN_OPTIONS] SCRIPT ARGS``
    as the chief (``installed=False``: ``python SCRIPT ARGS``), in folder
    ``cwd`` (default: the cluster's)."""
    runner = (["-m", "compat_distribute", "run", *run_options]
              if installed else [])
    self._chief = self._popen([sys.executable, *runner, script, *args],
                              "chief", 0, env, cwd)
    return self._chief

  def collect(self, process: subprocess.Popen,
              timeout: float) -> local.TaskResult:
    """Waits (bounded) for ``process``; kills it if it overruns."""
    return collect(process, timeout)

  def run_chief(self, script: str, args: Sequence[str] = (),
                timeout: float = 180.0,
                env: Optional[dict[str, str]] = None,
                installed: bool = True) -> local.TaskResult:
    """``start_chief`` then ``collect``."""
    return self.collect(self.start_chief(script, args, env, installed),
                        timeout)

  def wait_servers(self, timeout: float = 30.0) -> dict[str, local.TaskResult]:
    """Waits (bounded) for every serve process to end by itself."""
    deadline = time.monotonic() + timeout
    return {process.task: self.collect(  # type: ignore[attr-defined]
        process, max(0.0, deadline - time.monotonic()))
            for process in self.servers.values()}

  def kill_server(self, task_type: str, index: int) -> None:
    """SIGKILLs one task's serve process (to test faults)."""
    process = self.servers[(task_type, index)]
    process.kill()
    process.wait(timeout=10)

  def stop(self) -> None:
    """Stops every process this cluster started; safe to call twice."""
    for process in [self._chief, *self.servers.values(), *self._ended]:
      if process is not None:
        local.stop_process(process)
    for log in self._logs:
      log.close()  # type: ignore[attr-defined]
    self._logs = []

  def __enter__(self) -> "ServedCluster":
    try:
      return self.start()
    except BaseException:
      self.stop()
      raise

  def __exit__(self, *exc_info: object) -> None:
    self.stop()


class MultiWorkerCluster:
  """Every task of a ``MultiWorkerMirroredStrategy`` cluster (a ``worker``
  job, maybe a ``chief``) on loopback ports, each started with the same
  command, ``python -m compat_distribute run [RUN_OPTIONS] SCRIPT ARGS``,
  and its own ``TF_CONFIG``.  Leaving the ``with`` block stops every
  process it started.

  >>> MultiWorkerCluster(num_workers=2, chief=True).tasks
  [('chief', 0), ('worker', 0), ('worker', 1)]
  """

  def __init__(self, num_workers: int = 2, chief: bool = False,
               env: Optional[dict[str, str]] = None) -> None:
    ports = local.free_ports(num_workers + int(chief))
    addresses = [f"{local.LOOPBACK}:{p}" for p in ports]
    self.cluster = {"worker": addresses[int(chief):]}
    if chief:
      self.cluster["chief"] = addresses[:1]
    self._env = dict(env or {})
    self._logs: list[object] = []
    self.processes: dict[tuple[str, int], subprocess.Popen] = {}

  @property
  def tasks(self) -> list[tuple[str, int]]:
    """Every task, the chief first."""
    return [(job, i) for job in ("chief", "worker")
            for i in range(len(self.cluster.get(job, ())))]

  def tf_config(self, task_type: str, index: int) -> str:
    return local.tf_config(self.cluster, task_type, index)

  def start_task(self, task_type: str, index: int, command: Sequence[str],
                 env: Optional[dict[str, str]] = None,
                 cwd: Optional[str] = None) -> subprocess.Popen:
    """Starts ``command`` (a list, e.g. ``[sys.executable, "-m",
    "compat_distribute", "run", "train.py"]``) as one task, in folder
    ``cwd`` (default: this process's)."""
    extra = {**self._env, "TF_CONFIG": self.tf_config(task_type, index),
             **(env or {})}
    process = local.start_process(list(command), extra, self._logs, cwd)
    process.task = f"/job:{task_type}/task:{index}"  # type: ignore[attr-defined]
    self.processes[(task_type, index)] = process
    return process

  def start(self, command: Sequence[str]) -> "MultiWorkerCluster":
    """Starts ``command`` on every task not started yet."""
    for task in self.tasks:
      if task not in self.processes:
        self.start_task(*task, command)
    return self

  def collect(self, timeout: float) -> dict[tuple[str, int], local.TaskResult]:
    """Waits (bounded, ``timeout`` in all) for every process to end."""
    deadline = time.monotonic() + timeout
    return {task: collect(process, max(0.0, deadline - time.monotonic()))
            for task, process in self.processes.items()}

  def stop(self) -> None:
    """Stops every process; safe to call twice."""
    for process in self.processes.values():
      local.stop_process(process)
    for log in self._logs:
      log.close()  # type: ignore[attr-defined]
    self._logs = []

  def __enter__(self) -> "MultiWorkerCluster":
    return self

  def __exit__(self, *exc_info: object) -> None:
    self.stop()
