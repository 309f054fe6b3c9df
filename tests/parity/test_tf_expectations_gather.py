"""What TensorFlow's own strategy tests expect of gather, all_gather and reduce.

TensorFlow checks its one-device and central-storage strategies (the latter
on two accelerators; here two logical CPUs) for: concatenation along any
axis, pieces of different length along the gathered axis, errors for
pieces that cannot be joined, a fixed error phrase for ``IndexedSlices``,
gradients flowing back through ``all_gather``, and a few reduce facts. Each
test runs the same program on our strategy and on TensorFlow's and compares.
"""
import re

import pytest
import tensorflow as tf

from fixtures import strategies

pytestmark = pytest.mark.parity

KINDS = ["one_device", "central_storage"]


POINTS = {
    "one_device": strategies.Comparison("one_device", device="/cpu:0"),
    "central_storage": strategies.Comparison("central_storage", 2),
}


@pytest.fixture(params=KINDS)
def pair(request):
  return POINTS[request.param].pair()


def wrap(mode, fn):
  return fn if mode == "eager" else tf.function(fn)


def as_lists(values):
  return [v.numpy().tolist() for v in values]


def sparse():
  return tf.IndexedSlices(values=tf.constant([[3.0, 4.0]]),
                          indices=tf.constant([1]),
                          dense_shape=tf.constant([4, 2]))


# -- IndexedSlices: TensorFlow's error phrase ------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_gather_of_indexed_slices_names_them_like_tensorflow(kind, mode):
  for strategy in POINTS[kind].pair():
    call = wrap(mode, lambda v, s=strategy: s.gather(v, axis=0))
    with pytest.raises(NotImplementedError,
                       match="gather does not support IndexedSlices"):
      call(sparse())


@pytest.mark.parametrize("kind", KINDS)
def test_all_gather_of_indexed_slices_names_them_like_tensorflow(kind, mode):
  def per_replica(value):
    return tf.distribute.get_replica_context().all_gather(value, axis=0)

  for strategy in POINTS[kind].pair():
    with pytest.raises(NotImplementedError,
                       match="all_gather does not support IndexedSlices"):
      strategy.run(wrap(mode, per_replica), args=(sparse(),))


# -- equal pieces along every axis -------------------------------------------------

PIECES = [([5, 6, 7], 0), ([[5, 6, 7]], 0), ([[5, 6, 7]], 1),
          ([[[5, 6], [7, 8]]], 0), ([[[5, 6], [7, 8]]], 1),
          ([[[5, 6], [7, 8]]], 2)]


def _all_gather_on_every_replica(strategy, mode, dv, axis):
  """Each replica's ``all_gather`` of its piece of ``dv``, as local results."""
  def per_replica(value):
    ctx = tf.distribute.get_replica_context()
    return ctx.all_gather(tf.identity(value), axis=axis)

  return strategy.experimental_local_results(
      strategy.run(wrap(mode, per_replica), args=(dv,)))


@pytest.mark.parametrize("piece,axis", PIECES)
def test_gather_and_all_gather_concatenate_along_axis(pair, mode, piece,
                                                       axis):
  results = []
  for strategy in pair:
    n = strategy.num_replicas_in_sync
    dv = strategy.experimental_distribute_values_from_function(
        lambda _: tf.constant(piece))
    gathered = wrap(mode, lambda s=strategy, d=dv: s.gather(d, axis=axis))()
    everywhere = _all_gather_on_every_replica(strategy, mode, dv, axis)
    expected = tf.concat([tf.constant(piece)] * n, axis=axis).numpy().tolist()
    assert gathered.numpy().tolist() == expected
    assert as_lists(everywhere) == [expected] * n
    results.append((gathered.numpy().tolist(), as_lists(everywhere)))
  assert results[0] == results[1]


# -- pieces of different length along the gathered axis ------------------------

@pytest.mark.parametrize("axis", [0, 1])
def test_pieces_may_differ_along_the_gathered_axis(pair, mode, axis):
  def piece(ctx):
    size = ctx.replica_id_in_sync_group + 1
    return tf.fill((size, 1) if axis == 0 else (1, size), 7)

  outcomes = []
  for strategy in pair:
    n = strategy.num_replicas_in_sync
    total = n * (n + 1) // 2
    expected = tf.fill((total, 1) if axis == 0 else (1, total),
                       7).numpy().tolist()
    dv = strategy.experimental_distribute_values_from_function(piece)
    gathered = wrap(mode, lambda s=strategy, d=dv: s.gather(d, axis=axis))()
    everywhere = _all_gather_on_every_replica(strategy, mode, dv, axis)
    assert gathered.numpy().tolist() == expected
    assert as_lists(everywhere) == [expected] * n
    outcomes.append(as_lists(everywhere))
  assert outcomes[0] == outcomes[1]


def test_all_gather_of_a_nest_gathers_each_leaf(pair, mode):
  block = tf.constant([[[5, 6], [7, 8]]])

  def piece(ctx):
    return tf.fill((1, ctx.replica_id_in_sync_group + 1), 2)

  def per_replica(value):
    ctx = tf.distribute.get_replica_context()
    return ctx.all_gather([tf.identity(value), tf.identity(block)], axis=1)

  for strategy in pair:
    n = strategy.num_replicas_in_sync
    dv = strategy.experimental_distribute_values_from_function(piece)
    first, second = strategy.run(wrap(mode, per_replica), args=(dv,))
    expected_first = tf.fill((1, n * (n + 1) // 2), 2).numpy().tolist()
    expected_second = tf.concat([block] * n, axis=1).numpy().tolist()
    assert as_lists(strategy.experimental_local_results(first)) == (
        [expected_first] * n)
    assert as_lists(strategy.experimental_local_results(second)) == (
        [expected_second] * n)


# -- pieces that cannot be joined (several replicas only) ----------------------

def _mismatch_outcome(strategy, mode, piece, use_all_gather):
  dv = strategy.experimental_distribute_values_from_function(piece)

  def per_replica(value):
    ctx = tf.distribute.get_replica_context()
    return ctx.all_gather(tf.identity(value), axis=0)

  try:
    if use_all_gather:
      strategy.run(wrap(mode, per_replica), args=(dv,))
    else:
      wrap(mode, lambda: strategy.gather(dv, axis=0))()
  except (tf.errors.InvalidArgumentError, ValueError) as error:
    return str(error)
  raise AssertionError("joining mismatched pieces did not raise")


@pytest.mark.parametrize("use_all_gather", [False, True])
def test_other_dimension_mismatch_raises(mode, use_all_gather):
  def piece(ctx):
    return tf.fill((1, ctx.replica_id_in_sync_group + 1), 1)

  for strategy in POINTS["central_storage"].pair():
    message = _mismatch_outcome(strategy, mode, piece, use_all_gather)
    assert re.search(r"Dimension \d in both shapes must be equal", message)


@pytest.mark.parametrize("use_all_gather", [False, True])
def test_rank_mismatch_raises(mode, use_all_gather):
  def piece(ctx):
    return tf.ones(list(range(1, ctx.replica_id_in_sync_group + 2)))

  phrases = (["Ranks of all input tensors should match", "Shape mismatch"]
             if mode == "eager" else
             [r"Shape must be rank \d but is rank \d", "Shape mismatch"])
  for strategy in POINTS["central_storage"].pair():
    message = _mismatch_outcome(strategy, mode, piece, use_all_gather)
    assert any(re.search(p, message) for p in phrases), message


# -- gradients through all_gather ----------------------------------------------

@pytest.mark.parametrize("nested", [False, True])
def test_all_gather_gradient_sums_every_replicas_factor(pair, nested):
  @tf.function
  def step(factor):
    x = tf.constant([[1.5], [2.5]])
    ctx = tf.distribute.get_replica_context()
    if nested:
      joined = ctx.all_gather([x, tf.constant([[9.0], [9.0]])], axis=1)
    else:
      joined = ctx.all_gather(x, axis=1)
    return tf.gradients(tf.nest.map_structure(lambda j: j * factor, joined),
                        [x])[0]

  outcomes = []
  for strategy in pair:
    n = strategy.num_replicas_in_sync
    factors = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([float(ctx.replica_id_in_sync_group + 1)]))
    grads = strategy.experimental_local_results(
        strategy.run(step, args=(factors,)))
    total = float(n * (n + 1) // 2)
    assert as_lists(grads) == [[[total], [total]]] * n
    outcomes.append(as_lists(grads))
  assert outcomes[0] == outcomes[1]


# -- reduce facts from TensorFlow's common strategy tests ----------------------

def test_reduce_sum_of_ones_counts_replicas_with_and_without_scope(pair):
  for strategy in pair:
    n = strategy.num_replicas_in_sync
    ones = strategy.experimental_distribute_values_from_function(
        lambda _: tf.ones((), tf.float32))

    def total(s=strategy, v=ones):
      return s.reduce(tf.distribute.ReduceOp.SUM, value=v, axis=None)

    with strategy.scope():
      assert total().numpy() == n
      assert tf.function(total)().numpy() == n
    assert total().numpy() == n
    assert tf.function(total)().numpy() == n


def test_reduce_along_axis_of_run_result(pair):
  for strategy in pair:
    n = strategy.num_replicas_in_sync
    value = strategy.run(tf.function(lambda: tf.constant([1.0, 2.0])))
    assert strategy.reduce("MEAN", value, axis=0).numpy() == 1.5
    assert strategy.reduce("SUM", value, axis=0).numpy() == 3.0 * n


@pytest.mark.parametrize("nested", [False, True])
def test_extended_replica_context_all_reduce(pair, mode, nested):
  for strategy in pair:
    n = strategy.num_replicas_in_sync

    def body(s=strategy):
      def per_replica():
        value = ((tf.identity(1.0), tf.identity(1.0)) if nested
                 else tf.identity(1.0))
        return s.extended._replica_ctx_all_reduce("SUM", value)  # pylint: disable=protected-access
      return s.experimental_local_results(s.run(per_replica))

    first = wrap(mode, body)()[0]
    got = [float(x) for x in tf.nest.flatten(first)]
    assert got == [float(n)] * (2 if nested else 1)


def test_replica_id_captured_in_a_retraced_function(pair):
  for strategy in pair:
    made = {}

    @tf.function
    def replica_id():
      return tf.distribute.get_replica_context().replica_id_in_sync_group

    @tf.function
    def outer(s=strategy):
      if "v" not in made:
        made["v"] = tf.Variable(0.0)
      return s.experimental_local_results(s.run(replica_id))

    ids = [int(i) for i in outer()]
    assert ids == list(range(strategy.num_replicas_in_sync))


def test_cluster_resolver_is_none(pair):
  for strategy in pair:
    assert strategy.cluster_resolver is None
    with strategy.scope():
      assert strategy.cluster_resolver is None
