"""Where a variable goes is answered in one module, ``variables/placement.py``.

Each strategy's variable creator asks it (OneDevice, CentralStorage's
parameter device, the ``ps`` tasks in turn on a cluster); these tests check
its answers against native TensorFlow's strategies, and that no other
module answers the question again.
"""
import ast

import pytest
import support
import tensorflow as tf

from compat_distribute import v1 as ours_v1
from compat_distribute import v2 as ours
from compat_distribute.variables import placement

pytestmark = pytest.mark.parity

ROOT = support.ROOT
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


def _one_device(module):
  return module.OneDeviceStrategy("/cpu:0")


def _central(module):
  return module.experimental.CentralStorageStrategy(
      ["/cpu:0", "/cpu:1"], parameter_device="/cpu:1")


def _devices(strategy):
  """Where a variable goes: plainly, under the caller's tf.device, and
  colocated with another variable."""
  with strategy.scope():
    plain = tf.Variable(1.0)
    with tf.device("/cpu:2"):
      scoped = tf.Variable(1.0)
    with strategy.extended.colocate_vars_with(plain):
      colocated = tf.Variable(1.0)
  return [v.device for v in (plain, scoped, colocated)]


@pytest.mark.parametrize("make", [_one_device, _central])
def test_placement_as_native(make):
  assert _devices(make(ours)) == _devices(make(tf.distribute))


def test_the_answers():
  assert _devices(_one_device(ours)) == [CPU0, CPU0, CPU0]
  assert _devices(_central(ours)) == [CPU1, CPU1, CPU1]


def test_v1_central_storage_graph_placement_as_native():
  def devices(module):
    with tf.Graph().as_default():
      strategy = module.experimental.CentralStorageStrategy(
          ["/cpu:0", "/cpu:1"], parameter_device="/cpu:1")
      with strategy.scope(), tf.device("/cpu:2"):
        return tf.compat.v1.get_variable("v", [1]).device
  assert devices(ours_v1) == devices(tf.compat.v1.distribute) == "/device:CPU:1"


def test_round_robin():
  ps = placement.RoundRobin(("/job:ps/task:0", "/job:ps/task:1",
                             "/job:ps/task:2"))
  assert [ps.next() for _ in range(4)] == [
      "/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2", "/job:ps/task:0"]
  with pytest.raises(ValueError, match=r"got \(\)"):
    placement.RoundRobin(())


def test_round_robin_placer_in_a_graph():
  placer = placement.RoundRobinPlacer(num_ps=2,
                                      worker_device="/job:worker/task:1")
  with tf.Graph().as_default():
    with tf.compat.v1.device(placer):
      a = tf.Variable(0.0)
      b = tf.Variable(0.0)
      with tf.device("/job:worker"):
        c = tf.Variable(0.0)  # another job: off the rotation
      d = tf.Variable(0.0)
      x = tf.constant(1.0)
    assert [v.device for v in (a, b, c, d)] == [
        "/job:ps/task:0", "/job:ps/task:1", "/job:worker", "/job:ps/task:0"]
    assert x.device == "/job:worker/task:1"


def test_clear_scopes_takes_a_device_function():
  placer = placement.RoundRobinPlacer(num_ps=2, worker_device="/job:worker")
  with tf.Graph().as_default(), tf.device("/cpu:3"):
    with placement.variable_placement(None, placer, clear_scopes=True):
      v = tf.Variable(0.0)
  assert v.device == "/job:ps/task:0"


def _calls_colocate_with_none(path):
  """Lines of ``path`` that clear the colocation scope to place something
  (``colocate_with(None, ignore_existing=True)``)."""
  tree = ast.parse(path.read_text())
  return [node.lineno for node in ast.walk(tree)
          if isinstance(node, ast.Call) and
          getattr(node.func, "attr", getattr(node.func, "id", "")) ==
          "colocate_with" and node.args and
          isinstance(node.args[0], ast.Constant) and node.args[0].value is None]


def test_no_other_module_places_variables():
  """The scope-clearing placement and the ps rotation live only in
  ``variables/placement.py`` (the ``_tf_private`` door defines the helper)."""
  home = ROOT / "compat_distribute" / "variables" / "placement.py"
  others = {}
  for path in sorted((ROOT / "compat_distribute").rglob("*.py")):
    if path == home or "_tf_private" in path.parts:
      continue
    text = path.read_text()
    found = _calls_colocate_with_none(path)
    if "STATE_OPS" in text or "RoundRobin" in text and "placement." not in text:
      found.append("a ps rotation")
    if found:
      others[str(path.relative_to(ROOT))] = found
  assert others == {}, (
      f"{others} place variables themselves; ask "
      "compat_distribute/variables/placement.py instead")
  assert _calls_colocate_with_none(home)
