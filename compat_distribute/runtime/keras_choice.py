"""Which Keras ``tf.keras`` is for a program the runner starts, chosen
before TensorFlow is imported.

From TensorFlow 2.16, ``tf.keras`` is Keras 3, or tf-keras (Keras 2) when
``TF_USE_LEGACY_KERAS`` is set; TensorFlow reads the variable when it is
imported (for ``import tensorflow.keras``) and again at the first use of
``tf.keras``.  Estimator 2.15 is Keras 2 code, and a program written for it
on TensorFlow 2.15 may use ``tf.keras`` before Estimator (a ``Layer``
subclass at module level, a Keras model, ``set_random_seed``): by the time
Estimator is imported, it is too late to switch.  So ``python -m
compat_distribute run`` decides before the program's first line
(``choose_for_script``), before TensorFlow is imported: this module imports
no TensorFlow (nor does ``runtime/__init__``), which is why it sits here.

The decision, in order:

1. ``COMPAT_DISTRIBUTE_KERAS`` = ``2`` or ``3`` decides (``auto``, the
   default, goes on).
2. ``TF_USE_LEGACY_KERAS`` already set in the environment: TensorFlow's
   own switch, left as it is.
3. Only where both Kerases are installed (Keras 3 with its TensorFlow API
   and tf-keras) is there a choice; elsewhere (TensorFlow 2.12-2.15, where
   Keras 2 is the only ``tf.keras``) nothing is changed.
4. A bounded look at the program's source and the modules it imports
   (``estimator_evidence``; found by importlib's finders, never executed):
   Estimator in use selects Keras 2 (``TF_USE_LEGACY_KERAS=1``), otherwise
   the program keeps Keras 3.

Nothing here raises into the program: a file that cannot be read or
parsed counts as not using Estimator, and any other failure leaves the
environment as it was.

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
from typing import MutableMapping, Optional, Sequence

from compat_distribute.runtime import logs

OVERRIDE_VARIABLE = "COMPAT_DISTRIBUTE_KERAS"
EXPLAIN_VARIABLE = "COMPAT_DISTRIBUTE_KERAS_EXPLAIN"
LEGACY_KERAS_VARIABLE = "TF_USE_LEGACY_KERAS"
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


class Choice:
  """What ``choose_for_script`` decided.

  Attributes:
    keras: ``"2"`` (it set ``TF_USE_LEGACY_KERAS=1``) or None (it changed
      nothing: Keras 3 stays, or TensorFlow has one Keras only).
    reason: why, in a sentence (with the evidence found, if any).
    files_read: how many source files the look read.
    seconds: what the decision took.
  """

  def __init__(self, keras: Optional[str], reason: str, files_read: int,
               restore: Optional[tuple[Optional[str]]] = None) -> None:
    self.keras, self.reason, self.files_read = keras, reason, files_read
    self.seconds = 0.0
    self._restore = restore

  def __repr__(self) -> str:
    return f"Choice(keras={self.keras!r}, reason={self.reason!r})"

  def undo(self, environ: Optional[MutableMapping[str, str]] = None) -> None:
    """Puts ``TF_USE_LEGACY_KERAS`` back as it was (TensorFlow, once
    imported, keeps the Keras it chose)."""
    environ = os.environ if environ is None else environ
    if self._restore is None:
      return
    (previous,) = self._restore
    self._restore = None
    if previous is None:
      environ.pop(LEGACY_KERAS_VARIABLE, None)
    else:
      environ[LEGACY_KERAS_VARIABLE] = previous


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


def _script_source(script: str) -> Optional[str]:
  """The file Python runs for ``script`` (a file or a folder's
  ``__main__.py``); None for anything else (a zip file)."""
  if os.path.isdir(script):
    script = os.path.join(script, "__main__.py")
  if os.path.isfile(script) and not script.endswith((".zip", ".pyz")):
    return script
  return None


def two_kerases() -> bool:
  """Whether ``TF_USE_LEGACY_KERAS`` chooses between two installed
  Kerases: Keras 3 with the API TensorFlow 2.16+ routes ``tf.keras`` to
  (``keras/_tf_keras``), and tf-keras.  Found without importing either."""
  try:
    keras = importlib.util.find_spec("keras")
    tf_keras = importlib.util.find_spec("tf_keras")
  except (ImportError, ValueError):
    return False
  locations = (keras and keras.submodule_search_locations) or []
  return tf_keras is not None and any(
      os.path.isdir(os.path.join(location, "_tf_keras"))
      for location in locations)


def _decide(script: str, environ: MutableMapping[str, str]
            ) -> tuple[bool, str, int]:
  """(Keras 2 wanted, reason, files read)."""
  override = environ.get(OVERRIDE_VARIABLE, "auto").strip().lower() or "auto"
  if override not in ("2", "3", "auto"):
    logs.logger().warning(
        "%s=%r is not one of 2, 3, auto; deciding as for auto",
        OVERRIDE_VARIABLE, environ[OVERRIDE_VARIABLE])
    override = "auto"
  if not two_kerases():
    return False, ("one Keras only (TensorFlow before 2.16, or tf-keras not "
                   "installed): nothing to choose"), 0
  if override == "2":
    return True, f"{OVERRIDE_VARIABLE}=2", 0
  if override == "3":
    return False, f"{OVERRIDE_VARIABLE}=3", 0
  if LEGACY_KERAS_VARIABLE in environ:
    return False, (f"{LEGACY_KERAS_VARIABLE}={environ[LEGACY_KERAS_VARIABLE]}"
                   " is set by the environment: TensorFlow's choice"), 0
  if _script_source(script) is None:
    return False, f"{script} is not a Python source to read: Keras 3", 0
  evidence, files, exhausted = program_evidence(script)
  if evidence is not None:
    return True, f"Estimator in use ({evidence})", files
  limit = ", look stopped at its bound" if exhausted else ""
  return False, f"no use of Estimator found{limit}: Keras 3", files


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
  path = _script_source(script)
  if path is None:
    return None, 0, False
  real = os.path.realpath(script)
  folder = real if os.path.isdir(real) else os.path.dirname(real)
  look = _Look([folder] + sys.path[1:])
  evidence = look.run(path)
  return evidence, look.files, look.exhausted


def choose_for_script(script: str,
                      environ: Optional[MutableMapping[str, str]] = None
                      ) -> Choice:
  """Chooses ``tf.keras`` for ``script`` before TensorFlow is imported:
  sets ``TF_USE_LEGACY_KERAS=1`` in ``environ`` (``os.environ``) where the
  program needs Keras 2 (see the module docstring); never raises.

  Returns:
    The ``Choice`` (``undo()`` puts the environment back).
  """
  environ = os.environ if environ is None else environ
  start = time.perf_counter()
  try:
    keras_2, reason, files = _decide(script, environ)
  except Exception as e:  # pylint: disable=broad-except
    keras_2, reason, files = False, f"no decision ({e!r})", 0
  restore = None
  if keras_2 and environ.get(LEGACY_KERAS_VARIABLE) != "1":
    restore = (environ.get(LEGACY_KERAS_VARIABLE),)
    environ[LEGACY_KERAS_VARIABLE] = "1"
  choice = Choice("2" if keras_2 else None, reason, files, restore)
  choice.seconds = time.perf_counter() - start
  message = (f"tf.keras for {os.path.basename(script)}: "
             f"{'Keras 2 (tf-keras)' if keras_2 else 'unchanged'}: {reason} "
             f"({files} files read in {choice.seconds * 1000:.0f} ms)")
  logs.logger().debug(message)
  if environ.get(EXPLAIN_VARIABLE, "") not in ("", "0"):
    sys.stderr.write(f"compat_distribute run: {message}\n")
  return choice
