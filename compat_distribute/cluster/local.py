"""A TensorFlow cluster on this machine, for tests and the demo.

``LocalCluster`` starts one ``tf.distribute.Server`` process per ``ps`` and
``worker`` task on 127.0.0.1 (ports picked free when it starts), runs a
client program per worker with that worker's ``TF_CONFIG``, and stops every
process it started when it is closed -- also after an error, a timeout or
Ctrl-C.  The servers are TensorFlow's own gRPC runtime; nothing here carries
tensors.

>>> spec = cluster_dict(num_workers=2, num_ps=1, ports=[1001, 1002, 1003])
>>> spec
{'worker': ['127.0.0.1:1001', '127.0.0.1:1002'], 'ps': ['127.0.0.1:1003']}
>>> tf_config(spec, "worker", 1)
'{"cluster": {"worker": ["127.0.0.1:1001", "127.0.0.1:1002"], "ps": ["127.0.0.1:1003"]}, "task": {"type": "worker", "index": 1}}'
>>> parse_shape("2x1")
(2, 1)
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional, Sequence

from compat_distribute.cluster import addresses
from compat_distribute.cluster import lifetime

LOOPBACK = "127.0.0.1"


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
  """``count`` distinct TCP ports on ``host`` (127.0.0.1, or an IPv6
  address such as ``::1``) that were free just now."""
  sockets = []
  family = socket.AF_INET6 if ":" in host else socket.AF_INET
  try:
    for _ in range(count):
      s = socket.socket(family, socket.SOCK_STREAM)
      s.bind((host, 0))
      sockets.append(s)
    return [s.getsockname()[1] for s in sockets]
  finally:
    for s in sockets:
      s.close()


def cluster_dict(num_workers: int, num_ps: int,
                 ports: Sequence[int]) -> dict[str, list[str]]:
  """The cluster spec (as a dict) of ``num_workers`` workers, then
  ``num_ps`` parameter servers, on ``ports`` in that order."""
  addresses = [f"{LOOPBACK}:{p}" for p in ports]
  return {"worker": addresses[:num_workers],
          "ps": addresses[num_workers:num_workers + num_ps]}


def tf_config(cluster: dict[str, list[str]], task_type: str,
              index: int) -> str:
  """The ``TF_CONFIG`` value of one task."""
  return json.dumps({"cluster": cluster,
                     "task": {"type": task_type, "index": index}})


def parse_shape(text: str) -> tuple[int, int]:
  """``"WxP"`` -> (workers, parameter servers), e.g. ``"2x1"``."""
  try:
    workers, ps = (int(part) for part in text.lower().split("x"))
  except ValueError:
    workers = ps = 0
  if workers < 1 or ps < 1:
    raise ValueError(
        f"A cluster shape is WxP with at least one worker and one parameter "
        f"server, got {text!r}. Write e.g. 2x1 (2 workers, 1 ps).")
  return workers, ps


@dataclasses.dataclass
class TaskResult:
  """How one worker's client program ended."""
  task: str
  returncode: Optional[int]
  stdout: str
  stderr: str
  timed_out: bool = False

  def json(self) -> Any:
    """The last line of stdout that parses as JSON (the script's result)."""
    for line in reversed(self.stdout.splitlines()):
      try:
        return json.loads(line)
      except ValueError:
        continue
    raise ValueError(
        f"{self.task} printed no JSON result line (exit code "
        f"{self.returncode}).\nstdout:\n{self.stdout[-2000:]}\nstderr:\n"
        f"{self.stderr[-4000:]}")


def _server_main() -> None:
  """Runs this process's task's server until it is killed (or the process
  that started it ends)."""
  lifetime.end_with_parent()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=2,
                                    intra_op_parallelism_threads=1)
  server = tf.distribute.Server(
      resolver.cluster_spec(), job_name=resolver.task_type,
      task_index=resolver.task_id, protocol="grpc", config=config,
      start=True)
  print("ready", flush=True)
  server.join()


def start_process(args: list[str], env_extra: dict[str, str],
                  logs: list[Any], cwd: Optional[str] = None
                  ) -> subprocess.Popen:
  """Starts ``args`` in a session of its own (in folder ``cwd``, default
  this process's; a variable of ``env_extra`` set to None is unset), its
  output in two temporary files (``process.out``, ``process.err``,
  appended to ``logs`` to close)."""
  env = dict(os.environ, **lifetime.child_environment(env_extra))
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  for name in [name for name, value in env_extra.items() if value is None]:
    del env[name]  # None: unset for the process
  out = tempfile.TemporaryFile(mode="w+")
  err = tempfile.TemporaryFile(mode="w+")
  logs += [out, err]
  process = subprocess.Popen(args, env=env, stdout=out, stderr=err,
                             stdin=subprocess.DEVNULL, cwd=cwd,
                             start_new_session=True)
  process.out, process.err = out, err  # type: ignore[attr-defined]
  return process


class LocalCluster:
  """``num_ps`` parameter servers and ``num_workers`` worker servers, each a
  ``tf.distribute.Server`` in its own process, on loopback ports.

  Use it as a context manager; leaving it stops every process it started::

      with LocalCluster(num_workers=2, num_ps=1) as cluster:
        results = cluster.run_workers("train.py", ["--steps", "5"])
  """

  def __init__(self, num_workers: int = 2, num_ps: int = 1,
               start_timeout: float = 60.0,
               start_ps: bool = True) -> None:
    self.num_workers, self.num_ps = num_workers, num_ps
    self.start_timeout = start_timeout
    self.cluster = cluster_dict(num_workers, num_ps,
                                free_ports(num_workers + num_ps))
    self._servers: dict[tuple[str, int], subprocess.Popen] = {}
    self._clients: list[subprocess.Popen] = []
    self._logs: list[Any] = []
    self._start_ps = start_ps

  def __repr__(self) -> str:
    return (f"LocalCluster(num_workers={self.num_workers}, "
            f"num_ps={self.num_ps}, cluster={self.cluster!r})")

  # -- processes ------------------------------------------------------------

  def _popen(self, args: list[str], env_extra: dict[str, str]) -> Any:
    return start_process(args, env_extra, self._logs)

  def start_server(self, task_type: str, index: int) -> None:
    """Starts one task's server process (not waiting for it)."""
    self._servers[(task_type, index)] = self._popen(
        [sys.executable, "-c",
         "from compat_distribute.cluster import local as local_cluster; "
         "local_cluster._server_main()"],
        {"TF_CONFIG": tf_config(self.cluster, task_type, index)})

  def start(self) -> "LocalCluster":
    """Starts every server and waits (bounded) until each accepts
    connections."""
    for task_type in ("ps", "worker"):
      if task_type == "ps" and not self._start_ps:
        continue
      for index in range(len(self.cluster[task_type])):
        self.start_server(task_type, index)
    self.wait_ready()
    return self

  def wait_ready(self, timeout: Optional[float] = None) -> None:
    """Waits until every started server accepts connections.

    Raises:
      TimeoutError: a server is not up within ``timeout`` seconds (named,
        with its output); or RuntimeError if one exited.
    """
    deadline = time.monotonic() + (timeout or self.start_timeout)
    pending = dict(self._servers)
    while pending:
      for key, process in list(pending.items()):
        address = self.cluster[key[0]][key[1]]
        if process.poll() is not None:
          raise RuntimeError(
              f"The server of /job:{key[0]}/task:{key[1]} ({address}) exited "
              f"with code {process.returncode} while starting:\n"
              f"{read_log(process.err)[-3000:]}")
        if addresses.accepts(address):
          del pending[key]
      if pending and time.monotonic() > deadline:
        names = ", ".join(f"/job:{t}/task:{i}" for t, i in pending)
        raise TimeoutError(
            f"Servers not accepting connections after "
            f"{timeout or self.start_timeout:.0f} s: {names}.")
      time.sleep(0.05)

  def kill_server(self, task_type: str, index: int) -> None:
    """Kills one task's server (to test faults)."""
    process = self._servers.pop((task_type, index))
    stop_process(process)

  def target(self, index: int) -> str:
    """The gRPC target of worker ``index``."""
    return f"grpc://{self.cluster['worker'][index]}"

  def start_workers(self, script: str, args: Sequence[str] = (),
                    env: Optional[dict[str, str]] = None,
                    launcher: Sequence[str] = ()) -> list[Any]:
    """Starts ``python [launcher...] script args`` once per worker, with
    that worker's ``TF_CONFIG``; returns the processes (see ``collect``).

    ``launcher`` goes between the interpreter and the script, e.g.
    ``["-m", "compat_distribute", "run"]``.
    """
    processes = []
    for index in range(self.num_workers):
      process = self._popen(
          [sys.executable, *launcher, script, *args],
          {**(env or {}),
           "TF_CONFIG": tf_config(self.cluster, "worker", index)})
      process.task = f"/job:worker/task:{index}"  # type: ignore[attr-defined]
      self._clients.append(process)
      processes.append(process)
    return processes

  def collect(self, processes: Sequence[Any],
              timeout: float = 120.0) -> list[TaskResult]:
    """Waits (at most ``timeout`` seconds in all) for the client processes;
    one still running then is killed and reported as timed out."""
    deadline = time.monotonic() + timeout
    results = []
    for process in processes:
      timed_out = False
      try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        timed_out = True
        stop_process(process)
      results.append(TaskResult(process.task, process.returncode,
                                read_log(process.out), read_log(process.err),
                                timed_out))
    return results

  def run_workers(self, script: str, args: Sequence[str] = (),
                  timeout: float = 120.0,
                  env: Optional[dict[str, str]] = None,
                  launcher: Sequence[str] = ()) -> list[TaskResult]:
    """``start_workers`` then ``collect``."""
    return self.collect(self.start_workers(script, args, env, launcher),
                        timeout)

  def stop(self) -> None:
    """Stops every process this cluster started; safe to call twice."""
    for process in self._clients + list(self._servers.values()):
      stop_process(process)
    self._clients, self._servers = [], {}
    for log in self._logs:
      log.close()
    self._logs = []

  def __enter__(self) -> "LocalCluster":
    try:
      return self.start()
    except BaseException:
      self.stop()
      raise

  def __exit__(self, *exc_info: Any) -> None:
    self.stop()


def read_log(log: Any) -> str:
  """Everything written to a process's output file so far."""
  try:
    log.seek(0)
    return log.read()
  except (ValueError, OSError):
    return ""


def stop_process(process: subprocess.Popen, grace: float = 3.0) -> None:
  """SIGTERM ``process``'s group, then SIGKILL if it is still there after
  ``grace`` seconds (0: at once)."""
  if process.poll() is None:
    try:
      os.killpg(process.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
      process.terminate()
    try:
      process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
      try:
        os.killpg(process.pid, signal.SIGKILL)
      except (ProcessLookupError, PermissionError):
        process.kill()
      process.wait(timeout=10)  # SIGKILL cannot be ignored
