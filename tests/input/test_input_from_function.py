"""distribute_datasets_from_function and distribute_values_from_function
over several replicas, against TensorFlow 2.21's CentralStorageStrategy.

Native behaviour measured (and asserted live below): ``dataset_fn`` is
called once with InputContext(1, 0, n); its elements go to replicas
0, 1, ..., n-1 in turn.  When the dataset ends part-way through a round,
``next``/``get_next`` stop without returning that round, while
``get_next_as_optional`` and ``for`` loops inside ``tf.function`` return it
with empty batches for the replicas that got nothing.
"""
import pytest
import tensorflow as tf

from compat_distribute import input as input_lib
from compat_distribute.input import build
from conftest import cpu
from support.input import fake_workers
from support.input import local_values
from support.input import native
from support.input import native_local_values


def _dataset(size=5, batch=1):
  return tf.data.Dataset.range(size).batch(batch)


def _ours(n, dataset_fn, options=None):
  return input_lib.distribute_datasets_from_function(fake_workers(n),
                                                     dataset_fn, options)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_dataset_fn_called_once_with_context(n):
  contexts = []

  def dataset_fn(ctx):
    contexts.append(ctx)
    return _dataset()

  _ours(n, dataset_fn)
  assert len(contexts) == 1
  ctx = contexts[0]
  assert isinstance(ctx, tf.distribute.InputContext)
  assert (ctx.num_input_pipelines, ctx.input_pipeline_id,
          ctx.num_replicas_in_sync) == (1, 0, n)
  native_contexts = []
  native(n).distribute_datasets_from_function(
      lambda c: native_contexts.append(c) or _dataset())
  c = native_contexts[0]
  assert (c.num_input_pipelines, c.input_pipeline_id,
          c.num_replicas_in_sync) == (1, 0, n)


@pytest.mark.slow
@pytest.mark.parametrize("size", [4, 5, 7])
@pytest.mark.parametrize("n", [2, 4])
def test_order_and_partial_round_match_native(n, size):
  strategy = native(n)
  native_dist = strategy.distribute_datasets_from_function(
      lambda _: _dataset(size))
  dist = _ours(n, lambda _: _dataset(size))
  # next(): whole rounds only.
  expected = [native_local_values(strategy, x) for x in native_dist]
  assert [local_values(x, n) for x in dist] == expected
  assert expected[0] == [[i] for i in range(n)]
  # get_next_as_optional: the partial round too, with empty batches.
  expected_opt, got_opt = [], []
  native_it, it = iter(native_dist), iter(dist)
  while True:
    opt, native_opt = it.get_next_as_optional(), native_it.get_next_as_optional()
    assert bool(opt.has_value()) == bool(native_opt.has_value())
    if not opt.has_value():
      break
    expected_opt.append(native_local_values(strategy, native_opt.get_value()))
    got_opt.append(local_values(opt.get_value(), n))
  assert got_opt == expected_opt


@pytest.mark.slow
@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_for_loop_in_function_sees_partial_round_like_native(n, drop):
  def count_and_sum(strategy, dist):
    @tf.function
    def loop(d):
      total, steps = tf.constant(0, tf.int64), tf.constant(0)
      for x in d:
        parts = (strategy.experimental_local_results(x) if strategy else
                 (x.values if n > 1 else (x,)))
        total += tf.add_n([tf.reduce_sum(p) for p in parts])
        steps += 1
      return int(total), int(steps)
    return loop(dist)

  def dataset_fn(_):  # static batch shapes with drop_remainder
    return tf.data.Dataset.range(13).batch(2, drop_remainder=drop)

  strategy = native(n)
  expected = count_and_sum(
      strategy, strategy.distribute_datasets_from_function(dataset_fn))
  assert count_and_sum(None, _ours(n, dataset_fn)) == expected


@pytest.mark.parametrize("n", [2, 4])
def test_get_next_at_partial_round_raises_out_of_range(n, mode):
  it = iter(_ours(n, lambda _: _dataset(n + 1)))
  read = it.get_next if mode == "eager" else tf.function(lambda: it.get_next())
  assert local_values(read(), n) == [[i] for i in range(n)]
  with pytest.raises(tf.errors.OutOfRangeError):
    read()


@pytest.mark.parametrize("n", [2, 4])
def test_values_on_replica_devices(n):
  value = next(iter(_ours(n, lambda _: _dataset(8))))
  assert [v.device for v in value.values] == [cpu(i) for i in range(n)]


@pytest.mark.parametrize("n", [2, 4])
def test_element_spec_matches_native(n):
  def fn(_):
    return tf.data.Dataset.range(6).batch(2).map(lambda x: {"a": x, "b": (x,)})

  assert (repr(_ours(n, fn).element_spec) ==
          repr(native(n).distribute_datasets_from_function(fn).element_spec))


def test_dataset_fn_must_return_a_dataset():
  with pytest.raises(TypeError) as info:
    _ours(2, lambda ctx: [1, 2, 3])
  message = str(info.value)
  assert "list" in message and "[1, 2, 3]" in message
  assert "must return a tf.data.Dataset" in message
  assert "get_per_replica_batch_size" in message
  assert isinstance(info.value, build.NotADatasetError)
  with pytest.raises(TypeError, match="expects a function"):
    _ours(2, _dataset())


def test_dataset_fn_runs_on_input_device():
  seen = []

  def fn(_):
    seen.append(tf.constant(0).device)
    return _dataset()

  input_lib.distribute_datasets_from_function(fake_workers(2, host=2), fn,
                                              None)
  assert seen == [cpu(2)]


@pytest.mark.parametrize("n", [1, 2, 4])
def test_distribute_values_matches_native_values(n):
  def value_fn(ctx):
    return {"id": tf.constant(ctx.replica_id_in_sync_group),
            "n": ctx.num_replicas_in_sync,
            "pair": (tf.fill([2], ctx.replica_id_in_sync_group),)}

  strategy = native(n)
  expected = native_local_values(
      strategy, strategy.experimental_distribute_values_from_function(value_fn))
  ours = input_lib.distribute_values_from_function(fake_workers(n), value_fn)
  if n == 1:
    assert local_values(ours, 1) == expected
  else:
    assert local_values(ours, n) == expected
    assert [v.device for v in ours["id"].values] == [cpu(i) for i in range(n)]


def test_distribute_values_context_and_wrapping():
  contexts = []

  def value_fn(ctx):
    contexts.append(ctx)
    return ctx.replica_id_in_sync_group

  result = input_lib.distribute_values_from_function(fake_workers(3), value_fn)
  assert result.values == (0, 1, 2)
  assert [(c.replica_id_in_sync_group, c.num_replicas_in_sync)
          for c in contexts] == [(0, 3), (1, 3), (2, 3)]
  assert all(isinstance(c, tf.distribute.experimental.ValueContext)
             for c in contexts)
  # One replica: the value itself, unless the strategy asks for wrapping
  # (TensorFlow's CentralStorageStrategy returns a one-value PerReplica).
  assert input_lib.distribute_values_from_function(fake_workers(1),
                                                   value_fn) == 0
  wrapping = fake_workers(1, wrap_single_replica_values=True)
  assert input_lib.distribute_values_from_function(wrapping,
                                                   value_fn).values == (0,)
  with pytest.raises(TypeError, match="callable value_fn"):
    input_lib.distribute_values_from_function(fake_workers(2), 3)


def _steps_with_flag(strategy, flag, dataset_fn, how):
  """Every step's local results, read with ``how`` after setting ``flag``
  on ``strategy.extended`` (None: no flag)."""
  if flag is not None:
    setattr(strategy.extended, flag, True)
  dist = strategy.distribute_datasets_from_function(dataset_fn)
  local = lambda step: [x.numpy().tolist()  # pylint: disable=g-long-lambda
                        for x in strategy.experimental_local_results(step)]
  if how == "for":
    return [local(step) for step in dist]
  iterator = iter(dist)
  read = tf.function(lambda it: it.get_next()) if how == "function" else next
  steps = []
  while True:
    try:
      steps.append(local(read(iterator)))
    except (StopIteration, tf.errors.OutOfRangeError):
      return steps


@pytest.mark.slow
@pytest.mark.parametrize("how", ["for", "next", "function"])
@pytest.mark.parametrize("flag", [
    None, "experimental_enable_get_next_as_optional",
    "enable_partial_batch_handling"])
@pytest.mark.parametrize("dataset", ["partial", "static", "infinite"])
def test_partial_batch_flag_on_extended_as_native(how, flag, dataset):
  # TensorFlow's input tests switch partial-round handling on through
  # strategy.extended: then a last incomplete round is returned (with empty
  # batches) unless every shape is static or the input is infinite.
  fn = {
      "partial": lambda _: tf.data.Dataset.range(9).batch(2),
      "static": lambda _: tf.data.Dataset.range(9).batch(
          2, drop_remainder=True),
      "infinite": lambda _: tf.data.Dataset.range(3).repeat().batch(2),
  }[dataset]
  if dataset == "infinite":
    fn = (lambda inner: lambda ctx: inner(ctx).take(5))(fn)
  from compat_distribute import v2  # pylint: disable=g-import-not-at-top
  ours = _steps_with_flag(
      v2.experimental.CentralStorageStrategy([cpu(0), cpu(1)]), flag, fn, how)
  expected = _steps_with_flag(native(2), flag, fn, how)
  assert ours == expected
  if dataset == "partial" and flag:
    assert ours[-1] == [[8], []]
