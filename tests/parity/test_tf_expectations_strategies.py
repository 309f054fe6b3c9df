"""Behaviour TensorFlow's own distribute tests expect of a strategy's scope
and of ``extended.update``, checked on our strategies next to native ones.

* Exiting a strategy scope while a device, variable-creator or (v1)
  variable scope opened inside it is still open raises ``RuntimeError``
  naming which kind of scope is mis-nested; after the inner scope is
  closed, exiting the strategy scope again completes and the thread is back
  in the default state.
* ``extended.update`` called in a ``tf.function`` runs its update function
  through AutoGraph, so Python control flow on tensors works in it.
"""
import pytest
import tensorflow as tf

from conftest import cpu
from fixtures import strategies

pytestmark = pytest.mark.parity

POINTS = {
    "one_device": strategies.Comparison("one_device", device=cpu(0)),
    "central_storage_2": strategies.Comparison("central_storage", 2),
    "v1_one_device": strategies.Comparison("one_device", facade="v1",
                                           device=cpu(0)),
    "v1_central_storage_2": strategies.Comparison("central_storage", 2,
                                                  facade="v1"),
}
KINDS = sorted(POINTS)


def _both(kind):
  ours, native = POINTS[kind].pair()
  return [("ours", ours), ("native", native)]


def _assert_default_state():
  assert not tf.distribute.has_strategy()
  assert not tf.distribute.in_cross_replica_context()
  assert tf.distribute.get_replica_context() is not None


def _exit_inside(strategy, open_inner, close_inner, pattern):
  """Enters ``strategy``'s scope, opens an inner scope, exits the strategy
  scope (must fail with ``pattern``), closes the inner one, exits again."""
  scope = strategy.scope()
  scope.__enter__()
  assert tf.distribute.get_strategy() is strategy
  inner = open_inner()
  with pytest.raises(RuntimeError, match=pattern):
    scope.__exit__(None, None, None)
  # Still inside: the failed exit undid nothing the retry needs.
  assert tf.distribute.get_strategy() is strategy
  close_inner(inner)
  scope.__exit__(None, None, None)
  _assert_default_state()


def _open_creator_scope():
  inner = tf.variable_creator_scope(lambda next_, **kw: next_(**kw))
  inner.__enter__()
  return inner


@pytest.mark.parametrize("kind", KINDS)
def test_open_creator_scope_makes_exit_fail_until_it_is_closed(kind):
  # Native TensorFlow raises the same error eagerly, but its retried exit
  # leaves its variable creator installed for the rest of the process, so
  # it is not run here.
  _exit_inside(POINTS[kind].strategy("ours"), _open_creator_scope,
               lambda inner: inner.__exit__(None, None, None),
               "Variable creator scope nesting error")


@pytest.mark.parametrize("kind", KINDS)
def test_open_device_scope_makes_exit_fail_when_scope_sets_a_device(kind):
  for _, strategy in _both(kind):
    # Strategies whose scope places ops on a default device check that the
    # device scope is exited in order (TensorFlow's tests force one).
    strategy.extended._default_device = cpu(2)  # pylint: disable=protected-access

    def open_inner():
      inner = tf.device(cpu(3))
      inner.__enter__()
      return inner

    _exit_inside(strategy, open_inner,
                 lambda inner: inner.__exit__(None, None, None),
                 "Device scope nesting error")


@pytest.mark.parametrize("kind", KINDS)
def test_open_variable_scope_makes_exit_fail_in_a_graph(kind):
  # Native TensorFlow raises the same error here but leaves global state
  # behind (its own test says so), so only ours runs in this process.
  strategy = POINTS[kind].strategy("ours")
  with tf.Graph().as_default():
    scope = strategy.scope()
    scope.__enter__()
    with tf.compat.v1.variable_scope("inner"):
      with pytest.raises(RuntimeError, match="Variable scope nesting error"):
        scope.__exit__(None, None, None)
      assert tf.distribute.get_strategy() is strategy
    scope.__exit__(None, None, None)
    _assert_default_state()
    # The strategy's variable scope (its partitioner getter) is gone too.
    assert tf.compat.v1.get_variable_scope().custom_getter is None
  _assert_default_state()


@pytest.mark.parametrize("kind", KINDS)
def test_failed_exit_inside_variable_scope_leaves_nothing_after_the_graph(
    kind):
  # TensorFlow's testScopeVarScopeNestingError: the failed exit is not
  # retried; once the graph block ends, the thread is in the default state
  # with the graph that was default before.
  for _, strategy in _both(kind):
    outer_graph = tf.compat.v1.get_default_graph()
    with tf.Graph().as_default() as graph:
      scope = strategy.scope()
      scope.__enter__()
      with tf.compat.v1.variable_scope("AA"):
        with pytest.raises(RuntimeError, match="Variable scope nesting error"):
          scope.__exit__(None, None, None)
      assert tf.compat.v1.get_default_graph() is graph
    assert tf.compat.v1.get_default_graph() is outer_graph
    _assert_default_state()


def test_balanced_exit_inside_variable_scope_is_fine():
  strategy = POINTS["one_device"].strategy("ours")
  with tf.Graph().as_default():
    with tf.compat.v1.variable_scope("outer"):
      with strategy.scope():
        v = tf.compat.v1.get_variable("w", initializer=1.0)
    assert v.name == "outer/w:0"
  _assert_default_state()


def test_exiting_a_scope_more_often_than_entered_is_a_runtime_error():
  strategy = POINTS["one_device"].strategy("ours")
  scope = strategy.scope()
  with scope:
    pass
  with pytest.raises(RuntimeError, match="more times than it was entered"):
    scope.__exit__(None, None, None)
  _assert_default_state()


def test_nested_scopes_of_the_same_strategy_still_unwind():
  strategy = POINTS["central_storage_2"].strategy("ours")
  outer, inner = strategy.scope(), strategy.scope()
  with outer:
    with inner:
      with outer:
        assert tf.distribute.get_strategy() is strategy
      assert tf.distribute.get_strategy() is strategy
    assert tf.distribute.get_strategy() is strategy
  _assert_default_state()
  with inner:
    assert tf.distribute.get_strategy() is strategy
  _assert_default_state()


def _update_with_python_branch(strategy):
  """``extended.update`` in a tf.function with a Python ``if`` on a tensor
  in the update function: only works if AutoGraph converts it."""
  with strategy.scope():
    v = tf.Variable(1.0)

  def assign_fn(var, t):
    if t > 1.0:
      return var.assign(t * 10.0)
    return var.assign(-1.0)

  @tf.function
  def step(t):
    strategy.extended.update(v, assign_fn, (t,))

  step(tf.constant(2.0))
  high = float(v.numpy())
  step(tf.constant(0.5))
  return high, float(v.numpy())


@pytest.mark.parametrize("kind", ["one_device", "central_storage_2"])
def test_update_function_is_autograph_converted_in_tf_function(kind):
  ours, native = (_update_with_python_branch(s) for _, s in _both(kind))
  assert ours == native == (20.0, -1.0)


@pytest.mark.parametrize("kind", ["one_device", "central_storage_2"])
def test_update_in_scope_is_autograph_converted_too(kind):
  results = []
  for _, strategy in _both(kind):
    with strategy.scope():
      results.append(_update_with_python_branch(strategy))
  assert results == [(20.0, -1.0)] * 2


def test_update_stays_unconverted_eagerly():
  strategy = POINTS["one_device"].strategy("ours")
  with strategy.scope():
    v = tf.Variable(1.0)
  seen = []
  strategy.extended.update(v, lambda var, t: seen.append((var is v, float(t))),
                           (tf.constant(3.0),))
  assert seen == [(True, 3.0)]


@pytest.mark.parametrize("kind", ["v1_one_device", "v1_central_storage_2"])
def test_numpy_dataset_without_session_in_graph_raises_tensorflows_type(kind):
  import numpy as np  # pylint: disable=g-import-not-at-top
  for who, strategy in _both(kind):
    with tf.Graph().as_default():
      # TensorFlow raises AssertionError; ours is also a ValueError.
      with pytest.raises(AssertionError):
        strategy.experimental_make_numpy_dataset(np.ones([3], np.float32))
      if who == "ours":
        with pytest.raises(ValueError, match="session=sess"):
          strategy.experimental_make_numpy_dataset(np.ones([3], np.float32))
