"""Smaller v1 graph-mode behaviours compared with native
``tf.compat.v1.distribute``: what ``tf.compat.v1.get_variable`` makes in a
strategy's scope (partitioners), checked without running a Session.
"""
import pytest
import tensorflow as tf

from v1_support import CONFIGS, make_native, make_ours


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
