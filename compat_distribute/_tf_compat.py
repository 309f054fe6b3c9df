"""The supported TensorFlow range, and the semi-public names that move.

``_tf_private`` holds the names TensorFlow keeps private
(``tensorflow.python.*`` modules, ``Graph._*`` attributes).  This module, its
sibling, holds the rest of what differs between the supported versions
(TensorFlow 2.12 to 2.22): the range check made on first import, and the
names the package uses from ``tf.__internal__`` (TensorFlow's API for its own
satellite packages, which it renames without deprecation) or from public
modules that were renamed.  Every choice is made by feature detection.

Names used:

* ``tf.types.experimental.PolymorphicFunction`` (TF 2.15+) or
  ``GenericFunction`` (TF 2.12-2.14, the same class under its old name) --
  the type of a ``tf.function``; ``run`` traces every replica into one
  function when given one.
* ``tf.__internal__.autograph.tf_convert`` / ``control_status_ctx`` -- converts
  a user function with AutoGraph as the calling code is converted (all
  supported versions).
* ``tf.__internal__.CompositeTensor`` -- the base class that makes per-replica
  values, distributed datasets and iterators pass into ``tf.function`` by
  ``TypeSpec`` (all supported versions).
* ``tf.__internal__.types.Tensor`` -- the marker class that makes
  ``tf.is_tensor`` true for a central-storage variable (all supported versions).
* ``tf.__internal__.nest.yield_flat_paths`` -- the paths of a nest's leaves, as
  rebatching needs them (all supported versions).
* ``VariableBase`` -- the public variable class TensorFlow's resource
  variables derive from: ``tf.compat.v1.Variable`` on TF 2.12 (so there every
  variable, TensorFlow's central-storage wrapper included, is an instance of
  it), ``tf.Variable`` from 2.13.  Detected by building one resource variable
  in a throwaway graph, which does not start TensorFlow's runtime.

>>> tensorflow_version() >= OLDEST_SUPPORTED
True
>>> SUPPORTED_RANGE
'>=2.12,<2.23'
"""
from __future__ import annotations

import re
import sys
import warnings
from typing import Any, Callable

import tensorflow as tf

OLDEST_SUPPORTED = (2, 12)
NEWEST_SUPPORTED_EXCLUSIVE = (2, 23)
SUPPORTED_RANGE = ">=2.12,<2.23"


class UnsupportedTensorFlowWarning(UserWarning):
  """TensorFlow is newer than the newest version this release was tested on."""


def parse_version(version: str) -> tuple[int, int]:
  """``(major, minor)`` of a TensorFlow version string.

  >>> parse_version("2.16.0-rc0"), parse_version("2.22.0.dev20260101")
  ((2, 16), (2, 22))

  Raises:
    ValueError: ``version`` does not start with ``MAJOR.MINOR``.
  """
  match = re.match(r"\s*(\d+)\.(\d+)", str(version))
  if match is None:
    raise ValueError(
        f"TensorFlow version {version!r} does not start with MAJOR.MINOR; "
        "compat_distribute cannot tell whether it is supported. Install a "
        f"released TensorFlow {SUPPORTED_RANGE}.")
  return int(match.group(1)), int(match.group(2))


def _is_loading_frame(frame: Any) -> bool:
  """Whether ``frame`` is the package's own code or Python's import
  machinery: a frame the warning about the TensorFlow version must not
  name."""
  names = (frame.f_globals.get("__name__") or "",
           getattr(frame.f_globals.get("__spec__"), "name", None) or "")
  return frame.f_code.co_filename.startswith("<frozen importlib") or any(
      name.split(".")[0] in ("importlib", "compat_distribute")
      for name in names)


def _stacklevel_of_first_outside_frame() -> int:
  """``warnings.warn``'s ``stacklevel``, for a warning issued by this
  function's caller, that names the first frame out of the package and the
  import machinery: the user's line whose import (or ``install()`` call)
  loaded the package's TensorFlow-dependent modules.  Where every frame is
  the package's, the outermost one.

  ``warnings`` itself steps over the frames of ``importlib._bootstrap*``
  when it counts ``stacklevel``; they are not counted here either.
  """
  frame, level = sys._getframe(1), 1  # pylint: disable=protected-access
  while frame.f_back is not None and _is_loading_frame(frame):
    frame = frame.f_back
    name = frame.f_code.co_filename
    if not ("importlib" in name and "_bootstrap" in name):
      level += 1
  return level


def check_supported(version: str) -> None:
  """Refuses a TensorFlow older than 2.12; warns about one newer than 2.22.

  The warning names the caller's line outside the package and the import
  machinery (the user's ``import compat_distribute.v2``), not a line of the
  package.

  >>> check_supported("2.12.1")
  >>> check_supported("2.11.0")
  Traceback (most recent call last):
  ...
  ImportError: compat_distribute needs TensorFlow >=2.12,<2.23, but TensorFlow 2.11.0 is installed. Upgrade it, e.g. `pip install "tensorflow-cpu>=2.12,<2.23"` (or "tensorflow>=2.12,<2.23").

  Raises:
    ImportError: ``version`` is older than the oldest supported minor.
  """
  found = parse_version(version)
  if found < OLDEST_SUPPORTED:
    raise ImportError(
        f"compat_distribute needs TensorFlow {SUPPORTED_RANGE}, but "
        f"TensorFlow {version} is installed. Upgrade it, e.g. "
        f"`pip install \"tensorflow-cpu{SUPPORTED_RANGE}\"` "
        f"(or \"tensorflow{SUPPORTED_RANGE}\").")
  if found >= NEWEST_SUPPORTED_EXCLUSIVE:
    warnings.warn(
        f"compat_distribute was tested with TensorFlow {SUPPORTED_RANGE}; "
        f"TensorFlow {version} is installed and may have moved names it "
        "uses. If something fails, install a supported version "
        f"(`pip install \"tensorflow-cpu{SUPPORTED_RANGE}\"`) or a newer "
        "compat_distribute.", UnsupportedTensorFlowWarning,
        stacklevel=_stacklevel_of_first_outside_frame())


def tensorflow_version() -> tuple[int, int]:
  """``(major, minor)`` of the TensorFlow that is running."""
  return parse_version(tf.__version__)


check_supported(tf.__version__)

PolymorphicFunction: type = getattr(
    tf.types.experimental, "PolymorphicFunction", None) or getattr(
        tf.types.experimental, "GenericFunction")

CompositeTensor: type = tf.__internal__.CompositeTensor
TensorMarker: type = tf.__internal__.types.Tensor
yield_flat_paths: Callable[[Any], Any] = tf.__internal__.nest.yield_flat_paths

_autograph = tf.__internal__.autograph


def _resource_variable_base() -> type:
  with tf.Graph().as_default():
    probe = tf.compat.v1.Variable(0.0, use_resource=True)
  return (tf.compat.v1.Variable if isinstance(probe, tf.compat.v1.Variable)
          else tf.Variable)


VariableBase: type = _resource_variable_base()


def convert_as_caller(function: Callable[..., Any],
                      convert_by_default: bool = True) -> Callable[..., Any]:
  """``function`` converted by AutoGraph if the calling code is (eagerly,
  or where AutoGraph is off, as written).

  Args:
    function: the user's function.
    convert_by_default: whether to convert when the caller's AutoGraph
      status is unspecified (a plain ``tf.function`` body).

  >>> convert_as_caller(abs)(-2)
  2
  """
  return _autograph.tf_convert(function, _autograph.control_status_ctx(),
                               convert_by_default=convert_by_default)
