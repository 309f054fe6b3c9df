"""Whether a program uses TensorFlow Estimator, found by reading its
source and the modules it imports, never running them: what
``keras_choice`` decides Keras from, before TensorFlow is imported (this
module imports no TensorFlow).

A look is bounded (``MAX_FILES``, ``MAX_BYTES``, ``MAX_SECONDS``); the
standard library and ``NOT_READ`` are not read; a file that cannot be read
or parsed counts as not using Estimator.

>>> estimator_evidence(b"import tensorflow as tf\\nm = tf.estimator.Estimator")
'line 2: tf.estimator'
>>> estimator_evidence(b"import tensorflow as tf\\nm = tf.keras.Sequential()") is None
True
"""
from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import re
import sys
import time
from typing import Optional, Sequence

# Modules whose import means Estimator (a name, or a module below one):
# names compared with what a program imports, never imported here.
ESTIMATOR_MODULES = tuple(".".join(parts) for parts in (
    ("tensorflow_estimator",), ("tensorflow", "estimator"),
    ("tensorflow", "python", "estimator"),
    ("tensorflow", "compat", "v1", "estimator"),
    ("tensorflow", "compat", "v2", "estimator")))
# Packages never read: the standard library, TensorFlow and Keras
# themselves (their names are checked, their files are not), and large
# packages that do not build on Estimator.
NOT_READ = frozenset((
    "tensorflow", "tensorflow_estimator", "keras", "tf_keras", "tensorboard",
    "compat_distribute", "numpy", "scipy", "pandas", "sklearn", "matplotlib",
    "jax", "jaxlib", "torch", "google", "absl", "h5py", "ml_dtypes", "PIL",
    "grpc", "pytest", "_pytest", "setuptools", "pip", "six", "wrapt",
    "tensorflow_io_gcs_filesystem"))
# The look's bounds: files, bytes and seconds (whichever comes first).
MAX_FILES = 300
MAX_BYTES = 4_000_000
MAX_SECONDS = 0.5

_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([^\n#;]+)", re.M)
_FROM = re.compile(
    rb"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n#;]*)",
    re.M)


def _is_estimator_module(name: str) -> bool:
  return any(name == m or name.startswith(m + ".") for m in ESTIMATOR_MODULES)


def _absolute(module: str, level: int, package: Optional[str]) -> Optional[str]:
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


def _regex_imports(source: bytes,
                   package: Optional[str]) -> list[tuple[str, list[str]]]:
  """``[(module, [names imported from it]), ...]`` read with regular
  expressions (fast; a stray match in a string only costs a look)."""
  found = []
  for match in _IMPORT.finditer(source):
    for item in match.group(1).decode("utf-8", "replace").split(","):
      words = item.split()
      if words and re.fullmatch(r"[\w.]+", words[0]):
        found.append((words[0], []))
  for match in _FROM.finditer(source):
    raw = match.group(1).decode("utf-8", "replace")
    level = len(raw) - len(raw.lstrip("."))
    module = _absolute(raw[level:], level, package)
    names = [item.split()[0] for item in
             match.group(2).decode("utf-8", "replace").strip("()").split(",")
             if item.split() and item.split()[0].isidentifier()]
    if module:
      found.append((module, names))
  return found


def _ast_look(source: bytes, package: Optional[str]
             ) -> tuple[Optional[str], list[tuple[str, list[str]]]]:
  """(evidence of Estimator or None, imports) of a parsed source."""
  tree = ast.parse(source)
  imports: list[tuple[str, list[str]]] = []
  tf_names: set[str] = set()
  evidence = None
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        imports.append((alias.name, []))
        if alias.name.split(".")[0] == "tensorflow":
          tf_names.add(alias.asname or "tensorflow")
        if evidence is None and _is_estimator_module(alias.name):
          evidence = f"line {node.lineno}: import {alias.name}"
    elif isinstance(node, ast.ImportFrom):
      module = _absolute(node.module or "", node.level, package)
      if not module:
        continue
      names = [alias.name for alias in node.names]
      imports.append((module, names))
      if module.split(".")[0] == "tensorflow":
        tf_names.update(alias.asname or alias.name for alias in node.names)
      for name in [module] + [f"{module}.{n}" for n in names]:
        if evidence is None and _is_estimator_module(name):
          evidence = f"line {node.lineno}: from {module} import ..."
    elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and
          evidence is None and _is_estimator_module(node.value)):
      evidence = f"line {node.lineno}: {node.value!r}"
  if evidence is None:
    uses = []
    for node in ast.walk(tree):
      if isinstance(node, ast.Attribute) and node.attr == "estimator":
        chain, value = ["estimator"], node.value
        while isinstance(value, ast.Attribute):
          chain.insert(0, value.attr)
          value = value.value
        if isinstance(value, ast.Name) and value.id in tf_names:
          uses.append((node.lineno, ".".join([value.id] + chain)))
    if uses:
      evidence = "line %d: %s" % min(uses)
  return evidence, imports


def estimator_evidence(source: bytes,
                       package: Optional[str] = None) -> Optional[str]:
  """Where ``source`` uses Estimator (``"line 3: tf.estimator"``), or None.

  Estimator is in use where the source imports ``tensorflow_estimator``,
  ``tensorflow.estimator``, ``tensorflow.python.estimator`` or
  ``tensorflow.compat.v1/v2.estimator`` (or a module below one, or names
  one in a string), or reaches ``.estimator`` of a TensorFlow module it
  imported (``tf.estimator``, ``tf.compat.v1.estimator``,
  ``tf.keras.estimator``).  ``package`` resolves relative imports.

  >>> estimator_evidence(b"from tensorflow.python.estimator.canned import head")
  'line 1: from tensorflow.python.estimator.canned import ...'
  """
  if b"estimator" not in source:
    return None
  try:
    return _ast_look(source, package)[0]
  except (SyntaxError, ValueError):
    return None


class _Look:
  """The bounded look: the script, then the modules it imports, nearest
  first, each file read once, at most ``MAX_FILES`` / ``MAX_BYTES``."""

  def __init__(self, search_path: Sequence[str]) -> None:
    self.search_path = list(search_path)
    self.specs: dict[str, Optional[importlib.machinery.ModuleSpec]] = {}
    self.queue: list[tuple[str, str, Optional[str]]] = []
    self.seen: set[str] = set()
    self.files = 0
    self.bytes = 0
    self.exhausted = False
    self.deadline = time.perf_counter() + MAX_SECONDS

  def spec(self, name: str) -> Optional[importlib.machinery.ModuleSpec]:
    if name in self.specs:
      return self.specs[name]
    spec = None
    try:
      parent, _, _ = name.rpartition(".")
      if not parent:
        spec = importlib.machinery.PathFinder.find_spec(name, self.search_path)
        if spec is None and name not in sys.builtin_module_names:
          spec = importlib.util.find_spec(name)  # other finders (editable)
      else:
        parent_spec = self.spec(parent)
        locations = parent_spec and parent_spec.submodule_search_locations
        if locations:
          spec = importlib.machinery.PathFinder.find_spec(name, list(locations))
    except (ImportError, ValueError, OSError):
      spec = None
    self.specs[name] = spec
    return spec

  def follow(self, module: str, names: Sequence[str] = ()) -> None:
    """Queues ``module``, its parents and the submodules ``names``."""
    parts = module.split(".")
    top = parts[0]
    if (not top or top in NOT_READ or top in sys.stdlib_module_names or
        top in sys.builtin_module_names):
      return
    wanted = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    spec = self.spec(module)
    if spec is not None and spec.submodule_search_locations:
      wanted += [f"{module}.{n}" for n in names if n != "*"]
    for name in wanted:
      if name in self.seen:
        continue
      self.seen.add(name)
      spec = self.spec(name)
      origin = spec.origin if spec is not None else None
      if origin and origin.endswith(".py") and os.path.isfile(origin):
        package = name if spec.submodule_search_locations else (
            name.rpartition(".")[0] or None)
        self.queue.append((origin, name, package))

  def read(self, path: str, label: str,
           package: Optional[str]) -> Optional[str]:
    """Reads one file: its evidence (or None); queues what it imports."""
    if (self.files >= MAX_FILES or self.bytes >= MAX_BYTES or
        time.perf_counter() > self.deadline):
      self.exhausted = True
      return None
    try:
      with open(path, "rb") as f:
        source = f.read(MAX_BYTES)
    except OSError:
      return None
    self.files += 1
    self.bytes += len(source)
    imports = None
    if b"estimator" in source:
      try:
        evidence, imports = _ast_look(source, package)
      except (SyntaxError, ValueError):
        evidence = None
      if evidence is not None:
        return f"{label} {evidence}"
    if imports is None:
      imports = _regex_imports(source, package)
    for module, names in imports:
      if _is_estimator_module(module):
        return f"{label}: imports {module}"
      self.follow(module, names)
    return None

  def run(self, script: str) -> Optional[str]:
    evidence = self.read(script, os.path.basename(script), None)
    while evidence is None and self.queue and not self.exhausted:
      path, name, package = self.queue.pop(0)
      evidence = self.read(path, f"module {name}", package)
    return evidence


def script_source(script: str) -> Optional[str]:
  """The file Python runs for ``script`` (a file or a folder's
  ``__main__.py``); None for anything else (a zip file)."""
  if os.path.isdir(script):
    script = os.path.join(script, "__main__.py")
  if os.path.isfile(script) and not script.endswith((".zip", ".pyz")):
    return script
  return None


def program_evidence(script: str) -> tuple[Optional[str], int, bool]:
  """Where the program ``script`` (a file, or a folder with
  ``__main__.py``), or a module it imports, uses Estimator.

  The modules are found as Python would find them for ``python script``
  (the script's folder first, then ``sys.path``), read nearest first and
  never executed; the standard library and ``NOT_READ`` are not read, and
  the look stops at ``MAX_FILES``, ``MAX_BYTES`` or ``MAX_SECONDS``.

  Returns:
    (evidence or None, files read, whether the look stopped at a bound).
  """
  path = script_source(script)
  if path is None:
    return None, 0, False
  real = os.path.realpath(script)
  folder = real if os.path.isdir(real) else os.path.dirname(real)
  look = _Look([folder] + sys.path[1:])
  evidence = look.run(path)
  return evidence, look.files, look.exhausted
