"""The package's one logger, ``compat_distribute``, and its one format.

Records go up to the root logger as usual, so ``logging.basicConfig``,
pytest's ``caplog`` and any handler a program installs see them.  When the
root logger has no handler (a plain script), Python would print a record
with its bare "last resort" handler, without level or name; instead the
logger's own handler prints it in ``logging``'s default format, the one
``basicConfig()`` uses, so a warning reads the same either way::

    WARNING:compat_distribute:OneDeviceStrategy: device ...

>>> logger().name
'compat_distribute'
>>> len([h for h in logger().handlers if isinstance(h, _WhenRootIsSilent)])
1
"""
from __future__ import annotations

import logging
import sys

NAME = "compat_distribute"


class _WhenRootIsSilent(logging.Handler):
  """Prints to the current ``sys.stderr`` in ``logging.BASIC_FORMAT``, but
  only while the root logger has no handler (otherwise the root's handlers
  print the record, and this one would print it twice)."""

  def __init__(self) -> None:
    super().__init__()
    self.setFormatter(logging.Formatter(logging.BASIC_FORMAT))

  def emit(self, record: logging.LogRecord) -> None:
    if logging.getLogger().handlers:
      return
    try:
      sys.stderr.write(self.format(record) + "\n")
    except Exception:  # pylint: disable=broad-except
      self.handleError(record)


def logger() -> logging.Logger:
  """The ``compat_distribute`` logger, with its fallback handler (added once)."""
  log = logging.getLogger(NAME)
  if not any(isinstance(h, _WhenRootIsSilent) for h in log.handlers):
    log.addHandler(_WhenRootIsSilent())
  return log
