"""Test set-up: split the host CPU into 4 logical devices before TF starts.

Every multi-replica test runs on these logical CPUs, so the suite needs no
GPU.  This must happen before anything initialises TensorFlow's devices.

The run's temporary files (TensorFlow's ``__autograph_generated_file*.py``,
pytest's ``tmp_path``, the files of every subprocess a test starts) go to a
folder of their own, made here and removed when the run ends: the process
ends with ``os._exit`` (below), which skips the clean-up TensorFlow would do
at exit.
"""
import atexit
import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# -- one temporary folder per run, removed at its end ---------------------------
#
# Set before TensorFlow is imported (it reads TMPDIR, and autograph writes a
# file per converted function through `tempfile`), and in os.environ so that
# every subprocess a test starts inherits it.  A nested run (a test that runs
# pytest in a subprocess) makes its own folder inside this one.

RUN_TEMP_DIR = tempfile.mkdtemp(prefix="compat_distribute-tests-")
for _name in ("TMPDIR", "TEMP", "TMP"):
  os.environ[_name] = RUN_TEMP_DIR
tempfile.tempdir = RUN_TEMP_DIR


def _remove_run_temp_dir() -> None:
  shutil.rmtree(RUN_TEMP_DIR, ignore_errors=True)


# For COMPAT_DISTRIBUTE_NORMAL_EXIT=1 and a run that ends before its session
# does (a usage error); registered before TensorFlow's own exit handlers, so
# it runs after them.
atexit.register(_remove_run_temp_dir)

import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

NUM_LOGICAL_CPUS = 4


def _configure_logical_cpus() -> None:
  cpu = tf.config.list_physical_devices("CPU")[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)


_configure_logical_cpus()

from compat_distribute import _tf_private  # pylint: disable=g-import-not-at-top,wrong-import-position


def cpu(i: int) -> str:
  """Canonical name of logical CPU ``i``."""
  return f"/job:localhost/replica:0/task:0/device:CPU:{i}"


@pytest.fixture(params=["eager", "tf_function"])
def mode(request):
  """Runs a test body eagerly and inside a ``tf.function``."""
  return request.param


def in_mode(mode_name, fn):
  """Calls ``fn`` eagerly or wrapped in ``tf.function``, per ``mode_name``."""
  if mode_name == "eager":
    return fn()
  return tf.function(fn)()


@pytest.fixture
def compare(request):
  """The comparison a differential test makes: a ``fixtures.strategies.
  Comparison`` (kind x replicas x mode x facade) with ``pair()``,
  ``both(program)`` and ``run(fn)``.  Parametrize it indirectly:
  ``@pytest.mark.parametrize("compare", strategies.cases(...),
  indirect=True)``; unparametrized it is one_device, eager, v2."""
  from fixtures import strategies  # pylint: disable=g-import-not-at-top
  return getattr(request, "param", None) or strategies.Comparison("one_device")


@pytest.fixture(autouse=True)
def no_strategy_state_left_behind():
  """Fails a test that leaves a strategy scope or variable creator on the
  main thread, and removes it, so one leak cannot fail every later test."""
  graph = tf.compat.v1.get_default_graph()
  creators = _tf_private.variable_creator_stack(graph)
  strategies = list(_tf_private.strategy_stack_of(graph))
  yield
  graph = tf.compat.v1.get_default_graph()
  left = (_tf_private.variable_creator_stack(graph) != creators
          or _tf_private.strategy_stack_of(graph) != strategies)
  _tf_private.set_variable_creator_stack(graph, creators)
  _tf_private.set_strategy_stack(graph, strategies)
  assert not left, (
      "the test left a strategy scope or variable creator entered on the "
      "main thread; exit every scope it enters")


# -- TensorFlow resources do not outlive their test module ---------------------
#
# TensorFlow destroys a tf.data iterator that is still alive at interpreter
# exit only after its background (autotune) threads stop, which can take
# minutes for many long-lived iterators: a suite whose modules kept theirs
# (e.g. in a module-level functools.lru_cache) exited minutes after printing
# its summary.  Each module must drop its iterators and strategies; this
# check fails the module's last test otherwise, naming what is left.
# Strategies and graphs are not checked: every tf.custom_gradient traced
# into a graph (e.g. a traced all_reduce) keeps its graph and strategy in
# TensorFlow's process-wide gradient registry, natively too
# (test_resource_growth.py); they cost no time at exit.

_RESOURCE_TYPES = (tf.data.Iterator, tf.distribute.DistributedIterator)


def _live_resources():
  gc.collect()
  return {id(o): o for o in gc.get_objects()
          if isinstance(o, _RESOURCE_TYPES)}


@pytest.fixture(scope="module", autouse=True)
def no_tensorflow_resources_outlive_the_module(request):
  """Fails a module that leaves tf.data iterators or distributed iterators
  alive after its last test (module-level caches, globals)."""
  before = set(_live_resources())
  yield
  left = [o for i, o in _live_resources().items() if i not in before]
  names = sorted({type(o).__qualname__ for o in left})
  del left
  assert not names, (
      f"{request.module.__name__} keeps {names} alive after its tests: "
      "TensorFlow resources kept until interpreter exit delay it (iterators "
      "wait for their threads). Drop module-level caches and globals that "
      "hold them, or clear them in a module-scoped fixture.")


# -- ending the process with the tests ------------------------------------------
#
# After the summary line, interpreter shutdown runs TensorFlow's C++
# destructors for everything a whole suite made (traced graphs kept by its
# gradient registry, tf.data runtimes, gRPC channels).  With TensorFlow 2.21
# that took up to three minutes after the last test (measured on CI: pytest
# reported 705 s, the command took 887 s; TensorFlow 2.12: 5 s).  Nothing is
# left to write by then, so the run ends there with pytest's exit status,
# after removing the run's temporary folder.
# COMPAT_DISTRIBUTE_NORMAL_EXIT=1 keeps the ordinary shutdown (to study it).

_EXIT_STATUS = []


def pytest_sessionfinish(session, exitstatus):
  if _unlisted_skips(session.config) and exitstatus == 0:
    exitstatus = session.exitstatus = pytest.ExitCode.TESTS_FAILED
  _EXIT_STATUS.append(int(exitstatus))


# -- every skip of a default run is in docs/architecture.md ---------------------
#
# With COMPAT_DISTRIBUTE_CHECK_SKIPS=1 (tox sets it in tf221 and tf212, the
# default environments), a test skipped for a reason that no row of
# docs/architecture.md's "Skipped tests" table covers fails the run, naming
# the file and reason to add (tools/skip_reasons.py makes the rows).

_SKIPS = []


def pytest_runtest_logreport(report):
  if (report.skipped and isinstance(report.longrepr, tuple)
      and not hasattr(report, "wasxfail")):
    where, _, reason = report.longrepr
    _SKIPS.append((where, reason.removeprefix("Skipped: ")))


def _skip_reasons_tool():
  path = os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), "tools", "skip_reasons.py")
  spec = importlib.util.spec_from_file_location("skip_reasons", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _unlisted_skips(config):
  """The skips the table lacks (printed), where the check is on."""
  if os.environ.get("COMPAT_DISTRIBUTE_CHECK_SKIPS") != "1" or not _SKIPS:
    return []
  tool = _skip_reasons_tool()
  with open(tool.PAGE, encoding="utf-8") as f:
    missing = tool.unlisted(tool.skip_keys(_SKIPS), f.read())
  if missing:
    say = config.pluginmanager.get_plugin("terminalreporter")
    say.section("skips docs/architecture.md does not list", sep="=")
    for where, reason in missing:
      say.write_line(f"| {where} | {reason} |")
    say.write_line("Add each to the 'Skipped tests' table with the "
                   "environment that runs it (tools/skip_reasons.py).")
  return missing


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
  del config
  if _EXIT_STATUS and os.environ.get("COMPAT_DISTRIBUTE_NORMAL_EXIT") != "1":
    sys.stdout.flush()
    sys.stderr.flush()
    _remove_run_temp_dir()
    os._exit(_EXIT_STATUS[-1])  # pylint: disable=protected-access


# -- cases beyond the default run's representative -----------------------------
#
# A test marked `more` (support.MORE) is skipped, with the environment that
# runs it as the reason, unless COMPAT_DISTRIBUTE_MORE=1 (tox -e more).

MORE_REASON = ("a case beyond the default run's representative of its kind: "
               "tox -e more (COMPAT_DISTRIBUTE_MORE=1), which CI runs")


def pytest_collection_modifyitems(config, items):
  del config
  if os.environ.get("COMPAT_DISTRIBUTE_MORE") == "1":
    return
  skip = pytest.mark.skip(reason=MORE_REASON)
  for item in items:
    if item.get_closest_marker("more") is not None:
      item.add_marker(skip)


# -- a run without `subprocess` tests starts no process ------------------------
#
# The markers (pyproject.toml; docs/architecture.md, "Where a test lives") say
# which tests start a process.  Where a run deselects them (`tox -e quick`),
# a test that starts one anyway fails, naming the marker it lacks, so the
# quick loop stays free of process start-ups (~3.4 s of CPU per TensorFlow
# import) and the markers stay true.


def _refuse_process(*args, **kwargs):
  del kwargs
  raise AssertionError(
      f"this test starts a process ({args[1] if len(args) > 1 else args!r}) "
      "in a run that deselects `subprocess` tests; mark it "
      "@pytest.mark.subprocess (or the module: pytestmark)")


@pytest.fixture(autouse=True)
def unmarked_tests_start_no_process(request, monkeypatch):
  """Where the run deselects `subprocess`, a test without that marker may not
  start a process."""
  if ("not subprocess" in (request.config.option.markexpr or "")
      and request.node.get_closest_marker("subprocess") is None):
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse_process)
  yield
