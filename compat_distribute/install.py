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
``tf.distribute.experimental.auto_strategy`` (TensorFlow 2.23 on)    ``compat_distribute.v2.experimental.auto_strategy``
===================================================================  ==================================================

``auto_strategy`` is replaced only where TensorFlow has it: ``install()``
replaces TensorFlow's names and adds none, so on TensorFlow 2.12-2.22
``tf.distribute.experimental`` stays without it (a program that asks
``hasattr`` what its TensorFlow offers still gets the true answer), and
``compat_distribute.v2.experimental.auto_strategy`` is the way to it there.

Every other spelling of these names is replaced too.  TensorFlow's public
API is a tree of module objects, and one class appears in several of them:
``tf.compat.v2.distribute``, ``tf.compat.v1.compat.v1.distribute``,
``tf.compat.v2.compat.v1.distribute`` and the ``tensorflow._api.v2.*``
modules behind them are separate objects on some versions (2.12-2.14 have
the most), and from 2.15 the ``compat.v1`` modules are wrappers around an
inner module.  So ``install()`` does not go by path: it walks every loaded
module object of TensorFlow's API (``tensorflow``, ``tensorflow.compat.*``,
``tensorflow._api.*``) and rebinds each attribute that *is* one of the
classes above to ours.  A module of the API imported later, while
installed (an import statement naming a module not loaded yet, or a lazy
loader), is rebound as soon as it has run, and a later
``from tensorflow.compat.v1.distribute import OneDeviceStrategy`` imports
ours.  TensorFlow's own implementation modules (``tensorflow.python.*``)
keep their classes, so TensorFlow's and Keras' internal checks still see
TensorFlow's strategies as what they are.

On a TensorFlow without what TensorFlow Estimator needs (2.16 and later),
``install()`` also supplies it (``compat_distribute.estimator``;
docs/estimator.md), and ``uninstall()`` takes it out.

``uninstall()`` puts the exact original objects back.  Both are idempotent,
and ``install()`` also works as a context manager that undoes only what it
did:

>>> import tensorflow as tf
>>> import compat_distribute
>>> from compat_distribute import v2
>>> with compat_distribute.install():
...   tf.compat.v1.compat.v2.distribute.OneDeviceStrategy is v2.OneDeviceStrategy
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
import importlib.abc
import sys
import threading
import types
from typing import Any, Optional

# (TensorFlow module path below ``tf``, attribute, our module, our attribute).
# The path names where TensorFlow's class is looked up; install() then
# replaces that class object wherever TensorFlow's API holds it.
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

# Names only some TensorFlow versions have (auto_strategy: 2.23 on), in the
# same form: replaced where the running TensorFlow has them, never added.
_TARGETS_WHERE_PRESENT: tuple[tuple[str, str, str, str], ...] = (
    ("distribute.experimental", "auto_strategy",
     "compat_distribute.v2.experimental", "auto_strategy"),
    ("compat.v2.distribute.experimental", "auto_strategy",
     "compat_distribute.v2.experimental", "auto_strategy"),
)

# ``install(multi_worker=True)`` also replaces these (``run`` asks for it
# where tf.keras is Keras 3, or with ``--multi-worker ours``).
_MULTI_WORKER_TARGETS: tuple[tuple[str, str, str, str], ...] = (
    ("distribute", "MultiWorkerMirroredStrategy",
     "compat_distribute.v2", "MultiWorkerMirroredStrategy"),
    ("distribute.experimental", "MultiWorkerMirroredStrategy",
     "compat_distribute.v2.experimental", "MultiWorkerMirroredStrategy"),
    ("compat.v1.distribute.experimental", "MultiWorkerMirroredStrategy",
     "compat_distribute.v1.experimental", "MultiWorkerMirroredStrategy"),
)

_lock = threading.RLock()
# Whether the installation in effect includes _MULTI_WORKER_TARGETS.
_multi_worker = False
# While installed: one (module object, attribute, original value) per name
# replaced, in the order replaced.  None while not installed.
_originals: Optional[list[tuple[Any, str, Any]]] = None
# While installed: {id(TensorFlow's class): (TensorFlow's class, ours)}.
_replacements: dict[int, tuple[Any, Any]] = {}
# Entries install() added to sys.modules, as (name, module); see
# _unloaded_import_name.
_added_modules: list[tuple[str, Any]] = []
# While installed: what compat_distribute.estimator supplied (nothing on a
# TensorFlow that has Estimator's pieces, 2.12-2.15).
_supplied: Optional[object] = None


def _tf_module(path: str) -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  module = tf
  for part in path.split("."):
    module = getattr(module, part)
  return module


def _targets(multi_worker: bool = False
             ) -> tuple[tuple[str, str, str, str], ...]:
  """``_TARGETS``, those of ``_TARGETS_WHERE_PRESENT`` that the running
  TensorFlow has, and with ``multi_worker`` ``_MULTI_WORKER_TARGETS``."""
  return _TARGETS + tuple(target for target in _TARGETS_WHERE_PRESENT
                          if hasattr(_tf_module(target[0]), target[1])) + (
                              _MULTI_WORKER_TARGETS if multi_worker else ())


def _is_api_name(name: Any) -> bool:
  """Whether a module of this ``__name__`` belongs to TensorFlow's public API
  tree (as opposed to its implementation, ``tensorflow.python`` & co)."""
  return isinstance(name, str) and (
      name == "tensorflow" or name.startswith(("tensorflow.compat.",
                                               "tensorflow._api.")))


def _api_modules() -> list[Any]:
  """Every loaded module object of TensorFlow's API: reachable from
  ``tensorflow`` by attributes (also the inner module of a 2.15+ wrapper)
  or registered in ``sys.modules``.  Lazy loaders are not loaded."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  pending = [tf, *(m for n, m in list(sys.modules.items()) if _is_api_name(n))]
  seen, found = set(), []
  while pending:
    module = pending.pop()
    if id(module) in seen:
      continue
    seen.add(id(module))
    found.append(module)
    for value in list(vars(module).values()):
      if (isinstance(value, types.ModuleType) and id(value) not in seen
          and _is_api_name(value.__dict__.get("__name__"))):
        pending.append(value)
  return found


def _rebind(module: Any, record: list[tuple[Any, str, Any]]) -> None:
  """Replaces each of TensorFlow's classes ``module`` holds with ours,
  appending (module, attribute, original) to ``record`` first."""
  for attr, value in list(vars(module).items()):
    pair = _replacements.get(id(value))
    if pair is not None and pair[0] is value:
      record.append((module, attr, value))
      setattr(module, attr, pair[1])


class _RebindingLoader(importlib.abc.Loader):
  """Runs a module of TensorFlow's API with its own loader, then rebinds
  the strategy names in it (and in the wrapper that replaced it in
  ``sys.modules``, on 2.15+)."""

  def __init__(self, loader: Any) -> None:
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    try:
      self._loader.exec_module(module)
    finally:  # the module keeps TensorFlow's loader, not this wrapper
      module.__loader__ = self._loader
      if getattr(module, "__spec__", None) is not None:
        module.__spec__.loader = self._loader
    with _lock:
      if _originals is None:
        return
      for m in {id(m): m for m in (module,
                                   sys.modules.get(module.__name__))}.values():
        if m is not None:
          _rebind(m, _originals)

  def __getattr__(self, name):
    return getattr(self._loader, name)


class _RebindOnImport(importlib.abc.MetaPathFinder):
  """While installed, first in ``sys.meta_path``: a module of TensorFlow's
  API imported now gets our classes as soon as it has run."""

  def find_spec(self, fullname, path, target=None):
    if not _is_api_name(fullname):
      return None
    for finder in list(sys.meta_path):
      find = getattr(finder, "find_spec", None)
      if finder is self or find is None:
        continue
      spec = find(fullname, path, target)
      if spec is not None:
        if hasattr(spec.loader, "exec_module"):
          spec.loader = _RebindingLoader(spec.loader)
        return spec
    return None


_finder = _RebindOnImport()


def _unloaded_import_name(tf_path: str) -> Optional[str]:
  """``tensorflow.<tf_path>`` if it is an import name not loaded yet.

  ``from tensorflow.compat.v1.distribute import OneDeviceStrategy`` works in
  TensorFlow 2.21, but if ``tensorflow.compat.v1.distribute`` is not yet in
  ``sys.modules`` the import statement loads a *new* copy of the module and
  rebinds ``tf.compat.v1.distribute`` to it.  The copy would get our classes
  too (``_RebindOnImport``), but registering the module we patched under its
  import name first keeps ``tf.compat.v1.distribute`` the module it was.
  Only ``tensorflow.compat.*`` names are handled: ``tensorflow.distribute``
  is an unrelated package (the RPC kernels), from which TensorFlow's
  strategies cannot be imported.
  """
  if not tf_path.startswith("compat."):
    return None
  name = "tensorflow." + tf_path
  return None if name in sys.modules else name


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


def install(multi_worker: bool = False) -> Installation:
  """Rebinds TensorFlow's strategy names to the shim's classes.

  Calling it again while installed changes nothing.

  Args:
    multi_worker: also TensorFlow's ``MultiWorkerMirroredStrategy`` (v2,
      its experimental spelling, and v1): what ``run`` asks for where
      ``tf.keras`` is Keras 3, whose ``fit`` fails on TensorFlow's own.

  Returns:
    An ``Installation``; use it in a ``with`` statement to undo the install
    at the end of the block.

  Raises:
    ImportError: one of the shim's classes is missing; nothing was changed.

  Examples:
    >>> import tensorflow as tf
    >>> import compat_distribute
    >>> with compat_distribute.install():
    ...   strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    ...   print(type(strategy).__module__)
    compat_distribute.strategies.one_device
    >>> type(tf.distribute.OneDeviceStrategy("/cpu:0")).__module__
    'tensorflow.python.distribute.one_device_strategy'
  """
  global _originals, _supplied, _multi_worker
  with _lock:
    if _originals is not None:
      return Installation(swapped=False)
    replacements, register = {}, []
    for tf_path, attr, our_module, our_attr in _targets(multi_worker):
      ours = _our_class(our_module, our_attr)
      module = _tf_module(tf_path)
      native = getattr(module, attr)
      replacements[id(native)] = (native, ours)
      name = _unloaded_import_name(tf_path)
      if name is not None and name not in dict(register):
        register.append((name, module))
    _replacements.update(replacements)
    originals: list[tuple[Any, str, Any]] = []
    try:
      for module in _api_modules():
        _rebind(module, originals)
      for name, module in register:
        sys.modules.setdefault(name, module)
      sys.meta_path.insert(0, _finder)
      from compat_distribute import estimator  # pylint: disable=g-import-not-at-top
      _supplied = estimator.supply()
    except BaseException:
      _undo(originals, register)
      raise
    _originals = originals
    _multi_worker = multi_worker
    _added_modules[:] = register
    return Installation(swapped=True)


def _undo(originals: list[tuple[Any, str, Any]],
          added: list[tuple[str, Any]]) -> None:
  global _supplied
  if _supplied is not None:
    from compat_distribute import estimator  # pylint: disable=g-import-not-at-top
    estimator.withdraw(_supplied)
    _supplied = None
  while _finder in sys.meta_path:
    sys.meta_path.remove(_finder)
  for module, attr, original in reversed(originals):
    setattr(module, attr, original)
  for name, module in added:
    if sys.modules.get(name) is module:
      del sys.modules[name]
  _replacements.clear()


def uninstall() -> None:
  """Puts TensorFlow's original strategy classes back.

  Does nothing if the shim is not installed.

  Examples:
    >>> import tensorflow as tf
    >>> import compat_distribute
    >>> _ = compat_distribute.install()
    >>> tf.distribute.OneDeviceStrategy.__module__
    'compat_distribute.strategies.one_device'
    >>> compat_distribute.uninstall()
    >>> tf.distribute.OneDeviceStrategy.__module__
    'tensorflow.python.distribute.one_device_strategy'
  """
  global _originals, _multi_worker
  with _lock:
    if _originals is None:
      return
    _undo(_originals, _added_modules)
    _added_modules.clear()
    _originals = None
    _multi_worker = False


def installed_names() -> dict[str, Any]:
  """``{"tf.<path>.<name>": value}`` for each name ``install()`` replaces,
  with the value it has right now.

  >>> sorted(installed_names())[0]
  'tf.compat.v1.distribute.OneDeviceStrategy'
  """
  return {f"tf.{tf_path}.{attr}": getattr(_tf_module(tf_path), attr)
          for tf_path, attr, _, _ in _targets(_multi_worker)}
