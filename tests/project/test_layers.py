"""The package's architecture, checked: layers, one error base, named types.

Beside ``test_layout.py`` (which fences TensorFlow's private modules), this
reads every module's imports with ``ast`` (lazy ones inside functions too)
and checks:

* each import runs downward: a module imports only from its own
  subpackage or from a layer below its own (``LAYERS``, the order
  docs/architecture.md draws), never upward and never sideways into a
  sibling of the same layer;
* no two modules import each other, directly or round a longer cycle;
* at most 6 modules sit at the package root;
* every exception class the package defines derives from
  ``compat_distribute.Error`` and from a TensorFlow or Python class that
  native TensorFlow code would catch;
* at most ``MAX_ANY`` uses of ``typing.Any`` are left in the package.
"""
import ast
import importlib
import inspect
import pkgutil
import re
import sys

import pytest

import compat_distribute
import support

ROOT = support.ROOT
PACKAGE = "compat_distribute"

# Bottom first.  A unit is a subpackage of compat_distribute, or a module at
# its root; v1 and v2 are the facades (installed as compat_distribute.v1/.v2).
# Units in one layer are siblings: neither may import the other.
LAYERS = (
    ("_tf_compat",),
    ("_tf_private",),
    ("runtime",),
    ("values", "variables"),
    ("input", "replicas"),
    ("api",),
    ("strategies",),
    ("cluster",),
    ("estimator",),
    ("v1", "v2"),
    ("command_line", "runner"),
    ("demo",),
    ("install",),
    ("__init__", "__main__"),
)
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}
MAX_ROOT_MODULES = 6
MAX_ANY = 250
# The one BaseException the package defines: the signal that unwinds a
# paused replica after its run failed elsewhere.  It must stay outside
# Exception (so a replica's `except Exception` lets it pass), hence outside
# compat_distribute.Error; no caller ever sees it.
NOT_ERRORS = ("compat_distribute.replicas.errors.Aborted",)


def _module_files():
  """(module name, path) of every module of the package and its facades."""
  found = []
  for base, prefix in ((ROOT / PACKAGE, PACKAGE), (ROOT / "v1", f"{PACKAGE}.v1"),
                       (ROOT / "v2", f"{PACKAGE}.v2")):
    for path in sorted(base.rglob("*.py")):
      parts = path.relative_to(base).with_suffix("").parts
      if parts[-1] == "__init__":
        parts = parts[:-1]
      found.append((".".join((prefix,) + parts), path))
  return found


MODULES = dict(_module_files())
PACKAGES = {name for name, path in MODULES.items() if path.name == "__init__.py"}


def _unit(module):
  """The layer unit of a module name (see ``LAYERS``)."""
  parts = module.split(".")
  if len(parts) == 1:
    return "__init__"
  return parts[1]


def _imports(module, path):
  """(imported module, line) for every import of ours in ``path``."""
  tree = ast.parse(path.read_text(), filename=str(path))
  package = module if module in PACKAGES else module.rpartition(".")[0]
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found.extend((a.name, node.lineno) for a in node.names
                   if a.name.split(".")[0] == PACKAGE)
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        base = package.split(".")[:len(package.split(".")) - node.level + 1]
        source = ".".join(base + ([node.module] if node.module else []))
      else:
        source = node.module or ""
      if source.split(".")[0] != PACKAGE:
        continue
      for alias in node.names:
        target = f"{source}.{alias.name}"
        found.append((target if target in MODULES else source, node.lineno))
  return found


EDGES = {module: _imports(module, path) for module, path in MODULES.items()}


def _rel(module):
  return str(MODULES[module].relative_to(ROOT))


def test_every_unit_has_a_layer():
  units = {_unit(m) for m in MODULES}
  missing = sorted(units - set(LAYER_OF))
  assert not missing, (
      f"Modules of {missing} are in no layer of tests/project/test_layers.py's "
      "LAYERS. Add the new subpackage to LAYERS (and to the picture in "
      "docs/architecture.md) at the level of what it imports.")


def test_sources_found():
  assert "compat_distribute.replicas.runner" in MODULES
  assert "compat_distribute.v2" in PACKAGES
  assert any(EDGES.values())


def _upward(module):
  unit = _unit(module)
  bad = []
  for target, line in EDGES[module]:
    other = _unit(target)
    if other == unit or other not in LAYER_OF or unit not in LAYER_OF:
      continue
    if LAYER_OF[other] >= LAYER_OF[unit]:
      below = [u for units in LAYERS[:LAYER_OF[unit]] for u in units]
      kind = "sideways into a sibling" if LAYER_OF[other] == LAYER_OF[
          unit] else "upward"
      bad.append(
          f"{_rel(module)}:{line} imports {target}: {kind} ({unit} is layer "
          f"{LAYER_OF[unit]}, {other} layer {LAYER_OF[other]}). The rule: a "
          f"module imports only its own subpackage and the layers below "
          f"({', '.join(below) or 'none'}). Move what both need down (to "
          "runtime/ if every layer needs it), or pass it in as an argument.")
  return bad


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_run_downward(module):
  bad = _upward(module)
  assert not bad, "\n".join(bad)


# Units only one module outside them may import: the runner's decisions
# are the command line's (docs/architecture.md).
ONLY_IMPORTED_BY = {"runner": "compat_distribute.__main__"}


@pytest.mark.parametrize("unit", sorted(ONLY_IMPORTED_BY))
def test_a_unit_for_one_client_has_no_other(unit):
  others = [f"{_rel(module)}:{line} imports {target}"
            for module in sorted(MODULES) if _unit(module) != unit and
            module != ONLY_IMPORTED_BY[unit]
            for target, line in EDGES[module] if _unit(target) == unit]
  assert not others, (
      f"compat_distribute/{unit}/ is for {ONLY_IMPORTED_BY[unit]} alone "
      "(what `run` decides before a program starts); move what the others "
      "need out of it:\n" + "\n".join(others))


def _cycles():
  """Every import cycle between modules, as a list of modules."""
  graph = {m: sorted({t for t, _ in EDGES[m] if t in MODULES and t != m})
           for m in MODULES}
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(node):  # Tarjan's strongly connected components
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for nxt in graph[node]:
      if nxt not in index:
        visit(nxt)
        low[node] = min(low[node], low[nxt])
      elif nxt in on_stack:
        low[node] = min(low[node], index[nxt])
    if low[node] == index[node]:
      component = []
      while True:
        top = stack.pop()
        on_stack.discard(top)
        component.append(top)
        if top == node:
          break
      if len(component) > 1:
        found.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return found


def test_no_import_cycles():
  cycles = _cycles()
  lines = []
  for cycle in cycles:
    members = set(cycle)
    for module in cycle:
      lines.extend(f"{_rel(module)}:{line} imports {target}"
                   for target, line in EDGES[module] if target in members)
  assert not cycles, (
      f"Import cycles (the rule: no two modules import each other, however "
      f"indirectly): {cycles}. The imports involved:\n" + "\n".join(lines) +
      "\nMove what both sides need into a module below both.")


def test_cycle_finder_finds_a_cycle(monkeypatch):
  fake = {"compat_distribute.a": [("compat_distribute.b", 1)],
          "compat_distribute.b": [("compat_distribute.a", 2)]}
  monkeypatch.setattr(sys.modules[__name__], "EDGES", fake)
  monkeypatch.setattr(sys.modules[__name__], "MODULES", dict.fromkeys(fake))
  assert _cycles() == [["compat_distribute.a", "compat_distribute.b"]]


def test_root_holds_at_most_six_modules():
  root = sorted(p.name for p in (ROOT / PACKAGE).glob("*.py"))
  assert len(root) <= MAX_ROOT_MODULES, (
      f"compat_distribute/ holds {len(root)} modules at its root ({root}); "
      f"at most {MAX_ROOT_MODULES}. Put a new module in the subpackage of "
      "its responsibility (docs/architecture.md).")


def test_layers_match_docs():
  """docs/architecture.md names the layers in this order."""
  text = (ROOT / "docs" / "architecture.md").read_text()
  positions = [text.find(f"`{unit}/`") for unit in (
      "runtime", "values", "input", "api", "strategies", "cluster", "demo")]
  assert -1 not in positions and positions == sorted(positions), (
      "docs/architecture.md must name the layers runtime/, values/, input/, "
      "api/, strategies/, cluster/, demo/ in this (bottom-up) order, as "
      "tests/project/test_layers.py's LAYERS does.")


# -- one error base ------------------------------------------------------------

def _package_modules():
  names = [PACKAGE, f"{PACKAGE}.v1", f"{PACKAGE}.v2"]
  names += [info.name for info in pkgutil.walk_packages(
      compat_distribute.__path__, PACKAGE + ".")]
  return [importlib.import_module(n) for n in sorted(set(names))]


def _exception_classes():
  found = {}
  for module in _package_modules():
    for _, obj in inspect.getmembers(module, inspect.isclass):
      if (issubclass(obj, BaseException) and
          obj.__module__.startswith(PACKAGE) and
          not issubclass(obj, Warning)):
        found[f"{obj.__module__}.{obj.__qualname__}"] = obj
  return found


EXCEPTIONS = _exception_classes()


def test_exception_classes_found():
  assert len(EXCEPTIONS) >= 20, sorted(EXCEPTIONS)
  assert set(NOT_ERRORS) <= set(EXCEPTIONS)


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_exception_derives_from_package_error_and_native_class(name):
  cls = EXCEPTIONS[name]
  if cls is compat_distribute.Error:
    return  # the base itself
  if name in NOT_ERRORS:
    assert not issubclass(cls, Exception), name
    return
  assert issubclass(cls, compat_distribute.Error), (
      f"{name} does not derive from compat_distribute.Error. Every error the "
      "package defines does (list Error first among its bases), so `except "
      "compat_distribute.Error` catches any of them.")
  native = [b for b in cls.__mro__ if not b.__module__.startswith(PACKAGE)
            and b not in (Exception, BaseException, object)]
  assert native, (
      f"{name} derives from no TensorFlow or Python exception class besides "
      "Exception. Add the class native TensorFlow raises for the same "
      "mistake (e.g. ValueError), so native `except` clauses still catch it.")


def test_facades_and_package_export_the_error_base():
  from compat_distribute import v1, v2  # pylint: disable=g-import-not-at-top
  assert v1.Error is v2.Error is compat_distribute.Error
  assert "Error" in v1.__all__ and "Error" in v2.__all__
  assert "Error" in compat_distribute.__all__


# -- named types ---------------------------------------------------------------

def _any_uses(path):
  tree = ast.parse(path.read_text(), filename=str(path))
  return [node.lineno for node in ast.walk(tree)
          if (isinstance(node, ast.Name) and node.id == "Any") or
          (isinstance(node, ast.Attribute) and node.attr == "Any")]


def test_any_is_rare():
  counts = {str(p.relative_to(ROOT)): len(_any_uses(p))
            for p in sorted((ROOT / PACKAGE).rglob("*.py"))}
  total = sum(counts.values())
  worst = sorted(counts.items(), key=lambda kv: -kv[1])[:5]
  assert total <= MAX_ANY, (
      f"{total} uses of typing.Any in compat_distribute/ (at most {MAX_ANY}); "
      f"most in {worst}. Use the named types of "
      "compat_distribute/runtime/types.py (DeviceName, Destinations, Nest, "
      "StrategyLike, ...) or a precise type; keep Any for arbitrary user "
      "data.")


def test_no_alias_means_any():
  """An alias of Any would hide uses from the count above."""
  aliases = []
  for path in sorted((ROOT / PACKAGE).rglob("*.py")):
    for line_number, line in enumerate(path.read_text().splitlines(), 1):
      if re.match(r"^\w+\s*(:\s*\w+\s*)?=\s*(typing\.)?Any\s*(#.*)?$", line):
        aliases.append(f"{path.relative_to(ROOT)}:{line_number}: {line}")
  assert not aliases, aliases


# The cluster helpers that start processes on this machine; only the demo,
# the tests and the benchmarks use them, and each other (issue 43: the
# supervisor's port check lived in local.py).
LOCAL_HELPERS = ("compat_distribute.cluster.local",
                 "compat_distribute.cluster.local_served")


def test_production_code_imports_no_local_cluster_helper():
  found = [f"{_rel(module)}:{line} imports {target}"
           for module, edges in EDGES.items()
           if module not in LOCAL_HELPERS and _unit(module) != "demo"
           for target, line in edges if target in LOCAL_HELPERS]
  assert not found, found
  # The demo does use them (the check sees its imports).
  assert any(target in LOCAL_HELPERS for module, edges in EDGES.items()
             if _unit(module) == "demo" for target, _ in edges)
