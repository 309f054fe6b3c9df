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
(``choose``), before TensorFlow is imported: this package imports no
TensorFlow.

The decision, in order:

1. ``run --keras 2|3`` decides; without the flag (or with ``auto``),
   ``COMPAT_DISTRIBUTE_KERAS=2|3`` does; ``auto``, the default, goes on.
   Keras 3 means Keras 3: a ``TF_USE_LEGACY_KERAS`` of the environment is
   taken out.
2. The program itself sets ``TF_USE_LEGACY_KERAS`` before it imports
   TensorFlow (``os.environ["TF_USE_LEGACY_KERAS"] = "1"``, the recipe of
   TensorFlow's Keras 2 guides): under the runner TensorFlow is imported
   first, so the value the program assigns is set for it in advance
   (``script_keras_setting``).  Otherwise ``TF_USE_LEGACY_KERAS`` already
   set in the environment is TensorFlow's own switch, left as it is.
3. Only where both Kerases are installed (Keras 3 with its TensorFlow API
   and tf-keras) is there a choice; elsewhere (TensorFlow 2.12-2.15, where
   Keras 2 is the only ``tf.keras``) nothing is changed.
4. The look at the program's sources (``program_look``; never executed,
   bounded by files and bytes, not time): a use of Estimator selects Keras
   2 (``TF_USE_LEGACY_KERAS=1``); none, or a look that stopped at its
   bound, leaves Keras 3.

Whenever this changes ``tf.keras``, one line on stderr says so, why (the
flag, or the file and line of the use of Estimator) and how to override
it; a look that stopped at its bound says so too.  Nothing here raises
into the program: a file that cannot be read or parsed counts as not using
Estimator, and any other failure leaves the environment as it was.

>>> requested("2", {"COMPAT_DISTRIBUTE_KERAS": "3"})
('2', '--keras 2')
"""
from __future__ import annotations

import ast
import importlib.util
import os
import sys
from typing import MutableMapping, Optional

from compat_distribute.runner import program_look
from compat_distribute.runtime import errors
from compat_distribute.runtime import logs

OVERRIDE_VARIABLE = "COMPAT_DISTRIBUTE_KERAS"
EXPLAIN_VARIABLE = "COMPAT_DISTRIBUTE_KERAS_EXPLAIN"
LEGACY_KERAS_VARIABLE = "TF_USE_LEGACY_KERAS"
CHOICES = ("2", "3", "auto")
# TensorFlow's reading of TF_USE_LEGACY_KERAS: these select tf-keras.
TRUE_WORDS = ("1", "true", "True")
PREFIX = "compat_distribute run: "


class KerasChoiceError(errors.Error, ValueError):
  """A ``keras`` argument that is not one of ``run --keras``'s values."""

  def __init__(self, value: object) -> None:
    super().__init__(
        f"keras must be '2', '3' or 'auto' (as run --keras 2|3|auto), or None "
        f"to read {OVERRIDE_VARIABLE}; got {value!r}")


class Choice:
  """What ``choose`` decided.

  Attributes:
    keras: ``"2"`` (it set ``TF_USE_LEGACY_KERAS=1``), ``"3"`` (it took a
      ``TF_USE_LEGACY_KERAS`` of the environment out) or None (it changed
      nothing: the program's Keras is what plain ``python`` gives it).
    reason: why, in a few words (the evidence found, if any).
    files_read: how many source files the look read.
    message: the line it wrote to stderr, or None.
  """

  def __init__(self, keras: Optional[str], reason: str, files_read: int,
               restore: Optional[tuple[Optional[str]]] = None) -> None:
    self.keras, self.reason, self.files_read = keras, reason, files_read
    self.message: Optional[str] = None
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


def requested(keras: Optional[str], environ: MutableMapping[str, str]
              ) -> tuple[str, str]:
  """(``"2"``, ``"3"`` or ``"auto"``, where it was asked): the flag, else
  ``COMPAT_DISTRIBUTE_KERAS``, else auto.

  >>> requested(None, {"COMPAT_DISTRIBUTE_KERAS": "2"})
  ('2', 'COMPAT_DISTRIBUTE_KERAS=2')
  >>> requested("3", {"COMPAT_DISTRIBUTE_KERAS": "2"})
  ('3', '--keras 3')
  """
  if keras not in (None, "auto"):
    return keras, f"--keras {keras}"
  value = environ.get(OVERRIDE_VARIABLE, "auto").strip().lower() or "auto"
  if value not in CHOICES:
    logs.logger().warning(
        "%s=%r is not one of 2, 3, auto; deciding as for auto",
        OVERRIDE_VARIABLE, environ[OVERRIDE_VARIABLE])
    value = "auto"
  return value, f"{OVERRIDE_VARIABLE}={value}"


def _decide(program: program_look.Program, keras: Optional[str],
            environ: MutableMapping[str, str]
            ) -> tuple[Optional[str], str, int, Optional[str]]:
  """(``"2"``, ``"3"`` or None as ``Choice.keras``, reason, files read,
  the line to write or None)."""
  value, asked = requested(keras, environ)
  legacy = environ.get(LEGACY_KERAS_VARIABLE)
  if not two_kerases():
    reason = ("one Keras only (TensorFlow before 2.16, or tf-keras not "
              "installed): nothing to choose")
    said = (f"{asked} changes nothing here: tf.keras has one Keras only "
            "(TensorFlow before 2.16, or tf-keras not installed)")
    return None, reason, 0, said if value != "auto" else None
  if value == "2":
    line = (f"tf.keras is Keras 2 (tf-keras) for this program, not Keras 3, "
            f"because of {asked}; run --keras 3 to keep Keras 3")
    return "2", asked, 0, None if legacy in TRUE_WORDS else line
  if value == "3":
    line = (f"tf.keras is Keras 3 for this program, not Keras 2 as "
            f"{LEGACY_KERAS_VARIABLE}={legacy} in the environment asks, "
            f"because of {asked}; run --keras auto to leave "
            f"{LEGACY_KERAS_VARIABLE} as it is")
    return ("3", asked, 0, line) if legacy in TRUE_WORDS else (
        None, asked, 0, None)
  source = program.source
  if source is not None:
    with open(source, "rb") as f:
      own = script_keras_setting(f.read(program_look.MAX_BYTES))
    if own is not None:  # set in advance: no change from plain python
      return "2" if own in TRUE_WORDS else None, (
          f"the program sets {LEGACY_KERAS_VARIABLE}={own!r} itself"), 1, None
  if legacy is not None:
    return None, (f"{LEGACY_KERAS_VARIABLE}={legacy} is set by the "
                  "environment: TensorFlow's choice"), 0, None
  if source is None:
    return None, f"{program.name} is not a Python source to read: Keras 3", (
        0), None
  found = program_look.program_evidence(program)
  if found.evidence is not None:
    return "2", f"Estimator in use ({found.evidence})", found.files, (
        "tf.keras is Keras 2 (tf-keras) for this program, not Keras 3, "
        f"because it uses Estimator at {found.evidence}; run --keras 3 to "
        "keep Keras 3")
  if found.stopped:
    return None, "no use of Estimator found before the look's bound", (
        found.files), (
            "tf.keras stays Keras 3 (the default): the look for Estimator "
            f"in {program.name} stopped at its bound ("
            f"{program_look.MAX_FILES} files, {program_look.MAX_BYTES} "
            f"bytes) after {found.files} files without finding a use; run "
            "--keras 2 if the program uses Estimator")
  return None, "no use of Estimator found: Keras 3", found.files, None


def choose(program: program_look.Program, keras: Optional[str] = None,
           environ: Optional[MutableMapping[str, str]] = None) -> Choice:
  """Chooses ``tf.keras`` for ``program`` before TensorFlow is imported:
  sets (or, for Keras 3, takes out) ``TF_USE_LEGACY_KERAS`` in ``environ``
  (``os.environ``) as the module docstring says, and writes the line that
  says so; never raises.

  Args:
    program: what ``run`` runs (``program_look.script_program`` /
      ``module_program``).
    keras: ``run --keras``: ``"2"``, ``"3"``, ``"auto"`` or None (not
      given).
    environ: the environment to decide from and change.

  Returns:
    The ``Choice`` (``undo()`` puts the environment back).

  Raises:
    KerasChoiceError: ``keras`` is none of the above (a caller's mistake,
      before anything is decided).
  """
  if keras is not None and keras not in CHOICES:
    raise KerasChoiceError(keras)
  environ = os.environ if environ is None else environ
  try:
    wanted, reason, files, line = _decide(program, keras, environ)
  except Exception as e:  # pylint: disable=broad-except
    wanted, reason, files, line = None, f"no decision ({e!r})", 0, None
  restore = None
  if wanted is not None:
    restore = (environ.get(LEGACY_KERAS_VARIABLE),)
    if wanted == "2":
      environ[LEGACY_KERAS_VARIABLE] = "1"
    else:
      environ.pop(LEGACY_KERAS_VARIABLE, None)
  choice = Choice(wanted, reason, files, restore)
  summary = (f"tf.keras for {program.name}: "
             f"{'Keras ' + wanted if wanted else 'unchanged'}: {reason} "
             f"({files} files read)")
  logs.logger().debug(summary)
  if line is None and environ.get(EXPLAIN_VARIABLE, "") not in ("", "0"):
    line = summary
  if line is not None:
    choice.message = PREFIX + line
    sys.stderr.write(choice.message + "\n")
  return choice


def choose_for_script(script: str,
                      environ: Optional[MutableMapping[str, str]] = None,
                      keras: Optional[str] = None) -> Choice:
  """``choose`` for ``run script``."""
  return choose(program_look.script_program(script), keras, environ)
