"""TensorFlow's private names for the device that reads and writes a TF2
checkpoint's files (part of ``compat_distribute._tf_private``).

Which device runs a checkpoint's save and restore ops is the public
``tf.train.CheckpointOptions.experimental_io_device``; without it, each
variable's host does, in its own working folder.  A program passes those
options to some calls only (``CheckpointManager.save`` takes them;
``model.fit``'s callbacks, a restore deferred until its variable is made
and a SavedModel's variables do not ask the program), so ``route_io``
fills them in where every TF2 checkpoint passes:

* ``tensorflow.python.checkpoint.checkpoint.TrackableSaver``'s
  ``save(file_prefix, checkpoint_number=None, session=None, options=None)``
  and ``restore(save_path, options=None)`` -- what ``tf.train.Checkpoint``,
  ``CheckpointManager``, tf-keras' TensorFlow-format weights and
  ``tf.saved_model.save`` call; the options given to ``restore`` also
  place the reads of a variable restored as it is made;
* ``tensorflow.python.checkpoint.functional_saver.MultiDeviceSaver``'s
  ``restore(file_prefix, options=None)`` -- what TensorFlow calls without
  options for a restore deferred until its object is made.

Same names and signatures on TensorFlow 2.12, 2.15 and 2.21 (read in each).
"""
from __future__ import annotations

import copy
import functools
import inspect
from typing import Callable, Optional

import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.checkpoint import functional_saver  # pylint: disable=g-direct-tensorflow-import

# The function route_io was given: file prefix -> device or None.
_choose: Optional[Callable[[object], Optional[str]]] = None
_WRAPPED = ((checkpoint.TrackableSaver, "save"),
            (checkpoint.TrackableSaver, "restore"),
            (functional_saver.MultiDeviceSaver, "restore"))


def route_io(choose: Callable[[object], Optional[str]]) -> None:
  """From now on, a TF2 checkpoint saved or restored without an
  ``experimental_io_device`` has its files read and written on
  ``choose(file_prefix)`` when that is a device name (else as TensorFlow
  decides).  ``file_prefix`` is what the saver gets: a ``str`` or a string
  tensor.  A second call replaces the first's ``choose``."""
  global _choose
  if _choose is None:
    for owner, name in _WRAPPED:
      setattr(owner, name, _routed(getattr(owner, name)))
  _choose = choose


def _routed(method: Callable[..., object]) -> Callable[..., object]:
  signature = inspect.signature(method)

  @functools.wraps(method)
  def wrapper(*args: object, **kwargs: object) -> object:
    bound = signature.bind(*args, **kwargs)
    options = bound.arguments.get("options")
    if options is None or options.experimental_io_device is None:
      # The prefix: the first argument after self.
      prefix = bound.arguments[list(signature.parameters)[1]]
      device = _choose(prefix) if _choose is not None else None
      if device is not None:
        options = (tf.train.CheckpointOptions() if options is None
                   else copy.copy(options))  # the caller's stays as it was
        options.experimental_io_device = device
        bound.arguments["options"] = options
    return method(*bound.args, **bound.kwargs)

  return wrapper
