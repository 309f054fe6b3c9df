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
"""
import pytest
import tensorflow as tf

from compat_distribute import input as input_lib
from compat_distribute.input import auto_shard
from conftest import cpu
from support.input import fake_workers
from support.input import local_values

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


def test_each_worker_reads_what_tensorflows_strategy_gives_it(tmp_path):
  names = []
  for f in range(4):
    names.append(str(tmp_path / f"part-{f}.txt"))
    with open(names[-1], "w") as out:
      out.write("".join(f"{100 * f + i}\n" for i in range(4)))

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
