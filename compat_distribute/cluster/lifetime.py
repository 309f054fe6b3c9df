"""Task processes that end with the process that started them.

``LocalCluster`` and ``ServedCluster`` start servers, ``serve`` tasks and a
chief as processes of their own.  They stop them when they are closed, but a
parent that is SIGKILLed (a test's timeout, the OOM killer, ``kill -9``)
closes nothing: its tasks would live on, a ``serve`` task waiting for its
chief and the chief, if it was stuck, for ever.  So the parent marks each
child's environment with its pid (``child_environment``), and the child
calls ``end_with_parent()`` first thing: from then on it ends as soon as
that parent is gone.

On Linux the kernel delivers the end (``PR_SET_PDEATHSIG``), which works
even while the child is blocked inside TensorFlow holding the GIL; a
watcher thread polling the parent's pid backs it up everywhere (the kernel
signal follows the *thread* that started the child, so it is armed only
when the parent started it from its main thread).

>>> env = child_environment({"TF_CONFIG": "{}"})
>>> env[PARENT_VARIABLE] == f"{os.getpid()}:main"
True
>>> end_with_parent(environ={})   # not started by a cluster: nothing to do
False
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from typing import MutableMapping, Optional

# Set by the starting process: "<pid>:main" or "<pid>:thread".
PARENT_VARIABLE = "COMPAT_DISTRIBUTE_END_WITH_PARENT"

_PR_SET_PDEATHSIG = 1


def child_environment(extra: dict[str, str]) -> dict[str, str]:
  """``extra`` plus the mark that makes the child end with this process."""
  started_from = ("main" if threading.current_thread() is
                  threading.main_thread() else "thread")
  return {**extra, PARENT_VARIABLE: f"{os.getpid()}:{started_from}"}


def _arm_kernel_signal() -> bool:
  if not sys.platform.startswith("linux"):
    return False
  try:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
  except (OSError, AttributeError):
    return False


def _watch_parent(parent: int, poll_seconds: float) -> None:
  def watch() -> None:
    while os.getppid() == parent:
      time.sleep(poll_seconds)
    os._exit(1)  # pylint: disable=protected-access

  threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def end_with_parent(environ: Optional[MutableMapping[str, str]] = None,
                    poll_seconds: float = 1.0) -> bool:
  """Makes this process end when the process that started it ends.

  Acts only when ``environ`` (default ``os.environ``) carries the mark of a
  parent that is this process's parent; removes the mark, so programs this
  process runs or starts do not see it.  Returns whether it acted.
  """
  environ = os.environ if environ is None else environ
  mark = environ.pop(PARENT_VARIABLE, None)
  if not mark:
    return False
  pid_text, _, started_from = mark.partition(":")
  try:
    parent = int(pid_text)
  except ValueError:
    return False
  if parent != os.getppid():
    # Started by someone else (or the parent is already gone).
    if parent > 1 and os.getppid() == 1:
      os._exit(1)  # pylint: disable=protected-access
    return False
  if started_from == "main":
    _arm_kernel_signal()
  _watch_parent(parent, poll_seconds)
  if os.getppid() != parent:  # the parent ended before the signal was armed
    os._exit(1)  # pylint: disable=protected-access
  return True
