"""Command line: ``python -m compat_distribute run|demo ...``.

``run [--keras 2|3|auto] [--max-restarts N] [--task-wait S] [--checkpoint-dir DIR] script.py|-m module [args...]``
    Runs an unmodified script exactly as ``python script.py [args...]`` would
    (``sys.argv``, ``__name__ == "__main__"``, ``sys.path[0]``, exit code),
    or a module as ``python -m module [args...]`` would,
    with ``compat_distribute.install()`` in effect, so TensorFlow's
    ``OneDeviceStrategy`` and ``CentralStorageStrategy`` names (v1 and v2)
    and the v1 ``ParameterServerStrategy`` are the shim's, in every
    spelling.  With ``--max-restarts N``, a script that ends on a lost
    cluster task (an uncaught ``tf.errors.UnavailableError``,
    ``DeadlineExceededError`` or ``AbortedError``) is run again in a new
    process, at most N times (``cluster.supervisor``).  Before the
    program's first line, ``runner.keras_choice`` chooses which Keras
    ``tf.keras`` is (``--keras``; auto: Keras 2 for a program that uses
    Estimator).
``serve [--client-wait SECONDS] [--chief-return-wait SECONDS]``
    Runs this task's TensorFlow server (a ``worker`` or ``ps`` of
    ``TF_CONFIG``) for a ``CentralStorageStrategy`` program whose ``chief``
    runs under ``run``; ends when the chief is done.  ``serve --help``.
``demo [--strategy ...] [--replicas N] [--epochs N] [--api v1|v2] [--cluster WxP]``
    Trains a small classifier under the shim and under native TensorFlow and
    prints the two side by side; ``demo --help`` lists the flags.

A mistake on the command line prints the command's short usage and one
error line and exits with status 2; ``--help`` texts are plain text.
"""
from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import traceback
from typing import Callable, Optional, Sequence

from compat_distribute.cluster import addresses
from compat_distribute.cluster import lifetime
from compat_distribute.cluster import supervisor

PROG = "python -m compat_distribute"
SHORT_USAGE = f"""\
usage: {PROG} run SCRIPT [ARGS...]
       {PROG} run -m MODULE [ARGS...]
       {PROG} run --keras 2|3|auto SCRIPT|-m MODULE [ARGS...]
       {PROG} run --multi-worker auto|ours|native SCRIPT [ARGS...]
       {PROG} run --max-restarts N [--task-wait SECONDS]
           [--checkpoint-dir DIR] [--keras 2|3|auto] SCRIPT|-m MODULE [ARGS...]
       {PROG} serve [--client-wait SECONDS] [--chief-return-wait SECONDS]
       {PROG} demo [FLAGS...]
"""
USAGE = f"""\
{SHORT_USAGE}
  run   run SCRIPT as 'python SCRIPT ARGS...' does, with TensorFlow's
        OneDeviceStrategy and CentralStorageStrategy (tf.distribute and
        tf.compat.v1.distribute) and tf.compat.v1's ParameterServerStrategy
        replaced by compat_distribute's, in every spelling; with TF_CONFIG
        naming this task 'chief', a TF2 CentralStorageStrategy runs on the
        cluster's workers and ps tasks
    -m MODULE              run the module MODULE as 'python -m MODULE ARGS...'
                           does (the current folder first on sys.path)
    --keras 2|3|auto       which Keras tf.keras is, where TensorFlow 2.16+
                           has both Keras 3 and tf-keras: 2 (tf-keras), 3,
                           or auto (the default): Keras 2 for a program
                           that uses Estimator, read from its sources before
                           it starts; a change is said in one line on
                           stderr; overrides COMPAT_DISTRIBUTE_KERAS
    --multi-worker auto|ours|native
                           whose MultiWorkerMirroredStrategy: auto (the
                           default) gives compat_distribute's where tf.keras
                           is Keras 3, TensorFlow's with tf-keras; with ours,
                           started on every task of TF_CONFIG, the chief
                           (else worker 0) runs SCRIPT, the others serve it
                           where SCRIPT makes the strategy (read from its
                           sources, as for --keras) or ours is given
    --max-restarts N       when the script ends because a cluster task
                           was lost (an uncaught UnavailableError,
                           DeadlineExceededError or AbortedError), run it
                           again, in a new process, at most N times, then
                           exit 75; any other end is final, with the
                           script's status
    --task-wait SECONDS    before a restart, wait at most this long for
                           every worker and ps task to answer (default 30)
    --checkpoint-dir DIR   the script's checkpoint folder: each restart
                           logs the checkpoint it resumes from
  serve run this task's server for that cluster (TF_CONFIG: a 'worker' or
        'ps' task); ends when the chief is done, or is gone and not
        back within --chief-return-wait; 'serve --help'
  demo  train a small classifier under compat_distribute and under native
        TensorFlow and compare loss and time per step; 'demo --help' lists
        its flags (--strategy, --replicas, --epochs, --api v1|v2, ...), and
        'demo --cluster 2x1' trains on 2 workers and 1 ps on 127.0.0.1
"""


def _usage_error(message: str) -> int:
  """Prints the short usage and the message, as argparse does; returns 2."""
  sys.stderr.write(f"{SHORT_USAGE}{PROG}: error: {message}\n")
  return 2


# Frames of this file and of runpy (which may be frozen, "<frozen runpy>")
# are the runner's own, not the user's; they are cut from the traceback of an
# exception the script raises.
_RUNNER_FILE = os.path.normcase(os.path.abspath(__file__))


def _is_runner_frame(tb) -> bool:
  frame = tb.tb_frame
  if frame.f_globals.get("__name__") == "runpy":
    return True
  filename = frame.f_code.co_filename
  if filename.startswith("<frozen runpy"):
    return True
  return os.path.normcase(os.path.abspath(filename)) == _RUNNER_FILE


def _script_traceback(tb):
  """``tb`` without the leading frames that belong to the runner."""
  while tb is not None and _is_runner_frame(tb):
    tb = tb.tb_next
  return tb


def run_script(script: str, args: Sequence[str] = (),
               keras: Optional[str] = None) -> int:
  """Runs ``script`` as ``__main__`` with the shim installed.

  Args:
    script: path of a Python file (or of a directory / zip file with a
      ``__main__.py``), as it would be given to ``python``.
    args: the script's command-line arguments.
    keras: ``run --keras``: ``"2"``, ``"3"``, ``"auto"``, or None (not
      given: ``COMPAT_DISTRIBUTE_KERAS``, else auto).

  Returns:
    0 if the script finished, 1 if it raised (its traceback is printed to
    stderr; 75, ``supervisor.LOST_STATUS``, when ``run --max-restarts``
    runs this process and what it raised says a cluster task was lost),
    2 if it cannot be opened.  ``SystemExit`` raised by the script
    propagates, so ``sys.exit(code)`` behaves as under ``python``.
  """
  if not os.path.exists(script):
    sys.stderr.write(
        f"compat_distribute run: can't open file {os.path.abspath(script)!r}:"
        " [Errno 2] No such file or directory\n")
    return 2
  from compat_distribute.runner import program_look  # pylint: disable=g-import-not-at-top
  real = os.path.realpath(script)
  script_dir = real if os.path.isdir(real) else os.path.dirname(real)
  return _run_program(
      program_look.script_program(script), [script, *args], script_dir,
      lambda: runpy.run_path(script, run_name="__main__"), keras)


def run_module(module: str, args: Sequence[str] = (),
               keras: Optional[str] = None) -> int:
  """Runs ``module`` as ``__main__`` with the shim installed, as ``python
  -m module args...`` does: the current folder first on ``sys.path``,
  ``sys.argv[0]`` the module's file, a package's ``__main__`` for a
  package.

  Returns:
    As ``run_script``; 1 if there is no such module (as ``python -m``).
  """
  from compat_distribute.runner import program_look  # pylint: disable=g-import-not-at-top

  missing: list[str] = []  # python -m's words for a module it cannot run

  def run() -> None:  # after install(): a package's __init__ runs here
    try:
      spec = importlib.util.find_spec(module)
    except ModuleNotFoundError as e:  # a package of the name is missing
      if not e.name or not (module + ".").startswith(e.name + "."):
        raise
      spec = None
    if spec is None:
      missing.append(f"No module named {module}")
    elif (spec.submodule_search_locations is not None and
          importlib.util.find_spec(f"{module}.__main__") is None):
      missing.append(f"No module named {module}.__main__; {module!r} is a "
                     "package and cannot be directly executed")
    else:
      runpy.run_module(module, run_name="__main__", alter_sys=True)

  status = _run_program(program_look.module_program(module), ["-m", *args],
                        os.getcwd(), run, keras)
  if missing:
    sys.stderr.write(f"compat_distribute run: {missing[0]}\n")
    return 1
  return status


def _run_program(program: object, argv: list[str], path0: str,
                 run: Callable[[], object], keras: Optional[str]) -> int:
  """``run()`` with the Keras chosen for ``program``, the shim installed,
  ``sys.argv`` = ``argv`` and ``sys.path[0]`` = ``path0``; returns the
  status (see ``run_script``)."""
  # Before TensorFlow is imported: Keras 2 for a program that uses Estimator.
  from compat_distribute.runner import keras_choice  # pylint: disable=g-import-not-at-top
  keras_choice.choose(program, keras)
  # MultiWorkerMirroredStrategy: ours or TensorFlow's; on a task that
  # serves the program, serves (and ends) here.
  from compat_distribute.runner import multi_worker as multi_worker_run  # pylint: disable=g-import-not-at-top
  multi_worker = multi_worker_run.prepare(program)
  from compat_distribute.install import install  # pylint: disable=g-import-not-at-top
  try:
    installation = install(multi_worker=multi_worker)
  except ImportError as e:
    sys.stderr.write(f"compat_distribute run: {e}\n")
    return 1
  saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
  sys.argv = argv
  if sys.path:
    sys.path[0] = path0
  else:
    sys.path.insert(0, path0)
  supervisor.take_loss_file()
  supervisor.report_resume()
  try:
    with installation:
      run()
    return 0
  except SystemExit:
    raise
  except KeyboardInterrupt as e:
    traceback.print_exception(type(e), e, _script_traceback(e.__traceback__))
    return 130
  except BaseException as e:  # pylint: disable=broad-except
    remote = sys.modules.get("compat_distribute.cluster.remote")
    if remote is not None:  # a cluster task lost: the error names it
      e = remote.explain(e)
    traceback.print_exception(type(e), e, _script_traceback(e.__traceback__))
    return supervisor.child_status(e) or 1
  finally:
    sys.argv = saved_argv
    if saved_path0 is not None:
      sys.path[0] = saved_path0


# run's options: flag -> (type, what a value must be).
_RUN_FLAGS = {
    "--max-restarts": (int, "a number of restarts, 0 or more"),
    "--task-wait": (float, "a number of seconds (addresses.parse_seconds)"),
    "--checkpoint-dir": (str, "a folder"),
    "--keras": (str, "2, 3 or auto"),
}
_RUN_EXAMPLE = "e.g. run --max-restarts 3 --task-wait 60 train.py"


def _run_value(flag: str, text: str) -> object:
  if flag == "--task-wait":
    if not text.strip():
      raise ValueError(f"run {flag} needs a value")
    try:
      return addresses.parse_seconds(text, f"run {flag}",
                                     supervisor.DEFAULT_TASK_WAIT,
                                     above_zero=True)
    except ValueError as e:
      raise ValueError(f"{e} ({_RUN_EXAMPLE})") from e
  kind, rule = _RUN_FLAGS[flag]
  try:
    value = kind(text)
  except ValueError:
    value = None
  if flag == "--keras" and value not in ("2", "3", "auto"):
    raise ValueError(f"run --keras must be {rule}, got {text!r}; e.g. run "
                     "--keras 2 train.py")
  if value is None or (flag == "--max-restarts" and value < 0) or value == "":
    raise ValueError(f"run {flag} must be {rule}, got {text!r}; "
                     f"{_RUN_EXAMPLE}")
  return value


def _run_options(args: list[str]
                 ) -> tuple[Optional[supervisor.RestartPlan], Optional[str],
                            list[str]]:
  """``run``'s options (before SCRIPT): the restart plan (without
  ``--max-restarts``, no supervisor: None), ``--keras`` (None if not
  given), and the rest.

  >>> _run_options(["--max-restarts", "2", "train.py", "--max-restarts"])
  (RestartPlan(max_restarts=2, task_wait=30.0, checkpoint_dir=None), None, ['train.py', '--max-restarts'])
  >>> _run_options(["--keras=3", "-m", "pkg.train"])
  (None, '3', ['-m', 'pkg.train'])

  Raises:
    ValueError: a flag without a valid value, or one that needs
      ``--max-restarts``.
  """
  values: dict[str, object] = {}
  while args and args[0].split("=", 1)[0] in _RUN_FLAGS:
    flag, eq, text = args.pop(0).partition("=")
    if not eq:
      if not args:
        raise ValueError(f"run {flag} needs a value")
      text = args.pop(0)
    values[flag[2:].replace("-", "_")] = _run_value(flag, text)
  keras = values.pop("keras", None)
  if "max_restarts" not in values:
    if values:
      given = ", ".join("--" + k.replace("_", "-") for k in values)
      raise ValueError(f"run {given} only applies with --max-restarts N")
    return None, keras, args  # type: ignore[return-value]
  return (supervisor.RestartPlan(**values), keras,  # type: ignore[arg-type]
          args)


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Entry point of ``python -m compat_distribute``; returns the exit code."""
  argv = list(sys.argv[1:] if argv is None else argv)
  # A task a LocalCluster / ServedCluster started ends with that process.
  lifetime.end_with_parent()
  if not argv:
    return _usage_error("a command is required: run, serve or demo")
  if argv[0] in ("-h", "--help", "help"):
    sys.stdout.write(USAGE)
    return 0
  command, rest = argv[0], argv[1:]
  if command == "run":
    if rest and rest[0] in ("-h", "--help"):
      sys.stdout.write(USAGE)
      return 0
    try:
      from compat_distribute.runner import multi_worker as multi_worker_run  # pylint: disable=g-import-not-at-top
      plan, keras, rest = _run_options(multi_worker_run.take_flag(rest))
    except ValueError as e:
      return _usage_error(str(e))
    if not rest:
      return _usage_error("run needs the SCRIPT to run")
    if rest == ["-m"]:
      return _usage_error("run -m needs the MODULE to run")
    if plan is not None:  # the child: run [--keras K] SCRIPT|-m MODULE ...
      return supervisor.supervise(rest[0], rest[1:], plan, [
          sys.executable, "-m", "compat_distribute", "run",
          *(["--keras", keras] if keras else []), *rest])
    if rest[0] == "-m":
      return run_module(rest[1], rest[2:], keras)
    if rest[0].startswith("-m"):  # -mMODULE, as python takes it too
      return run_module(rest[0][2:], rest[1:], keras)
    return run_script(rest[0], rest[1:], keras)
  if command == "serve":
    from compat_distribute.cluster import serve  # pylint: disable=g-import-not-at-top
    return serve.main(rest)
  if command == "demo":
    from compat_distribute.demo import single as demo  # pylint: disable=g-import-not-at-top
    return demo.run_from_command_line([f"{PROG} demo", *rest])
  return _usage_error(f"unknown command {command!r} (choose from 'run', "
                      "'serve', 'demo')")


if __name__ == "__main__":
  sys.exit(main())
