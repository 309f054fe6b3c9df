"""What one Python source shows for the runner's decisions: where its code
uses a thing a decision depends on (``Uses``: Estimator for the Keras
choice, ``MultiWorkerMirroredStrategy`` for the multi-worker one), and the
modules it imports (for the look to follow), read with ``ast``, never run.
One walker serves every decision; what counts for each is one ``Uses``
(``ESTIMATOR``, ``MULTI_WORKER``).

Evidence is code that reaches the thing, in a branch the running
TensorFlow can take (``version_guards``).  Of Estimator (``ESTIMATOR``):

* an import of an Estimator module (``ESTIMATOR_MODULES``, or a module
  below one): ``import tensorflow_estimator``, ``from tensorflow import
  estimator``, ``from tensorflow.python.estimator.canned import head``, or
  ``importlib.import_module`` / ``__import__`` with that name written out;
* ``.estimator`` reached on a TensorFlow module the source imported:
  ``tf.estimator``, ``tf.compat.v1.estimator``, ``tf.keras.estimator``.

Of the strategy (``MULTI_WORKER``): ``MultiWorkerMirroredStrategy``,
``CollectiveAllReduceStrategy`` or ``auto_strategy`` reached on a
TensorFlow or compat_distribute module (``tf.distribute.
MultiWorkerMirroredStrategy``, ``tf.compat.v1.distribute.experimental.
MultiWorkerMirroredStrategy``, ``compat_distribute.v2.experimental.
auto_strategy``) or imported from one (``from tensorflow.distribute import
MultiWorkerMirroredStrategy``).

A string is not evidence: ``importlib.util.find_spec("tensorflow_estimator")``,
``"tensorflow.estimator"`` or ``"MultiWorkerMirroredStrategy"`` in a
constant, a docstring or a comment.

>>> estimator_evidence(b"import tensorflow as tf\\nm = tf.estimator.Estimator")
'line 2: tf.estimator'
>>> estimator_evidence(b"import importlib.util\\n"
...                    b"importlib.util.find_spec('tensorflow_estimator')") is None
True
>>> estimator_evidence(b"import tensorflow as tf\\nif tf.__version__ < '2.16':\\n"
...                    b"  import tensorflow_estimator", tf_version="2.21.0") is None
True
>>> first_use(b"# tf.distribute.MultiWorkerMirroredStrategy\\nimport tensorflow as tf\\n"
...           b"s = tf.distribute.MultiWorkerMirroredStrategy()", MULTI_WORKER)
'line 3: tf.distribute.MultiWorkerMirroredStrategy'
"""
from __future__ import annotations

import ast
from typing import NamedTuple, Optional

from compat_distribute.runner import version_guards


class Uses(NamedTuple):
  """What counts as a use of one thing, for one of the runner's decisions.

  Attributes:
    what: the thing, as the runner's lines name it.
    modules: modules whose import (of one, or of a module below one) is a
      use: names compared with what a program imports, never imported here.
    packages: the top-level packages whose modules ``names`` count on.
    names: the names that are a use when reached as an attribute of a
      module of ``packages`` (``tf.estimator``), or imported from one
      (``from tensorflow import estimator``).
  """
  what: str
  modules: tuple[str, ...]
  packages: frozenset[str]
  names: frozenset[str]


ESTIMATOR = Uses(
    "Estimator",
    tuple(".".join(parts) for parts in (
        ("tensorflow_estimator",), ("tensorflow", "estimator"),
        ("tensorflow", "python", "estimator"),
        ("tensorflow", "compat", "v1", "estimator"),
        ("tensorflow", "compat", "v2", "estimator"))),
    frozenset(("tensorflow",)), frozenset(("estimator",)))
# auto_strategy makes the strategy for a TF_CONFIG cluster of several
# workers (TensorFlow 2.23 on; compat_distribute.v2.experimental's on any).
MULTI_WORKER = Uses(
    "MultiWorkerMirroredStrategy", (),
    frozenset(("tensorflow", "compat_distribute")),
    frozenset(("MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy",
               "auto_strategy")))
# Modules whose import means Estimator (a name, or a module below one).
ESTIMATOR_MODULES = ESTIMATOR.modules
# Calls that import the module their first argument names.
IMPORT_CALLS = frozenset(("import_module", "__import__"))


class SourceFacts(NamedTuple):
  """What a source shows: ``evidence`` (``(line, what)``, the first use of
  the thing looked for, or None) and ``imports`` (``[(module, [names imported from
  it])]``, in the order written, reachable ones only)."""
  evidence: Optional[tuple[int, str]]
  imports: list[tuple[str, list[str]]]


def is_use(name: str, uses: Uses = ESTIMATOR) -> bool:
  """Whether importing ``name`` (a module, or ``module.attribute`` of a
  from-import) is a use of ``uses``' thing."""
  if any(name == m or name.startswith(m + ".") for m in uses.modules):
    return True
  top, _, rest = name.partition(".")
  return bool(rest) and top in uses.packages and (
      name.rpartition(".")[2] in uses.names)


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
             ) -> tuple[version_guards.Evaluator, dict[str, str]]:
  """The evaluator of ``tree``'s conditions (its TensorFlow module names,
  and the module-level names assigned once to a value worked out), and the
  names it binds to a module of a package (``{"tf": "tensorflow"}``)."""
  bound: dict[str, str] = {}
  values: dict[str, object] = {}
  stores: dict[str, int] = {}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        top = alias.name.split(".")[0]
        bound[alias.asname or top] = top
    elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
      top = node.module.split(".")[0]
      for alias in node.names:
        if top == "tensorflow" and alias.name in ("__version__", "VERSION"):
          if tf_version is not None:
            values[alias.asname or alias.name] = tf_version
        elif alias.name != "*":
          bound[alias.asname or alias.name] = top
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
      stores[node.id] = stores.get(node.id, 0) + 1
  tf_modules = {name for name, top in bound.items() if top == "tensorflow"}
  evaluator = version_guards.Evaluator(tf_version, tf_modules, values)
  for node in tree.body:  # in order: a name may use the ones before it
    if (isinstance(node, ast.Assign) and len(node.targets) == 1 and
        isinstance(node.targets[0], ast.Name) and
        stores.get(node.targets[0].id) == 1):
      value = evaluator.value(node.value)
      if not version_guards.is_unknown(value):
        evaluator.values[node.targets[0].id] = value
  return evaluator, bound


class _Reader(ast.NodeVisitor):
  """Visits the code the running TensorFlow can reach, noting the uses of
  ``uses``' thing and the imports."""

  def __init__(self, evaluator: version_guards.Evaluator,
               bound: dict[str, str], package: Optional[str],
               uses: Uses) -> None:
    self.evaluator = evaluator
    self.roots = {name for name, top in bound.items() if top in uses.packages}
    self.package = package
    self.looked_for = uses
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
    if any(is_use(n, self.looked_for)
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
    if node.attr in self.looked_for.names:
      chain, value = [node.attr], node.value
      while isinstance(value, ast.Attribute):
        chain.insert(0, value.attr)
        value = value.value
      if isinstance(value, ast.Name) and value.id in self.roots:
        self.uses.append((node.lineno, ".".join([value.id] + chain)))
        return
    self.generic_visit(node)


def source_facts(source: bytes, package: Optional[str] = None,
                 tf_version: Optional[str] = None,
                 uses: Uses = ESTIMATOR) -> SourceFacts:
  """The ``SourceFacts`` of ``source`` on TensorFlow ``tf_version`` (None:
  unknown, every branch counts), for ``uses``.  ``package`` resolves
  relative imports.

  Raises:
    SyntaxError, ValueError: ``source`` is not Python.
  """
  tree = ast.parse(source)
  evaluator, bound = _bindings(tree, tf_version)
  reader = _Reader(evaluator, bound, package, uses)
  reader.visit(tree)
  return SourceFacts(min(reader.uses) if reader.uses else None,
                     reader.imports)


def first_use(source: bytes, uses: Uses = ESTIMATOR,
              package: Optional[str] = None,
              tf_version: Optional[str] = None) -> Optional[str]:
  """Where ``source`` first uses ``uses``' thing (``"line 3: what"``), or
  None (also for a source that is not Python).

  >>> first_use(b"import tensorflow as tf\\nNAME = 'MultiWorkerMirroredStrategy'",
  ...           MULTI_WORKER) is None
  True
  """
  try:
    evidence = source_facts(source, package, tf_version, uses).evidence
  except (SyntaxError, ValueError):
    return None
  return None if evidence is None else "line %d: %s" % evidence


def estimator_evidence(source: bytes, package: Optional[str] = None,
                       tf_version: Optional[str] = None) -> Optional[str]:
  """Where ``source`` uses Estimator (``"line 3: tf.estimator"``), or None
  (also for a source that is not Python).

  >>> estimator_evidence(b"from tensorflow.python.estimator.canned import head")
  'line 1: from tensorflow.python.estimator.canned import head'
  """
  return first_use(source, ESTIMATOR, package, tf_version)
