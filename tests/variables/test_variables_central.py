"""Variables under our CentralStorageStrategy against native TF's, with 1, 2
and 4 compute devices: aggregated replica-context updates, the NONE error,
cross-replica and update-context assignment, a Keras training loop, Keras
layers, and checkpoints in every direction."""
import os

import numpy as np
import pytest
import tensorflow as tf

from compat_distribute import v2 as distribute
from compat_distribute.variables.aggregating import AggregatingVariable
from conftest import in_mode
from fixtures import strategies
from support.keras import keras
from support.keras import keras_2
from support.keras import optimizer_variables
from support.keras import tf_variable

OURS = distribute.experimental.CentralStorageStrategy
assert OURS.__module__.startswith("compat_distribute"), OURS

NATIVE = tf.distribute.experimental.CentralStorageStrategy
A = tf.VariableAggregation
REPLICAS = [1, 2, 4]


def devices(n):
  return [f"/cpu:{i}" for i in range(n)]


def replica_id():
  ctx = tf.distribute.get_replica_context()
  return tf.cast(ctx.replica_id_in_sync_group, tf.float32)


def local(strategy, value):
  return [np.asarray(x) for x in strategy.experimental_local_results(value)]


def assert_all_equal(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    np.testing.assert_allclose(x, y, rtol=1e-6)


# -- creation ----------------------------------------------------------------

@pytest.mark.parametrize("n", REPLICAS)
def test_type_and_placement_as_native(n):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(1.0, aggregation=A.SUM)
    return type(v).__name__, v.device, v.aggregation
  ours, native = strategies.both("central_storage", program, n)
  assert ours == native
  assert (ours[0] == "AggregatingVariable") == (n > 1)


def test_wrapper_is_ours_and_strategy_is_recorded():
  strategy = OURS(devices(2))
  with strategy.scope():
    v = tf.Variable(1.0)
  assert isinstance(v, AggregatingVariable)
  assert v.distribute_strategy is strategy
  assert strategy.extended.variable_created_in_scope(v)


# -- replica-context updates -------------------------------------------------

@pytest.mark.parametrize("n", REPLICAS)
@pytest.mark.parametrize("aggregation", [A.SUM, A.MEAN, A.ONLY_FIRST_REPLICA])
@pytest.mark.parametrize("method", ["assign", "assign_add", "assign_sub"])
def test_replica_updates_aggregate_as_native(n, aggregation, method, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable([1.0, 2.0], aggregation=aggregation)

    def replica_fn():
      delta = tf.constant([1.0, 10.0]) * (replica_id() + 1.0)
      return tf.convert_to_tensor(getattr(v, method)(delta))

    result = in_mode(mode, lambda: strategy.run(replica_fn))
    return v.numpy(), local(strategy, result)

  ours, native = strategies.both("central_storage", program, n)
  np.testing.assert_allclose(ours[0], native[0], rtol=1e-6)
  assert_all_equal(ours[1], native[1])


@pytest.mark.parametrize("n", [2, 4])
def test_read_value_false_and_options_as_native(n, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(0.0, aggregation=A.MEAN)

    def replica_fn():
      result = v.assign_add(replica_id(), use_locking=True, name="add",
                            read_value=False)
      return tf.constant(0.0) if result is None else tf.constant(1.0)

    result = in_mode(mode, lambda: strategy.run(replica_fn))
    return float(v.numpy()), local(strategy, result)

  ours, native = strategies.both("central_storage", program, n)
  assert ours[0] == native[0] == sum(range(n)) / n
  assert_all_equal(ours[1], native[1])


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("aggregation", [A.MEAN, A.ONLY_FIRST_REPLICA])
def test_same_python_value_from_every_replica(n, aggregation, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(1.0, aggregation=aggregation)
    in_mode(mode, lambda: strategy.run(lambda: v.assign_add(2.0)))
    return float(v.numpy())
  assert strategies.both("central_storage", program, n) == (3.0, 3.0)


@pytest.mark.parametrize("n", [2, 4])
def test_summing_one_python_value_is_an_error_as_native(n, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(1.0, aggregation=A.SUM)
    with pytest.raises(ValueError):
      in_mode(mode, lambda: strategy.run(lambda: v.assign_add(2.0)))
    return float(v.numpy())
  assert strategies.both("central_storage", program, n) == (1.0, 1.0)


@pytest.mark.parametrize("n", REPLICAS)
def test_scatter_in_replica_context_applies_per_replica(n, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(tf.zeros([4]), aggregation=A.SUM)

    def replica_fn():
      v.scatter_add(tf.IndexedSlices(tf.ones([1]), [1]))
      return v.sparse_read([1])

    result = in_mode(mode, lambda: strategy.run(replica_fn))
    return v.numpy(), local(strategy, result)[0].shape
  ours, native = strategies.both("central_storage", program, n)
  np.testing.assert_array_equal(ours[0], native[0])
  assert ours[1] == native[1]


@pytest.mark.parametrize("n", REPLICAS)
def test_keras_metric_on_read_variables_as_native(n, mode):

  def program(strategy):
    with strategy.scope():
      metric = keras.metrics.Mean()
    in_mode(mode, lambda: strategy.run(
        lambda: metric.update_state(replica_id() + 1.0)))
    return ([type(tf_variable(v)).__name__ for v in metric.variables],
            float(metric.result()))
  ours, native = strategies.both("central_storage", program, n)
  assert ours == native


@pytest.mark.parametrize("n", REPLICAS)
def test_wrapper_as_tf_function_argument(n):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable([1.0, 2.0], aggregation=A.MEAN)
    seen = []

    @tf.function
    def step(var):
      seen.append(type(var).__name__)
      return strategy.run(lambda: var.assign_add(replica_id() + [1.0, 1.0]))

    for _ in range(2):
      step(v)
    return seen, v.numpy()
  ours, native = strategies.both("central_storage", program, n)
  assert ours[0] == native[0]
  np.testing.assert_array_equal(ours[1], native[1])


@pytest.mark.parametrize("n", REPLICAS)
def test_none_aggregation_in_replica_context(n, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(1.0)
    try:
      in_mode(mode, lambda: strategy.run(lambda: v.assign_add(1.0)))
    except ValueError as e:
      return "ValueError", str(e)
    return "ok", float(v.numpy())

  ours, native = strategies.both("central_storage", program, n)
  assert ours[0] == native[0]
  if n == 1:
    assert ours == native == ("ok", 2.0)
  else:
    assert "aggregation" in ours[1]
    assert "tf.VariableAggregation.SUM" in ours[1]
    assert "assign_add" in ours[1] and "NONE" in ours[1]


# -- cross-replica and update context ----------------------------------------

@pytest.mark.parametrize("n", REPLICAS)
def test_cross_replica_updates_pass_through(n, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable([1.0, 2.0])
      none = tf.Variable(1.0)

      def updates():
        a = v.assign([3.0, 4.0])
        b = v.assign_add([1.0, 1.0])
        c = v.assign_sub([0.5, 0.5])
        d = none.assign_add(1.0)
        return [tf.convert_to_tensor(x) for x in (a, b, c, d)]

      results = in_mode(mode, updates)
    return [v.numpy(), none.numpy()] + [np.asarray(r) for r in results]

  ours, native = strategies.both("central_storage", program, n)
  assert_all_equal(ours, native)


@pytest.mark.parametrize("n", REPLICAS)
def test_per_replica_value_assigned_outside_replica_context(n, mode):
  # TensorFlow updates through extended.update there, which takes replica
  # 0's part of a per-replica value: in plain cross-replica code and in a
  # merge_fn (ours failed converting the PerReplica with several replicas).
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(1.0, aggregation=A.SUM)
      w = tf.Variable(1.0, aggregation=A.MEAN)

    def merge_fn(strat, x):
      return v.assign_add(x)

    def replica_fn():
      return tf.convert_to_tensor(
          tf.distribute.get_replica_context().merge_call(
              merge_fn, args=(replica_id() + 1.0,)))

    def steps():
      per_replica = strategy.run(lambda: replica_id() + 7.0)
      first = tf.convert_to_tensor(v.assign(per_replica))
      second = tf.convert_to_tensor(w.assign_sub(per_replica))
      merged = strategy.experimental_local_results(strategy.run(replica_fn))
      return first, second, merged

    first, second, merged = in_mode(mode, steps)
    return ([float(first), float(second)] + [float(m) for m in merged]
            + [float(v.numpy()), float(w.numpy())])

  ours, native = strategies.both("central_storage", program, n)
  assert ours == native
  assert ours[:2] == [7.0, -6.0] and ours[-2:] == [8.0, -6.0]


@pytest.mark.parametrize("n", REPLICAS)
def test_proto_round_trip_as_native(n):
  # from_proto of a variable made in scope builds a plain resource variable
  # from the proto in a graph, and is refused eagerly, as in TensorFlow.
  def program(strategy):
    with tf.Graph().as_default():
      with strategy.scope():
        v = tf.Variable([1.0, 2.0], name="pv")
      copy = v.from_proto(v.to_proto())
      in_graph = (type(copy).__name__, copy.name, copy.shape.as_list())
    with strategy.scope():
      v = tf.Variable([1.0, 2.0], name="pv")
    with pytest.raises(RuntimeError, match="eager"):
      v.from_proto(None)
    return in_graph

  ours, native = strategies.both("central_storage", program, n)
  assert ours == native == ("ResourceVariable", "pv:0", [2])


@pytest.mark.parametrize("n", REPLICAS)
def test_update_context_does_not_merge_again(n, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable(1.0, aggregation=A.SUM)
    # fn uses the wrapper itself (not its argument): inside update that must
    # apply directly, not reach merge_call again.
    add = lambda _, x: v.assign_add(x)

    def cross():
      return strategy.extended.update(v, add, args=(tf.constant(2.0),))

    def merge_fn(strat, x):
      return strat.extended.update(v, add, args=(x,))

    def replica_fn():
      return tf.convert_to_tensor(
          tf.distribute.get_replica_context().merge_call(
              merge_fn, args=(replica_id() + 1.0,)))

    first = float(in_mode(mode, lambda: tf.convert_to_tensor(cross())))
    second = local(strategy, in_mode(mode, lambda: strategy.run(replica_fn)))
    return first, float(v.numpy()), second

  ours, native = strategies.both("central_storage", program, n)
  assert ours[:2] == native[:2]
  assert_all_equal(ours[2], native[2])


def _training_replica_fn(model, optimizer, xs, ys):
  """A replica step: replica i trains on row block i of ``xs``/``ys``."""
  def replica_fn():
    rid = tf.distribute.get_replica_context().replica_id_in_sync_group
    xb, yb = tf.gather(xs, rid), tf.gather(ys, rid)
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum((model(xb) - yb) ** 2) / 8.0
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss
  return replica_fn


# -- Keras -------------------------------------------------------------------

def _train(strategy, optimizer_name, steps=3, eager=False):
  n = strategy.num_replicas_in_sync
  with strategy.scope():
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((4,)),
                              keras.layers.Dense(5, activation="tanh"),
                              keras.layers.Dense(1)])
    optimizer = (keras.optimizers.SGD(0.1, momentum=0.9)
                 if optimizer_name == "sgd" else keras.optimizers.Adam(0.05))
    optimizer.build(model.trainable_variables)
  x = tf.reshape(tf.range(32, dtype=tf.float32), (8, 4)) / 32.0
  y = tf.reduce_sum(tf.sin(x), axis=1, keepdims=True)
  xs, ys = tf.reshape(x, (n, 8 // n, 4)), tf.reshape(y, (n, 8 // n, 1))

  replica_fn = _training_replica_fn(model, optimizer, xs, ys)

  step = lambda: strategy.reduce("SUM", strategy.run(replica_fn), axis=None)
  step = step if eager else tf.function(step)
  losses = [float(step()) for _ in range(steps)]
  return (losses, [w.numpy() for w in model.weights],
          [v.numpy() for v in optimizer_variables(optimizer)])


@pytest.mark.slow
@pytest.mark.parametrize("n", REPLICAS)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_keras_training_loop_matches_native(n, optimizer):
  ours, native = strategies.both("central_storage",
                                 lambda s: _train(s, optimizer), n)
  for a, b in zip(ours, native):
    assert_all_equal(a, b)
  assert ours[2][0] == 3  # iterations: ONLY_FIRST_REPLICA, once per step


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_keras_training_loop_eagerly_matches_native(optimizer):
  ours, native = strategies.both(
      "central_storage", lambda s: _train(s, optimizer, eager=True), 2)
  for a, b in zip(ours, native):
    assert_all_equal(a, b)


@pytest.mark.parametrize("n", [1, 2])
def test_keras_layers_build_and_run_as_native(n):

  def program(strategy):
    outputs = []
    with strategy.scope():
      keras.utils.set_random_seed(3)
      layers = [(keras.layers.Dense(3), tf.ones((2, 4))),
                (keras.layers.Conv2D(2, 3), tf.ones((1, 5, 5, 2))),
                (keras.layers.Embedding(10, 3), tf.constant([[1, 2], [3, 9]])),
                (keras.layers.BatchNormalization(), tf.ones((4, 3)))]
      for layer, x in layers:
        outputs.append(layer(x, training=True).numpy())
        outputs.extend(w.numpy() for w in layer.weights)
        outputs.append(np.array([w.trainable for w in layer.weights]))
      outputs.append(layers[0][0](tf.ones((1, 4))).numpy())
    run = strategy.run(lambda: layers[0][0](tf.ones((1, 4))))
    outputs.extend(local(strategy, run))
    return outputs

  ours, native = strategies.both("central_storage", program, n)
  assert_all_equal(ours, native)


# -- checkpoints -------------------------------------------------------------

def _make(strategy, value):
  """A module with a variable, a SUM variable and an optimizer slot."""
  module = tf.Module()
  scope = strategy.scope() if strategy is not None else _nullcontext()
  with scope:
    module.v = tf.Variable(value)
    module.s = tf.Variable(value[0] * 2.0, aggregation=A.SUM)
  return module


class _nullcontext:  # pylint: disable=invalid-name
  def __enter__(self):
    return None

  def __exit__(self, *unused):
    return False


def _strategy(kind):
  if kind == "none":
    return None
  family, n = kind.split("-")
  return strategies.strategy(family, "central_storage", int(n))


@pytest.mark.parametrize("source,target", [
    ("ours-2", "native-2"), ("native-2", "ours-2"), ("ours-4", "none"),
    ("none", "ours-4"), ("ours-2", "ours-1"), ("native-4", "ours-1"),
    ("ours-1", "native-2")])
def test_checkpoint_round_trip(tmp_path, source, target):
  saved = _make(_strategy(source), [1.0, 2.0])
  path = tf.train.Checkpoint(m=saved).save(os.path.join(tmp_path, "c"))
  restored = _make(_strategy(target), [0.0, 0.0])
  tf.train.Checkpoint(m=restored).restore(path).assert_consumed()
  np.testing.assert_array_equal(restored.v.numpy(), [1.0, 2.0])
  assert float(restored.s.numpy()) == 2.0


@pytest.mark.parametrize("source", ["native-2", "ours-2", "none"])
@pytest.mark.parametrize("n", [1, 2])
def test_restore_before_create(tmp_path, source, n):
  saved = _make(_strategy(source), [5.0, 6.0])
  path = tf.train.Checkpoint(m=saved).save(os.path.join(tmp_path, "c"))
  module = tf.Module()
  status = tf.train.Checkpoint(m=module).restore(path)
  with OURS(devices(n)).scope():
    module.v = tf.Variable([0.0, 0.0])
    module.s = tf.Variable(0.0, aggregation=A.SUM)
  np.testing.assert_array_equal(module.v.numpy(), [5.0, 6.0])
  assert float(module.s.numpy()) == 10.0
  status.assert_consumed()


@pytest.mark.parametrize("source,target", [("ours-2", "native-2"),
                                           ("native-2", "ours-2")])
def test_model_and_optimizer_slots_checkpoint(tmp_path, source, target):

  def build(strategy):
    with strategy.scope():
      model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
      optimizer = keras.optimizers.Adam(0.1)
      optimizer.build(model.trainable_variables)
    return model, optimizer

  model, optimizer = build(_strategy(source))
  for i, w in enumerate(model.weights + optimizer_variables(optimizer)):
    w.assign(tf.cast(tf.fill(w.shape, 1.25 * (i + 1)), w.dtype))
  path = tf.train.Checkpoint(model=model, optimizer=optimizer).save(
      os.path.join(tmp_path, "c"))
  model2, optimizer2 = build(_strategy(target))
  tf.train.Checkpoint(model=model2, optimizer=optimizer2).restore(
      path).assert_consumed()
  assert_all_equal(
      [w.numpy() for w in model2.weights + optimizer_variables(optimizer2)],
      [w.numpy() for w in model.weights + optimizer_variables(optimizer)])


def test_saved_model_of_module_made_in_scope(tmp_path):
  strategy = OURS(devices(2))
  module = _make(strategy, [1.0, 2.0])
  module.f = tf.function(lambda: module.v * module.s,
                         input_signature=[])
  tf.saved_model.save(module, str(tmp_path))
  loaded = tf.saved_model.load(str(tmp_path))
  np.testing.assert_array_equal(loaded.v.numpy(), [1.0, 2.0])
  np.testing.assert_array_equal(loaded.f(), [2.0, 4.0])
  with strategy.scope():
    reloaded = tf.saved_model.load(str(tmp_path))
  np.testing.assert_array_equal(reloaded.f(), [2.0, 4.0])


@pytest.mark.parametrize("n", [1, 2])
def test_keras_model_save_and_load_in_scope(tmp_path, n):
  strategy = OURS(devices(n))
  with strategy.scope():
    keras.utils.set_random_seed(5)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2),
                              keras.layers.BatchNormalization()])
    model.compile(optimizer="adam", loss="mse")
  path = os.path.join(tmp_path, "m.keras")
  model.save(path)
  with strategy.scope():
    loaded = keras.models.load_model(path)
  assert [type(tf_variable(w)).__name__ for w in loaded.weights] == [
      type(tf_variable(w)).__name__ for w in model.weights]
  assert_all_equal([w.numpy() for w in loaded.weights],
                   [w.numpy() for w in model.weights])
  x = tf.ones((4, 3))
  np.testing.assert_allclose(loaded(x), model(x), rtol=1e-6)
  plain = keras.models.load_model(path)
  np.testing.assert_allclose(plain(x), model(x), rtol=1e-6)


def _train_tf_keras(strategy, optimizer_name, steps=3):
  tf_keras = keras_2()
  n = strategy.num_replicas_in_sync
  with strategy.scope():
    tf_keras.utils.set_random_seed(11)
    model = tf_keras.Sequential([
        tf_keras.layers.Dense(5, activation="tanh", input_shape=(4,)),
        tf_keras.layers.Dense(1)])
    optimizer = (tf_keras.optimizers.legacy.SGD(0.1, momentum=0.9)
                 if optimizer_name == "legacy_sgd" else
                 tf_keras.optimizers.Adam(0.05))
  x = tf.reshape(tf.range(32, dtype=tf.float32), (8, 4)) / 32.0
  y = tf.reduce_sum(tf.cos(x), axis=1, keepdims=True)
  xs, ys = tf.reshape(x, (n, 8 // n, 4)), tf.reshape(y, (n, 8 // n, 1))

  replica_fn = _training_replica_fn(model, optimizer, xs, ys)

  step = tf.function(lambda: strategy.reduce(
      "SUM", strategy.run(replica_fn), axis=None))
  losses = [float(step()) for _ in range(steps)]
  return losses, [w.numpy() for w in model.weights]


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("optimizer", ["legacy_sgd", "adam"])
def test_tf_keras_training_loop_matches_native(n, optimizer):
  if keras_2() is None:
    pytest.skip("no Keras 2 here: install tf-keras of the TensorFlow minor")
  ours, native = strategies.both(
      "central_storage", lambda s: _train_tf_keras(s, optimizer), n)
  for a, b in zip(ours, native):
    assert_all_equal(a, b)


@pytest.mark.parametrize("n", [1, 2])
def test_graph_mode_v1_variables_optimizer_and_global_step(n):
  def program(strategy_class):
    with tf.Graph().as_default():
      strategy = strategy_class(devices(n))
      with strategy.scope():
        v = tf.compat.v1.get_variable("v", initializer=[1.0, 2.0],
                                      aggregation=A.MEAN)
        w = tf.compat.v1.get_variable("w", initializer=[1.0, 2.0])
        step = tf.compat.v1.train.get_or_create_global_step()

        def replica_fn():
          rid = replica_id()
          update = v.assign_add(tf.stack([rid, rid]), read_value=False)
          loss = tf.reduce_sum(w * w) * (rid + 1.0)
          with tf.control_dependencies([update]):
            return tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
                loss, global_step=step)

        train = strategy.group(
            strategy.extended.call_for_each_replica(replica_fn))
      names = ([type(x).__name__ for x in tf.compat.v1.global_variables()],
               len(tf.compat.v1.trainable_variables()),
               type(tf.compat.v1.train.get_global_step()).__name__)
      with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(train)
        return names, session.run([v, w, step])

  ours, native = program(OURS), program(NATIVE)
  assert ours[0] == native[0]
  assert_all_equal(ours[1], native[1])
  np.testing.assert_allclose(ours[1][0], [1.0, 2.0] if n == 1 else [1.5, 2.5])
  assert ours[1][2] == 1


@pytest.mark.parametrize("library", ["keras", "keras_2"])
def test_keras_deferred_restore_into_model_built_in_scope(tmp_path, library):
  # keras_2: tf-keras, or on TensorFlow 2.12-2.13 the bundled Keras 2.
  lib = keras if library == "keras" else keras_2()
  if lib is None:
    pytest.skip("no Keras 2 here: install tf-keras of the TensorFlow minor")
  with OURS(devices(2)).scope():
    model = lib.Sequential([lib.layers.Dense(2)])
    model.build((None, 3))
  for i, w in enumerate(model.weights):
    w.assign(tf.fill(w.shape, float(i + 3)))
  path = tf.train.Checkpoint(model=model).save(os.path.join(tmp_path, "c"))

  def program(strategy):
    with strategy.scope():
      restored = lib.Sequential([lib.layers.Dense(2)])
      status = tf.train.Checkpoint(model=restored).restore(path)
      restored.build((None, 3))
    status.assert_existing_objects_matched()
    return [w.numpy() for w in restored.weights]

  ours, native = strategies.both("central_storage", program, 2)
  assert_all_equal(ours, native)
  assert_all_equal(ours, [w.numpy() for w in model.weights])
