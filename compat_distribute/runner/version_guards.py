"""Which way a program's TensorFlow version test goes on the running
TensorFlow, worked out from the source without running it: the runner's
look for Estimator skips code in a branch the running TensorFlow cannot
take (``if tf.__version__ < "2.16": import tensorflow_estimator`` on
TensorFlow 2.21).

The running version is read from the installed distribution's metadata
(``running_tensorflow_version``), never by importing TensorFlow.  A
condition is worked out (``Evaluator.truth``) where it is built only of:

* the version: ``tf.__version__``, ``tf.version.VERSION``, ``tf.VERSION``
  (``tf`` any name a TensorFlow module was imported as), or a name
  imported as ``from tensorflow import __version__``;
* constants, and module-level names assigned once to one of these
  expressions (``TF_VERSION = version.parse(tf.__version__)``);
* a parse into a version: a call of ``parse``, ``Version``,
  ``LooseVersion``, ``StrictVersion`` or ``parse_version`` (however
  reached: ``packaging.version.parse``, ``version.Version``, ...), with its
  ``release``, ``major``, ``minor`` and ``micro``;
* ``.split``, ``.startswith``, ``.endswith``, ``.strip``, indexing and
  slicing, ``int``, ``str``, ``tuple``, ``list``, ``map(int, ...)``;
* comparisons, ``and``, ``or``, ``not``; and ``TYPE_CHECKING`` (False).

Anything else is unknown, and both branches count.  Comparisons behave as
in Python: ``tf.__version__ < "2.16"`` compares strings, as the program
itself does.

>>> import ast
>>> test = ast.parse('tf.__version__ < "2.16"', mode="eval").body
>>> Evaluator("2.21.0", {"tf"}).truth(test)
False
>>> test = ast.parse("version.parse(tf.__version__) >= version.parse('2.16')",
...                  mode="eval").body
>>> Evaluator("2.21.0", {"tf"}).truth(test), Evaluator(None, {"tf"}).truth(test)
(True, None)
"""
from __future__ import annotations

import ast
import functools
import importlib.metadata
import operator
import re
from typing import Optional

# The distributions that install the ``tensorflow`` package, most usual
# first.
TENSORFLOW_DISTRIBUTIONS = (
    "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos",
    "tensorflow-intel", "tensorflow-aarch64", "tf-nightly", "tf-nightly-cpu")
# Callables whose result is a version, by their last name.
PARSERS = frozenset(("parse", "Version", "LooseVersion", "StrictVersion",
                     "parse_version"))
UNKNOWN = object()
_TF = object()          # a TensorFlow module (``tf``, ``tf.compat.v1``)
_TF_VERSION = object()  # the module ``tf.version``
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
            ast.GtE: operator.ge, ast.Eq: operator.eq, ast.NotEq: operator.ne}
_VERSION = re.compile(r"\s*v?(\d+(?:\.\d+)*)(.*)", re.S)


def running_tensorflow_version() -> Optional[str]:
  """The installed TensorFlow's version (``"2.21.0"``), or None."""
  for name in TENSORFLOW_DISTRIBUTIONS:
    try:
      return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      continue
  return None


@functools.total_ordering
class Version:
  """A version as ``packaging`` orders release versions: its numbers,
  trailing zeros ignored (``2.16 == 2.16.0``), a pre-release
  (``2.16.0rc0``) before its release.

  >>> Version("2.21.0") > Version("2.16"), Version("2.16.0rc1") < "2.16"
  (True, True)
  """

  def __init__(self, text: str) -> None:
    match = _VERSION.fullmatch(text)
    if not match:
      raise ValueError(f"not a version: {text!r}")
    self.release = tuple(int(n) for n in match.group(1).split("."))
    self.final = not match.group(2).strip(" .-_+").lower().startswith(
        ("a", "b", "c", "rc", "pre", "dev"))
    numbers = self.release + (0, 0, 0)
    self.major, self.minor, self.micro = numbers[:3]

  def _key(self) -> tuple:
    release = list(self.release)
    while len(release) > 1 and release[-1] == 0:
      release.pop()
    return tuple(release), self.final

  def __eq__(self, other: object) -> bool:
    if isinstance(other, str):
      other = Version(other)
    if not isinstance(other, Version):
      return NotImplemented
    return self._key() == other._key()

  def __lt__(self, other: object) -> bool:
    if isinstance(other, str):
      other = Version(other)
    if not isinstance(other, Version):
      return NotImplemented
    return self._key() < other._key()

  def __hash__(self) -> int:
    return hash(self._key())


def is_unknown(*values: object) -> bool:
  """Whether any of ``values`` is not a plain value (unknown, or a
  module)."""
  return any(v is UNKNOWN or v is _TF or v is _TF_VERSION for v in values)


def _last_name(node: ast.AST) -> Optional[str]:
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Attribute):
    return node.attr
  return None


class Evaluator:
  """Works out a condition's value against the running TensorFlow.

  Args:
    tf_version: the running TensorFlow's version, or None (then nothing
      that reads it is known).
    tf_modules: the names a TensorFlow module is bound to in the source.
    values: names bound to the version itself (``from tensorflow import
      __version__ as v``: ``{"v": "2.21.0"}``) or to values worked out.
  """

  def __init__(self, tf_version: Optional[str], tf_modules: set[str],
               values: Optional[dict[str, object]] = None) -> None:
    self.tf_version = tf_version
    self.tf_modules = tf_modules
    self.values = dict(values or {})

  def truth(self, node: ast.AST) -> Optional[bool]:
    """True or False where ``node`` is worked out, else None."""
    value = self.value(node)
    if is_unknown(value):
      return None
    try:
      return bool(value)
    except Exception:  # pylint: disable=broad-except
      return None

  def value(self, node: ast.AST) -> object:
    try:
      return self._value(node)
    except Exception:  # pylint: disable=broad-except  # as Python would fail
      return UNKNOWN

  def _value(self, node: ast.AST) -> object:
    if isinstance(node, ast.Constant):
      return node.value
    if isinstance(node, ast.Name):
      if node.id == "TYPE_CHECKING":
        return False
      if node.id in self.tf_modules:
        return _TF
      return self.values.get(node.id, UNKNOWN)
    if isinstance(node, ast.Attribute):
      return self._attribute(node)
    if isinstance(node, (ast.Tuple, ast.List)):
      items = [self._value(e) for e in node.elts]
      return UNKNOWN if is_unknown(*items) else tuple(items)
    if isinstance(node, ast.Compare):
      return self._compare(node)
    if isinstance(node, ast.BoolOp):
      return self._bool_op(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
      truth = self.truth(node.operand)
      return UNKNOWN if truth is None else not truth
    if isinstance(node, ast.Subscript):
      return self._subscript(node)
    if isinstance(node, ast.Call):
      return self._call(node)
    return UNKNOWN

  def _attribute(self, node: ast.Attribute) -> object:
    if node.attr == "TYPE_CHECKING" and _last_name(node.value) == "typing":
      return False
    base = self._value(node.value)
    if base is _TF and node.attr in ("__version__", "VERSION"):
      return UNKNOWN if self.tf_version is None else self.tf_version
    if base is _TF and node.attr == "version":
      return _TF_VERSION
    if base is _TF_VERSION and node.attr == "VERSION":
      return UNKNOWN if self.tf_version is None else self.tf_version
    if isinstance(base, Version) and node.attr in ("release", "major",
                                                   "minor", "micro"):
      return getattr(base, node.attr)
    return UNKNOWN

  def _compare(self, node: ast.Compare) -> object:
    left = self._value(node.left)
    for op, right_node in zip(node.ops, node.comparators):
      right = self._value(right_node)
      compare = _COMPARE.get(type(op))
      if compare is None or is_unknown(left, right):
        return UNKNOWN
      if not compare(left, right):
        return False
      left = right
    return True

  def _bool_op(self, node: ast.BoolOp) -> object:
    # Its truth (all a branch needs): one false part makes ``and`` false,
    # one true part makes ``or`` true, whatever the others are.
    truths = [self.truth(v) for v in node.values]
    decides = isinstance(node.op, ast.Or)
    if decides in truths:
      return decides
    return UNKNOWN if None in truths else not decides

  def _subscript(self, node: ast.Subscript) -> object:
    base = self._value(node.value)
    if not isinstance(base, (str, tuple)):
      return UNKNOWN
    index = node.slice
    if isinstance(index, ast.Slice):
      parts = [None if p is None else self._value(p)
               for p in (index.lower, index.upper, index.step)]
      if is_unknown(*parts):
        return UNKNOWN
      return base[slice(*parts)]
    key = self._value(index)
    return UNKNOWN if is_unknown(key) else base[key]

  def _call(self, node: ast.Call) -> object:
    name = _last_name(node.func)
    if node.keywords or name is None:
      return UNKNOWN
    if (name == "map" and isinstance(node.func, ast.Name) and
        len(node.args) == 2 and _last_name(node.args[0]) == "int"):
      parts = self._value(node.args[1])
      return UNKNOWN if is_unknown(parts) else tuple(int(p) for p in parts)
    args = [self._value(a) for a in node.args]
    if is_unknown(*args):
      return UNKNOWN
    if isinstance(node.func, ast.Attribute):
      target = self._value(node.func.value)
      if isinstance(target, str) and name in ("split", "startswith",
                                              "endswith", "strip"):
        result = getattr(target, name)(*args)
        return tuple(result) if isinstance(result, list) else result
    if name in PARSERS and len(args) == 1 and isinstance(args[0], str):
      return Version(args[0])
    if isinstance(node.func, ast.Name) and len(args) == 1:
      if name in ("int", "str"):
        return {"int": int, "str": str}[name](args[0])
      if name in ("tuple", "list") and isinstance(args[0], (tuple, str)):
        return tuple(args[0])
    return UNKNOWN
