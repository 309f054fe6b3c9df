"""``tf.estimator``, ``tf.compat.v1.estimator`` and ``import
tensorflow_estimator`` on a TensorFlow that no longer knows Estimator.

TensorFlow up to 2.15 held ``estimator`` in each of its API modules as a
lazy module: Estimator's v2 API (``tensorflow_estimator.python.estimator.
api._v2.estimator``) in ``tf`` and ``tf.compat.v2``, its v1 API in
``tf.compat.v1``, imported at the first attribute read.  ``LazyEstimatorAPI``
is that lazy module, and ``attach`` puts one wherever an API module has no
``estimator``.  ``from tensorflow.estimator import RunConfig`` (an import
statement, not an attribute read) is served by ``EstimatorImportFinder``,
which also stands guard over ``import tensorflow_estimator``:

* Estimator not installed: ``EstimatorNotInstalledError`` with the pip
  command, instead of a bare ``No module named 'tensorflow_estimator'``;
* installed: just before it runs, ``tf.keras`` is made Keras 2
  (``keras.prepare_for_estimator``), or the import fails with the reason.

>>> lazy = LazyEstimatorAPI("tf.estimator", "json")
>>> lazy
<LazyEstimatorAPI tf.estimator -> json (not loaded)>
>>> lazy.dumps([1])
'[1]'
>>> lazy
<LazyEstimatorAPI tf.estimator -> json (loaded)>
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
import types
from typing import Callable, Optional, Sequence

import tensorflow as tf

from compat_distribute.estimator.errors import EstimatorNotInstalledError

PACKAGE = "tensorflow_estimator"
_API_ROOT = "tensorflow_estimator.python.estimator.api"
V2_API = f"{_API_ROOT}._v2.estimator"
V1_API = f"{_API_ROOT}._v1.estimator"
# TensorFlow API module (path below tf) -> the Estimator API it held.
API_PATHS: dict[str, str] = {
    "": V2_API, "compat.v2": V2_API, "compat.v1.compat.v2": V2_API,
    "compat.v2.compat.v2": V2_API,
    "compat.v1": V1_API, "compat.v1.compat.v1": V1_API,
    "compat.v2.compat.v1": V1_API,
}
# TensorFlow's API modules by import name (an ``import tensorflow.compat.v2``
# statement loads a fresh module object when that name is not loaded yet,
# and rebinds ``tf.compat`` to fresh ones) -> their path below tf.
API_IMPORT_NAMES: dict[str, str] = {
    "tensorflow." + path: path for path in API_PATHS if path}
# Import names served by EstimatorImportFinder -> the API module (path
# below tf) whose ``estimator`` they name.
IMPORT_ALIASES: dict[str, str] = {
    "tensorflow.estimator": "",
    "tensorflow.compat.v2.estimator": "compat.v2",
    "tensorflow.compat.v1.estimator": "compat.v1",
}


ModuleSpec = importlib.machinery.ModuleSpec
# A meta path finder's ``path`` argument: the parent package's __path__.
SearchPath = Optional[Sequence[str]]


class LazyEstimatorAPI(types.ModuleType):
  """A module that imports ``target`` at its first attribute read and then
  holds the target's names itself."""

  def __init__(self, name: str, target: str, path: str = "") -> None:
    super().__init__(name, f"Lazily loaded {target} (compat_distribute).")
    vars(self)["_compat_target"] = target
    vars(self)["_compat_path"] = path
    vars(self)["_compat_loaded"] = False

  @property
  def target(self) -> str:
    """The name of the Estimator module this module stands for."""
    return vars(self)["_compat_target"]

  @property
  def api_path(self) -> str:
    """Where it sits, below ``tf`` (``""``, ``"compat.v1"``, ...)."""
    return vars(self)["_compat_path"]

  def _load(self) -> types.ModuleType:
    module = importlib.import_module(vars(self)["_compat_target"])
    vars(self).update({k: v for k, v in vars(module).items()
                       if not k.startswith("__")})
    vars(self)["_compat_loaded"] = True
    return module

  def __getattr__(self, name: str) -> object:
    if name.startswith("__") and name.endswith("__"):
      raise AttributeError(name)
    return getattr(self._load(), name)

  def __dir__(self) -> list[str]:
    return dir(self._load())

  def __repr__(self) -> str:
    state = "loaded" if vars(self)["_compat_loaded"] else "not loaded"
    return (f"<LazyEstimatorAPI {self.__name__} -> "
            f"{vars(self)['_compat_target']} ({state})>")


# (API module, the lazy ``estimator`` attach() put in it).
Attached = tuple[types.ModuleType, LazyEstimatorAPI]


def api_module(path: str) -> Optional[types.ModuleType]:
  """The API module at ``path`` below tf (``""``: tf itself), or None
  where this TensorFlow has none.

  >>> api_module("compat.v1") is tf.compat.v1, api_module("no.such")
  (True, None)
  """
  module: object = tf
  for part in path.split(".") if path else ():
    module = getattr(module, part, None)
  return module if isinstance(module, types.ModuleType) else None


def attach_to(module: types.ModuleType, path: str,
              attached: list[Attached]) -> None:
  """Puts a ``LazyEstimatorAPI`` as ``module.estimator`` (the API module at
  ``path`` below tf) if it has none, recording it in ``attached``."""
  if hasattr(module, "estimator"):
    return
  lazy = LazyEstimatorAPI(".".join(filter(None, ("tf", path, "estimator"))),
                          API_PATHS[path], path)
  module.estimator = lazy
  attached.append((module, lazy))


def attach() -> list[Attached]:
  """Puts a ``LazyEstimatorAPI`` as ``estimator`` in every API module of
  ``API_PATHS`` that has none; returns (module, lazy module) pairs for
  ``detach``."""
  attached: list[Attached] = []
  try:
    for path in API_PATHS:
      module = api_module(path)
      if module is None:
        raise AttributeError(f"TensorFlow {tf.__version__} has no tf.{path}")
      attach_to(module, path, attached)
  except BaseException:
    detach(attached)
    raise
  return attached


def detach(attached: list[Attached]) -> None:
  """Takes out what ``attach`` put in (where it is still there)."""
  for module, lazy in reversed(attached):
    if getattr(module, "estimator", None) is lazy:
      delattr(module, "estimator")


class _AliasLoader(importlib.abc.Loader):
  """Loads an import alias: ``tensorflow.estimator`` as the lazy module
  ``tf.estimator`` itself, and ``tensorflow.estimator.<sub>`` as a module
  holding the names of Estimator's ``<sub>`` (TensorFlow 2.15's
  ``tensorflow.estimator`` gave the same names)."""

  def __init__(self, lazy: LazyEstimatorAPI, suffix: str,
               made: list[tuple[str, types.ModuleType]]) -> None:
    self._lazy = lazy
    self._suffix = suffix
    self._made = made

  def create_module(self, spec: ModuleSpec) -> types.ModuleType:
    if not self._suffix:
      self._lazy._load()  # pylint: disable=protected-access
      module = self._lazy
    else:
      module = types.ModuleType(spec.name)
      source = importlib.import_module(self._lazy.target + self._suffix)
      vars(module).update({k: v for k, v in vars(source).items()
                           if not k.startswith("__")})
      module.__doc__ = source.__doc__
    self._made.append((spec.name, module))
    return module

  def exec_module(self, module: types.ModuleType) -> None:
    del module  # filled in create_module


class _GuardedLoader(importlib.abc.Loader):
  """Runs ``before``, the module's own loader, then ``after`` (with the
  module, and the one that replaced it in ``sys.modules`` if any)."""

  def __init__(self, loader: importlib.abc.Loader,
               before: Callable[[], None] = lambda: None,
               after: Callable[[types.ModuleType], None] = lambda m: None
               ) -> None:
    self._loader = loader
    self._before = before
    self._after = after

  def create_module(self, spec: ModuleSpec) -> Optional[types.ModuleType]:
    self._before()
    return self._loader.create_module(spec)

  def exec_module(self, module: types.ModuleType) -> None:
    try:
      self._loader.exec_module(module)
    finally:  # the module keeps its own loader, not this wrapper
      module.__loader__ = self._loader
      if getattr(module, "__spec__", None) is not None:
        module.__spec__.loader = self._loader
    self._after(sys.modules.get(module.__name__, module))

  def __getattr__(self, name: str) -> object:
    return getattr(self._loader, name)


class EstimatorImportFinder(importlib.abc.MetaPathFinder):
  """While installed, first in ``sys.meta_path``: serves the import
  aliases and guards ``import tensorflow_estimator``.

  Args:
    before_import: called just before ``tensorflow_estimator`` runs (it may
      raise to refuse the import).
    tf_minor: the TensorFlow minor named in the install command.
  """

  def __init__(self, before_import: Callable[[], None], tf_minor: str,
               attached: list[Attached]) -> None:
    self._before_import = before_import
    self._tf_minor = tf_minor
    self._attached = attached
    self._busy = threading.local()  # names being looked up by this thread
    by_path = {lazy.api_path: lazy for _, lazy in attached}
    self._aliases = {alias: by_path[path]
                     for alias, path in IMPORT_ALIASES.items()
                     if path in by_path}
    # (import name, module) of each alias module loaded, for forget().
    self.made: list[tuple[str, types.ModuleType]] = []

  def forget(self) -> None:
    """Takes the alias modules it loaded out of ``sys.modules``."""
    for name, module in reversed(self.made):
      if sys.modules.get(name) is module:
        del sys.modules[name]
    self.made = []

  def _find_elsewhere(self, fullname: str, path: SearchPath,
                      target: Optional[types.ModuleType]
                      ) -> Optional[ModuleSpec]:
    """The spec the other finders give (another finder that asks every
    finder in turn, as install()'s does, asks this one again: it is told
    None)."""
    busy = vars(self._busy).setdefault("names", set())
    busy.add(fullname)
    try:
      for finder in list(sys.meta_path):
        find = getattr(finder, "find_spec", None)
        if finder is self or find is None:
          continue
        spec = find(fullname, path, target)
        if spec is not None:
          return spec
      return None
    finally:
      busy.discard(fullname)

  def find_spec(self, fullname: str, path: SearchPath = None,
                target: Optional[types.ModuleType] = None
                ) -> Optional[ModuleSpec]:
    if fullname in vars(self._busy).get("names", ()):
      return None
    if fullname == PACKAGE:
      spec = self._find_elsewhere(fullname, path, target)
      if spec is None:
        raise EstimatorNotInstalledError(self._tf_minor)
      if hasattr(spec.loader, "exec_module"):
        spec.loader = _GuardedLoader(spec.loader, self._before_import)
      return spec
    if fullname in API_IMPORT_NAMES and self._attached:
      # A fresh copy of an API module (it would replace tf.compat's): it
      # gets its lazy ``estimator`` as TensorFlow 2.15's copies had theirs.
      spec = self._find_elsewhere(fullname, path, target)
      if spec is not None and hasattr(spec.loader, "exec_module"):
        api_path = API_IMPORT_NAMES[fullname]
        spec.loader = _GuardedLoader(
            spec.loader, after=lambda module: attach_to(
                module, api_path, self._attached))
      return spec
    for alias, lazy in self._aliases.items():
      if fullname == alias or fullname.startswith(alias + "."):
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(lazy, fullname[len(alias):], self.made),
            is_package=True)
    return None

  def __repr__(self) -> str:
    return f"EstimatorImportFinder(tf_minor={self._tf_minor!r})"
