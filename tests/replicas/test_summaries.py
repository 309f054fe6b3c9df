"""Only replica 0 writes summaries, on every path, as in native TF."""
import glob

import pytest
import tensorflow as tf

from fixtures import strategies


def _count_written(logdir):
  count = 0
  for path in glob.glob(f"{logdir}/*"):
    for event in tf.compat.v1.train.summary_iterator(path):
      count += len(event.summary.value)
  return count


def _replica_fn(with_merge_call):
  def fn():
    ctx = tf.distribute.get_replica_context()
    if with_merge_call:
      ctx.merge_call(lambda strategy: None)
    tf.summary.write("value", tf.cast(ctx.replica_id_in_sync_group, tf.float32))
    return tf.summary.should_record_summaries()
  return fn


def _written_and_flags(strategy, logdir, with_merge_call, use_function):
  writer = tf.summary.create_file_writer(logdir)
  fn = _replica_fn(with_merge_call)
  with writer.as_default(step=0):
    call = lambda: strategy.run(fn)
    flags = tf.function(call)() if use_function else call()
  writer.flush()
  flags = [bool(f) for f in strategy.experimental_local_results(flags)]
  return _count_written(logdir), flags


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [1, 2, 4])
@pytest.mark.parametrize("with_merge_call", [False, True])
@pytest.mark.parametrize("use_function", [False, True])
def test_only_replica_zero_writes(tmp_path, replicas, with_merge_call,
                                  use_function):
  ours, native = strategies.pair("central_storage", replicas)
  expected = _written_and_flags(native, str(tmp_path / "native"),
                                with_merge_call, use_function)
  got = _written_and_flags(ours, str(tmp_path / "ours"), with_merge_call,
                           use_function)
  assert got == expected
  assert got[1] == [True] + [False] * (replicas - 1)
  # The summary state is restored once the run is over.
  assert tf.summary.should_record_summaries().numpy() == False  # no writer
