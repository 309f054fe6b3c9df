"""Smaller v1 graph-mode behaviours compared with native
``tf.compat.v1.distribute``: what ``tf.compat.v1.get_variable`` makes in a
strategy's scope (partitioners), checked without running a Session.
"""
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from support.v1 import CONFIGS, make_native, make_ours, native_session_config
import support

pytestmark = pytest.mark.parity


def _partitioned(make, config, graph_mode, inside_run):
  """Type, variable names and checkpoint keys of a variable made with a
  partitioner in the strategy's scope (or inside its ``run``)."""
  graph = tf.Graph()
  with (graph.as_default() if graph_mode else tf.init_scope()):
    strategy = make(config)
    def create():
      with tf.compat.v1.variable_scope("s", reuse=tf.compat.v1.AUTO_REUSE):
        return tf.compat.v1.get_variable(
            "p", shape=[4, 2],
            partitioner=tf.compat.v1.fixed_size_partitioner(2),
            initializer=tf.compat.v1.ones_initializer())
    if inside_run:
      made = []
      strategy.run(lambda: made.append(create()))
      v = made[0]
    else:
      with strategy.scope():
        v = create()
    parts = list(v) if type(v).__name__ == "PartitionedVariable" else [v]
    names = [p.name for p in parts]
    shapes = [p.shape.as_list() for p in parts]
    return type(v).__name__, names, shapes


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("graph_mode", [True, False], ids=["graph", "eager"])
def test_partitioner_in_scope_matches_native(config, graph_mode):
  # Native drops the partitioner (one whole variable) except for
  # CentralStorageStrategy while building a graph.
  ours = _partitioned(make_ours, config, graph_mode, inside_run=False)
  native = _partitioned(make_native, config, graph_mode, inside_run=False)
  assert ours == native


@pytest.mark.parametrize("config", ["one_device", "central_storage/2"])
def test_partitioner_inside_run_in_graph_matches_native(config):
  ours = _partitioned(make_ours, config, True, inside_run=True)
  native = _partitioned(make_native, config, True, inside_run=True)
  assert ours == native


@pytest.mark.parametrize("config", ["one_device", "central_storage/2"])
def test_scope_keeps_names_and_variable_scope(config):
  # The strategy's variable scope (holding its getter) does not change the
  # names of variables, and a variable_scope left open is still reported.
  strategy = make_ours(config)
  graph = tf.Graph()
  with graph.as_default():
    with tf.compat.v1.variable_scope("outer"):
      with strategy.scope():
        v = tf.compat.v1.get_variable("v", shape=[2])
        with tf.compat.v1.variable_scope("inner"):
          w = tf.compat.v1.get_variable("w", shape=[2])
      assert tf.compat.v1.get_variable_scope().name == "outer"
    assert (v.name, w.name) == ("outer/v:0", "outer/inner/w:0")
    scope = strategy.scope()
    scope.__enter__()
    inner = tf.compat.v1.variable_scope("left_open")
    inner.__enter__()
    with pytest.raises(RuntimeError, match="variable_scope"):
      scope.__exit__(None, None, None)
    inner.__exit__(None, None, None)
    scope.__exit__(None, None, None)
    assert tf.compat.v1.get_variable_scope().name == ""
    assert not tf.distribute.has_strategy()


def _initializer_kinds(make, config, graph_mode):
  """What ``initialize()`` / ``initializer`` give for both v1 iterators, and
  whether TF1 code can use the result as an op (``.run()``, ``.name``,
  ``control_dependencies``)."""
  graph = tf.Graph()
  with (graph.as_default() if graph_mode else tf.init_scope()):
    strategy = make(config)
    dataset = tf.data.Dataset.range(32).batch(4)
    iterators = [strategy.make_dataset_iterator(dataset),
                 strategy.make_input_fn_iterator(lambda _: dataset)]
    kinds = []
    for iterator in iterators:
      for init in (iterator.initialize(), iterator.initializer):
        kinds.append(type(init).__name__)
        if graph_mode:
          assert init.name  # usable as an op
          with tf.control_dependencies([init]):
            tf.constant(0)
    if graph_mode:
      config_proto = native_session_config(strategy)
      with tf.compat.v1.Session(graph=graph, config=config_proto) as sess:
        for iterator in iterators:
          iterator.initializer.run()
          first = strategy.experimental_local_results(iterator.get_next())
          kinds.append([v.tolist() for v in sess.run(list(first))])
    return kinds


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("graph_mode", [True, False], ids=["graph", "eager"])
def test_iterator_initializer_is_an_op_as_in_native(config, graph_mode):
  # A tf.Operation in graphs (so `.run()`, `.name` and control dependencies
  # work), None eagerly.
  ours = _initializer_kinds(make_ours, config, graph_mode)
  native = _initializer_kinds(make_native, config, graph_mode)
  assert ours == native
  assert ours[0] == ("Operation" if graph_mode else "NoneType")


FIRST_TOUCH = (support.FIXTURES /
               "first_touch_in_graph.py")


@pytest.mark.subprocess
@pytest.mark.parametrize("kind", ["one_device", "central_storage"])
def test_strategy_made_first_in_a_graph_keeps_soft_placement(kind):
  # TensorFlow initialises its runtime on first use and, if that happens
  # while a TF1 graph is the default, turns soft placement off for good.
  # Making (and configuring) a strategy in a graph must leave it as
  # TensorFlow's own strategies do: on.
  results = {}
  for impl in ("native", "ours"):
    done = subprocess.run(
        [sys.executable, str(FIRST_TOUCH), impl, kind],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results[impl] = json.loads(done.stdout.strip().splitlines()[-1])
  assert results["ours"] == results["native"] == {
      "soft_placement": True, "op_on_missing_device_ran": True}


def _input_devices(make, config):
  """Devices of the per-replica tensors a v1 iterator gives in a TF1 graph,
  plain, under another device scope, and passed through experimental_run."""
  with tf.Graph().as_default():
    strategy = make(config)
    iterator = strategy.make_dataset_iterator(
        tf.data.Dataset.range(64).batch(8))

    def devices(value):
      return [v.device for v in strategy.experimental_local_results(value)]
    found = [devices(iterator.get_next())]
    with tf.device("/cpu:2"):
      found.append(devices(iterator.get_next()))
    found.append(devices(strategy.experimental_run(lambda x: x, iterator)))
    return found


@pytest.mark.parametrize("config", CONFIGS)
def test_input_tensors_name_the_replica_device_in_graphs(config):
  assert _input_devices(make_ours, config) == _input_devices(make_native,
                                                             config)


def _variable_placements(make, config):
  """Device and colocation group of every variable op in a TF1 graph: made
  in the scope under a user's device and colocation scopes, inside ``run``,
  and as a v1 optimizer's slots."""
  with tf.Graph().as_default() as graph:
    strategy = make(config)
    with strategy.scope():
      anchor = tf.constant(1.0, name="anchor")
      with tf.compat.v1.colocate_with(anchor):
        tf.Variable(2.0, name="under_colocation")
      with tf.device("/cpu:1"):
        tf.Variable(3.0, name="under_device")
      weights = tf.Variable([1.0, 2.0], name="weights")
      optimizer = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9)

      def step():
        bias = tf.Variable(1.0, name="made_in_run")
        return optimizer.minimize(tf.reduce_sum(weights * weights) + bias)

      strategy.run(step)
  return sorted(
      (op.name, op.device, list(op.node_def.attr["_class"].list.s))
      for op in graph.get_operations()
      if op.type in ("VarHandleOp", "VariableV2"))


@pytest.mark.parametrize("config", CONFIGS)
def test_variable_device_and_colocation_match_native(config):
  # CentralStorage clears the caller's device and colocation scopes for its
  # variables (also inside run); slots are colocated with their variable.
  ours = _variable_placements(make_ours, config)
  assert ours == _variable_placements(make_native, config)
  assert ("weights/Momentum", ours[0][1], [b"loc:@weights"]) in ours


def _merge_fn_op_names(make, config, in_function):
  """Names of ops a replica function and its merge_fn make, under a name
  scope and then under a (non-root) v1 variable scope."""
  names = []

  def merge_fn(unused_strategy, x):
    names.append(tf.constant(1.0, name="merged").op.name)
    return x

  def replica_fn():
    with tf.name_scope("outer"):
      names.append(tf.constant(0.0, name="replica").op.name)
      tf.distribute.get_replica_context().merge_call(merge_fn, args=(1.0,))
    with tf.compat.v1.variable_scope("vs"), tf.name_scope("inner"):
      tf.distribute.get_replica_context().merge_call(merge_fn, args=(1.0,))

  if in_function:
    strategy = make(config)
    tf.function(lambda: strategy.run(replica_fn)).get_concrete_function()
  else:
    with tf.Graph().as_default():
      make(config).run(replica_fn)
  return names


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("in_function", [False, True],
                         ids=["graph", "function"])
def test_merge_fn_op_names_match_native(config, in_function):
  # CentralStorage runs merge_fn in the replica's variable scope entered
  # again, which adds the variable scope's name to the name scope.
  ours = _merge_fn_op_names(make_ours, config, in_function)
  assert ours == _merge_fn_op_names(make_native, config, in_function)
  expected = "inner/merged" if config == "one_device" else "inner/vs/merged"
  assert ours[-1] == "vs/" + expected


def _grouped(make, config, graph_mode):
  """What ``strategy.group`` returns for one op, one tensor, one replica
  result and two tensors: whether it is the value (or its op) itself."""
  graph = tf.Graph()
  with (graph.as_default() if graph_mode else tf.init_scope()):
    strategy = make(config)
    with strategy.scope():
      v = tf.Variable(0.0)
    t = tf.constant(1.0)
    op = t.op if graph_mode else None
    single = strategy.run(lambda: tf.identity(t))
    results = []
    for value in ([t] if graph_mode else [t, v]):
      got = strategy.group(value)
      results.append(got is (value.op if graph_mode else value))
    if graph_mode:
      results.append(strategy.group(op) is op)
    got = strategy.group(single)
    results.append(type(got).__name__ if got is not None else None)
    results.append(strategy.group([t, t]) is None)
    return results


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("graph_mode", [True, False], ids=["graph", "eager"])
def test_group_of_one_value_returns_it_as_native(config, graph_mode):
  ours = _grouped(make_ours, config, graph_mode)
  assert ours == _grouped(make_native, config, graph_mode)
  assert ours[0]  # the single value (graph: its op) comes back itself


EAGER_BLOCK = (support.FIXTURES /
               "eager_block_in_tf1_process.py")


@pytest.mark.subprocess
def test_eager_block_in_a_tf1_process_runs_every_replica_eagerly():
  # With eager execution disabled process-wide, run inside an eager block:
  # replica threads start in graph mode and must run eagerly anyway.
  results = {}
  for impl in ("native", "ours"):
    done = subprocess.run(
        [sys.executable, str(EAGER_BLOCK), impl],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results[impl] = json.loads(done.stdout.strip().splitlines()[-1])
  assert results["ours"] == results["native"] == {
      # Python values equal on every replica come back once.
      "eager_in_replicas": [True], "all_reduce": [3.0, 3.0],
      "merge_in_init_scope": [True], "variable": 4.0}


def _initializer_devices(make, config):
  with tf.Graph().as_default():
    strategy = make(config)
    iterators = [
        strategy.make_dataset_iterator(tf.data.Dataset.range(8).batch(4)),
        strategy.make_input_fn_iterator(
            lambda _: tf.data.Dataset.range(8).batch(2))]
    return [(it.initializer.type, it.initializer.device) for it in iterators]


@pytest.mark.parametrize("config", CONFIGS)
def test_iterator_initializer_device_matches_native(config):
  # One replica: the replica's device (its input worker); several: the host.
  assert (_initializer_devices(make_ours, config) ==
          _initializer_devices(make_native, config))


SELECT_REPLICA = (support.FIXTURES /
                  "tf_internal_select_replica.py")


@pytest.mark.subprocess
def test_tf_internal_select_replica_passes_our_values_through_whole():
  # docs/differences.md, "Per-replica values are the public types only":
  # TensorFlow's private select_replica knows only its own private class.
  # Run apart: the script imports that private helper.
  done = subprocess.run([sys.executable, str(SELECT_REPLICA)],
                        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  results = json.loads(done.stdout.strip().splitlines()[-1])
  assert results["native"] == {"picked_type": results["native"]["picked_type"],
                               "picked_is_tensor": True,
                               "picked_value": [2, 3], "public_value": [2, 3]}
  assert results["ours"] == {"picked_type": "PerReplica",
                             "picked_is_tensor": False, "picked_value": None,
                             "public_value": [2, 3]}
