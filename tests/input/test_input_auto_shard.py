"""Each worker's share of ``experimental_distribute_dataset`` on a
``MultiWorkerMirroredStrategy`` cluster, by auto-shard policy.

MEASURED is what TensorFlow 2.21's own ``MultiWorkerMirroredStrategy`` gave
on two workers of one replica each (tests/fixtures/mwms_shards.py run on
both tasks of a loopback cluster, TF_USE_LEGACY_KERAS=1): per step,
[worker 0's batch, worker 1's batch].  ``range`` is
``Dataset.range(16).batch(4)``; ``files`` reads four text files of four
numbers each (file ``f`` holds ``100 f`` to ``100 f + 3``), ``batch(4)``.
Here the two workers are two logical CPUs of this process (the input layer
does not care where a worker's host is); the multi-worker tests
(tests/clients/cluster/test_multi_worker_data.py) compare ours with
TensorFlow's on a real two-task cluster.

Where the workers' shares hold different numbers of steps, TensorFlow's
strategy goes on until every share has ended, a worker whose share ended
giving its replicas empty batches (measured there; UNEVEN_FILES): so do
ours, read every way, counted (known cardinalities) or not.
"""
import pytest
import tensorflow as tf

from compat_distribute import input as input_lib
from compat_distribute.input import auto_shard
from conftest import cpu
from support.input import fake_workers
from support.input import local_values
from support.input import to_list

Policy = tf.data.experimental.AutoShardPolicy
RANGE_DATA = [[[0, 1], [2, 3]], [[4, 5], [6, 7]], [[8, 9], [10, 11]],
              [[12, 13], [14, 15]]]
FILES_FILE = [[[0, 1], [100, 101]], [[2, 3], [102, 103]],
              [[200, 201], [300, 301]], [[202, 203], [302, 303]]]
MEASURED = {
    ("range", None): RANGE_DATA,  # AUTO: no files, so DATA
    ("range", Policy.DATA): RANGE_DATA,
    ("range", Policy.OFF): [[[i, i + 1]] * 2 for i in range(0, 16, 2)],
    ("partial", Policy.DATA): [[[0, 1], [2, 3]], [[4, 5], [6, 7]],
                               [[8], [9]]],
    ("files", None): FILES_FILE,  # AUTO: files, so FILE
    ("files", Policy.FILE): FILES_FILE,
    ("files", Policy.DATA): [[[0, 1], [2, 3]], [[100, 101], [102, 103]],
                             [[200, 201], [202, 203]],
                             [[300, 301], [302, 303]]],
    ("files", Policy.OFF): [[[f + i, f + i + 1]] * 2 for f in
                            (0, 100, 200, 300) for i in (0, 2)],
}


# FILE over three files on two workers: per step, [values, shape] of each
# worker's replica (TensorFlow 2.21's strategy gives these,
# tests/clients/cluster/test_multi_worker_data.py).
UNEVEN_FILES = [[[[0, 1], [2]], [[100, 101], [2]]],
                [[[2, 3], [2]], [[102, 103], [2]]],
                [[[200, 201], [2]], [[], [0]]],
                [[[202, 203], [2]], [[], [0]]]]
TWO_WORKERS = ((cpu(0), (cpu(0),)), (cpu(1), (cpu(1),)))


def text_files(folder, count):
  """``count`` files of four numbers (file ``f``: ``100 f`` to ``100 f + 3``)."""
  names = []
  for f in range(count):
    names.append(str(folder / f"part-{f}.txt"))
    with open(names[-1], "w") as out:
      out.write("".join(f"{100 * f + i}\n" for i in range(4)))
  return names


def numbers(names, policy=Policy.FILE):
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = policy
  return tf.data.TextLineDataset(names).map(
      lambda line: tf.strings.to_number(line, tf.int64)).batch(4).with_options(
          options)


def test_each_worker_reads_what_tensorflows_strategy_gives_it(tmp_path):
  names = text_files(tmp_path, 4)

  def source(kind, policy):
    if kind == "files":
      dataset = tf.data.TextLineDataset(names).map(
          lambda line: tf.strings.to_number(line, tf.int64)).batch(4)
    else:
      dataset = tf.data.Dataset.range(16 if kind == "range" else 10).batch(4)
    options = tf.data.Options()
    if policy is not None:
      options.experimental_distribute.auto_shard_policy = policy
    return dataset.with_options(options)

  workers = fake_workers(2, per_worker=((cpu(0), (cpu(0),)),
                                        (cpu(1), (cpu(1),))), auto_shard=True)
  options = tf.distribute.InputOptions()
  for (kind, policy), expected in MEASURED.items():
    distributed = input_lib.distribute_dataset(workers, source(kind, policy),
                                               options)
    assert [local_values(x, 2) for x in distributed] == expected, (kind,
                                                                   policy)
  # Two replicas per worker (TensorFlow's rule, not measured: no GPUs here):
  # each batch cut into 4 pieces, each worker keeps every second piece from
  # its own index, its replicas taking the next two each step.
  pairs = fake_workers(4, per_worker=((cpu(0), (cpu(0), cpu(1))),
                                      (cpu(2), (cpu(2), cpu(3)))),
                       auto_shard=True)
  distributed = input_lib.distribute_dataset(
      pairs, source("range", Policy.DATA), options)
  assert [local_values(x, 4) for x in distributed] == [
      [[i], [i + 2], [i + 1], [i + 3]] for i in range(0, 16, 4)]
  # FILE where nothing reads files: TensorFlow's error, on the first worker.
  with pytest.raises(tf.errors.NotFoundError,
                     match="Found an unshardable source dataset"):
    input_lib.distribute_dataset(workers, source("range", Policy.FILE),
                                 options)
  with pytest.raises(auto_shard.UnevenWorkersError,
                     match=r"got \[2, 1\] replicas per worker"):
    auto_shard.replicas_per_worker([2, 1])


def shaped(step):
  """A step as [[values, shape] per replica]."""
  return [[to_list(v), v.shape.as_list()] for v in step.values]


def every_read(distributed):
  """The steps read each way: eager ``next``, ``get_next`` inside a
  ``tf.function``, ``get_next_as_optional`` eagerly and inside one."""
  read_next = tf.function(lambda iterator: iterator.get_next())
  read_optional = tf.function(lambda iterator: iterator.get_next_as_optional())
  found = {"next": [shaped(x) for x in distributed]}
  for name, read in (("function", read_next),
                     ("optional", lambda it: it.get_next_as_optional()),
                     ("function optional", read_optional)):
    iterator, steps = iter(distributed), []
    while True:
      try:
        value = read(iterator)
      except tf.errors.OutOfRangeError:
        break
      if name.endswith("optional"):
        if not value.has_value():
          break
        value = value.get_value()
      steps.append(shaped(value))
    found[name] = steps
  return found


@tf.function
def steps_and_sum(distributed):
  """``reduce`` inside a ``tf.function`` (a ``for`` loop's way)."""
  def add(state, step):
    total = tf.add_n([tf.reduce_sum(v) for v in step.values])
    return state + tf.stack([tf.constant(1, tf.int64), total])
  return distributed.reduce(tf.zeros([2], tf.int64), add)


def assert_read_every_way(distributed, expected):
  for name, steps in every_read(distributed).items():
    assert steps == expected, name
  total = sum(sum(v) for step in expected for v, _ in step)
  assert steps_and_sum(distributed).numpy().tolist() == [len(expected), total]


def test_a_worker_whose_share_ended_gives_empty_batches_until_all_end(
    tmp_path):
  workers = fake_workers(2, per_worker=TWO_WORKERS, auto_shard=True)
  pairs = fake_workers(4, per_worker=((cpu(0), (cpu(0), cpu(1))),
                                      (cpu(2), (cpu(2), cpu(3)))),
                       auto_shard=True)
  empty = [[], [0]]
  options = tf.distribute.InputOptions()
  # FILE over three files: worker 0 reads two, worker 1 one (cardinality
  # unknown: each step asks the workers whether they have more).
  files = input_lib.distribute_dataset(
      workers, numbers(text_files(tmp_path, 3)), options)
  assert [s.shape.as_list() for s in files.element_spec._value_specs] == [
      [None], [None]]
  assert_read_every_way(files, UNEVEN_FILES)
  # Two replicas per worker (TensorFlow's rule, not measured: no GPUs
  # here): both of an ended worker's replicas get empty batches.
  assert_read_every_way(
      input_lib.distribute_dataset(pairs, numbers(text_files(tmp_path, 3)),
                                   options),
      [[[[0], [1]], [[1], [1]], [[100], [1]], [[101], [1]]],
       [[[2], [1]], [[3], [1]], [[102], [1]], [[103], [1]]],
       [[[200], [1]], [[201], [1]], empty, empty],
       [[[202], [1]], [[203], [1]], empty, empty]])

  # Shares of known cardinality (counted, no question asked per step).
  def sharded(context):
    return tf.data.Dataset.range(6).batch(2, drop_remainder=True).shard(
        context.num_input_pipelines, context.input_pipeline_id)
  counted = input_lib.distribute_datasets_from_function(workers, sharded,
                                                        options)
  # Static batches of 2, but a share may end early: the batch dimension
  # is unknown, as TensorFlow's element spec leaves it.
  assert [s.shape.as_list() for s in counted.element_spec._value_specs] == [
      [None], [None]]
  assert_read_every_way(counted, [[[[0, 1], [2]], [[2, 3], [2]]],
                                  [[[4, 5], [2]], [[], [0]]]])
  # Read eagerly, then inside a tf.function: the count gives way to asking.
  iterator = iter(counted)
  assert shaped(next(iterator)) == [[[0, 1], [2]], [[2, 3], [2]]]
  assert shaped(tf.function(lambda it: it.get_next())(iterator)) == [
      [[4, 5], [2]], [[], [0]]]
  with pytest.raises(StopIteration):
    next(iterator)

  # Two replicas per worker: a last round that only some of a worker's
  # replicas get gives the others empty batches too (TensorFlow's rule).
  def five_batches(context):
    return tf.data.Dataset.range(10).batch(2).shard(
        context.num_input_pipelines, context.input_pipeline_id)
  assert_read_every_way(
      input_lib.distribute_datasets_from_function(pairs, five_batches,
                                                  options),
      [[[[0, 1], [2]], [[4, 5], [2]], [[2, 3], [2]], [[6, 7], [2]]],
       [[[8, 9], [2]], empty, empty, empty]])

  # Without MultiWorkerMirroredStrategy's rule (our cluster form of
  # CentralStorageStrategy, no partial batches asked): the shortest share
  # ends the input.
  central = fake_workers(2, per_worker=TWO_WORKERS)
  shortest = input_lib.distribute_datasets_from_function(central, sharded,
                                                         options)
  assert [s.shape.as_list() for s in shortest.element_spec._value_specs] == [
      [2], [2]]
  assert_read_every_way(shortest, [[[[0, 1], [2]], [[2, 3], [2]]]])


def test_four_files_on_three_workers_end_with_the_longest_share(tmp_path):
  # FILE over four files on three workers: worker 0 reads files 0 and 3,
  # each batch cut into three pieces: 6 pieces; workers 1 and 2: 3 each.
  workers = fake_workers(3, per_worker=tuple(
      (cpu(i), (cpu(i),)) for i in range(3)), auto_shard=True)
  names = text_files(tmp_path, 4)
  distributed = input_lib.distribute_dataset(
      workers, numbers(names), tf.distribute.InputOptions())
  steps = every_read(distributed)["next"]
  assert len(steps) == 6
  for step in steps[3:]:
    assert [shape for _, shape in step[1:]] == [[0], [0]]
  # Each worker read its files' numbers, in order, and nothing else.
  for worker, files in enumerate(([0, 3], [1], [2])):
    assert [n for step in steps for n in step[worker][0]] == [
        100 * f + i for f in files for i in range(4)]
