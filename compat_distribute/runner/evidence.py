"""What one Python source shows of Estimator: where its code uses it, and
the modules it imports (for the look to follow), read with ``ast``, never
run.

Evidence of Estimator is code that runs it, in a branch the running
TensorFlow can take (``version_guards``):

* an import of an Estimator module (``ESTIMATOR_MODULES``, or a module
  below one): ``import tensorflow_estimator``, ``from tensorflow import
  estimator``, ``from tensorflow.python.estimator.canned import head``, or
  ``importlib.import_module`` / ``__import__`` with that name written out;
* ``.estimator`` reached on a TensorFlow module the source imported:
  ``tf.estimator``, ``tf.compat.v1.estimator``, ``tf.keras.estimator``.

A string is not evidence: ``importlib.util.find_spec("tensorflow_estimator")``,
``"tensorflow.estimator"`` in a constant, a docstring or a comment.

>>> estimator_evidence(b"import tensorflow as tf\\nm = tf.estimator.Estimator")
'line 2: tf.estimator'
>>> estimator_evidence(b"import importlib.util\\n"
...                    b"importlib.util.find_spec('tensorflow_estimator')") is None
True
>>> estimator_evidence(b"import tensorflow as tf\\nif tf.__version__ < '2.16':\\n"
...                    b"  import tensorflow_estimator", tf_version="2.21.0") is None
True
"""
from __future__ import annotations

import ast
from typing import NamedTuple, Optional

from compat_distribute.runner import version_guards

# Modules whose import means Estimator (a name, or a module below one):
# names compared with what a program imports, never imported here.
ESTIMATOR_MODULES = tuple(".".join(parts) for parts in (
    ("tensorflow_estimator",), ("tensorflow", "estimator"),
    ("tensorflow", "python", "estimator"),
    ("tensorflow", "compat", "v1", "estimator"),
    ("tensorflow", "compat", "v2", "estimator")))
# Calls that import the module their first argument names.
IMPORT_CALLS = frozenset(("import_module", "__import__"))


class SourceFacts(NamedTuple):
  """What a source shows: ``evidence`` (``(line, what)``, the first use of
  Estimator, or None) and ``imports`` (``[(module, [names imported from
  it])]``, in the order written, reachable ones only)."""
  evidence: Optional[tuple[int, str]]
  imports: list[tuple[str, list[str]]]


def is_estimator_module(name: str) -> bool:
  return any(name == m or name.startswith(m + ".") for m in ESTIMATOR_MODULES)


def absolute(module: str, level: int, package: Optional[str]) -> Optional[str]:
  """The absolute name of ``from <level dots><module> import``."""
  if not level:
    return module
  if not package:
    return None
  parts = package.split(".")
  if level - 1 > len(parts) - 1:
    return None
  base = ".".join(parts[:len(parts) - (level - 1)])
  return f"{base}.{module}" if module else base


def _bindings(tree: ast.Module, tf_version: Optional[str]
             ) -> version_guards.Evaluator:
  """The evaluator of ``tree``'s conditions: its TensorFlow module names,
  and the module-level names assigned once to a value worked out."""
  tf_modules: set[str] = set()
  values: dict[str, object] = {}
  stores: dict[str, int] = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.split(".")[0] == "tensorflow":
          tf_modules.add(alias.asname or "tensorflow")
    elif isinstance(node, ast.ImportFrom) and not node.level and (
        (node.module or "").split(".")[0] == "tensorflow"):
      for alias in node.names:
        if alias.name in ("__version__", "VERSION"):
          if tf_version is not None:
            values[alias.asname or alias.name] = tf_version
        else:
          tf_modules.add(alias.asname or alias.name)
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
      stores[node.id] = stores.get(node.id, 0) + 1
  evaluator = version_guards.Evaluator(tf_version, tf_modules, values)
  for node in tree.body:  # in order: a name may use the ones before it
    if (isinstance(node, ast.Assign) and len(node.targets) == 1 and
        isinstance(node.targets[0], ast.Name) and
        stores.get(node.targets[0].id) == 1):
      value = evaluator.value(node.value)
      if not version_guards.is_unknown(value):
        evaluator.values[node.targets[0].id] = value
  return evaluator


class _Reader(ast.NodeVisitor):
  """Visits the code the running TensorFlow can reach."""

  def __init__(self, evaluator: version_guards.Evaluator,
               package: Optional[str]) -> None:
    self.evaluator = evaluator
    self.package = package
    self.uses: list[tuple[int, str]] = []
    self.imports: list[tuple[str, list[str]]] = []

  def _branches(self, node: ast.AST) -> None:
    truth = self.evaluator.truth(node.test)
    self.visit(node.test)
    for branch, taken in ((node.body, truth is not False),
                          (node.orelse, truth is not True)):
      if taken:
        for child in branch if isinstance(branch, list) else [branch]:
          self.visit(child)

  visit_If = visit_IfExp = _branches  # pylint: disable=invalid-name

  def _imported(self, line: int, module: str, names: list[str],
                what: str) -> None:
    self.imports.append((module, names))
    if any(is_estimator_module(n)
           for n in [module] + [f"{module}.{n}" for n in names]):
      self.uses.append((line, what))

  def visit_Import(self, node: ast.Import) -> None:  # pylint: disable=invalid-name
    for alias in node.names:
      self._imported(node.lineno, alias.name, [], f"import {alias.name}")

  def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # pylint: disable=invalid-name
    module = absolute(node.module or "", node.level, self.package)
    if module:
      names = [alias.name for alias in node.names]
      self._imported(node.lineno, module, names,
                     f"from {module} import {', '.join(names)}")

  def visit_Call(self, node: ast.Call) -> None:  # pylint: disable=invalid-name
    name = (node.func.attr if isinstance(node.func, ast.Attribute) else
            getattr(node.func, "id", None))
    first = node.args[0] if node.args else None
    if (name in IMPORT_CALLS and isinstance(first, ast.Constant) and
        isinstance(first.value, str) and not first.value.startswith(".")):
      self._imported(node.lineno, first.value, [],
                     f"{name}({first.value!r})")
    self.generic_visit(node)

  def visit_Attribute(self, node: ast.Attribute) -> None:  # pylint: disable=invalid-name
    if node.attr == "estimator":
      chain, value = ["estimator"], node.value
      while isinstance(value, ast.Attribute):
        chain.insert(0, value.attr)
        value = value.value
      if (isinstance(value, ast.Name) and
          value.id in self.evaluator.tf_modules):
        self.uses.append((node.lineno, ".".join([value.id] + chain)))
        return
    self.generic_visit(node)


def source_facts(source: bytes, package: Optional[str] = None,
                 tf_version: Optional[str] = None) -> SourceFacts:
  """The ``SourceFacts`` of ``source`` on TensorFlow ``tf_version`` (None:
  unknown, every branch counts).  ``package`` resolves relative imports.

  Raises:
    SyntaxError, ValueError: ``source`` is not Python.
  """
  tree = ast.parse(source)
  reader = _Reader(_bindings(tree, tf_version), package)
  reader.visit(tree)
  return SourceFacts(min(reader.uses) if reader.uses else None,
                     reader.imports)


def estimator_evidence(source: bytes, package: Optional[str] = None,
                       tf_version: Optional[str] = None) -> Optional[str]:
  """Where ``source`` uses Estimator (``"line 3: tf.estimator"``), or None
  (also for a source that is not Python).

  >>> estimator_evidence(b"from tensorflow.python.estimator.canned import head")
  'line 1: from tensorflow.python.estimator.canned import head'
  """
  try:
    evidence = source_facts(source, package, tf_version).evidence
  except (SyntaxError, ValueError):
    return None
  return None if evidence is None else "line %d: %s" % evidence
