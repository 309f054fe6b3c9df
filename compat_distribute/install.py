"""Make TensorFlow's own strategy names resolve to the shim's classes.

``install()`` rebinds these public TensorFlow names to ``compat_distribute``'s
classes, so that an unmodified program picks up the shim:

===================================================================  ==================================================
TensorFlow name                                                      replaced by
===================================================================  ==================================================
``tf.distribute.OneDeviceStrategy``                                  ``compat_distribute.v2.OneDeviceStrategy``
``tf.distribute.experimental.CentralStorageStrategy``                ``compat_distribute.v2.experimental.CentralStorageStrategy``
``tf.compat.v1.distribute.OneDeviceStrategy``                        ``compat_distribute.v1.OneDeviceStrategy``
``tf.compat.v1.distribute.experimental.CentralStorageStrategy``      ``compat_distribute.v1.experimental.CentralStorageStrategy``
``tf.compat.v1.distribute.experimental.ParameterServerStrategy``     ``compat_distribute.v1.experimental.ParameterServerStrategy``
===================================================================  ==================================================

The same two v2 names under ``tf.compat.v2.distribute`` (a separate module
object in TensorFlow 2.21) are replaced as well, and so are the names a later
``from tensorflow.compat.v1.distribute import OneDeviceStrategy`` statement
imports.  ``uninstall()`` puts the exact original objects back.  Both are idempotent, and ``install()`` also
works as a context manager that undoes only what it did:

>>> import tensorflow as tf
>>> import compat_distribute
>>> from compat_distribute import v2
>>> with compat_distribute.install():
...   tf.distribute.OneDeviceStrategy is v2.OneDeviceStrategy
True
>>> tf.distribute.OneDeviceStrategy is v2.OneDeviceStrategy
False

Our classes are looked up when ``install()`` is called, not when this module
is imported, and all of them are checked before anything is changed: if one
is missing, ``install()`` raises ``ImportError`` naming it and TensorFlow is
left untouched.
"""
from __future__ import annotations

import importlib
import sys
import threading
from typing import Any, Optional

# (TensorFlow module path below ``tf``, attribute, our module, our attribute).
_TARGETS: tuple[tuple[str, str, str, str], ...] = (
    ("distribute", "OneDeviceStrategy",
     "compat_distribute.v2", "OneDeviceStrategy"),
    ("distribute.experimental", "CentralStorageStrategy",
     "compat_distribute.v2.experimental", "CentralStorageStrategy"),
    ("compat.v2.distribute", "OneDeviceStrategy",
     "compat_distribute.v2", "OneDeviceStrategy"),
    ("compat.v2.distribute.experimental", "CentralStorageStrategy",
     "compat_distribute.v2.experimental", "CentralStorageStrategy"),
    ("compat.v1.distribute", "OneDeviceStrategy",
     "compat_distribute.v1", "OneDeviceStrategy"),
    ("compat.v1.distribute.experimental", "CentralStorageStrategy",
     "compat_distribute.v1.experimental", "CentralStorageStrategy"),
    ("compat.v1.distribute.experimental", "ParameterServerStrategy",
     "compat_distribute.v1.experimental", "ParameterServerStrategy"),
)

_lock = threading.RLock()
# While installed: one (module object, attribute, original value) per name
# replaced, in the order replaced.  None while not installed.
_originals: Optional[list[tuple[Any, str, Any]]] = None
# Entries install() added to sys.modules, as (name, module); see
# _import_name_modules.
_added_modules: list[tuple[str, Any]] = []


def _tf_module(path: str) -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  module = tf
  for part in path.split("."):
    module = getattr(module, part)
  return module


def _import_name_modules(tf_path: str, module: Any) -> tuple[list[Any],
                                                             list[str]]:
  """The module objects behind ``tensorflow.<tf_path>`` as an import name.

  ``from tensorflow.compat.v1.distribute import OneDeviceStrategy`` works in
  TensorFlow 2.21, but if ``tensorflow.compat.v1.distribute`` is not yet in
  ``sys.modules`` the import statement loads a *new* copy of the module (with
  TensorFlow's classes) and rebinds ``tf.compat.v1.distribute`` to it.  So
  the module we patch is registered under its import name first, and a copy
  already registered there is patched too.  Only ``tensorflow.compat.*``
  names are handled: ``tensorflow.distribute`` is an unrelated package
  (the RPC kernels), from which TensorFlow's strategies cannot be imported.

  Returns:
    (other module objects to patch, import names to register).
  """
  if not tf_path.startswith("compat."):
    return [], []
  name = "tensorflow." + tf_path
  existing = sys.modules.get(name)
  if existing is None:
    return [], [name]
  return ([] if existing is module else [existing]), []


def _our_class(module_name: str, attr: str) -> Any:
  """Imports ``module_name.attr`` and checks it is the shim's own class.

  The facades fall back to TensorFlow's names for anything the shim does not
  define, so a missing class would otherwise silently "replace" TensorFlow's
  class with itself.
  """
  try:
    module = importlib.import_module(module_name)
  except ImportError as e:
    raise ImportError(
        f"compat_distribute.install() needs {module_name}.{attr}, but "
        f"{module_name} cannot be imported ({e}). Reinstall compat_distribute "
        "(pip install -e .) or use compat_distribute's classes directly."
    ) from e
  value = module.__dict__.get(attr)
  if value is None or not getattr(value, "__module__", "").startswith(
      "compat_distribute"):
    raise ImportError(
        f"compat_distribute.install() needs {module_name}.{attr}, but "
        f"{module_name} does not define it (it resolves to "
        f"{getattr(module, attr, None)!r}). This version of compat_distribute "
        "does not implement that strategy; nothing was installed.")
  return value


def is_installed() -> bool:
  """Whether TensorFlow's strategy names currently resolve to ours.

  >>> is_installed()
  False
  """
  return _originals is not None


class Installation:
  """What ``install()`` returns; a context manager that undoes the install.

  Leaving the ``with`` block calls ``uninstall()`` only if this particular
  ``install()`` call did the swap, so nested ``with install():`` blocks (or a
  ``with`` block inside a program that already called ``install()``) leave
  the outer installation in place.
  """

  def __init__(self, swapped: bool) -> None:
    self._swapped = swapped

  @property
  def swapped(self) -> bool:
    """True if this call replaced TensorFlow's names (False: already done)."""
    return self._swapped

  def __enter__(self) -> "Installation":
    return self

  def __exit__(self, *exc_info: Any) -> None:
    if self._swapped:
      self._swapped = False
      uninstall()

  def __repr__(self) -> str:
    return (f"Installation(swapped={self._swapped}, "
            f"installed={is_installed()})")


def install() -> Installation:
  """Rebinds TensorFlow's strategy names to the shim's classes.

  Calling it again while installed changes nothing.

  Returns:
    An ``Installation``; use it in a ``with`` statement to undo the install
    at the end of the block.

  Raises:
    ImportError: one of the shim's classes is missing; nothing was changed.
  """
  global _originals
  with _lock:
    if _originals is not None:
      return Installation(swapped=False)
    plan, register = [], []
    for tf_path, attr, our_module, our_attr in _TARGETS:
      ours = _our_class(our_module, our_attr)
      module = _tf_module(tf_path)
      copies, names = _import_name_modules(tf_path, module)
      plan.extend((m, attr, ours) for m in [module, *copies])
      register.extend((name, module) for name in names)
    originals = [(module, attr, getattr(module, attr))
                 for module, attr, _ in plan]
    try:
      for module, attr, ours in plan:
        setattr(module, attr, ours)
      for name, module in register:
        sys.modules.setdefault(name, module)
    except BaseException:
      for module, attr, original in originals:
        setattr(module, attr, original)
      for name, module in register:
        if sys.modules.get(name) is module:
          del sys.modules[name]
      raise
    _originals = originals
    _added_modules[:] = register
    return Installation(swapped=True)


def uninstall() -> None:
  """Puts TensorFlow's original strategy classes back.

  Does nothing if the shim is not installed.

  >>> uninstall()
  >>> is_installed()
  False
  """
  global _originals
  with _lock:
    if _originals is None:
      return
    for module, attr, original in reversed(_originals):
      setattr(module, attr, original)
    for name, module in _added_modules:
      if sys.modules.get(name) is module:
        del sys.modules[name]
    _added_modules.clear()
    _originals = None


def installed_names() -> dict[str, Any]:
  """``{"tf.<path>.<name>": value}`` for each name ``install()`` replaces,
  with the value it has right now.

  >>> sorted(installed_names())[0]
  'tf.compat.v1.distribute.OneDeviceStrategy'
  """
  return {f"tf.{tf_path}.{attr}": getattr(_tf_module(tf_path), attr)
          for tf_path, attr, _, _ in _TARGETS}
