"""Which lost cluster task caused an error, if any: ``explain``.

An error was caused by a lost task (one ``failures.Watchdog`` found lost)
when it, or an exception on its ``__cause__`` / ``__context__`` chain (not
past ``raise ... from None``), is

* a TensorFlow error of the lost-task family (``LOST_ERRORS``:
  ``UnavailableError``, ``DeadlineExceededError``, ``AbortedError``) whose
  message names that task -- its address, or ``/job:J/task:I`` with or
  without ``replica:R`` --, or names no task of the cluster while that task
  is lost now (TensorFlow's bare ``recvmsg:Connection reset by peer`` says
  no more);
* another TensorFlow error whose message names ``UNAVAILABLE`` and that
  task (TensorFlow wraps some as ``InternalError``: "... originally
  returned UnavailableError ...").

Anything else stays itself, whatever was lost meanwhile: an
``InvalidArgumentError`` of the program's own, or a family error naming
only tasks that answer.  ``explain`` turns an error caused so into a
``failures.TaskLostError`` naming those tasks, chained from it; the client
installs it as ``sys.excepthook`` (``install_excepthook``), and a runner
that prints the program's exception itself calls it.

>>> spec = tf.train.ClusterSpec({"worker": ["127.0.0.1:2222"]})
>>> watchdog = failures.Watchdog(spec, [("worker", 0)], 30.0)  # not started
>>> watchdog.report(failures.LostTask("worker", 0, "127.0.0.1:2222",
...                                   failures.REFUSED))
>>> watchdog.stop()
>>> reset = tf.errors.UnavailableError(None, None, "recvmsg:Connection reset")
>>> type(explain(reset, watchdog)).__name__
'TaskLostError'
>>> shape = tf.errors.InvalidArgumentError(None, None, "Incompatible shapes")
>>> explain(shape, watchdog) is shape
True
"""
from __future__ import annotations

import re
import sys
from typing import Callable, Optional

import tensorflow as tf

from compat_distribute.cluster import failures

# TensorFlow's errors of a lost or stalled task, and the words of one
# wrapped in another class ("... originally returned UnavailableError").
LOST_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
               tf.errors.AbortedError)
_UNAVAILABLE = re.compile(r"\bUNAVAILABLE\b|UnavailableError")
# Links of an exception's cause / context chain looked at.
MAX_CHAIN = 20


def _chain(error: BaseException) -> list[BaseException]:
  """``error`` and what caused it: its ``__cause__``, else its
  ``__context__`` unless suppressed (``raise ... from None``)."""
  chain: list[BaseException] = []
  link: Optional[BaseException] = error
  while link is not None and len(chain) < MAX_CHAIN and not any(
      link is seen for seen in chain):
    chain.append(link)
    link = link.__cause__ or (None if link.__suppress_context__ else
                              link.__context__)
  return chain


def _names(message: str, task: tuple[str, int, str]) -> bool:
  """Whether a TensorFlow error's message names ``(job, index, address)``:
  its address, or its task (``/job:J/task:I``, with or without
  ``replica:R``)."""
  job, index, address = task
  return bool(re.search(
      rf"(?<![\w.]){re.escape(address)}(?!\d)|/job:{re.escape(job)}/"
      rf"(?:replica:\d+/)?task:{index}(?!\d)", message))


def caused_by(error: BaseException, watchdog: failures.Watchdog,
              timeout: float = 2.0) -> list[failures.LostTask]:
  """The lost tasks that caused ``error`` (see the module docstring);
  when it is of the lost-task family and no task is lost now, checks every
  task first, for at most ``timeout`` seconds."""
  errors = [(e, str(e.message or "")) for e in _chain(error)
            if isinstance(e, tf.errors.OpError)]
  if not any(isinstance(e, LOST_ERRORS) or _UNAVAILABLE.search(message)
             for e, message in errors):
    return []
  lost = watchdog.lost or watchdog.check_now(timeout)
  found = {(t.job, t.index): t for t in lost}
  found.update({(t.job, t.index): t for t in watchdog.found
                if (t.job, t.index) not in found})
  for e, message in errors:
    named = [task for task in watchdog.tasks if _names(message, task)]
    family = isinstance(e, LOST_ERRORS)
    if named and (family or _UNAVAILABLE.search(message)):
      culprits = [found[(job, index)] for job, index, _ in named
                  if (job, index) in found]
    elif family and not named:
      culprits = lost
    else:
      culprits = []
    if culprits:
      return culprits
  return []


def explain(error: BaseException, watchdog: Optional[failures.Watchdog],
            timeout: float = 2.0) -> BaseException:
  """``error``, or a ``TaskLostError`` chained from it when lost tasks
  caused it (``caused_by``)."""
  if watchdog is None or isinstance(error, failures.TaskLostError):
    return error
  lost = caused_by(error, watchdog, timeout)
  if not lost:
    return error
  named = failures.TaskLostError(lost)
  named.__cause__ = error
  return named


def install_excepthook(
    watchdog: Callable[[], Optional[failures.Watchdog]]) -> None:
  """Makes an uncaught TensorFlow error of a program that lost a task print
  as the ``TaskLostError`` that names it (``watchdog``: the current one)."""
  previous = sys.excepthook

  def hook(kind, value, traceback):
    if isinstance(value, BaseException):
      named = explain(value, watchdog())
      if named is not value:
        kind, value, traceback = type(named), named, named.__traceback__
    previous(kind, value, traceback)

  sys.excepthook = hook
