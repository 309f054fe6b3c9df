"""Reduction has one home, ``values/reduction.py``: its argument checks, what
it computes across replicas (``aggregate``) and along an axis
(``reduce_along``, behind ``Strategy.reduce``), compared with native
TensorFlow; ``cross_device`` only moves values for it.
"""
import ast

import numpy as np
import pytest
import support
import tensorflow as tf

from compat_distribute import v2 as ours
from compat_distribute.values import cross_device
from compat_distribute.values import reduction
from compat_distribute.values.distributed import PerReplica

pytestmark = pytest.mark.parity

ROOT = support.ROOT
HOME = ROOT / "compat_distribute" / "values" / "reduction.py"


def _central(module):
  return module.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])


def _reduce_partial_batches(module, reduce_op, axis):
  strategy = _central(module)
  value = strategy.experimental_distribute_values_from_function(
      lambda ctx: tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
      if ctx.replica_id_in_sync_group == 0 else tf.constant([[7.0, 8.0]]))
  return strategy.reduce(reduce_op, value, axis=axis).numpy().tolist()


@pytest.mark.parametrize("reduce_op", ["SUM", "MEAN"])
@pytest.mark.parametrize("axis", [0, -2, (0, 1), None])
def test_strategy_reduce_as_native(reduce_op, axis):
  if axis is None:
    # Without an axis the replicas' values must have one shape.
    def value(module):
      return _central(module).experimental_distribute_values_from_function(
          lambda ctx: tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32))
    ours_result = _central(ours).reduce(reduce_op, value(ours), axis=None)
    native = _central(tf.distribute).reduce(reduce_op, value(tf.distribute),
                                            axis=None)
    assert float(ours_result) == float(native)
    return
  assert (_reduce_partial_batches(ours, reduce_op, axis) ==
          _reduce_partial_batches(tf.distribute, reduce_op, axis))


def test_mean_along_an_axis_weighs_partial_batches():
  # 4 rows in all: (1+3+5+7)/4, (2+4+6+8)/4.
  assert _reduce_partial_batches(ours, "MEAN", 0) == [4.0, 5.0]


def test_aggregate():
  values = [tf.constant(1), tf.constant(2)]
  assert int(reduction.aggregate(values, reduction.ReduceOp.SUM)) == 3
  mean = reduction.aggregate(values, reduction.ReduceOp.MEAN)
  assert mean.dtype == tf.float64 and float(mean) == 1.5  # TensorFlow's "/"
  slices = reduction.aggregate(
      [tf.IndexedSlices(tf.constant([[1.0]]), tf.constant([0]), [2, 1]),
       tf.IndexedSlices(tf.constant([[3.0]]), tf.constant([1], tf.int64),
                        [2, 1])], reduction.ReduceOp.MEAN)
  assert isinstance(slices, tf.IndexedSlices)
  assert slices.values.numpy().tolist() == [[0.5], [1.5]]
  assert slices.indices.dtype == tf.int64


def test_check_reducible():
  reduction.check_reducible(reduction.ReduceOp.MEAN, 1.0, 2)
  reduction.check_reducible(reduction.ReduceOp.SUM, 1.0, 1)
  with pytest.raises(ValueError, match="not a per-replica value"):
    reduction.check_reducible(reduction.ReduceOp.SUM, 1.0, 2)


def test_cross_device_reduces_with_the_reduction_module():
  x = PerReplica((tf.constant(np.float32(1.0)), tf.constant(np.float32(3.0))))
  ops = cross_device.ReduceToOneDevice()
  assert float(ops.reduce(reduction.ReduceOp.MEAN, x, "/cpu:0")) == 2.0
  assert cross_device.aggregate is reduction.aggregate


def _defines(path):
  tree = ast.parse(path.read_text())
  return {node.name for node in ast.walk(tree)
          if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def test_one_home():
  """The reduction's pieces are defined in ``reduction.py`` and nowhere
  else in the package."""
  pieces = {"to_reduce_op", "check_axis", "check_summable", "check_reducible",
            "aggregate", "reduce_along", "_sum_along", "_sum_and_count_along",
            "_concat_slices"}
  assert pieces <= _defines(HOME)
  elsewhere = {
      str(p.relative_to(ROOT)): sorted(_defines(p) & pieces)
      for p in sorted((ROOT / "compat_distribute").rglob("*.py"))
      if p != HOME and _defines(p) & pieces}
  assert elsewhere == {}
