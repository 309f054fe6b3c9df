"""The replica layer reads its ``ReplicaPlan``, never the strategy's privates.

``extended`` hands ``compat_distribute/replicas/`` one immutable
``replicas.plan.ReplicaPlan`` (as it hands ``input/`` an ``InputWorkers``),
and the replica layer keeps its own caches (``plan.Replicas``).  The
first test reads every module of ``replicas/`` with ``ast`` and fails on a
read of a private member (``._x``) of a strategy or of its ``extended``,
naming the file and the line; the others check the plan itself.
"""
import ast
import dataclasses
import re

import pytest
import support
import tensorflow as tf

from compat_distribute import v1 as distribute_v1
from compat_distribute import v2 as distribute
from compat_distribute.replicas import plan as plan_lib

ROOT = support.ROOT
REPLICAS = ROOT / "compat_distribute" / "replicas"

# An expression that names a strategy or its extended: ``extended``,
# ``strategy``, ``self._strategy``, ``run.strategy``, ``s.extended``,
# ``container_strategy``, ``extended_ref()`` ...
_STRATEGY_NAME = re.compile(r"(^|_)(strategy|extended)(_ref)?$")


def _names_strategy(node):
  if isinstance(node, ast.Call):  # extended_ref(), _container_strategy()
    node = node.func
  if isinstance(node, ast.Name):
    return bool(_STRATEGY_NAME.search(node.id))
  if isinstance(node, ast.Attribute):
    return bool(_STRATEGY_NAME.search(node.attr))
  return False


def _private(name):
  return name.startswith("_") and not name.startswith("__")


def private_reads(source, filename="<source>"):
  """``(filename, line, text)`` of each read of a private member of a
  strategy or extended in ``source`` (``x._y`` or ``getattr(x, "_y")``)."""
  found = []
  for node in ast.walk(ast.parse(source, filename)):
    if (isinstance(node, ast.Attribute) and _private(node.attr) and
        _names_strategy(node.value)):
      found.append((filename, node.lineno, ast.unparse(node)))
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
          node.func.id in ("getattr", "hasattr", "setattr") and
          len(node.args) >= 2 and _names_strategy(node.args[0]) and
          isinstance(node.args[1], ast.Constant) and
          isinstance(node.args[1].value, str) and _private(node.args[1].value)):
      found.append((filename, node.lineno, ast.unparse(node)))
  return found


def test_replica_layer_reads_no_private_member_of_a_strategy():
  files = sorted(REPLICAS.glob("*.py"))
  assert len(files) >= 8, files
  found = []
  for path in files:
    found += private_reads(path.read_text(), str(path.relative_to(ROOT)))
  assert found == [], "\n".join(
      f"{f}:{line}: {text} reads a private member of a strategy or its "
      "extended; put what the replica layer needs in replicas/plan.py's "
      "ReplicaPlan (built by api/extended.py's _replica_plan) instead"
      for f, line, text in found)


def _package_imports(path):
  """The package modules ``path`` imports (``compat_distribute.x.y`` ->
  its file), functions' imports included."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    names = []
    if isinstance(node, ast.ImportFrom) and node.module:
      names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    elif isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    for name in names:
      if not name.startswith("compat_distribute."):
        continue
      base = ROOT.joinpath(*name.split("."))
      for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
          found.add(candidate)
  return found


def test_nothing_the_replica_layer_imports_reads_a_private_member():
  # Closed over imports: runtime/context.py's scope entry used to read
  # extended._variable_creator, _default_device and _partition_getter; it
  # now takes a ScopePlan.  _tf_private is TensorFlow's door, not ours.
  seen, todo = set(), sorted(REPLICAS.glob("*.py"))
  while todo:
    path = todo.pop()
    if path in seen:
      continue
    seen.add(path)
    todo += sorted(_package_imports(path) - seen)
  modules = [p for p in sorted(seen) if "_tf_private" not in p.parts]
  assert ROOT / "compat_distribute" / "runtime" / "context.py" in modules
  found = []
  for path in modules:
    found += private_reads(path.read_text(), str(path.relative_to(ROOT)))
  assert found == [], "\n".join(
      f"{f}:{line}: {text} (imported by the replica layer) reads a private "
      "member of a strategy or its extended; hand it over in a plan instead"
      for f, line, text in found)


@pytest.mark.parametrize("source, expected", [
    # What the replica layer read before its plan (issue 31).
    ("several = len(extended._compute_devices) > 1", ["extended._compute_devices"]),
    ("c = extended._single_replica_context", ["extended._single_replica_context"]),
    ("s = extended._container_strategy()", ["extended._container_strategy"]),
    ("self.idle = extended._idle_eager_runs.pop()",
     ["extended._idle_eager_runs"]),
    ("f = lambda s, v: s.extended._gather_to(v, v, 0)",
     ["s.extended._gather_to"]),
    ("x = self._strategy._extended", ["self._strategy._extended"]),
    ("x = getattr(strategy, '_extended', None)",
     ["getattr(strategy, '_extended', None)"]),
    ("y = run.strategy._scale_loss_for_estimator",
     ["run.strategy._scale_loss_for_estimator"]),
    # Allowed: public members, the replica layer's own privates.
    ("n = self._strategy.num_replicas_in_sync", []),
    ("d = strategy.extended.worker_devices", []),
    ("t = ctx._thread_context", []),
    ("r = plan.devices[0]", []),
    ("m = strategy.__class__", []),
])
def test_the_check_finds_a_private_read(source, expected):
  assert [text for _, _, text in private_reads(source)] == expected


def test_the_check_names_file_and_line():
  source = "import x\n\ndef f(extended):\n  return extended._compute_devices\n"
  assert private_reads(source, "replicas/runner.py") == [
      ("replicas/runner.py", 4, "extended._compute_devices")]


def test_the_plan_is_what_extended_says():
  strategy = distribute.experimental.CentralStorageStrategy(
      ["/cpu:0", "/cpu:1"])
  replicas = strategy.extended._replicas  # pylint: disable=protected-access
  plan = replicas.plan
  assert isinstance(replicas, plan_lib.Replicas)
  assert plan.devices == tuple(strategy.extended.worker_devices)
  assert plan.strategy is strategy
  assert plan.num_replicas == strategy.num_replicas_in_sync == 2
  assert plan.several and plan.one_replica_like_many
  one = distribute.OneDeviceStrategy("/cpu:0")
  one_plan = one.extended._replicas.plan  # pylint: disable=protected-access
  assert one_plan.devices == ("/job:localhost/replica:0/task:0/device:CPU:0",)
  assert (one_plan.several, one_plan.one_replica_like_many) == (False, False)
  v1 = distribute_v1.OneDeviceStrategy("/cpu:0")
  assert v1.extended._replicas.plan.strategy is v1  # pylint: disable=protected-access


def test_the_plan_is_immutable_and_needs_a_device():
  plan = distribute.OneDeviceStrategy("/cpu:0").extended._replicas.plan  # pylint: disable=protected-access
  with pytest.raises(dataclasses.FrozenInstanceError):
    plan.devices = ("/cpu:1",)
  with pytest.raises(ValueError, match=r"devices=\(\)"):
    dataclasses.replace(plan, devices=())


def test_the_replica_layer_keeps_its_caches():
  """The one replica's context and the finished eager runs stay in the
  strategy's ``Replicas``, built once: a run reuses them."""
  one = distribute.OneDeviceStrategy("/cpu:0")
  replicas = one.extended._replicas  # pylint: disable=protected-access
  ctxs = [one.run(tf.distribute.get_replica_context) for _ in range(2)]
  assert ctxs[0] is ctxs[1] is replicas.kept_context
  two = distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
  replicas = two.extended._replicas  # pylint: disable=protected-access
  two.run(lambda: tf.constant(1))
  assert len(replicas.idle_runs) == 1
  run = replicas.idle_runs[0]
  two.run(lambda: tf.constant(2))
  assert replicas.idle_runs == [run]
  assert two.extended._replicas is replicas  # pylint: disable=protected-access
