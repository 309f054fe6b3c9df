"""compat_distribute: TensorFlow's single-machine distribution strategies,
re-implemented on low-level TensorFlow primitives.

Use it through its facades, which mirror TensorFlow's module paths::

    from compat_distribute import v2 as distribute   # for tf.distribute
    from compat_distribute import v1 as distribute   # for tf.compat.v1.distribute

or, without touching the program, make TensorFlow's own names resolve to the
shim: ``compat_distribute.install()`` in code, or
``python -m compat_distribute run script.py [args...]`` from the shell.
"""
__version__ = "0.1.0"

from compat_distribute.install import install, uninstall  # pylint: disable=g-import-not-at-top

__all__ = ["__version__", "install", "uninstall"]
