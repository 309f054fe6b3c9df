"""Which cluster task was lost, and how: the TF2 cluster form's watchdog.

When a ``worker`` or ``ps`` task of a TF2 ``CentralStorageStrategy``
cluster dies, TensorFlow's remote eager runtime fails the next op with a
bare ``UnavailableError`` (``recvmsg:Connection reset by peer``) that
often does not say which task; when a task stops answering but keeps its
port open (a stopped or hung process, a paused machine), the op waits for
ever.  TensorFlow offers nothing that ends that wait in remote eager: on
2.12 and 2.21, on loopback, ``ConfigProto.operation_timeout_in_ms`` (the
context's ``operation_timeout_in_ms``) never fires; the coordination
service (``coordination_config``, heartbeats) makes
``experimental_connect_to_cluster`` itself wait for tasks that run a plain
``tf.distribute.Server``; gRPC keepalive (``TF_GRPC_DEFAULT_OPTIONS``)
makes the healthy servers hang up on the client (``GOAWAY
too_many_pings``) and then backs off.  So the client watches its tasks
itself:

* ``Watchdog``: a background thread per task (nothing on the training
  step's path) checks every ``period`` seconds that the task's server
  answers: a TCP connection, then the start of an HTTP/2 conversation, to
  which a live gRPC server replies at once.  A task that refuses the
  connection or closes it is lost at once; one that accepts it but says
  nothing for ``timeout`` seconds is lost as stalled.  A lost task is
  logged (an ERROR line naming it), remembered, and this process's
  connections to it are shut, so that an op waiting on it fails now
  instead of never -- again every ``SWEEP_PERIOD`` seconds, as TensorFlow
  connects to it again, until the task answers again (a task restarted at
  its address, a stopped process continued): then it is logged (a WARNING
  line), no longer shut off and watched as before, so a program that
  caught the error can retry.
* the error a program got is explained (a ``TaskLostError`` naming the
  lost tasks that caused it) by ``cluster.causes``.

``COMPAT_DISTRIBUTE_TASK_TIMEOUT`` sets the stall timeout in seconds
(default ``DEFAULT_TASK_TIMEOUT``; ``none``/``off`` turns the watchdog off).

>>> parse_task_timeout(""), parse_task_timeout("5"), parse_task_timeout("off")
(30.0, 5.0, None)
>>> error = TaskLostError([LostTask("worker", 1, "127.0.0.1:2222",
...                                 "refused the connection")])
>>> isinstance(error, tf.errors.UnavailableError), error.job, error.index
(True, 'worker', 1)
>>> print(str(error).split(". ")[0])
Lost cluster task /job:worker/task:1 at 127.0.0.1:2222: refused the connection
"""
from __future__ import annotations

import dataclasses
import errno
import os
import socket
import threading
import time
from typing import Callable, Optional, Sequence

import tensorflow as tf

from compat_distribute.cluster import addresses
from compat_distribute.runtime import logs
from compat_distribute.runtime.errors import Error

TASK_TIMEOUT_VARIABLE = "COMPAT_DISTRIBUTE_TASK_TIMEOUT"
# Seconds a task may stay silent before it is lost as stalled; with the
# check period below, a stalled task is found within 30 + 5 s.
DEFAULT_TASK_TIMEOUT = 30.0
# Longest pause between two checks of one task.
MAX_PERIOD = 5.0
# Seconds between two calls of ``on_lost`` for a task once lost.
SWEEP_PERIOD = 1.0

REFUSED = "refused the connection (its process ended or its port closed)"
CLOSED = "closed the connection (its server ended)"

# The start of an HTTP/2 conversation: the client preface and an empty
# SETTINGS frame (RFC 9113, 3.4 and 6.5).  A gRPC server answers with a
# SETTINGS frame of its own.
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 4


def parse_task_timeout(text: str) -> Optional[float]:
  """A value of ``COMPAT_DISTRIBUTE_TASK_TIMEOUT``: seconds above 0, or a
  word of ``addresses.NO_WAIT_WORDS`` for no watchdog (None); empty:
  ``DEFAULT_TASK_TIMEOUT``.

  >>> parse_task_timeout("0")
  Traceback (most recent call last):
  ...
  ValueError: COMPAT_DISTRIBUTE_TASK_TIMEOUT must be a number of seconds above 0 or one of none, off, no, never (no watchdog), got '0'. Set it to e.g. 60 or none, or unset it for 30.
  """
  return addresses.parse_seconds(text, TASK_TIMEOUT_VARIABLE,
                                 DEFAULT_TASK_TIMEOUT, "no watchdog",
                                 above_zero=True)


def default_task_timeout() -> Optional[float]:
  """The timeout ``COMPAT_DISTRIBUTE_TASK_TIMEOUT`` sets."""
  return parse_task_timeout(os.environ.get(TASK_TIMEOUT_VARIABLE, ""))


@dataclasses.dataclass(frozen=True)
class LostTask:
  """A task found lost, and what happened to it."""
  job: str
  index: int
  address: str
  what: str

  def __str__(self) -> str:
    return f"/job:{self.job}/task:{self.index} at {self.address}: {self.what}"


class TaskLostError(Error, tf.errors.UnavailableError):
  """A worker or ps task of the cluster was lost.

  Attributes:
    job, index, address, what: the first task lost (``what``: how, e.g.
      ``refused the connection ...``, ``no answer for 30 s ...``).
    lost: every ``LostTask`` found.
  """

  def __init__(self, lost: Sequence[LostTask]) -> None:
    self.lost = tuple(lost)
    first = self.lost[0]
    self.job, self.index = first.job, first.index
    self.address, self.what = first.address, first.what
    names = "; ".join(str(task) for task in self.lost)
    s = "s" if len(self.lost) > 1 else ""
    tf.errors.UnavailableError.__init__(
        self, None, None,
        f"Lost cluster task{s} {names}. The program cannot go on without "
        f"it; restart the task (python -m compat_distribute serve) and the "
        f"program from its last checkpoint (python -m compat_distribute run "
        f"--max-restarts N does that for the program).")

  def __reduce__(self):
    return type(self), (self.lost,)


def probe(address: str, timeout: float) -> Optional[str]:
  """What is wrong with the server at ``host:port``, or None if it answers
  (a gRPC server's HTTP/2 greeting) within ``timeout`` seconds."""
  host, _, port = address.rpartition(":")
  start = time.monotonic()
  try:
    connection = socket.create_connection((host.strip("[]"), int(port)),
                                          timeout=timeout)
  except ConnectionRefusedError:
    return REFUSED
  except socket.timeout:
    return (f"no answer for {timeout:g} s (it did not accept a connection: "
            "its machine is down, hung or cut off)")
  except (OSError, ValueError) as e:
    return f"could not be reached ({e})"
  with connection:
    try:
      connection.settimeout(max(0.01, timeout - (time.monotonic() - start)))
      connection.sendall(_PREFACE)
      reply = connection.recv(9)
    except socket.timeout:
      return (f"no answer for {timeout:g} s (it accepts connections but its "
              "server says nothing: the process is stopped, hung or "
              "starved)")
    except OSError as e:
      if e.errno in (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED):
        return CLOSED
      return f"could not be reached ({e})"
  if len(reply) < 4:
    return CLOSED
  if reply[3] != _SETTINGS:
    return f"does not answer as a TensorFlow server (it sent {reply!r})"
  return None


def close_connections_to(address: str) -> int:
  """Shuts this process's TCP connections to ``host:port`` (TensorFlow's
  channels to a stalled task), so that what waits on them fails at once.
  Returns how many it shut.  Only where ``/proc/self/fd`` or ``/dev/fd``
  lists the process's files."""
  host, _, port = address.rpartition(":")
  try:
    peers = {info[4][0] for info in socket.getaddrinfo(
        host.strip("[]"), int(port), type=socket.SOCK_STREAM)}
  except (OSError, ValueError):
    return 0
  peers |= {f"::ffff:{peer}" for peer in peers}
  folder = next((f for f in ("/proc/self/fd", "/dev/fd")
                 if os.path.isdir(f)), None)
  if folder is None:
    return 0
  shut = 0
  for name in os.listdir(folder):
    try:
      fd = int(name)
      if folder.startswith("/proc") and not os.readlink(
          f"{folder}/{name}").startswith("socket:"):
        continue
      with socket.socket(fileno=os.dup(fd)) as s:
        peer = s.getpeername()
        if (s.type == socket.SOCK_STREAM and isinstance(peer, tuple) and
            peer[0] in peers and peer[1] == int(port)):
          s.shutdown(socket.SHUT_RDWR)
          shut += 1
    except (OSError, ValueError):
      continue
  return shut


class Watchdog:
  """Background checks of a cluster's tasks (see the module docstring).

  Args:
    cluster_spec: the cluster.
    watched: ``(job, index)`` of each task to watch.
    timeout: seconds of silence after which a task is lost as stalled.
    on_lost: called (in a thread of the watchdog) with each ``LostTask``
      when it is found, then every ``SWEEP_PERIOD`` seconds until the task
      answers again.
  """

  def __init__(self, cluster_spec: tf.train.ClusterSpec,
               watched: Sequence[tuple[str, int]], timeout: float,
               on_lost: Optional[Callable[[LostTask], None]] = None) -> None:
    self.timeout = float(timeout)
    self.period = min(MAX_PERIOD, self.timeout / 2)
    self.tasks = [(job, index, cluster_spec.task_address(job, index))
                  for job, index in watched]
    self._on_lost = on_lost
    self._lock = threading.Lock()
    self._lost: list[LostTask] = []
    self._found: list[LostTask] = []
    self._stop = threading.Event()
    self._threads: list[threading.Thread] = []

  def start(self) -> "Watchdog":
    for job, index, address in self.tasks:
      thread = threading.Thread(
          target=self._watch, args=(job, index, address), daemon=True,
          name=f"compat_distribute-watch-{job}-{index}")
      thread.start()
      self._threads.append(thread)
    return self

  def stop(self) -> None:
    """Ends the checks (at once; a check under way ends on its own); a
    lost task's ``on_lost`` goes on every ``SWEEP_PERIOD`` seconds, and
    from now on also once it answers again."""
    self._stop.set()

  @property
  def lost(self) -> list[LostTask]:
    """The tasks lost now (found lost and not answering again since)."""
    with self._lock:
      return list(self._lost)

  @property
  def found(self) -> list[LostTask]:
    """Every task found lost since the start, answering again or not."""
    with self._lock:
      return list(self._found)

  def _is_lost(self, job: str, index: int) -> bool:
    return any((t.job, t.index) == (job, index) for t in self.lost)

  def _watch(self, job: str, index: int, address: str) -> None:
    while not self._stop.wait(self.period):
      if self._is_lost(job, index):
        continue  # the sweep of ``report`` checks it until it answers
      what = probe(address, self.timeout)
      if what is None or self._stop.is_set():
        continue
      self.report(LostTask(job, index, address, what))

  def report(self, task: LostTask) -> None:
    """Records ``task`` as lost (once while it is lost), logs it and calls
    ``on_lost`` now and then every ``SWEEP_PERIOD`` seconds: TensorFlow
    connects to a lost task again (and, if it is stalled, waits on it
    again), its teardown at exit included.  Until ``stop()``, each sweep
    first checks the task (for at most ``SWEEP_PERIOD`` seconds): once it
    answers, it is no longer lost, ``on_lost`` is no longer called and the
    regular checks take it up again."""
    with self._lock:
      if any((t.job, t.index) == (task.job, task.index) for t in self._lost):
        return
      self._lost.append(task)
      self._found.append(task)
    logs.logger().error("lost cluster task %s", task)
    # The sweep is running before anyone hears of the loss.
    threading.Thread(target=self._sweep, args=(task, time.monotonic()),
                     daemon=True,
                     name=f"compat_distribute-lost-{task.job}-{task.index}-"
                     f"{task.address}").start()
    if self._on_lost is not None:
      self._on_lost(task)

  def _sweep(self, task: LostTask, since: float) -> None:
    while True:
      time.sleep(SWEEP_PERIOD)
      if (not self._stop.is_set() and
          probe(task.address, SWEEP_PERIOD) is None and
          not self._stop.is_set()):
        with self._lock:
          self._lost.remove(task)
        logs.logger().warning(
            "cluster task /job:%s/task:%d at %s answers again, %.1f s after "
            "it was found lost; its connections are no longer shut",
            task.job, task.index, task.address, time.monotonic() - since)
        return
      if self._on_lost is None:
        if self._stop.is_set():
          return  # nothing to do any more
        continue
      self._on_lost(task)

  def check_now(self, timeout: float) -> list[LostTask]:
    """Checks every task not lost now at once, in parallel, for at most
    ``timeout`` seconds; returns every task lost now."""
    known = {(t.job, t.index) for t in self.lost}
    checks = []
    for job, index, address in self.tasks:
      if (job, index) in known:
        continue

      def check(job=job, index=index, address=address) -> None:
        what = probe(address, timeout)
        if what is not None and not what.startswith("no answer"):
          self.report(LostTask(job, index, address, what))
      thread = threading.Thread(target=check, daemon=True)
      thread.start()
      checks.append(thread)
    deadline = time.monotonic() + timeout + 1.0
    for thread in checks:
      thread.join(max(0.0, deadline - time.monotonic()))
    return self.lost
