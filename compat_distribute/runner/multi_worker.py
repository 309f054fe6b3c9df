"""What ``python -m compat_distribute run train.py`` does on a task of a
``MultiWorkerMirroredStrategy`` cluster.

Every task is started with the same command.  Before the program runs,
``prepare`` (which ``run`` calls once, after choosing ``tf.keras``):

1. Decides whose ``MultiWorkerMirroredStrategy`` the program gets:
   ``--multi-worker ours|native|auto`` (or ``COMPAT_DISTRIBUTE_MULTI_WORKER``;
   ``auto`` by default) -- ``auto`` gives compat_distribute's where
   ``tf.keras`` is Keras 3 (whose ``fit`` fails on TensorFlow's) and leaves
   TensorFlow's own where it is tf-keras (Keras 2), where it works.
2. With ours, and a program that uses the strategy (or ``--multi-worker
   ours``), reads ``TF_CONFIG``: the driving task (the chief, else worker
   0) runs the program; every other chief and worker task serves it
   instead (``cluster.serve``, which ends when the program does) and the
   program never starts there.

A program uses the strategy when its code, or a module it imports, makes
it in a branch the running TensorFlow takes (``tf.distribute.
MultiWorkerMirroredStrategy``, its experimental and ``compat.v1``
spellings, ``CollectiveAllReduceStrategy``, ``auto_strategy``): found by
``program_look`` with ``evidence.MULTI_WORKER``, the look the Keras choice
makes (bounded by files and bytes, never run, never a string or a
comment).  A program the look cannot read, or whose look stops at its
bound first, runs on every task as under ``python``; on a cluster, a line
says so.

Each decision is one line on stderr, starting ``compat_distribute run:``;
the first names the file and line of the use.
A ``TF_CONFIG`` the strategy refuses (a ``ps`` job, an ``evaluator``
task) leaves the program to run, and its strategy raises the error that
names the task and the fix.

>>> take_flag(["--multi-worker", "ours", "train.py", "--multi-worker"], {})
['train.py', '--multi-worker']
>>> uses_strategy(b"s = 'tf.distribute.MultiWorkerMirroredStrategy()'") is None
True
>>> uses_strategy(b"import tensorflow as tf\\n"
...               b"s = tf.distribute.MultiWorkerMirroredStrategy()")
'line 2: tf.distribute.MultiWorkerMirroredStrategy'
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import sys
from typing import TYPE_CHECKING, MutableMapping, Optional, Union

from compat_distribute.runner import evidence
from compat_distribute.runner import program_look

if TYPE_CHECKING:
  from compat_distribute.cluster.multi_worker_config import MultiWorkerTask

FLAG = "--multi-worker"
VARIABLE = "COMPAT_DISTRIBUTE_MULTI_WORKER"
CHOICES = ("auto", "ours", "native")
PREFIX = "compat_distribute run: "


def take_flag(args: list[str],
              environ: Optional[MutableMapping[str, str]] = None) -> list[str]:
  """``run``'s options without ``--multi-worker X`` (among the options
  before SCRIPT), whose value it puts in ``environ[VARIABLE]`` (so a
  restarted program gets it too).

  Raises:
    ValueError: a value that is not one of ``CHOICES``, or none.
  """
  environ = os.environ if environ is None else environ
  rest, i = list(args), 0
  while i < len(rest) and rest[i].startswith("--"):
    flag, eq, value = rest[i].partition("=")
    if flag != FLAG:
      i += 2 if not eq else 1  # another option and its value
      continue
    del rest[i]
    if not eq:
      value = rest.pop(i) if i < len(rest) else ""
    if value not in CHOICES:
      raise ValueError(
          f"run {FLAG} must be one of {', '.join(CHOICES)}, got {value!r}; "
          f"e.g. run {FLAG} ours train.py")
    environ[VARIABLE] = value
  return rest


def keras_3(environ: Optional[MutableMapping[str, str]] = None) -> bool:
  """Whether ``tf.keras`` will be Keras 3, by TensorFlow's rule (Keras 3
  installed, ``TF_USE_LEGACY_KERAS`` not true or tf-keras absent); found
  without importing either."""
  environ = os.environ if environ is None else environ
  try:
    version = importlib.metadata.version("keras")
  except importlib.metadata.PackageNotFoundError:
    return False
  legacy = environ.get("TF_USE_LEGACY_KERAS") in ("true", "True", "1")
  return version.startswith("3.") and not (
      legacy and importlib.util.find_spec("tf_keras") is not None)


def uses_strategy(source: bytes) -> Optional[str]:
  """Where ``source`` (one file) makes the strategy (``"line 3: what"``),
  or None: ``evidence.MULTI_WORKER``'s rule, on any TensorFlow."""
  return evidence.first_use(source, evidence.MULTI_WORKER)


def _look(program: program_look.Program) -> tuple[Optional[str], str]:
  """(where ``program`` or a module it imports makes the strategy, or
  None; why not, when the look could not tell)."""
  if program.source is None:
    return None, f"{program.name} is not a Python source the runner can read"
  try:
    found = program_look.program_evidence(program, evidence.MULTI_WORKER)
  except Exception as e:  # pylint: disable=broad-except
    return None, f"the look through {program.name} failed ({e!r})"
  if found.evidence is None and found.stopped:
    return None, (f"the look through {program.name} stopped at its bound ("
                  f"{program_look.MAX_FILES} files, {program_look.MAX_BYTES} "
                  f"bytes) after {found.files} files")
  return found.evidence, ""


def _say(line: str) -> None:
  sys.stderr.write(PREFIX + line + "\n")
  sys.stderr.flush()


def ours(environ: Optional[MutableMapping[str, str]] = None) -> bool:
  """Whether ``MultiWorkerMirroredStrategy`` is to be ours (step 1)."""
  environ = os.environ if environ is None else environ
  mode = environ.get(VARIABLE, "auto").strip().lower() or "auto"
  if mode not in CHOICES:
    _say(f"{VARIABLE}={environ[VARIABLE]!r} is not one of "
         f"{', '.join(CHOICES)}; deciding as for auto")
    mode = "auto"
  return mode == "ours" or (mode == "auto" and keras_3(environ))


@dataclasses.dataclass
class Decision:
  """What ``decide`` found.

  Attributes:
    ours: whether ``install`` replaces ``MultiWorkerMirroredStrategy``.
    lines: what to say on stderr, one line each.
    serves: the task this process serves instead of running the program
      (None: it runs the program).
  """
  ours: bool
  lines: list[str]
  serves: Optional["MultiWorkerTask"] = None


def _task(tf_config: str) -> Optional["MultiWorkerTask"]:
  """This task of ``TF_CONFIG``'s cluster; None without one, or where the
  strategy refuses it (then the strategy names the task and the fix)."""
  if not tf_config.strip():
    return None
  from compat_distribute.cluster import multi_worker_config  # pylint: disable=g-import-not-at-top
  try:
    return multi_worker_config.from_tf_config(tf_config)
  except ValueError:
    return None


def decide(program: Union[program_look.Program, str],
           environ: Optional[MutableMapping[str, str]] = None) -> Decision:
  """Steps 1 and 2 for ``program`` (a ``program_look.Program``, or a
  script's path; see the module docstring)."""
  environ = os.environ if environ is None else environ
  if isinstance(program, str):
    program = program_look.script_program(program)
  mine = ours(environ)
  forced = environ.get(VARIABLE, "").strip().lower() == "ours"
  use, unknown = (None, "") if forced else _look(program)
  tf_config = environ.get("TF_CONFIG", "")
  if not (forced or use):
    return Decision(mine, [
        f"{unknown}: it runs on every task as under python (run {FLAG} ours "
        "if it makes tf.distribute.MultiWorkerMirroredStrategy)"]
                    if mine and unknown and _task(tf_config) else [])
  if not mine:
    return Decision(False, [
        f"tf.keras is tf-keras (Keras 2): tf.distribute."
        f"MultiWorkerMirroredStrategy, which the program makes at {use}, "
        "stays TensorFlow's own on every task "
        f"(run {FLAG} ours for compat_distribute's)"] if tf_config.strip()
                    else [])
  why = (f"{FLAG} ours" if forced else
         f"the program makes it at {use}, and tf.keras is Keras 3, whose fit "
         "fails on TensorFlow's")
  lines = [f"tf.distribute.MultiWorkerMirroredStrategy is compat_distribute's "
           f"({why}; run {FLAG} native keeps TensorFlow's)"]
  task = _task(tf_config)
  if task is None:
    return Decision(True, lines)
  name = os.path.basename(program.name)
  if task.drives:
    lines.append(f"TF_CONFIG names this task {task.name} of ({task.shape()}):"
                 f" it runs {name}; the other tasks serve it")
    return Decision(True, lines)
  lines.append(f"TF_CONFIG names this task {task.name} of ({task.shape()}): "
               f"it serves the program, which {task.driver_name} runs ({name} "
               "does not run here)")
  return Decision(True, lines, task)


def prepare(program: Union[program_look.Program, str]) -> bool:
  """``decide`` for ``program``, said on stderr; returns whether
  ``install`` replaces ``MultiWorkerMirroredStrategy``.  On a task that
  serves, serves and ends the process (it never returns there)."""
  decision = decide(program)
  for line in decision.lines:
    _say(line)
  task = decision.serves
  if task is None:
    return decision.ours
  from compat_distribute.cluster import serve  # pylint: disable=g-import-not-at-top
  return serve.serve(serve.ServedTask(task.cluster, task.job, task.index,
                                      task.driver),
                     serve.parse_args([]))  # type: ignore[func-returns-value]
