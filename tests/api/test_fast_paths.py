"""The hot paths of ``run``, ``scope()`` and tracing behave as the generic
ones (and as native TF) do: variable-creator order, state restored on
errors, device scopes, PerReplica type specs, select_replica."""
import pytest
import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.runtime import context
from compat_distribute import v2 as distribute
from compat_distribute.values.distributed import PerReplica, PerReplicaSpec, select_replica
from conftest import cpu
from fixtures import strategies


POINTS = {
    "one_device": strategies.Comparison("one_device", device=cpu(0)),
    "central_storage": strategies.Comparison("central_storage", 2),
}


def _creator_order(strategy, mode):
  """Which creators see a variable made in run, inside a user creator scope
  entered outside (and a second one entered inside) the strategy's scope."""
  calls = []

  def outer(next_creator, **kwargs):
    calls.append("outer")
    return next_creator(**kwargs)

  def inner(next_creator, **kwargs):
    calls.append("inner")
    return next_creator(**kwargs)

  made = []

  def fn():
    if not made:
      made.append(tf.Variable(1.0, name="v"))
    return tf.constant(0.0)

  with tf.variable_creator_scope(outer):
    with strategy.scope():
      with tf.variable_creator_scope(inner):
        if mode == "eager":
          strategy.run(fn)
        else:
          tf.function(lambda: strategy.run(fn))()
  return calls


@pytest.mark.parametrize("kind", ["one_device", "central_storage"])
@pytest.mark.parametrize("mode", ["eager", "tf_function"])
def test_user_creators_run_in_native_order(kind, mode):
  ours, native = (_creator_order(s, mode) for s in POINTS[kind].pair())
  assert ours == native == ["inner", "outer"]


def test_push_variable_creator_matches_tf_variable_creator_scope():
  graph = tf.Graph()

  def a(next_creator, **kwargs):
    return next_creator(**kwargs)

  def b(next_creator, **kwargs):
    return next_creator(**kwargs)

  with graph.as_default(), tf.variable_creator_scope(a):
    with tf.variable_creator_scope(b):
      public = _tf_private.variable_creator_stack(graph)
    token = _tf_private.push_variable_creator(graph, b)
    assert _tf_private.variable_creator_stack(graph) == public
    _tf_private.pop_variable_creator(graph, token)
    assert [c for _, c in _tf_private.variable_creator_stack(graph)] == [a]


def test_pop_variable_creator_refuses_improper_nesting():
  graph = tf.Graph()
  with graph.as_default():
    token = _tf_private.push_variable_creator(graph, print)
    scope = tf.variable_creator_scope(lambda n, **k: n(**k))
    scope.__enter__()
    with pytest.raises(RuntimeError, match="without proper nesting"):
      _tf_private.pop_variable_creator(graph, token)
    scope.__exit__(None, None, None)
    _tf_private.pop_variable_creator(graph, token)
    assert _tf_private.variable_creator_stack(graph) == []


@pytest.mark.parametrize("mode", ["eager", "tf_function"])
def test_run_error_restores_strategy_and_creator_stacks(mode):
  strategy = distribute.OneDeviceStrategy(cpu(0))

  def fn():
    raise ValueError("boom")

  def call():
    graph = tf.compat.v1.get_default_graph()
    before = (list(_tf_private.strategy_stack()),
              _tf_private.variable_creator_stack(graph))
    with pytest.raises(ValueError, match="boom"):
      strategy.run(fn)
    after = (list(_tf_private.strategy_stack()),
             _tf_private.variable_creator_stack(graph))
    assert after == before
    return tf.constant(0)

  if mode == "eager":
    call()
  else:
    tf.function(call)()
  assert context.current_mode() is None


def test_scope_exited_out_of_order_raises_and_cleans_up():
  strategy = distribute.OneDeviceStrategy(cpu(0))
  scope = strategy.scope()
  scope.__enter__()
  stray = context.cross_replica_mode(strategy)
  context.push(stray)
  with pytest.raises(RuntimeError, match="exited out of order"):
    scope.__exit__(None, None, None)
  context.pop(stray)
  context.pop(context.current_mode())  # what the failed exit left
  assert context.current_mode() is None
  assert _tf_private.variable_creator_stack(
      tf.compat.v1.get_default_graph()) == []


def test_run_in_replica_context_still_refused():
  strategy = distribute.OneDeviceStrategy(cpu(0))
  with pytest.raises(RuntimeError, match="replica context"):
    strategy.run(lambda: strategy.run(lambda: 1))
  assert context.current_mode() is None


def test_run_inside_scope_and_default_device_scope():
  strategy = distribute.OneDeviceStrategy(cpu(0))
  with strategy.scope():
    assert strategy.run(lambda: tf.distribute.get_strategy()) is strategy
    assert tf.distribute.get_strategy() is strategy
  strategy.extended._default_device = cpu(1)  # pylint: disable=protected-access
  with strategy.scope():
    assert tf.constant(1.0).device.endswith("CPU:1")
  assert context.current_mode() is None


@pytest.mark.parametrize("where", ["eager", "tf_function", "tf1_graph"])
def test_device_helper_is_tf_device(where):
  def probe(scope):
    with scope("/cpu:1"):
      x = tf.constant(1.0) + 1
      device = x.device if tf.executing_eagerly() else x.op.device
      return device, _tf_private.current_device()

  def check():
    assert probe(_tf_private.device) == probe(tf.device)
    with tf.device("/cpu:1"):
      assert (probe(lambda _: _tf_private.device(None)) ==
              probe(lambda _: tf.device(None)))
    with pytest.raises(KeyError):
      with _tf_private.device("/cpu:1"):
        raise KeyError("inside")
    assert _tf_private.current_device() == ""
    return tf.constant(0)

  if where == "eager":
    check()
  elif where == "tf_function":
    tf.function(check)()
  else:
    with tf.Graph().as_default():
      check()


def test_per_replica_spec_fast_paths_agree_with_type_spec():
  a = PerReplica((tf.zeros([2, 3]), tf.zeros([4, 3])))
  b = PerReplica((tf.zeros([2, 3]), tf.zeros([4, 3])))
  c = PerReplica((tf.zeros([5, 3]), tf.zeros([4, 3])))
  assert a._type_spec is a._type_spec  # pylint: disable=protected-access
  spec_a, spec_b, spec_c = (v._type_spec for v in (a, b, c))  # pylint: disable=protected-access
  assert spec_a.most_specific_common_supertype([spec_b]) == spec_a
  assert spec_a.most_specific_common_supertype([spec_c]) == PerReplicaSpec(
      tf.TensorSpec([None, 3]), tf.TensorSpec([4, 3]))
  assert spec_a.most_specific_common_supertype([tf.TensorSpec([2])]) is None
  assert spec_a._without_tensor_names() is spec_a  # pylint: disable=protected-access
  named = PerReplicaSpec(tf.TensorSpec([2], name="x"))
  assert named._without_tensor_names() == PerReplicaSpec(tf.TensorSpec([2]))  # pylint: disable=protected-access


def test_per_replica_arguments_do_not_retrace():
  traces = []

  @tf.function
  def f(v):
    traces.append(1)
    return v.values[0] + v.values[1]

  f(PerReplica((tf.constant([1.0]), tf.constant([2.0]))))
  f(PerReplica((tf.constant([3.0]), tf.constant([4.0]))))
  assert len(traces) == 1
  f(PerReplica((tf.constant([1.0, 2.0]), tf.constant([2.0, 3.0]))))
  assert len(traces) == 2


def test_select_replica_flat_sequences():
  x, y = tf.constant(1), tf.constant(2)
  per = PerReplica((x, y))
  assert select_replica(1, (per, 3, "s")) == (y, 3, "s")
  picked = select_replica(0, [per, None])
  assert type(picked) is list and picked[0] is x and picked[1] is None
  nested = (per, (per,), {"k": per})
  assert select_replica(1, nested) == (y, (y,), {"k": y})
  plain = (x, 1)
  assert select_replica(0, plain) is plain
