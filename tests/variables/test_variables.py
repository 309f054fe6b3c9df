"""AggregatingVariable's tf.Variable API, checkpoints and SavedModel, and
create_central_variable's placement rules.

Most tests run with one replica through a test-local strategy that wraps
every variable it creates, so the wrapper is exercised on its own; the
multi-replica aggregation is in test_variables_central.py.  Wherever a plain
``tf.Variable`` defines the answer, the wrapper is compared against one.
"""
import copy
import os

import numpy as np
import pytest
import tensorflow as tf

from compat_distribute.strategies import one_device
from compat_distribute import v2 as distribute
from compat_distribute.variables.aggregating import AggregatingVariable
from compat_distribute.variables.central import create_central_variable
from conftest import cpu, in_mode
from support.keras import keras
from support.keras import tf_variable

SUM = tf.VariableAggregation.SUM


class _WrappingExtended(one_device.OneDeviceExtended):
  """OneDevice placement, but every variable comes back wrapped."""

  def _create_variable(self, next_creator, **kwargs):
    aggregation = kwargs.get("aggregation") or tf.VariableAggregation.NONE
    variable = super()._create_variable(next_creator, **kwargs)
    return AggregatingVariable(self._container_strategy(), variable,
                               aggregation)


class WrappingStrategy(distribute.OneDeviceStrategy):
  """A one-replica strategy whose variables are AggregatingVariables."""

  def __init__(self, device="/cpu:1"):
    super().__init__(device)
    self._extended = _WrappingExtended(self, device)


def make_pair(value, **kwargs):
  """(wrapper, plain variable) with the same value and arguments."""
  strategy = WrappingStrategy()
  with strategy.scope():
    wrapped = tf.Variable(value, **kwargs)
  plain = tf.Variable(value, **kwargs)
  assert isinstance(wrapped, AggregatingVariable)
  return wrapped, plain


# -- identity, repr, properties ----------------------------------------------

def test_types():
  w, _ = make_pair([1.0, 2.0])
  assert isinstance(w, tf.Variable)
  assert tf.is_tensor(w)
  assert not isinstance(w, tf.Tensor)
  assert isinstance(w.get(), tf.Variable)
  assert not isinstance(w.get(), AggregatingVariable)


def test_repr_shows_aggregation_and_the_variable():
  w, _ = make_pair([1.0, 2.0], name="w", aggregation=SUM)
  assert repr(w) == (
      "<AggregatingVariable aggregation=SUM tf.Variable 'w:0' shape=(2,) "
      "dtype=float32, numpy=array([1., 2.], dtype=float32)>")
  assert str(w) == repr(w)


def test_properties_forward():
  w, p = make_pair([[1, 2]], name="k", aggregation=SUM, trainable=False,
                   dtype=tf.int64)
  for attr in ("name", "dtype", "shape", "trainable", "synchronization",
               "constraint", "_shared_name", "_in_graph_mode"):
    assert getattr(w, attr) == getattr(p, attr), attr
  assert w.aggregation == SUM
  assert w.get_shape() == p.get_shape()
  assert w.device == w.get().device == cpu(1)
  assert w.handle is w.get().handle
  assert w._unique_id == w.get()._unique_id
  assert w.distribute_strategy is w._distribute_strategy


def test_ref_and_hash_as_tf_variable():
  w, _ = make_pair(1.0)
  with pytest.raises(TypeError, match="unhashable"):
    hash(w)
  assert w.ref() == w.ref() and w.ref().deref() is w
  assert {w.ref(): 1}[w.ref()] == 1


def test_value_container_and_distributed_container():
  strategy = WrappingStrategy()
  with strategy.scope():
    w = tf.Variable(1.0)
  assert strategy.extended.value_container(w) is w
  assert strategy.extended.value_container(w.get()) is w
  assert w._distributed_container() is w
  assert w.get()._distributed_container() is w


# -- reads ------------------------------------------------------------------

def test_reads_match_plain_variable(mode):
  w, p = make_pair([[1.0, -2.0], [3.0, 4.0]])

  def reads(v):
    return (v.value(), v.read_value(), tf.convert_to_tensor(v), v + 1.0,
            2.0 - v, v * v, v / 2.0, -v, abs(v), v ** 2, v @ v, v[1],
            v[:, 0], v > 0.0, tf.identity(v), v.sparse_read([1]),
            v.gather_nd([[0, 1]]), tf.reduce_sum(v))

  ours = in_mode(mode, lambda: reads(w))
  native = in_mode(mode, lambda: reads(p))
  for a, b in zip(ours, native):
    np.testing.assert_array_equal(a, b)


def test_numpy_array_iteration_bool():
  w, _ = make_pair([1.0, 2.0])
  np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])
  np.testing.assert_array_equal(np.array(w), [1.0, 2.0])
  assert np.asarray(w, dtype=np.float64).dtype == np.float64
  assert [float(x) for x in w] == [1.0, 2.0]
  s, _ = make_pair(0.0)
  assert not bool(s)
  assert float(s + 1) == 1.0


def test_equality_is_elementwise_like_tf_variable():
  w, p = make_pair([1.0, 2.0])
  for v in (w, p):
    np.testing.assert_array_equal(v == [1.0, 3.0], [True, False])
    np.testing.assert_array_equal(v != [1.0, 3.0], [False, True])


# -- updates with one replica: straight through -----------------------------

@pytest.mark.parametrize("method,arg", [("assign", [5.0, 6.0]),
                                        ("assign_add", [1.0, 1.0]),
                                        ("assign_sub", [0.5, 0.5])])
def test_assign_methods_match_plain(mode, method, arg):
  w, p = make_pair([1.0, 2.0], aggregation=SUM)
  for v in (w, p):
    result = in_mode(mode, lambda v=v: getattr(v, method)(arg))
    np.testing.assert_array_equal(tf.convert_to_tensor(result), v.numpy())
  np.testing.assert_array_equal(w.numpy(), p.numpy())
  assert w.assign(arg, read_value=False) is None
  assert w.assign_add(arg, use_locking=True, name="x").numpy().shape == (2,)


@pytest.mark.parametrize("method,args", [
    ("scatter_update", (tf.IndexedSlices(tf.constant([9.0]), [1]),)),
    ("scatter_add", (tf.IndexedSlices(tf.constant([9.0]), [1]),)),
    ("scatter_sub", (tf.IndexedSlices(tf.constant([9.0]), [0]),)),
    ("scatter_max", (tf.IndexedSlices(tf.constant([9.0]), [0]),)),
    ("scatter_min", (tf.IndexedSlices(tf.constant([-9.0]), [0]),)),
    ("scatter_mul", (tf.IndexedSlices(tf.constant([3.0]), [1]),)),
    ("scatter_div", (tf.IndexedSlices(tf.constant([4.0]), [1]),)),
    ("scatter_nd_update", ([[0]], [7.0])),
    ("scatter_nd_add", ([[1]], [7.0])),
    ("scatter_nd_sub", ([[1]], [7.0])),
    ("batch_scatter_update", (tf.IndexedSlices(tf.constant([8.0]), [0]),)),
])
def test_scatter_methods_match_plain(mode, method, args):
  w, p = make_pair([1.0, 2.0], aggregation=SUM)
  for v in (w, p):
    in_mode(mode, lambda v=v: getattr(v, method)(*args))
  np.testing.assert_array_equal(w.numpy(), p.numpy())


def test_slice_assign_and_count_up_to():
  w, p = make_pair([1, 2, 3])
  w[1].assign(7)
  p[1].assign(7)
  np.testing.assert_array_equal(w.numpy(), p.numpy())
  ws, ps = make_pair(3)
  assert int(ws.count_up_to(10)) == int(ps.count_up_to(10)) == 3
  assert int(ws) == 4


def test_deepcopy_keeps_strategy_and_aggregation():
  w, _ = make_pair([1.0, 2.0], aggregation=SUM)
  assert copy.copy(w) is w
  c = copy.deepcopy(w)
  assert isinstance(c, AggregatingVariable) and c is not w
  assert c.get() is not w.get()
  assert c.aggregation == SUM and c.distribute_strategy is w.distribute_strategy
  c.assign([0.0, 0.0])
  np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])


# -- tf.function and gradients ----------------------------------------------

def test_tf_function_closure_and_argument():
  w, _ = make_pair([1.0, 2.0], aggregation=SUM)
  seen = []

  @tf.function
  def step(v):
    seen.append(type(v))
    v.assign_add([1.0, 1.0])
    return v * 2.0

  np.testing.assert_array_equal(step(w), [4.0, 6.0])
  np.testing.assert_array_equal(step(w), [6.0, 8.0])
  assert seen == [AggregatingVariable]  # traced once, body saw the wrapper
  np.testing.assert_array_equal(w.numpy(), [3.0, 4.0])

  @tf.function
  def closure():
    return w.assign_sub([1.0, 1.0])

  np.testing.assert_array_equal(closure(), [2.0, 3.0])


def test_gradients_with_respect_to_the_wrapper(mode):
  w, p = make_pair([1.0, 2.0])

  def grads(v):
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(v * v * 3.0)
    return tape.gradient(loss, [v])[0]

  np.testing.assert_array_equal(in_mode(mode, lambda: grads(w)),
                                in_mode(mode, lambda: grads(p)))
  with tf.GradientTape() as tape:
    tape.watch(w)
    loss = tf.reduce_sum(tf.sin(w))
  np.testing.assert_allclose(tape.gradient(loss, w), np.cos([1.0, 2.0]),
                             rtol=1e-6)


def test_non_trainable_wrapper_is_not_watched():
  w, _ = make_pair(1.0, trainable=False)
  with tf.GradientTape() as tape:
    loss = w * 2.0
  assert tape.gradient(loss, w) is None


# -- checkpoints and SavedModel ---------------------------------------------

def _save(tmp_path, **objects):
  return tf.train.Checkpoint(**objects).save(os.path.join(tmp_path, "ckpt"))


def test_checkpoint_key_is_the_plain_variables(tmp_path):
  w, p = make_pair([1.0, 2.0])
  a = tf.train.Checkpoint(v=w).save(os.path.join(tmp_path, "a"))
  b = tf.train.Checkpoint(v=p).save(os.path.join(tmp_path, "b"))
  keys = lambda path: sorted(k for k, _ in tf.train.list_variables(path))
  assert keys(a) == keys(b)
  assert "v/.ATTRIBUTES/VARIABLE_VALUE" in keys(a)


@pytest.mark.parametrize("direction", ["wrapper_to_plain", "plain_to_wrapper",
                                       "wrapper_to_wrapper"])
def test_checkpoint_round_trip(tmp_path, direction):
  source_wrapped = direction != "plain_to_wrapper"
  target_wrapped = direction != "wrapper_to_plain"
  w, p = make_pair([1.0, 2.0])
  path = _save(tmp_path, v=w if source_wrapped else p)
  w2, p2 = make_pair([0.0, 0.0])
  target = w2 if target_wrapped else p2
  tf.train.Checkpoint(v=target).restore(path).assert_consumed()
  np.testing.assert_array_equal(target.numpy(), [1.0, 2.0])


def test_checkpoint_restore_before_create(tmp_path):
  saved = tf.Module()
  saved.v, _ = make_pair([3.0, 4.0])
  path = _save(tmp_path, m=saved)
  strategy = WrappingStrategy()
  module = tf.Module()
  status = tf.train.Checkpoint(m=module).restore(path)
  with strategy.scope():
    module.v = tf.Variable([0.0, 0.0])
  assert isinstance(module.v, AggregatingVariable)
  np.testing.assert_array_equal(module.v.numpy(), [3.0, 4.0])
  status.assert_existing_objects_matched()


def test_checkpoint_manager_and_async_save(tmp_path):
  w, _ = make_pair([5.0, 6.0])
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=w),
                                       str(tmp_path), max_to_keep=1)
  path = manager.save()
  options = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
  ckpt = tf.train.Checkpoint(v=w)
  async_path = ckpt.save(os.path.join(tmp_path, "async"), options=options)
  if hasattr(ckpt, "sync"):
    ckpt.sync()
  else:  # TensorFlow 2.12 has no Checkpoint.sync; an async restore waits
    ckpt.restore(async_path, options=options)  # for the pending write
  for saved in (path, async_path):
    _, p = make_pair([0.0, 0.0])
    tf.train.Checkpoint(v=p).restore(saved).assert_consumed()
    np.testing.assert_array_equal(p.numpy(), [5.0, 6.0])


def test_checkpoint_mismatched_shape_keeps_tf_error(tmp_path):
  _, p = make_pair([1.0, 2.0])
  path = _save(tmp_path, v=p)
  w, _ = make_pair([1.0, 2.0, 3.0])
  with pytest.raises(ValueError, match="incompatible|shape"):
    tf.train.Checkpoint(v=w).restore(path)


def test_saved_model_round_trip(tmp_path):
  strategy = WrappingStrategy()
  module = tf.Module()
  with strategy.scope():
    module.v = tf.Variable([1.0, 2.0], aggregation=SUM)
    module.u = tf.Variable(3.0, trainable=False)
  module.f = tf.function(lambda x: module.v * x + module.u,
                         input_signature=[tf.TensorSpec([], tf.float32)])
  tf.saved_model.save(module, str(tmp_path))
  loaded = tf.saved_model.load(str(tmp_path))
  np.testing.assert_array_equal(loaded.v.numpy(), [1.0, 2.0])
  assert loaded.v.aggregation == SUM
  assert loaded.u.trainable is False
  np.testing.assert_array_equal(loaded.f(tf.constant(2.0)), [5.0, 7.0])
  loaded.v.assign([0.0, 1.0])
  np.testing.assert_array_equal(loaded.f(tf.constant(2.0)), [3.0, 5.0])


# -- Keras -----------------------------------------------------------------

def _keras_layers():
  return keras, [
      (keras.layers.Dense(3), (2, 4)),
      (keras.layers.Conv2D(2, 3), (1, 5, 5, 2)),
      (keras.layers.Embedding(10, 3), None),
      (keras.layers.BatchNormalization(), (4, 3)),
  ]


def test_keras_layers_build_and_train_with_wrapped_variables():
  keras, layers = _keras_layers()
  strategy = WrappingStrategy()
  with strategy.scope():
    for layer, shape in layers:
      x = (tf.constant([[1, 2], [3, 9]]) if shape is None else
           tf.random.stateless_normal(shape, seed=[1, 2]))
      y = layer(x, training=True)
      assert all(isinstance(tf_variable(w), AggregatingVariable)
                 for w in layer.weights), layer
      assert np.all(np.isfinite(y))
      assert [w.trainable for w in layer.weights] == [
          tf_variable(w).trainable for w in layer.weights]
    optimizer = keras.optimizers.Adam(0.1)
    dense = layers[0][0]
    optimizer.build(dense.trainable_variables)
  before = dense.kernel.numpy()
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(dense(tf.ones([2, 4])))
  grads = tape.gradient(loss, dense.trainable_variables)
  assert all(g is not None for g in grads)
  optimizer.apply_gradients(zip(grads, dense.trainable_variables))
  assert not np.allclose(before, dense.kernel.numpy())


# -- create_central_variable -----------------------------------------------

class _FakeExtended:
  """Just the attributes create_central_variable reads."""

  def __init__(self, strategy, replicas, parameter_device):
    self._strategy = strategy
    self.worker_devices = tuple(cpu(i) for i in range(replicas))
    self.parameter_devices = (parameter_device,)

  def _container_strategy(self):
    return self._strategy


def _v2_creator(**kwargs):
  """``tf.Variable`` as the end of a creator chain: TensorFlow's default
  creator drops the v1-only ``collections`` keyword, which ``tf.Variable``
  itself refuses before TensorFlow 2.13."""
  kwargs.pop("collections", None)
  return tf.Variable(**kwargs)


def _create(replicas, parameter_device=cpu(0), creator=_v2_creator,
            **kwargs):
  extended = _FakeExtended(distribute.OneDeviceStrategy("/cpu:0"), replicas,
                           parameter_device)
  return create_central_variable(
      extended, lambda **kw: creator(**kw), **kwargs)


def test_one_replica_gives_a_plain_variable_on_the_parameter_device():
  v = _create(1, cpu(2), initial_value=1.0)
  assert not isinstance(v, AggregatingVariable)
  assert v.device == cpu(2)


def test_several_replicas_give_a_wrapper_on_the_parameter_device():
  v = _create(2, cpu(3), initial_value=1.0,
              aggregation=tf.VariableAggregation.MEAN)
  assert isinstance(v, AggregatingVariable)
  assert v.device == cpu(3)
  assert v.aggregation == tf.VariableAggregation.MEAN
  assert v.get().aggregation == tf.VariableAggregation.MEAN
  assert _create(2, initial_value=1.0).aggregation == (
      tf.VariableAggregation.NONE)


def test_colocate_with_places_like_that_variable():
  with tf.device("/cpu:3"):
    anchor = tf.Variable(1.0)
  v = _create(2, cpu(0), initial_value=2.0, colocate_with=anchor)
  assert v.device == cpu(3)
  w = _create(2, cpu(0), initial_value=2.0, colocate_with=v)
  assert w.device == cpu(3)


@pytest.mark.parametrize("aggregation", [tf.VariableAggregation.SUM,
                                         tf.compat.v1.VariableAggregation.MEAN,
                                         3])
def test_accepted_aggregations(aggregation):
  v = _create(2, initial_value=1.0, aggregation=aggregation)
  assert v.aggregation == tf.VariableAggregation(
      getattr(aggregation, "value", aggregation))


@pytest.mark.parametrize("aggregation", ["sum", 7])
def test_invalid_aggregation_is_a_value_error(aggregation):
  with pytest.raises(ValueError, match=(
      r"Invalid variable aggregation .* for variable 'bad'.*"
      r"aggregation=tf.VariableAggregation.SUM")):
    _create(2, initial_value=1.0, aggregation=aggregation, name="bad")


def test_on_read_variable_is_wrapped_and_not_trainable():
  v = _create(2, initial_value=1.0, aggregation=SUM,
              synchronization=tf.VariableSynchronization.ON_READ)
  assert isinstance(v, AggregatingVariable)
  assert v.synchronization == tf.VariableSynchronization.ON_READ
  assert v.trainable is False


@pytest.mark.parametrize("creator", [_v2_creator, tf.compat.v1.Variable],
                         ids=["Variable", "VariableV1"])
def test_graph_mode_collections_session_and_eval(creator):
  with tf.Graph().as_default():
    v = _create(2, initial_value=[1.0, 2.0], aggregation=SUM,
                creator=creator)
    frozen = _create(2, initial_value=3.0, trainable=False, creator=creator)
    # tf.Variable in a graph files itself; TensorFlow's CentralStorage
    # leaves it beside its wrapper (test_variables_central_saver.py).
    filed = ([v.get(), v, frozen.get(), frozen] if creator is _v2_creator
             else [v, frozen])
    assert len(tf.compat.v1.global_variables()) == len(filed)
    assert all(a is b for a, b in zip(tf.compat.v1.global_variables(), filed))
    assert len(tf.compat.v1.trainable_variables()) == 1
    assert tf.compat.v1.trainable_variables()[0] is v
    update = v.assign_add([1.0, 1.0])
    doubled = v * 2.0
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      np.testing.assert_array_equal(v.eval(session), [1.0, 2.0])
      session.run(update)
      np.testing.assert_array_equal(session.run(v), [2.0, 3.0])
      np.testing.assert_array_equal(session.run(doubled), [4.0, 6.0])
      v.load([0.0, 1.0], session)
      np.testing.assert_array_equal(session.run(v.read_value()), [0.0, 1.0])
    assert v.op is v.get().op and v.graph is v.get().graph
    assert v.initializer is v.get().initializer
