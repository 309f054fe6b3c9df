"""Long-lived replica worker threads, and the pool that lends them to runs.

``strategy.run`` runs replicas 1..N-1 on worker threads once replica 0
reaches a ``merge_call`` (see ``threads``).  Threads are lent to a
run (a ``Lease``) and come back to the pool after it, so steady-state runs
create none.  What a worker borrows from the calling thread to act like it
is in ``caller_state``.

How control passes.  Each worker counts ``requests`` (times a leader handed
it control; only leaders write it) and ``returns`` (times it handed control
back; only the worker writes it): the worker has control exactly while
``returns < requests``.  Two raw locks are only doorbells that say "look at
the counters again", so a stale or extra ring costs one more look.  A
leader interrupted anywhere -- a ``KeyboardInterrupt`` from a signal
handler, an exception injected into its thread -- therefore leaves the
truth in the counters, and ``Lease.close`` (or, if that is interrupted
too, the next ``take``) can always finish the hand-over: wait for a worker
that has control, then resume each paused replica once so that it unwinds,
and put the workers back in the pool.

>>> lease = Lease()
>>> w = lease.take(1)[0]
>>> out = []
>>> w.start_job(lambda: out.append("ran on the worker"))
>>> out
['ran on the worker']
>>> lease.close()
>>> w in idle()
True
"""
from __future__ import annotations

import _thread
import os
import threading
from typing import Any, Callable, Optional


def _ring(doorbell: Any) -> None:
  try:
    doorbell.release()
  except RuntimeError:  # already ringing: one ring says it all
    pass


class Worker(threading.Thread):
  """A long-lived thread that runs one replica per job (see the module
  docstring for how control passes between it and its leader)."""

  def __init__(self) -> None:
    super().__init__(name="compat_distribute-replica", daemon=True)
    self._wake = _thread.allocate_lock()
    self._wake.acquire()
    self._back = _thread.allocate_lock()
    self._back.acquire()
    self._requests = 0
    self._returns = 0
    self._job: Optional[Callable[[], None]] = None
    self.in_job = False  # (worker) a job has started and not yet ended
    self.lease: Optional[Lease] = None  # (pool) whom it is lent to

  def __repr__(self) -> str:
    state = ("running" if self.has_control else
             "paused in a job" if self.in_job else "idle")
    return f"<replica worker {self.name}: {state}>"

  @property
  def has_control(self) -> bool:
    """Whether the worker runs (or was told to and has not yet handed
    control back)."""
    return self._returns < self._requests

  # -- the leader's side ------------------------------------------------------

  def start_job(self, job: Callable[[], None]) -> None:
    """(leader) Starts ``job``; returns when it pauses or finishes."""
    self._job = job
    self.resume()

  def resume(self) -> None:
    """(leader) Lets the worker continue; returns when it pauses or ends."""
    self._requests += 1
    _ring(self._wake)
    while self._returns < self._requests:
      self._back.acquire()

  def finish(self) -> None:
    """(leader) Waits until a worker that has control hands it back.

    Also right after a leader was interrupted between counting a request
    and ringing: the wake-up is rung again (an extra ring is harmless).
    """
    if self._returns < self._requests:
      _ring(self._wake)
      while self._returns < self._requests:
        self._back.acquire()

  # -- the worker's side ------------------------------------------------------

  def pause(self) -> None:
    """(worker) Hands control back to the leader until resumed."""
    self._hand_back()
    self._await_control()

  def _hand_back(self) -> None:
    self._returns += 1
    _ring(self._back)

  def _await_control(self) -> None:
    while self._returns >= self._requests:
      self._wake.acquire()

  def run(self) -> None:
    while True:
      self._await_control()
      job, self._job = self._job, None
      self.in_job = job is not None
      try:
        if job is not None:
          job()
      except BaseException:  # pylint: disable=broad-except
        pass  # jobs record their own errors; the worker must survive
      finally:
        # Drop the finished run (and the graph it traced into) now, not
        # when the next job replaces it.
        job = None
        self.in_job = False
        self._hand_back()


# -- the pool -----------------------------------------------------------------

_workers: list[Worker] = []  # every worker started, lent or idle
_lock = threading.Lock()


def _forget_workers_after_fork() -> None:
  """In a forked child only the forking thread exists: the pooled workers
  are gone, and handing one out would block its leader for ever."""
  global _lock
  _workers.clear()
  _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_workers_after_fork)


def idle() -> list[Worker]:
  """The workers not lent to any run."""
  with _lock:
    return [w for w in _workers if w.lease is None]


class Lease:
  """The workers lent to one run.

  ``closed`` is the run's end: a replica that reaches ``merge_call`` after
  it unwinds instead of pausing.  Set it as the first statement of the
  run's ``finally`` (a plain attribute store, which no signal handler can
  interrupt half-way), then call ``close``: if ``close`` is cut short, the
  next ``take`` finishes it.
  """

  __slots__ = ("workers", "closed", "_taken", "_settling", "__weakref__")

  def __init__(self) -> None:
    self.workers: list[Worker] = []
    self.closed = False
    self._taken = False
    self._settling = _thread.allocate_lock()

  def __repr__(self) -> str:
    state = "closed" if self.closed else "open"
    return f"<Lease of {len(self.workers)} worker(s), {state}>"

  def take(self, count: int) -> list[Worker]:
    """Borrows ``count`` idle workers (new ones if the pool is short)."""
    self._taken = True
    _reap()
    taken = []
    with _lock:
      for worker in _workers:
        if len(taken) == count:
          break
        if worker.lease is None and worker.is_alive():
          worker.lease = self
          taken.append(worker)
    self.workers.extend(taken)
    while len(taken) < count:
      # Registered (as lent) before it starts: an interrupt in between
      # leaves a worker that _settle finds, not a thread no one knows.
      worker = Worker()
      worker.lease = self
      with _lock:
        _workers.append(worker)
      self.workers.append(worker)
      worker.start()
      taken.append(worker)
    return taken

  def close(self) -> None:
    """Closes the lease and returns its workers, each done with its job:
    waits for those that have control, then resumes each paused replica,
    one at a time, until it has unwound."""
    self.closed = True
    if self._taken:
      try:
        self._settle(wait=True)
      except BaseException:
        # Interrupted: stop waiting for a worker that has control (the
        # next take frees it), but free the others now.
        self._settle(wait=False)
        raise

  def _settle(self, wait: bool) -> None:
    if not self._settling.acquire(False):
      return  # another thread is settling this lease
    try:
      # From the registry, not self.workers: an interrupt in take may have
      # lent a worker before it was listed.
      with _lock:
        mine = [w for w in _workers if w.lease is self]
        for worker in mine:
          if not worker.is_alive() and not worker.has_control:
            _workers.remove(worker)  # never started (take interrupted)
      mine = [w for w in mine if w.is_alive()]
      if wait:
        for worker in mine:
          worker.finish()
      for worker in mine:
        if worker.has_control:
          continue  # not waiting: the next _reap frees it
        while worker.in_job:
          worker.resume()
        worker._job = None  # pylint: disable=protected-access
        worker.lease = None
    finally:
      self._settling.release()


def _reap() -> None:
  """Frees the workers of closed leases whose ``close`` was cut short (by
  a second interrupt while it waited), unwinding paused replicas; a worker
  still running its replica is left for a later call."""
  with _lock:
    leases = {w.lease for w in _workers
              if w.lease is not None and w.lease.closed}
  for lease in leases:
    lease._settle(wait=False)  # pylint: disable=protected-access
