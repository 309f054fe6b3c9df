"""compat_distribute: TensorFlow's single-machine distribution strategies,
re-implemented on low-level TensorFlow primitives.

Use it through its facades, which mirror TensorFlow's module paths::

    from compat_distribute import v2 as distribute   # for tf.distribute
    from compat_distribute import v1 as distribute   # for tf.compat.v1.distribute

or, without touching the program, make TensorFlow's own names resolve to the
shim: ``compat_distribute.install()`` in code, or
``python -m compat_distribute run script.py [args...]`` from the shell.
"""
import os as _os

__version__ = "0.1.0"

# Installed, the facades live inside this package (setup.py maps v1/ and v2/
# there).  In a source checkout they sit beside it; let the import system
# find them there too, so `python -m compat_distribute` works from the root.
_checkout_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if (not _os.path.isdir(_os.path.join(__path__[0], "v2")) and
    _os.path.isfile(_os.path.join(_checkout_root, "v2", "__init__.py"))):
  __path__.append(_checkout_root)

from compat_distribute.install import install, uninstall  # pylint: disable=g-import-not-at-top

__all__ = ["__version__", "install", "uninstall"]
