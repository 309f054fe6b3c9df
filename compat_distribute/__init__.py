"""compat_distribute: TensorFlow's single-machine distribution strategies,
re-implemented on low-level TensorFlow primitives.

Use it through its facades, which mirror TensorFlow's module paths::

    from compat_distribute import v2 as distribute   # for tf.distribute
    from compat_distribute import v1 as distribute   # for tf.compat.v1.distribute

or, without touching the program, make TensorFlow's own names resolve to the
shim: ``compat_distribute.install()`` in code, or
``python -m compat_distribute run script.py [args...]`` from the shell.

Every error the package defines derives from ``compat_distribute.Error``
(and from the class native TensorFlow raises for the same mistake).
"""
import importlib.abc as _abc
import importlib.util as _util
import os as _os
import sys as _sys

__version__ = "0.1.0"


class _CheckoutFacadeFinder(_abc.MetaPathFinder):
  """Finds ``compat_distribute.v1``/``.v2`` in a source checkout.

  Installed, setup.py maps ``v1/`` and ``v2/`` inside this package.  Run from
  a checkout (e.g. ``python -m compat_distribute`` in the repository root,
  where the source folder shadows the installed package) they sit beside it.
  """

  def __init__(self, root: str) -> None:
    self._root = root

  def find_spec(self, fullname, path=None, target=None):
    del path, target
    parts = fullname.split(".")
    if parts[0] != __name__ or len(parts) < 2 or parts[1] not in ("v1", "v2"):
      return None
    folder = _os.path.join(self._root, *parts[1:])
    init = _os.path.join(folder, "__init__.py")
    if _os.path.isfile(init):
      return _util.spec_from_file_location(
          fullname, init, submodule_search_locations=[folder])
    module_file = folder + ".py"
    if _os.path.isfile(module_file):
      return _util.spec_from_file_location(fullname, module_file)
    return None


_checkout_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if (not _os.path.isdir(_os.path.join(__path__[0], "v2")) and
    _os.path.isfile(_os.path.join(_checkout_root, "v2", "__init__.py"))):
  _sys.meta_path.insert(0, _CheckoutFacadeFinder(_checkout_root))

from compat_distribute.install import install, uninstall  # pylint: disable=g-import-not-at-top
from compat_distribute.runtime.errors import Error  # pylint: disable=g-import-not-at-top

__all__ = ["Error", "__version__", "install", "uninstall"]
