"""CentralStorageStrategy (v2) against TensorFlow's, with 1, 2 and 4
compute devices, eagerly and in tf.function: devices, run, merge_call,
reduce, gather, local results, reduce_to / batch_reduce_to / update."""
import numpy as np
import pytest
import tensorflow as tf

from support.central_storage import (REPLICAS, NativeCentralStorage,
                                     OursCentralStorage, assert_same, both,
                                     compute_devices, devices, norm, pair,
                                     per_replica, replica_float)
from conftest import cpu

ReduceOp = tf.distribute.ReduceOp


# -- construction -------------------------------------------------------------

@pytest.mark.parametrize("n", REPLICAS)
def test_devices_match_native(n):
  ours, native = pair(n)
  assert isinstance(ours, tf.distribute.Strategy)
  assert isinstance(ours.extended, tf.distribute.StrategyExtended)
  assert ours.extended.worker_devices == native.extended.worker_devices
  assert type(ours.extended.worker_devices) is type(
      native.extended.worker_devices)
  assert ours.extended.parameter_devices == native.extended.parameter_devices
  assert type(ours.extended.parameter_devices) is type(
      native.extended.parameter_devices)
  assert ours.num_replicas_in_sync == native.num_replicas_in_sync == n
  assert ours.extended._input_device == cpu(0)  # pylint: disable=protected-access


@pytest.mark.parametrize("n", REPLICAS)
def test_single_machine_cluster_attributes_match_native(n):
  # tf_keras reads extended._task_id / _task_type (distributed_file_utils).
  ours, native = pair(n)
  for name in ("_cluster_spec", "_task_type", "_task_id", "_is_chief",
               "_worker_device"):
    assert getattr(ours.extended, name) == getattr(native.extended, name), name
  assert ours.extended._is_chief is True  # pylint: disable=protected-access
  assert ours.extended._worker_device == cpu(0)  # pylint: disable=protected-access


def test_default_devices_match_native():
  ours, native = OursCentralStorage(), NativeCentralStorage()
  assert ours.extended.worker_devices == native.extended.worker_devices
  assert ours.extended.parameter_devices == native.extended.parameter_devices


def test_explicit_parameter_device_matches_native():
  ours, native = pair(2, parameter_device="/cpu:3")
  assert ours.extended.parameter_devices == native.extended.parameter_devices
  with ours.scope():
    v = tf.Variable(1.0)
  assert v.device == cpu(3)


def test_repr_shows_both_device_settings():
  ours = OursCentralStorage(["/cpu:0", "cpu:1"], parameter_device="/cpu:2")
  assert repr(ours) == (
      f"CentralStorageStrategy(compute_devices=['{cpu(0)}', '{cpu(1)}'], "
      "parameter_device='/cpu:2')")
  assert "parameter_devices=('/cpu:2',)" in repr(ours.extended)


def test_empty_compute_devices_is_a_value_error():
  with pytest.raises(ValueError, match="compute_devices is empty"):
    OursCentralStorage([])


def test_duplicate_compute_devices_are_named():
  with pytest.raises(ValueError, match=r"'/cpu:0' and 'cpu:0'"):
    OursCentralStorage(["/cpu:0", "/cpu:1", "cpu:0"])


def test_compute_devices_must_be_a_list():
  with pytest.raises(TypeError, match="list of device names"):
    OursCentralStorage("/cpu:0")


def test_default_device_in_scope_matches_native():
  for strategy in pair(2):
    with strategy.scope():
      assert tf.constant(1.0).device == cpu(0)


# -- run and merge_call -------------------------------------------------------

@pytest.mark.parametrize("n", REPLICAS)
def test_run_values_and_devices(n, mode):
  seen = {}

  def program(strategy):
    key = "ours" if isinstance(strategy, OursCentralStorage) else "native"
    seen[key] = []

    def fn(x):
      ctx = tf.distribute.get_replica_context()
      seen[key].append((tf.constant(0.0).device, ctx.devices[-1]))
      return ctx.replica_id_in_sync_group, x * 2.0

    x = per_replica(strategy, lambda i: tf.cast(i, tf.float32) + 1.0)
    return strategy.run(fn, args=(x,))

  ours, native = both(n, mode, program)
  assert_same(ours, native)
  assert seen["ours"] == [(cpu(i), cpu(i)) for i in range(n)]
  assert [s[0] for s in seen["ours"]] == [s[0] for s in seen["native"]]
  if mode == "eager" and n > 1:
    assert devices(ours[1]) == devices(native[1])


@pytest.mark.parametrize("n", REPLICAS)
def test_run_unwraps_values_shared_by_all_replicas(n):
  ours, native = pair(n)
  for strategy in (ours, native):
    with strategy.scope():
      v = tf.Variable(1.0)
    same = tf.constant(5.0)
    assert strategy.run(lambda: v) is v
    assert strategy.run(lambda: 3) == 3
    assert strategy.run(lambda: None) is None
    assert strategy.run(lambda t: t, args=(same,)) is same






# -- reduce, gather, local results --------------------------------------------

def _batches(strategy, sizes):
  """Per-replica batches of float32 [size, 2]; replica i's rows hold i+1."""
  return per_replica(strategy, lambda i: tf.fill(
      [tf.gather(tf.constant(sizes), i), 2], tf.cast(i, tf.float32) + 1.0))


@pytest.mark.parametrize("n", REPLICAS)
@pytest.mark.parametrize("op", ["SUM", "MEAN"])
@pytest.mark.parametrize("axis", [None, 0])
def test_reduce(n, op, axis, mode):
  sizes = [2] * n

  def program(strategy):
    return strategy.reduce(op, _batches(strategy, sizes), axis=axis)

  ours, native = both(n, mode, program)
  assert_same(ours, native)


@pytest.mark.parametrize("n", (2, 4))
def test_reduce_mean_of_partial_batch_counts_true_elements(n, mode):
  sizes = [2] * (n - 1) + [1]  # the last replica got a partial batch

  def program(strategy):
    return strategy.reduce("MEAN", _batches(strategy, sizes), axis=0)

  ours, native = both(n, mode, program)
  assert_same(ours, native)


@pytest.mark.parametrize("n", (1, 2))
def test_reduce_of_integers_and_plain_values(n):
  ours, native = pair(n)
  for op in ("SUM", "MEAN"):
    values = [s.reduce(op, per_replica(s, lambda i: tf.fill([2], i + 1)),
                       axis=None) for s in (ours, native)]
    assert_same(*values)
  assert_same(ours.reduce("MEAN", tf.constant([1.0, 2.0]), axis=None),
              native.reduce("MEAN", tf.constant([1.0, 2.0]), axis=None))
  assert_same(ours.reduce("SUM", tf.constant([1.0, 2.0]), axis=0),
              native.reduce("SUM", tf.constant([1.0, 2.0]), axis=0))
  if n > 1:
    for strategy in (ours, native):
      with pytest.raises(ValueError, match="SUM"):
        strategy.reduce("SUM", tf.constant(1.0), axis=None)


@pytest.mark.parametrize("compute", [["/cpu:0"], ["/cpu:1"],
                                     ["/cpu:0", "/cpu:1"]])
def test_reduce_results_do_not_depend_on_an_earlier_graph(compute):
  # Device names complete differently in a TF1 graph (no job) and eagerly;
  # a reduction made in a graph first must not change the eager result
  # (a one-replica MEAN of integers stays an integer copy, as in TF).
  def reductions(cls, graph_mode):
    def build():
      strategy = cls(compute)
      value = strategy.run(lambda: tf.fill([2], 3) + tf.distribute
                           .get_replica_context().replica_id_in_sync_group)
      results = [strategy.reduce(op, value, axis=None)
                 for op in ("MEAN", "SUM")]
      with tf.device("/cpu:2"):
        results.append(strategy.reduce("MEAN", value, axis=None))
      return results
    if not graph_mode:
      return [(r.dtype.name, r.device, r.numpy().tolist()) for r in build()]
    with tf.Graph().as_default():
      return [(r.dtype.name, r.device) for r in build()]

  for graph_mode in (True, False, True, False):
    assert (reductions(OursCentralStorage, graph_mode) ==
            reductions(NativeCentralStorage, graph_mode))


@pytest.mark.parametrize("n", REPLICAS)
@pytest.mark.parametrize("axis", [0, 1])
def test_gather(n, axis, mode):
  def program(strategy):
    return strategy.gather(_batches(strategy, [2] * n), axis=axis)

  ours, native = both(n, mode, program)
  assert_same(ours, native)


def test_reduce_and_gather_go_to_the_current_device():
  ours, native = pair(2)
  for strategy in (ours, native):
    x = _batches(strategy, [1, 1])
    with tf.device("/cpu:3"):
      assert strategy.reduce("SUM", x, axis=None).device == cpu(3)
      assert strategy.gather(x, axis=0).device == cpu(3)
    assert strategy.reduce("SUM", x, axis=None).device == cpu(0)
    assert strategy.gather(tf.constant([1.0]), axis=0).numpy().tolist() == [1.0]


@pytest.mark.parametrize("n", REPLICAS)
def test_experimental_local_results(n):
  ours, native = pair(n)
  for strategy in (ours, native):
    with strategy.scope():
      v = tf.Variable(1.0)
    assert strategy.experimental_local_results(v) == (v,)
    t = tf.constant(1.0)
    assert strategy.experimental_local_results(t) == (t,)
  results = [s.experimental_local_results(s.run(replica_float))
             for s in (ours, native)]
  assert_same(*results)


# -- StrategyExtended: reduce_to, batch_reduce_to, update ---------------------

def _destinations(strategy, variable, x):
  return {"device": "/cpu:3", "short": "cpu:1", "variable": variable,
          "tensor": tf.constant(0.0), "per_replica": x}


@pytest.mark.parametrize("n", (1, 2, 4))
def test_reduce_to_destinations(n):
  ours, native = pair(n)
  results = {}
  for name, strategy in (("ours", ours), ("native", native)):
    with strategy.scope():
      v = tf.Variable([0.0, 0.0])
      x = per_replica(strategy, lambda i: tf.fill([2], tf.cast(i, tf.float32)))
      out = {}
      for key, dest in _destinations(strategy, v, x).items():
        for op in ("SUM", "MEAN"):
          r = strategy.extended.reduce_to(op, x, dest)
          out[key, op] = (norm(r), devices(r))
      results[name] = out
  for key in results["native"]:
    value, device = results["ours"][key]
    native_value, native_device = results["native"][key]
    assert value == native_value, key
    if key[0] != "per_replica":
      assert device == native_device, key


@pytest.mark.parametrize("n", (2, 4))
def test_reduce_to_plain_value(n):
  ours, native = pair(n)
  for strategy in (ours, native):
    with strategy.scope():
      t = tf.constant([1.0, 2.0])
      assert strategy.extended.reduce_to("MEAN", t, "/cpu:0") is t
      with pytest.raises(ValueError, match="SUM"):
        strategy.extended.reduce_to("SUM", t, "/cpu:0")


@pytest.mark.parametrize("n", (1, 2))
def test_batch_reduce_to(n, mode):
  def program(strategy):
    with strategy.scope():
      x = per_replica(strategy, lambda i: tf.fill([2], tf.cast(i, tf.float32)))
      a, b = strategy.extended.batch_reduce_to(
          "MEAN", [(x, "/cpu:0"), (x, x)])
      return a, strategy.experimental_local_results(b)

  ours, native = both(n, mode, program)
  assert_same(ours, native)


@pytest.mark.parametrize("n", REPLICAS)
def test_update(n, mode):
  def program(strategy):
    with strategy.scope():
      v = tf.Variable([0.0, 0.0])
    got = []

    def fn(var, delta):
      got.append((isinstance(var, tf.Variable), type(var).__name__,
                  tf.distribute.in_cross_replica_context()))
      return var.assign_add(delta)

    def step():
      with strategy.scope():
        x = per_replica(strategy,
                        lambda i: tf.fill([2], tf.cast(i, tf.float32) + 1.0))
        strategy.extended.update(v, fn, args=(x,))
        ungrouped = strategy.extended.update(
            v, lambda var: var.assign_add([1.0, 1.0]), group=False)
        return tf.convert_to_tensor(v), len(ungrouped)

    result = run_mode(step)
    return result, got

  def run_mode(fn):
    return fn() if mode == "eager" else tf.function(fn)()

  (ours, ours_got), (native, native_got) = (program(s) for s in pair(n))
  assert_same(ours, native)
  assert [g[0] for g in ours_got] == [True]
  assert "Aggregating" not in ours_got[0][1]  # fn gets the plain variable
  assert ours_got[0][2] and native_got[0][2]


@pytest.mark.parametrize("n", (1, 2))
def test_update_non_slot_and_non_slot_devices(n):
  ours, native = pair(n)
  for strategy in (ours, native):
    with strategy.scope():
      a = tf.Variable(1.0, name="b_var")
      b = tf.Variable(2.0, name="a_var")
      assert strategy.extended.non_slot_devices([a, b]) is b
      out = strategy.extended.update_non_slot(b, lambda: tf.constant(1.0))
      assert out.device == b.device


def test_update_rejects_a_non_variable():
  ours, _ = pair(2)
  with ours.scope():
    with pytest.raises(ValueError, match="tf.Variable"):
      ours.extended.update(tf.constant(1.0), lambda v: v)


@pytest.mark.parametrize("n", (1, 2))
def test_broadcast_to(n):
  ours, native = pair(n)
  for strategy in (ours, native):
    with strategy.scope():
      t = tf.constant(1.0)
      assert strategy.extended.broadcast_to(3, "/cpu:1") == 3
      out = strategy.extended.broadcast_to(t, "/cpu:3")
      assert out.device == cpu(3) and float(out) == 1.0


def test_value_container_and_read_var():
  ours, native = pair(2)
  for strategy in (ours, native):
    with strategy.scope():
      v = tf.Variable(4.0)
      assert strategy.extended.value_container(v) is v
      assert float(strategy.extended.read_var(v)) == 4.0


def test_zero_plain_value_reduces_to_zeros():
  ours, _ = pair(2)
  with ours.scope():
    out = ours.extended.reduce_to("SUM", np.zeros([2]), "/cpu:0")
  np.testing.assert_array_equal(out, np.zeros([2]))


def test_parameter_device_validated():
  with pytest.raises(ValueError, match="parameter_device"):
    OursCentralStorage(compute_devices(2), parameter_device="")
