"""The errors a run with several replicas raises, and which one its caller
sees.

>>> isinstance(mismatch(), RuntimeError)
True
"""
from __future__ import annotations

from typing import Optional


class Aborted(BaseException):
  """Unwinds a paused replica after the run failed elsewhere.

  A BaseException, so that ``except Exception`` in user code lets it pass.
  """


def mismatch() -> RuntimeError:
  """The error for replicas that made different numbers of merge_calls."""
  return RuntimeError(
      "Some replicas made a different number of replica_context().merge_call()"
      " calls: every replica must call merge_call (directly, or through "
      "all_reduce, all_gather, optimizer.apply_gradients or aggregated "
      "variable updates) the same number of times. Make the synchronising "
      "calls independent of the replica id.")


def interrupt_behind(error: RuntimeError) -> Optional[BaseException]:
  """The ``KeyboardInterrupt`` (or other non-``Exception``) that made a
  TensorFlow scope's exit fail with its nesting error, if any: an interrupt
  landing inside ``tf.device``'s exit leaves every enclosing scope's exit
  to fail.  The caller should see the interrupt, not that error.

  >>> try:
  ...   try:
  ...     raise KeyboardInterrupt
  ...   finally:
  ...     raise RuntimeError("Exiting device scope without proper scope nesting")
  ... except RuntimeError as e:
  ...   type(interrupt_behind(e)).__name__
  'KeyboardInterrupt'
  """
  if "nesting" not in str(error):
    return None
  cause = error.__context__
  for _ in range(32):  # a context chain can be long; it cannot be a cycle
    if cause is None:
      return None
    if not isinstance(cause, (Exception, Aborted)):
      return cause
    cause = cause.__context__
  return None
