"""Whether a program uses a thing one of the runner's decisions depends on
(TensorFlow Estimator for the Keras choice, ``MultiWorkerMirroredStrategy``
for the multi-worker one), found by reading its source and the modules it
imports, never running them, before TensorFlow is imported (this module
imports no TensorFlow).

The program is what ``run`` runs: a script (``script_program``) or a
module (``module_program``, for ``run -m``).  The look reads its file, then
the modules it imports, nearest first (each in the order written), each
file once; what counts as a use is ``evidence``'s (one ``evidence.Uses``
per decision).  It is bounded by files and bytes only (``MAX_FILES``,
``MAX_BYTES``), never by time, so a program gets the same answer on any
machine at any load; the standard library and ``NOT_READ`` are not read; a
file that cannot be read or parsed counts as not using the thing.

>>> from compat_distribute.runner.evidence import estimator_evidence
>>> estimator_evidence(b"import tensorflow as tf\\nm = tf.keras.Sequential()") is None
True
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from typing import NamedTuple, Optional, Sequence

from compat_distribute.runner import evidence as evidence_lib
from compat_distribute.runner import version_guards

# Packages never read: the standard library, TensorFlow and Keras
# themselves (their names are checked, their files are not), and large
# packages that use neither Estimator nor the strategy.
NOT_READ = frozenset((
    "tensorflow", "tensorflow_estimator", "keras", "tf_keras", "tensorboard",
    "compat_distribute", "numpy", "scipy", "pandas", "sklearn", "matplotlib",
    "jax", "jaxlib", "torch", "google", "absl", "h5py", "ml_dtypes", "PIL",
    "grpc", "pytest", "_pytest", "setuptools", "pip", "six", "wrapt",
    "tensorflow_io_gcs_filesystem"))
# The look's bounds: files and bytes read (whichever comes first).
MAX_FILES = 300
MAX_BYTES = 4_000_000


class Program(NamedTuple):
  """What ``run`` runs, as the look needs it.

  Attributes:
    name: the script as given, or the module's name.
    source: the file Python runs first (the script, a folder's
      ``__main__.py``, the module's file), or None (a zip file, a module
      not found, not Python source).
    package: the package relative imports of ``source`` start from.
    search_path: where its imports are found (``sys.path`` as the program
      will have it).
    parents: modules Python imports before ``source`` (``-m pkg.mod``:
      ``pkg``).
  """
  name: str
  source: Optional[str]
  package: Optional[str]
  search_path: list[str]
  parents: list[str]


class Finding(NamedTuple):
  """What a look found: ``evidence`` (``"path:line: what"``, or None),
  ``files`` read, and whether it ``stopped`` at a bound first."""
  evidence: Optional[str]
  files: int
  stopped: bool


def display_path(path: str) -> str:
  """``path`` as a user reads it: relative below the current folder."""
  if not os.path.isabs(path):
    return path
  relative = os.path.relpath(path)
  return path if relative.startswith(os.pardir) else relative


def _spec(name: str, search_path: Sequence[str],
          cache: dict) -> Optional[importlib.machinery.ModuleSpec]:
  """``name``'s spec found as Python would, without importing anything."""
  if name in cache:
    return cache[name]
  spec = None
  try:
    parent, _, _ = name.rpartition(".")
    if not parent:
      spec = importlib.machinery.PathFinder.find_spec(name, list(search_path))
      if spec is None and name not in sys.builtin_module_names:
        spec = importlib.util.find_spec(name)  # other finders (editable)
    else:
      parent_spec = _spec(parent, search_path, cache)
      locations = parent_spec and parent_spec.submodule_search_locations
      if locations:
        spec = importlib.machinery.PathFinder.find_spec(name, list(locations))
  except (ImportError, ValueError, OSError):
    spec = None
  cache[name] = spec
  return spec


def _source_of(spec: Optional[importlib.machinery.ModuleSpec]
               ) -> Optional[str]:
  origin = spec.origin if spec is not None else None
  if origin and origin.endswith(".py") and os.path.isfile(origin):
    return origin
  return None


class _Look:
  """The bounded look: the program, then the modules it imports, nearest
  first, each file read once, at most ``MAX_FILES`` / ``MAX_BYTES``."""

  def __init__(self, search_path: Sequence[str],
               uses: evidence_lib.Uses) -> None:
    self.search_path = list(search_path)
    self.uses = uses
    self.tf_version = version_guards.running_tensorflow_version()
    self.specs: dict = {}
    self.queue: list[tuple[str, Optional[str]]] = []
    self.seen: set[str] = set()
    self.files = 0
    self.bytes = 0
    self.stopped = False

  def follow(self, module: str, names: Sequence[str] = ()) -> None:
    """Queues ``module``, its parents and the submodules ``names``."""
    parts = module.split(".")
    top = parts[0]
    if (not top or top in NOT_READ or top in sys.stdlib_module_names or
        top in sys.builtin_module_names):
      return
    wanted = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    spec = _spec(module, self.search_path, self.specs)
    if spec is not None and spec.submodule_search_locations:
      wanted += [f"{module}.{n}" for n in names if n != "*"]
    for name in wanted:
      if name in self.seen:
        continue
      self.seen.add(name)
      spec = _spec(name, self.search_path, self.specs)
      path = _source_of(spec)
      if path is not None:
        package = name if spec.submodule_search_locations else (
            name.rpartition(".")[0] or None)
        self.queue.append((path, package))

  def read(self, path: str, package: Optional[str]) -> Optional[str]:
    """Reads one file: its evidence (or None); queues what it imports."""
    if self.files >= MAX_FILES or self.bytes >= MAX_BYTES:
      self.stopped = True
      return None
    room = MAX_BYTES - self.bytes
    try:
      with open(path, "rb") as f:
        source = f.read(room + 1)
    except OSError:
      return None
    if len(source) > room:  # the file does not fit: the look ends here
      self.stopped = True
      return None
    self.files += 1
    self.bytes += len(source)
    try:
      facts = evidence_lib.source_facts(source, package, self.tf_version,
                                        self.uses)
    except (SyntaxError, ValueError):
      return None
    if facts.evidence is not None:
      return "%s:%d: %s" % ((display_path(path),) + facts.evidence)
    for module, names in facts.imports:
      self.follow(module, names)
    return None

  def run(self, first: str, package: Optional[str],
          parents: Sequence[str]) -> Optional[str]:
    for parent in parents:
      self.follow(parent)
    self.seen.update(parents)
    self.queue.append((first, package))
    evidence = None
    while evidence is None and self.queue and not self.stopped:
      path, package = self.queue.pop(0)
      evidence = self.read(path, package)
    return evidence


def script_program(script: str) -> Program:
  """The ``Program`` of ``run script``: the file Python runs (a file, or a
  folder's ``__main__.py``; None for a zip file), its folder first on the
  search path."""
  path = os.path.join(script, "__main__.py") if os.path.isdir(script) else (
      script)
  if not os.path.isfile(path) or path.endswith((".zip", ".pyz")):
    path = None
  real = os.path.realpath(script)
  folder = real if os.path.isdir(real) else os.path.dirname(real)
  return Program(script, path, None, [folder] + sys.path[1:], [])


def module_program(module: str) -> Program:
  """The ``Program`` of ``run -m module``, found as ``python -m`` finds it
  (the current folder first on the search path) without importing it or
  its packages: the module's file, or a package's ``__main__.py``."""
  search_path = [os.getcwd()] + sys.path[1:]
  cache: dict = {}
  spec = _spec(module, search_path, cache)
  parents = [".".join(module.split(".")[:i])
             for i in range(1, module.count(".") + 1)]
  package = module.rpartition(".")[0] or None
  if spec is not None and spec.submodule_search_locations:
    parents.append(module)
    package = module
    spec = _spec(f"{module}.__main__", search_path, cache)
  return Program(module, _source_of(spec), package, search_path, parents)


def program_evidence(program: Program | str,
                     uses: evidence_lib.Uses = evidence_lib.ESTIMATOR
                     ) -> Finding:
  """Where ``program`` (a ``Program``, or a script's path), or a module it
  imports, uses ``uses``' thing (Estimator by default) in code the running
  TensorFlow can reach.

  The modules are found as Python would find them for the program (its
  ``search_path``), read nearest first and never executed; the standard
  library and ``NOT_READ`` are not read, and the look stops at
  ``MAX_FILES`` or ``MAX_BYTES``.
  """
  if isinstance(program, str):
    program = script_program(program)
  if program.source is None:
    return Finding(None, 0, False)
  look = _Look(program.search_path, uses)
  found = look.run(program.source, program.package, program.parents)
  return Finding(found, look.files, look.stopped)
