"""``extended.experimental_run_steps_on_iterator``: a step function run
several times in one loop (a ``tf.while_loop`` in graphs), TensorFlow's
deprecated multi-step API, which ``OneDeviceStrategy`` still offers.

The step function gets a ``MultiStepContext`` and one element of the
iterator; it records what the last step should report with
``set_last_step_output`` (reduced across replicas when a ``reduce_op`` is
given) or ``set_non_tensor_output``.

>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.OneDeviceStrategy("/cpu:0")
>>> iterator = iter(tf.data.Dataset.range(10))
>>> def step(context, x):
...   context.set_last_step_output("x", x)
...   return tf.no_op()
>>> with strategy.scope():
...   context = strategy.extended.experimental_run_steps_on_iterator(
...       step, iterator, iterations=3,
...       initial_loop_values={"x": tf.constant(0, tf.int64)})
>>> int(context.last_step_outputs["x"])
2
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Optional, Union

import tensorflow as tf

from compat_distribute.runtime.errors import Error

from compat_distribute import _tf_private
from compat_distribute.runtime.types import ExtendedLike
from compat_distribute.runtime.types import Nest
from compat_distribute.runtime.types import ReduceOpLike
from compat_distribute.runtime.types import StrategyLike
from compat_distribute.runtime.types import OpOrTensor


class MissingReduceOpError(Error, ValueError, AssertionError):
  """``set_last_step_output`` in replica context without a ``reduce_op``
  (TensorFlow asserts; this error is also a ``ValueError``)."""


class MultiStepContext:
  """What a step function of ``experimental_run_steps_on_iterator`` can
  report, and (afterwards) the loop's ``run_op``."""

  def __init__(self) -> None:
    self._last_step_outputs: dict[str, Nest] = {}
    self._last_step_outputs_reduce_ops: dict[str, Optional[ReduceOpLike]] = {}
    self._non_tensor_outputs: dict[str, Any] = {}
    self.run_op: Optional[tf.Operation] = None

  def __repr__(self) -> str:
    return (f"MultiStepContext(last_step_outputs="
            f"{sorted(self._last_step_outputs)}, non_tensor_outputs="
            f"{sorted(self._non_tensor_outputs)})")

  @property
  def last_step_outputs(self) -> dict[str, Nest]:
    """The outputs set with ``set_last_step_output``: after the loop, their
    values at the last step."""
    return self._last_step_outputs

  def _set_last_step_outputs(self, outputs: dict[str, Nest]) -> None:
    if not isinstance(outputs, dict):
      raise ValueError(
          f"last_step_outputs must be a dict of name -> value, got "
          f"{outputs!r} of type {type(outputs).__name__}.")
    self._last_step_outputs = outputs

  def set_last_step_output(self, name: str, output: Nest,
                           reduce_op: ReduceOpLike = None) -> None:
    """Reports ``output`` as ``name`` at the last step, reduced across
    replicas with ``reduce_op`` (required in replica context)."""
    if tf.distribute.in_cross_replica_context():
      self._last_step_outputs_reduce_ops[name] = reduce_op
      if reduce_op is not None:
        output = tf.distribute.get_strategy().reduce(reduce_op, output,
                                                      axis=None)
      self._last_step_outputs[name] = output
      return
    if reduce_op is None:
      raise MissingReduceOpError(
          f"set_last_step_output({name!r}) was called in replica context "
          "without a reduce_op; the replicas' values must be combined. Pass "
          "reduce_op=tf.distribute.ReduceOp.SUM or MEAN.")

    def merge_fn(strategy: StrategyLike, value: Nest) -> None:
      self._last_step_outputs[name] = strategy.reduce(reduce_op, value,
                                                      axis=None)
      self._last_step_outputs_reduce_ops[name] = reduce_op

    tf.distribute.get_replica_context().merge_call(merge_fn, args=(output,))

  @property
  def non_tensor_outputs(self) -> dict[str, Any]:
    """The values set with ``set_non_tensor_output``."""
    return self._non_tensor_outputs

  def set_non_tensor_output(self, name: str, output: Nest) -> None:
    """Reports a non-tensor ``output`` as ``name`` (in replica context, as
    the tuple of every replica's value)."""
    if tf.distribute.in_cross_replica_context():
      self._non_tensor_outputs[name] = output
      return

    def merge_fn(strategy: StrategyLike, value: Nest) -> None:
      self._non_tensor_outputs[name] = strategy.experimental_local_results(
          value)

    tf.distribute.get_replica_context().merge_call(merge_fn, args=(output,))


def run_steps(extended: ExtendedLike,
              fn: Callable[[MultiStepContext, Nest], Optional[OpOrTensor]],
              iterator: Iterator[Nest], iterations: Union[int, tf.Tensor],
              initial_loop_values: Nest = None) -> MultiStepContext:
  """Runs ``fn(context, iterator.get_next())`` ``iterations`` times in one
  loop; returns the context, whose ``run_op`` runs the loop (graph mode)
  and whose ``last_step_outputs`` hold the last step's values.

  While the loop is built, ``extended._outer_control_flow_context`` is the
  control-flow context around it, where TensorFlow's v1 metrics create
  their value ops (so they are read once, after the loop).
  """
  flat_initial = tf.nest.flatten(
      {} if initial_loop_values is None else initial_loop_values)
  context = MultiStepContext()

  def body(i: tf.Tensor, *unused_outputs: tf.Tensor) -> list[Nest]:
    step = fn(context, iterator.get_next())
    outputs = tf.nest.flatten(context.last_step_outputs)
    with tf.control_dependencies([step] if step is not None else []):
      return [i + 1] + outputs

  extended._outer_control_flow_context = _tf_private.control_flow_context()  # pylint: disable=protected-access
  try:
    # The v1 spelling: tf.while_loop logs a deprecation notice for
    # back_prop=False on every call; the loop built is the same.
    result = tf.compat.v1.while_loop(
        lambda i, *unused: i < iterations, body,
        [tf.constant(0)] + flat_initial, parallel_iterations=1,
        back_prop=False, swap_memory=False, name="",
        return_same_structure=True)
  finally:
    del extended._outer_control_flow_context  # pylint: disable=protected-access
  context.run_op = tf.group(result)
  context._set_last_step_outputs(  # pylint: disable=protected-access
      tf.nest.pack_sequence_as(context.last_step_outputs, list(result[1:])))
  return context
