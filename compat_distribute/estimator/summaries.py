"""``tf.summary`` without TensorBoard in an Estimator program: one clear
error with the install command.

From TensorFlow 2.16 on, ``tensorflow-cpu`` no longer installs TensorBoard,
and ``tf.summary.scalar``, ``histogram``, ``image``, ``text`` and ``audio``
are TensorFlow's stand-ins that import TensorBoard's implementation when
called, raising ``TBNotInstalledError`` if they cannot.  Estimator itself
writes its summaries with TensorFlow 1's ops (``tf.compat.v1.summary``),
which need no TensorBoard, so an Estimator program trains without it until
its ``model_fn`` calls one of those five.  ``guard`` (run when Estimator is
imported under ``install()``, and only if TensorBoard is not installed then)
puts in front of each stand-in one that raises ``TensorBoardMissingError``
instead -- still a ``TBNotInstalledError`` -- naming the pip command;
``unguard`` puts the stand-ins back.  With TensorBoard installed nothing
changes: the summary functions stay TensorFlow's.

>>> guarded = guard("2.21")
>>> sorted({name for _, name, _ in guarded}) == (
...     [] if tensorboard_installed() or tf.__version__ < "2.16" else
...     ["audio", "histogram", "image", "scalar", "text"])
True
>>> unguard(guarded)
"""
from __future__ import annotations

import functools
import importlib.util
import types
from typing import Callable

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.estimator import api
from compat_distribute.estimator.errors import TensorBoardMissingError

# TensorFlow's API modules holding TensorFlow 2's summary functions (path
# below tf).
SUMMARY_PATHS = ("summary", "compat.v2.summary",
                 "compat.v1.compat.v2.summary", "compat.v2.compat.v2.summary")

# A summary function (it takes the user's tensors, returns a bool tensor).
SummaryFunction = Callable[..., object]
# (API module, function name, TensorFlow's stand-in it replaced).
Guarded = list[tuple[types.ModuleType, str, SummaryFunction]]


def _guarded(stand_in: SummaryFunction, api_name: str,
             tf_minor: str) -> SummaryFunction:
  tb_not_installed = _tf_private.tb_not_installed_error()

  @functools.wraps(stand_in)
  def guarded(*args: object, **kwargs: object) -> object:
    try:
      return stand_in(*args, **kwargs)
    except tb_not_installed as error:
      # The ImportError behind TensorFlow's error says what failed.
      raise TensorBoardMissingError(api_name, tf_minor) from error.__cause__

  guarded.__module__ = __name__  # not one of TensorFlow's stand-ins
  return guarded


def tensorboard_installed() -> bool:
  """Whether the import system finds TensorBoard (without importing it)."""
  try:
    return importlib.util.find_spec("tensorboard") is not None
  except ImportError:
    return False


def guard(tf_minor: str) -> Guarded:
  """Puts a ``TensorBoardMissingError``-raising function in front of each of
  TensorFlow's TensorBoard stand-ins in ``tf.summary`` (and its
  ``compat`` copies); returns what ``unguard`` takes."""
  guarded: Guarded = []
  if _tf_private.tb_not_installed_error() is None or tensorboard_installed():
    return guarded
  for path in SUMMARY_PATHS:
    module = api.api_module(path)
    if module is None:
      continue
    for name, stand_in in sorted(
        _tf_private.tensorboard_stand_ins(module).items()):
      setattr(module, name, _guarded(stand_in, f"tf.summary.{name}",
                                     tf_minor))
      guarded.append((module, name, stand_in))
  return guarded


def unguard(guarded: Guarded) -> None:
  """Puts back the stand-ins ``guard`` covered (where its function is still
  there)."""
  for module, name, stand_in in reversed(guarded):
    current = vars(module).get(name)
    if getattr(current, "__wrapped__", None) is stand_in:
      setattr(module, name, stand_in)
