"""tf.function and SavedModel interplay, compared with native TensorFlow:
``run`` of a ``tf.function`` (traced anew for the replicas, as TF does even
with one device), public per-replica types, and SavedModels whose functions
take or return per-replica values.
"""
import tempfile

import pytest
import tensorflow as tf

from test_api_parity import KINDS as CONFIGS  # pylint: disable=g-bad-import-order
from test_api_parity import make

pytestmark = pytest.mark.parity


def _run_of_a_tf_function(strategy):
  """Trace counts and what the body sees when ``run`` gets a tf.function,
  plus the error type for an exception raised while tracing it."""
  seen = []

  @tf.function
  def f(x):
    seen.append(tf.distribute.has_strategy())
    return x * 2.0

  f(tf.constant(1.0))  # a trace outside any strategy first
  result = strategy.run(f, args=(tf.constant(1.0),))
  values = [float(v) for v in strategy.experimental_local_results(result)]

  @tf.function
  def broken(x):
    raise KeyError("raised while tracing")

  try:
    strategy.run(broken, args=(tf.constant(1.0),))
    error = None
  except Exception as e:  # pylint: disable=broad-except
    error = type(e).__name__
  return f.experimental_get_tracing_count(), seen, values, error


@pytest.mark.parametrize("config", CONFIGS)
def test_run_of_a_tf_function_traces_like_native(config):
  assert (_run_of_a_tf_function(make(config, native=False)) ==
          _run_of_a_tf_function(make(config, native=True)))


def test_per_replica_values_are_the_public_per_replica_type():
  per_replica_type = tf.types.experimental.distributed.PerReplica
  for native in (False, True):
    strategy = make("central_2", native)
    from_run = strategy.run(lambda: tf.constant(1.0))
    from_fn = strategy.experimental_distribute_values_from_function(
        lambda _: tf.constant(1.0))
    element = next(iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.range(8).batch(4))))
    for value in (from_run, from_fn, element):
      assert isinstance(value, per_replica_type), (native, value)


def _saved_and_loaded(strategy):
  """A module whose functions return and take per-replica values, saved and
  loaded without a strategy; the loaded functions' results."""
  per_replica = strategy.experimental_distribute_values_from_function(
      lambda ctx: tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 1.0)

  class Model(tf.Module):

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def per_replica_output(self, x):
      return strategy.run(lambda v: v + tf.cast(
          tf.distribute.get_replica_context().replica_id_in_sync_group,
          tf.float32), args=(x,))

    @tf.function(input_signature=[tf.type_spec_from_value(per_replica)])
    def per_replica_input(self, x):
      return strategy.reduce("SUM", x, axis=None)

  with tempfile.TemporaryDirectory() as path:
    with pytest.warns(UserWarning, match="PerReplicaSpec") if not type(
        strategy).__module__.startswith("tensorflow") else _nothing():
      tf.saved_model.save(Model(), path)
    loaded = tf.saved_model.load(path)
    output = loaded.per_replica_output(tf.constant(1.0))
    return (type(output).__name__,
            [float(v) for v in output.values],
            float(loaded.per_replica_input(per_replica)))


class _nothing:  # pylint: disable=invalid-name
  def __enter__(self):
    return None

  def __exit__(self, *exc):
    return False


def test_saved_model_with_per_replica_values_like_native():
  ours = _saved_and_loaded(make("central_2", native=False))
  native = _saved_and_loaded(make("central_2", native=True))
  assert ours == native == ("PerReplica", [1.0, 2.0], 3.0)
