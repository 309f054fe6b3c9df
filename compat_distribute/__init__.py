"""compat_distribute: TensorFlow's single-machine distribution strategies,
re-implemented on low-level TensorFlow primitives.

Use it through its facades, which mirror TensorFlow's module paths::

    from compat_distribute import v2 as distribute   # for tf.distribute
    from compat_distribute import v1 as distribute   # for tf.compat.v1.distribute
"""
__version__ = "0.1.0"
__all__ = ["__version__"]
