"""``tensorflow.python.estimator`` -- the module path TensorFlow 2.12 to
2.15 kept for libraries that import Estimator by TensorFlow's names --
served on a TensorFlow that no longer has it.

Libraries written before Estimator moved out of TensorFlow import, for
instance, ``from tensorflow.python.estimator.canned.head import _Head``.
TensorFlow 2.15 answered each such module with one holding every name of
the matching ``tensorflow_estimator`` module, underscored names included,
and the module itself under its last name; the packages (``canned``,
``export``, ``inputs``, ``inputs.queues`` and the top) held only their
submodules.  ``EstimatorPathFinder``, put in ``sys.meta_path`` while
installed, answers the same names with the same content: the objects are
Estimator's own, nothing is copied but the names, and nothing is loaded
before the program imports a module (importing a package loads no
Estimator code).  ``forget`` takes every module it loaded out of
``sys.modules`` and ``tensorflow.python`` again.

>>> finder = EstimatorPathFinder(
...     "demo_path", {"": None, "codec": "json.decoder"})
>>> sys.meta_path.insert(0, finder)
>>> from demo_path.codec import JSONDecodeError, scanstring, decoder
>>> import json.decoder
>>> JSONDecodeError is json.decoder.JSONDecodeError, decoder is json.decoder
(True, True)
>>> sys.modules["demo_path"]
<module 'demo_path' (compat_distribute)>
>>> sys.meta_path.remove(finder); finder.forget()
>>> "demo_path.codec" in sys.modules
False
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Mapping, Optional, Sequence

# Set in each forwarding module as in TensorFlow's: it tells readers (and
# linters) that the module's names come from elsewhere at run time.
DYNAMIC_ATTRIBUTES_FLAG = "_HAS_DYNAMIC_ATTRIBUTES"
_MISSING = object()


def forwarded_names(source: types.ModuleType) -> dict[str, object]:
  """The names a forwarding module takes from ``source``: every one not
  starting with a double underscore (single-underscore names included, as
  TensorFlow 2.15's forwarding modules had them).

  >>> import json.decoder
  >>> sorted(forwarded_names(json.decoder))[:3]
  ['BACKSLASH', 'FLAGS', 'JSONArray']
  """
  return {name: value for name, value in vars(source).items()
          if not name.startswith("__")}


class _ForwardingLoader(importlib.abc.Loader):
  """Fills a module with the names of ``target`` (None: a package with
  only its submodules) and records it in ``made``."""

  def __init__(self, target: Optional[str],
               made: list[tuple[str, types.ModuleType]]) -> None:
    self._target = target
    self._made = made

  def create_module(self, spec: importlib.machinery.ModuleSpec
                    ) -> Optional[types.ModuleType]:
    del spec
    return None  # the import system's default module

  def exec_module(self, module: types.ModuleType) -> None:
    if self._target is None:
      module.__doc__ = (f"{module.__name__}, supplied by compat_distribute "
                        "(see compat_distribute.estimator.legacy_path).")
    else:
      source = importlib.import_module(self._target)
      module.__doc__ = (f"{module.__name__}, supplied by compat_distribute: "
                        f"the names of {self._target}.")
      setattr(module, self._target.rpartition(".")[2], source)
      setattr(module, DYNAMIC_ATTRIBUTES_FLAG, True)
      vars(module).update(forwarded_names(source))
    self._made.append((module.__name__, module))


class EstimatorPathFinder(importlib.abc.MetaPathFinder):
  """Serves ``root`` and the modules below it named in ``modules``.

  Args:
    root: the package name (``tensorflow.python.estimator``).
    modules: name below ``root`` (``""`` for ``root`` itself) -> the module
      whose names it holds, or None for a package.
  """

  def __init__(self, root: str, modules: Mapping[str, Optional[str]]) -> None:
    self.root = root
    self._modules = dict(modules)
    self._parent, _, self._child = root.rpartition(".")
    # What the parent package held under ``root``'s last name, if anything.
    parent = sys.modules.get(self._parent)
    self._previous = (_MISSING if parent is None
                      else vars(parent).get(self._child, _MISSING))
    # (import name, module) of each module loaded, for forget().
    self.made: list[tuple[str, types.ModuleType]] = []

  def find_spec(self, fullname: str,
                path: Optional[Sequence[str]] = None,
                target: Optional[types.ModuleType] = None
                ) -> Optional[importlib.machinery.ModuleSpec]:
    del path, target
    if fullname == self.root:
      below = ""
    elif fullname.startswith(self.root + "."):
      below = fullname[len(self.root) + 1:]
    else:
      return None
    if below not in self._modules:
      return None
    source = self._modules[below]
    return importlib.machinery.ModuleSpec(
        fullname, _ForwardingLoader(source, self.made),
        origin="compat_distribute", is_package=source is None)

  def forget(self) -> None:
    """Takes the modules it loaded out of ``sys.modules`` and ``root`` out
    of its parent package (restoring what the parent held before)."""
    for name, module in reversed(self.made):
      if sys.modules.get(name) is module:
        del sys.modules[name]
    parent = sys.modules.get(self._parent)
    ours = {id(module) for _, module in self.made}
    if parent is not None and id(vars(parent).get(self._child)) in ours:
      if self._previous is _MISSING:
        delattr(parent, self._child)
      else:
        setattr(parent, self._child, self._previous)
    self.made = []

  def __repr__(self) -> str:
    return f"EstimatorPathFinder({self.root!r})"


