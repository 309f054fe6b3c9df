"""The repository's layout and the package's contract with TensorFlow.

Checked statically (``ast``), so no module has to be imported to find out
what it imports:

* the top-level paths DESIGN.md promises exist;
* only the modules of ``compat_distribute/_tf_private/`` import
  ``tensorflow.python``;
* nothing at all imports TensorFlow's own strategy implementations;
* the facades hold only re-exports, ``__all__``, a module ``__getattr__``
  and a docstring, and every name in their ``__all__`` resolves;
* ``setup.py`` installs ``v1/`` and ``v2/`` only as ``compat_distribute.v1``
  and ``compat_distribute.v2``.
"""
import ast
import importlib

import pytest
import support

ROOT = support.ROOT
PRIVATE_DOOR = ROOT / "compat_distribute" / "_tf_private"
REQUIRED = ("setup.py", "compat_distribute", "v1", "v2", "tests", "docs",
            "tox.ini", "README.md", "benchmarks", "compat_distribute/py.typed")
# TensorFlow's strategy implementations, under tensorflow.python.distribute.
# The shim is built from primitives; importing these would make it a wrapper.
FORBIDDEN_EXACT = ("one_device_strategy", "central_storage_strategy",
                   "values", "ps_values", "input_lib", "input_util",
                   "cross_device_ops", "distribute_utils")
FORBIDDEN_PREFIX = ("parameter_server_strategy", "mirrored_")
TF_DISTRIBUTE = "tensorflow.python.distribute"


def _sources(*dirs):
  files = []
  for d in dirs:
    files.extend(sorted((ROOT / d).rglob("*.py")))
  return files


PACKAGE_FILES = _sources("compat_distribute", "v1", "v2")
FACADE_FILES = [p for p in _sources("v1", "v2") if p.name == "__init__.py"]


def _rel(path):
  return str(path.relative_to(ROOT))


def _imported_modules(path):
  """Every module name ``path`` imports, with ``from a import b`` giving both
  ``a`` and ``a.b`` (``b`` may be a submodule).  Dotted ``tensorflow.*``
  string constants count too, to catch ``importlib.import_module("...")``."""
  tree = ast.parse(path.read_text(), filename=str(path))
  # A string assigned to a class's __module__ names a module, imports none
  # (_tf_private's Keras marker class): not counted.
  module_labels = {id(node.value) for node in ast.walk(tree)
                   if isinstance(node, ast.Assign) and all(
                       isinstance(t, ast.Attribute) and t.attr == "__module__"
                       for t in node.targets)}
  names = []
  for node in ast.walk(tree):
    if (isinstance(node, ast.Constant) and isinstance(node.value, str) and
        node.value.startswith("tensorflow.") and " " not in node.value and
        id(node) not in module_labels):
      names.append(node.value)
    if isinstance(node, ast.Import):
      names.extend(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names.append(node.module)
      names.extend(f"{node.module}.{alias.name}" for alias in node.names)
  return names


def _is_forbidden(module):
  if not module.startswith(TF_DISTRIBUTE + "."):
    return False
  first = module[len(TF_DISTRIBUTE) + 1:].split(".")[0]
  return first in FORBIDDEN_EXACT or first.startswith(FORBIDDEN_PREFIX)


@pytest.mark.parametrize("path", REQUIRED)
def test_required_path_exists(path):
  assert (ROOT / path).exists(), (
      f"{path} is missing from the repository root {ROOT}; DESIGN.md's "
      "layout requires it.")


def test_sources_found():
  """Guards the checks below against an empty glob."""
  assert PRIVATE_DOOR / "__init__.py" in PACKAGE_FILES
  assert len([p for p in PACKAGE_FILES if p.parent == PRIVATE_DOOR]) >= 4
  assert any(p.parent.name == "v2" for p in FACADE_FILES)


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=_rel)
def test_only_tf_private_imports_tensorflow_python(path):
  if path.parent == PRIVATE_DOOR:
    return
  private = [m for m in _imported_modules(path)
             if m == "tensorflow.python" or m.startswith("tensorflow.python.")]
  assert not private, (
      f"{_rel(path)} imports {sorted(set(private))}; only "
      "compat_distribute/_tf_private/ may import tensorflow.python. Add a "
      "small documented helper to the module there of its topic, re-export "
      "it from _tf_private/__init__.py and call it as _tf_private.NAME.")


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=_rel)
def test_private_helpers_are_reached_through_the_package(path):
  """Callers use ``_tf_private.NAME``; the modules by topic inside the door
  are its own business (so they can move without touching a caller)."""
  if path.parent == PRIVATE_DOOR:
    return
  inner = [m for m in _imported_modules(path)
           if m.startswith("compat_distribute._tf_private.")
           and (PRIVATE_DOOR / (m.split(".")[2] + ".py")).exists()]
  assert not inner, (
      f"{_rel(path)} imports {sorted(set(inner))}; import the package "
      "(from compat_distribute import _tf_private) and call _tf_private.NAME.")


def test_the_door_holds_the_private_imports():
  """The fence above is not vacuous: the door's modules do import
  ``tensorflow.python``, each its own topic."""
  for topic in ("scopes", "devices", "functions", "estimator"):
    names = _imported_modules(PRIVATE_DOOR / f"{topic}.py")
    assert any(m.startswith("tensorflow.python.") for m in names), topic


@pytest.mark.parametrize("path", PACKAGE_FILES, ids=_rel)
def test_no_tf_strategy_implementation_imported(path):
  bad = [m for m in _imported_modules(path) if _is_forbidden(m)]
  assert not bad, (
      f"{_rel(path)} imports {sorted(set(bad))}: TensorFlow's strategy "
      "implementations are off limits everywhere, _tf_private included. "
      "Build the behaviour from public tf.* primitives.")


@pytest.mark.parametrize("module", [
    "tensorflow.python.distribute.values",
    "tensorflow.python.distribute.mirrored_strategy",
    "tensorflow.python.distribute.parameter_server_strategy_v2",
    "tensorflow.python.distribute.input_lib.DistributedDataset",
    "tensorflow.python.distribute.parameter_server_strategy",
    "tensorflow.python.distribute.central_storage_strategy",
])
def test_forbidden_matcher(module):
  assert _is_forbidden(module)


@pytest.mark.parametrize("module", [
    "tensorflow.python.distribute.device_util",
    "tensorflow.python.distribute.distribute_lib",
    "tensorflow.python.framework.values",
    "compat_distribute.values.distributed",
])
def test_allowed_matcher(module):
  assert not _is_forbidden(module)


def _facade_violations(path):
  """Statements a facade may not contain (anything but re-exports)."""
  tree = ast.parse(path.read_text(), filename=str(path))
  bad = []
  for i, node in enumerate(tree.body):
    if i == 0 and isinstance(node, ast.Expr) and isinstance(
        getattr(node, "value", None), ast.Constant) and isinstance(
            node.value.value, str):
      continue  # the module docstring
    if isinstance(node, (ast.Import, ast.ImportFrom)):
      continue
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and _is_reexport(node):
      continue
    if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
      continue
    bad.append(f"line {node.lineno}: {ast.dump(node)[:80]}")
  return bad


def _is_reexport(node):
  """``name = <dotted name>`` or ``__all__ = [<strings>]``."""
  targets = node.targets if isinstance(node, ast.Assign) else [node.target]
  if not all(isinstance(t, ast.Name) for t in targets):
    return False
  if any(t.id == "__all__" for t in targets):
    return isinstance(node.value, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str)
        for e in node.value.elts)
  value = node.value
  while isinstance(value, ast.Attribute):
    value = value.value
  return isinstance(value, ast.Name)


@pytest.mark.parametrize("path", FACADE_FILES, ids=_rel)
def test_facade_holds_only_reexports(path):
  bad = _facade_violations(path)
  assert not bad, (
      f"{_rel(path)} is a facade: it may hold only imports, `name = "
      "module.attr` re-exports, __all__, a module __getattr__ and its "
      f"docstring. Move these into the core package: {bad}")


def _facade_module(path):
  parts = path.relative_to(ROOT).with_suffix("").parts[:-1]
  return "compat_distribute." + ".".join(parts)


@pytest.mark.parametrize("path", FACADE_FILES, ids=_rel)
def test_facade_all_resolves(path):
  module = importlib.import_module(_facade_module(path))
  assert hasattr(module, "__all__"), f"{_rel(path)} has no __all__."
  missing = []
  for name in module.__all__:
    try:
      getattr(module, name)
    except AttributeError:
      missing.append(name)
  assert not missing, (
      f"{_facade_module(path)}.__all__ lists {missing}, which do not "
      "resolve; define them or remove them from __all__.")


def _setup_call():
  tree = ast.parse((ROOT / "setup.py").read_text())
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup":
      return {k.arg: ast.literal_eval(k.value) for k in node.keywords
              if k.arg in ("packages", "package_dir", "py_modules")}
  raise AssertionError("setup.py has no setup(...) call")


def test_setup_installs_facades_under_the_package():
  setup = _setup_call()
  packages = setup["packages"]
  package_dir = setup["package_dir"]
  top_level = {p.split(".")[0] for p in packages}
  assert top_level == {"compat_distribute"}, (
      f"setup.py installs top-level packages {sorted(top_level)}; only "
      "compat_distribute may be top level (v1/v2 go under it).")
  assert "" not in package_dir, "package_dir must not remap the root"
  assert not setup.get("py_modules"), "setup.py must not install py_modules"
  for facade in ("v1", "v2"):
    name = f"compat_distribute.{facade}"
    assert name in packages, f"setup.py does not install {name}"
    assert package_dir.get(name) == facade, (
        f"package_dir maps {name} to {package_dir.get(name)!r}, expected "
        f"{facade!r}")
    # Every sub-package of the facade directory is installed too.
    for init in (ROOT / facade).rglob("__init__.py"):
      rel = init.parent.relative_to(ROOT / facade).parts
      sub = ".".join((name,) + rel)
      assert sub in packages, f"setup.py does not install {sub} ({init})"
      assert package_dir.get(sub, "/".join((facade,) + rel)) == "/".join(
          (facade,) + rel)
  for package in packages:
    directory = package_dir.get(package) or package.replace(".", "/")
    assert (ROOT / directory / "__init__.py").exists(), (
            f"setup.py installs {package} from {directory}, which has no "
            "__init__.py")


def test_setup_ships_py_typed():
  text = (ROOT / "setup.py").read_text()
  assert "py.typed" in text, "setup.py must ship compat_distribute/py.typed"


def test_tests_have_one_conftest():
  # Test folders are not packages, so every conftest.py is imported as the
  # module `conftest`: a second one shadows the first for the test files
  # that import helpers `from conftest import ...`.
  found = sorted(support.TESTS.rglob("conftest.py"))
  assert found == [support.TESTS / "conftest.py"], (
      f"tests/ must have one conftest.py, found {found}; put a folder's "
      "fixtures in a support module (e.g. tests/docs/site_support.py) and "
      "import them from the test files that use them")


def test_setup_installs_every_package_folder():
  # A folder of compat_distribute/ that setup.py does not list is missing
  # from the installed wheel (tox installs it), while a checkout still
  # imports it: the suite would pass here and fail for users.
  tree = ast.parse((ROOT / "setup.py").read_text())
  listed = next(
      {element.value for element in keyword.value.elts}
      for node in ast.walk(tree) if isinstance(node, ast.Call)
      for keyword in node.keywords if keyword.arg == "packages")
  folders = {
      ".".join(path.parent.relative_to(ROOT).parts)
      for path in (ROOT / "compat_distribute").rglob("__init__.py")}
  missing = sorted(folders - listed)
  assert not missing, (
      f"setup.py's packages= does not list {missing}; add them, or the "
      "installed package lacks them")
