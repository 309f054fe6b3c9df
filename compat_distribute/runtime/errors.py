"""``compat_distribute.Error``: the base class of every error the package
defines.

Each error class also keeps the TensorFlow or Python class that native
TensorFlow raises for the same mistake (``ValueError``, ``TypeError``,
``AssertionError``, TensorFlow's own error classes ...), so an ``except``
written for native TensorFlow still catches it, and
``except compat_distribute.Error`` catches any of them.

>>> import compat_distribute
>>> from compat_distribute import v2 as distribute
>>> try:
...   distribute.OneDeviceStrategy(42)
... except compat_distribute.Error as e:
...   print(type(e).__name__, isinstance(e, TypeError))
DeviceTypeError True
"""
from __future__ import annotations


class Error(Exception):
  """Base class of the package's errors (see the module docstring).

  Subclasses list it first among their bases and add the classes native
  TensorFlow raises.  Its ``__init__`` is ``Exception``'s, so that AutoGraph
  can re-raise an error of these classes (with the user's source location)
  when it is raised inside a ``tf.function``.

  Examples:
    >>> import compat_distribute
    >>> from compat_distribute import v2 as distribute
    >>> try:
    ...   distribute.experimental.CentralStorageStrategy("/cpu:0")
    ... except compat_distribute.Error as e:
    ...   print(type(e).__name__, isinstance(e, TypeError))
    ComputeDevicesTypeError True
  """
  __init__ = Exception.__init__
