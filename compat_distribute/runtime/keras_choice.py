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
2. The script itself sets ``TF_USE_LEGACY_KERAS`` before it imports
   TensorFlow (``os.environ["TF_USE_LEGACY_KERAS"] = "1"``, the recipe of
   TensorFlow's Keras 2 guides): under the runner TensorFlow is imported
   first, so the value the script assigns is set for it in advance
   (``script_keras_setting``).  Otherwise ``TF_USE_LEGACY_KERAS`` already
   set in the environment is TensorFlow's own switch, left as it is.
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
import importlib.util
import os
import sys
import time
from typing import MutableMapping, Optional

from compat_distribute.runtime import logs
from compat_distribute.runtime import program_look
from compat_distribute.runtime.program_look import estimator_evidence  # pylint: disable=unused-import
from compat_distribute.runtime.program_look import program_evidence

OVERRIDE_VARIABLE = "COMPAT_DISTRIBUTE_KERAS"
EXPLAIN_VARIABLE = "COMPAT_DISTRIBUTE_KERAS_EXPLAIN"
LEGACY_KERAS_VARIABLE = "TF_USE_LEGACY_KERAS"
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


def _constant_string(node: ast.AST) -> Optional[str]:
  if isinstance(node, ast.Constant) and isinstance(node.value, str):
    return node.value
  return None


def script_keras_setting(source: bytes) -> Optional[str]:
  """The value ``source`` gives ``TF_USE_LEGACY_KERAS`` at its top level,
  as a constant (``os.environ[...] = "1"``, ``os.environ.setdefault(...)``,
  ``os.environ.update(TF_USE_LEGACY_KERAS=...)``, ``os.putenv(...)``), or
  None.  Only statements outside functions and classes count: they run
  when the script starts.

  >>> script_keras_setting(b'import os\\nos.environ["TF_USE_LEGACY_KERAS"] = "1"')
  '1'
  >>> script_keras_setting(b'import os') is None
  True
  """
  if LEGACY_KERAS_VARIABLE.encode() not in source:
    return None
  try:
    tree = ast.parse(source)
  except (SyntaxError, ValueError):
    return None
  value = None
  for node in tree.body:
    statement = node.value if isinstance(node, ast.Expr) else node
    if isinstance(statement, ast.Assign):
      for target in statement.targets:
        if (isinstance(target, ast.Subscript) and
            _constant_string(target.slice) == LEGACY_KERAS_VARIABLE):
          value = _constant_string(statement.value)
    elif (isinstance(statement, ast.Call) and
          isinstance(statement.func, ast.Attribute)):
      args = [_constant_string(a) for a in statement.args]
      if (statement.func.attr in ("setdefault", "putenv") and
          len(args) == 2 and args[0] == LEGACY_KERAS_VARIABLE):
        value = args[1]
      for keyword in statement.keywords:
        if (statement.func.attr == "update" and
            keyword.arg == LEGACY_KERAS_VARIABLE):
          value = _constant_string(keyword.value)
  return value


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
  path = program_look.script_source(script)
  if path is not None:
    with open(path, "rb") as f:
      own = script_keras_setting(f.read(program_look.MAX_BYTES))
    if own is not None:
      return own in ("1", "true", "True"), (
          f"the script sets {LEGACY_KERAS_VARIABLE}={own!r} itself"), 1
  if LEGACY_KERAS_VARIABLE in environ:
    return False, (f"{LEGACY_KERAS_VARIABLE}={environ[LEGACY_KERAS_VARIABLE]}"
                   " is set by the environment: TensorFlow's choice"), 0
  if path is None:
    return False, f"{script} is not a Python source to read: Keras 3", 0
  evidence, files, exhausted = program_evidence(script)
  if evidence is not None:
    return True, f"Estimator in use ({evidence})", files
  limit = ", look stopped at its bound" if exhausted else ""
  return False, f"no use of Estimator found{limit}: Keras 3", files


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
