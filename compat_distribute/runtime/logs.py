"""The package's one logger, ``compat_distribute``, its one format, and the
one-time deprecation warning.

Records go up to the root logger as usual, so ``logging.basicConfig``,
pytest's ``caplog`` and any handler a program installs see them.  When the
root logger has no handler (a plain script), Python would print a record
with its bare "last resort" handler, without level or name; instead the
logger's own handler prints it in ``logging``'s default format, the one
``basicConfig()`` uses, so a warning reads the same either way::

    WARNING:compat_distribute:OneDeviceStrategy: device ...

>>> logger().name
'compat_distribute'
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...   warnings.simplefilter("always")
...   for _ in range(2):
...     warn_deprecated_once("old_name_in_doctest", "new_name")
>>> [str(w.message) for w in caught]
['old_name_in_doctest is deprecated; use new_name instead.']
>>> len([h for h in logger().handlers if isinstance(h, _WhenRootIsSilent)])
1
"""
from __future__ import annotations

import logging
import sys
import warnings

NAME = "compat_distribute"
_warned: set[str] = set()


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


def warn_deprecated_once(old: str, new: str) -> None:
  """Warns (``DeprecationWarning``) the first time ``old`` is used in this
  process, never again."""
  if old in _warned:
    return
  _warned.add(old)
  warnings.warn(f"{old} is deprecated; use {new} instead.",
                DeprecationWarning, stacklevel=3)
