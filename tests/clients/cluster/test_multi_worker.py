"""``MultiWorkerMirroredStrategy`` under ``python -m compat_distribute run``
on loopback clusters, every task started with the same command.

The default run has one case: the Keras 3 program of docs/cluster.md
("Keras 3 on several machines") and its commands, taken from the page as
printed (the hosts become loopback ports, ``python`` this interpreter), on
two workers; the reference is the same program run by ``python`` alone
under TensorFlow's ``MirroredStrategy`` with two logical CPUs.  The
per-epoch losses, the ``evaluate`` result and the weights agree to float32
round-off (``rtol=1e-5``): the same ops on the same values, the gradients
summed in another order.

The other cases (a chief and two workers with a custom loop, and the
refusals) start several TensorFlow processes each: they run where
``COMPAT_DISTRIBUTE_MULTI_WORKER_ALL=1`` (``tox -e multi-worker``).
Checkpoints: test_multi_worker_checkpoints.py.
"""
import contextlib
import importlib.util
import json
import os
import re
import shlex
import signal
import sys
import time

import numpy as np
import pytest

from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import local_served
from compat_distribute.runner import multi_worker as multi_worker_run
import support

pytestmark = [pytest.mark.cluster, pytest.mark.subprocess]

ROOT = str(support.ROOT)
DOC = os.path.join(ROOT, "docs", "cluster.md")
TIMEOUT = 240
ENV = {"PYTHONPATH": ROOT, "COMPAT_DISTRIBUTE_CLUSTER_WAIT": "60",
       "COMPAT_DISTRIBUTE_CLIENT_WAIT": "120"}
CONSTRUCTOR = "tf.distribute.MultiWorkerMirroredStrategy()"
ALL = support.MULTI_WORKER_ALL
# The other cases ask for ours whichever Keras tf.keras is.
RUN = [sys.executable, "-m", "compat_distribute", "run", "--multi-worker",
       "ours"]


def section():
  text = open(DOC).read()
  start = text.index("## Keras 3 on several machines")
  return text[start:text.index("\n## ", start + 1)]


def block(kind, first_line=None):
  for body in re.findall(rf"```{kind}\n(.*?)```", section(), re.S):
    if first_line is None or body.startswith(first_line):
      return body
  raise AssertionError(f"docs/cluster.md: no ```{kind} block {first_line}")


def native_program(program, devices):
  """``program`` under TensorFlow's MirroredStrategy on ``devices`` logical
  CPUs of this machine."""
  assert program.count(CONSTRUCTOR) == 1
  names = ", ".join(f'"/cpu:{i}"' for i in range(devices))
  return ("import tensorflow as tf\n"
          "tf.config.set_logical_device_configuration(\n"
          "    tf.config.list_physical_devices('CPU')[0],\n"
          f"    [tf.config.LogicalDeviceConfiguration()] * {devices})\n"
          + program.replace(CONSTRUCTOR,
                            f"tf.distribute.MirroredStrategy([{names}])"))


@contextlib.contextmanager
def native_run(path, args=(), tf_config="{}"):
  """Starts ``python path args`` (TensorFlow's own strategy, no cluster) at
  once; gives a function that waits (bounded) for its result; stops it at
  the end in any case."""
  logs = []
  process = local_cluster.start_process([sys.executable, str(path), *args],
                                        {"TF_CONFIG": tf_config}, logs)
  process.task = "native"
  try:
    yield lambda: local_served.collect(process, TIMEOUT)
  finally:
    local_cluster.stop_process(process)
    for log in logs:
      log.close()


def printed(result, key):
  assert result.returncode == 0 and not result.timed_out, (
      f"{result.task} failed (exit {result.returncode}, timed out "
      f"{result.timed_out}):\n{result.stdout[-2000:]}\n{result.stderr[-5000:]}")
  for line in result.stdout.splitlines():
    if line.startswith(f"{key}: "):
      return json.loads(line[len(key) + 2:])
  raise AssertionError(f"no {key!r} in:\n{result.stdout[-2000:]}")


def assert_close(ours, native):
  flat_ours = [np.asarray(a) for a in ours]
  flat_native = [np.asarray(b) for b in native]
  assert len(flat_ours) == len(flat_native)
  for a, b in zip(flat_ours, flat_native):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def doc_commands(cluster):
  """The page's commands for each task: (TF_CONFIG, argv), the hosts of
  its TF_CONFIG replaced by the cluster's loopback addresses."""
  lines = [line for line in block("sh", "# on host1").splitlines()
           if line and not line.startswith("#")]
  assert len(lines) == 2 and lines[0].startswith("export TF_CONFIG=")
  config = json.loads(shlex.split(lines[0][len("export "):])[0]
                      .split("=", 1)[1])
  argv = shlex.split(lines[1])
  assert argv[:1] == ["python"]
  assert len(config["cluster"]["worker"]) == len(cluster.cluster["worker"])
  config["cluster"] = cluster.cluster
  commands = {}
  for job, index in cluster.tasks:
    config["task"] = {"type": job, "index": index}
    commands[(job, index)] = (json.dumps(config), [sys.executable, *argv[1:]])
  return commands


def expected_lines():
  """What the page says each worker prints: {index: [line, ...]}."""
  found, current = {}, None
  for line in block("text", "# worker 0").splitlines():
    match = re.fullmatch(r"# worker (\d+)", line)
    if match:
      current = found.setdefault(int(match.group(1)), [])
    elif line:
      current.append(line)
  return found


@pytest.mark.skipif(not multi_worker_run.keras_3(),
                    reason="the page's command gives ours where tf.keras is "
                    "Keras 3; with Keras 2 it leaves TensorFlow's own")
def test_doc_program_on_two_workers_equals_mirrored_on_one_machine(tmp_path):
  program = block("python", "# train.py")
  (tmp_path / "train.py").write_text(program)
  (tmp_path / "native.py").write_text(native_program(program, 2))
  with native_run(tmp_path / "native.py") as native_result, \
      local_served.MultiWorkerCluster(2, env=ENV) as cluster:
    for task, (tf_config, argv) in doc_commands(cluster).items():
      assert argv[1:] == ["-m", "compat_distribute", "run", "train.py"]
      cluster.start_task(*task, argv, {"TF_CONFIG": tf_config},
                         cwd=str(tmp_path))
    results = cluster.collect(TIMEOUT)
    native = native_result()
  assert_doc_program_as_mirrored(results, native, 2)
  for index, lines in expected_lines().items():
    said = results[("worker", index)].stderr.splitlines()
    for line in lines:
      assert line in said, (index, line, said[:5])


def assert_doc_program_as_mirrored(results, native, replicas, rows=512):
  """The page's program (on ``rows`` examples): worker 0 ran it on
  ``replicas`` replicas and printed what ``native`` (MirroredStrategy on
  one machine) printed; every other task served it and ended when it did."""
  driver = results[("worker", 0)]
  assert printed(driver, "replicas") == replicas
  for key in ("losses", "evaluate", "predict"):
    np.testing.assert_allclose(printed(driver, key), printed(native, key),
                               rtol=1e-5, atol=1e-6)
  assert np.shape(printed(driver, "predict")) == (rows, 1)
  assert_close(printed(driver, "final weights"),
               printed(native, "final weights"))
  for task, server in results.items():
    if task == ("worker", 0):
      continue
    assert server.returncode == 0 and not server.timed_out, (
        task, server.stderr[-3000:])
    assert "the chief says its job is done" in server.stdout
    assert "replicas:" not in server.stdout  # the program ran once


@ALL
@pytest.mark.slow
def test_doc_program_on_three_workers_without_a_chief_equals_mirrored(
    tmp_path):
  """The page's program on three workers and no chief (worker 0 drives):
  against MirroredStrategy on one machine with three CPU replicas.  Its
  global batch of 64 would split unevenly (22, 21, 21), which Keras 3's
  fit under TensorFlow's MirroredStrategy refuses (AddN of [22, 8] and
  [20, 8]): batches of 48 over 480 examples, 16 per replica."""
  program = block("python", "# train.py")
  for old, new in (("GLOBAL_BATCH = 64", "GLOBAL_BATCH = 48"),
                   ("size=(512, 8)", "size=(480, 8)")):
    assert program.count(old) == 1
    program = program.replace(old, new)
  (tmp_path / "train.py").write_text(program)
  (tmp_path / "native.py").write_text(native_program(program, 3))
  with native_run(tmp_path / "native.py") as native_result, \
      local_served.MultiWorkerCluster(3, env=ENV) as cluster:
    assert cluster.tasks == [("worker", 0), ("worker", 1), ("worker", 2)]
    results = cluster.start([*RUN, str(tmp_path / "train.py")]
                           ).collect(TIMEOUT)
    native = native_result()
  assert_doc_program_as_mirrored(results, native, 3, rows=480)


LOOP = '''\
# loop.py
import json
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
GLOBAL_BATCH = 12


def dataset_fn(context):
  rng = np.random.RandomState(0)
  x = rng.normal(size=(96, 4)).astype("float32")
  y = (x @ rng.normal(size=(4, 1))).astype("float32")
  batch = context.get_per_replica_batch_size(GLOBAL_BATCH)
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
  return dataset.shard(context.num_input_pipelines, context.input_pipeline_id)


with strategy.scope():
  layer = tf.keras.layers.Dense(
      1, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=1))
  layer.build((None, 4))
  optimizer = tf.keras.optimizers.SGD(0.1)


@tf.function
def step(inputs):
  def replica_step(inputs):
    x, y = inputs
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.square(layer(x) - y)) / GLOBAL_BATCH
    grads = tape.gradient(loss, layer.trainable_variables)
    optimizer.apply_gradients(zip(grads, layer.trainable_variables))
    return loss
  return strategy.reduce("SUM", strategy.run(replica_step, args=(inputs,)),
                         axis=None)


losses = [float(step(inputs))
          for inputs in strategy.distribute_datasets_from_function(dataset_fn)]
# A second epoch from one dataset, each global batch split over the replicas.
rng = np.random.RandomState(1)
x = rng.normal(size=(96, 4)).astype("float32")
dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1] * 2.0))
losses += [float(step(inputs)) for inputs in
           strategy.experimental_distribute_dataset(dataset.batch(GLOBAL_BATCH))]
print("replicas:", strategy.num_replicas_in_sync)
print("losses:", json.dumps(losses))
print("final weights:", json.dumps([v.numpy().tolist() for v in layer.weights]))
'''


@ALL
@pytest.mark.slow
def test_chief_and_two_workers_custom_loop_equals_mirrored_three_replicas(
    tmp_path):
  (tmp_path / "loop.py").write_text(LOOP)
  (tmp_path / "native.py").write_text(native_program(LOOP, 3))
  with native_run(tmp_path / "native.py") as native_result, \
      local_served.MultiWorkerCluster(2, chief=True, env=ENV) as cluster:
    results = cluster.start([*RUN, str(tmp_path / "loop.py")]).collect(TIMEOUT)
    native = native_result()
  chief = results[("chief", 0)]
  assert printed(chief, "replicas") == 3
  np.testing.assert_allclose(printed(chief, "losses"),
                             printed(native, "losses"), rtol=1e-5)
  assert_close(printed(chief, "final weights"),
               printed(native, "final weights"))
  for task in (("worker", 0), ("worker", 1)):
    assert results[task].returncode == 0, results[task].stderr[-3000:]


@ALL
@pytest.mark.slow
def test_a_ps_job_is_refused_on_the_task_that_makes_the_strategy(tmp_path):
  (tmp_path / "loop.py").write_text(LOOP)
  with local_served.MultiWorkerCluster(1, env=ENV) as cluster:
    cluster.cluster["ps"] = [f"127.0.0.1:{local_cluster.free_ports(1)[0]}"]
    results = cluster.start([*RUN, str(tmp_path / "loop.py")]).collect(90)
  result = results[("worker", 0)]
  assert result.returncode == 1 and not result.timed_out
  assert ("MultiWorkerConfigError: TF_CONFIG of /job:worker/task:0 has a "
          "'ps' job") in result.stderr


@ALL
@pytest.mark.slow
def test_a_worker_with_another_cluster_is_named_and_its_serve_ends(tmp_path):
  (tmp_path / "loop.py").write_text(LOOP)
  with local_served.MultiWorkerCluster(2, env=ENV) as cluster:
    other = dict(cluster.cluster, worker=[
        *cluster.cluster["worker"],
        f"127.0.0.1:{local_cluster.free_ports(1)[0]}"])
    cluster.start_task("worker", 1, [*RUN, str(tmp_path / "loop.py")], {
        "TF_CONFIG": local_cluster.tf_config(other, "worker", 1)})
    results = cluster.start([*RUN, str(tmp_path / "loop.py")]).collect(TIMEOUT)
  driver, refused = results[("worker", 0)], results[("worker", 1)]
  assert driver.returncode == 1 and not driver.timed_out
  assert ("/job:worker/task:1 at " + cluster.cluster["worker"][1] +
          " has another cluster in its TF_CONFIG") in driver.stderr
  assert refused.returncode == 2 and not refused.timed_out
  assert "has another cluster in its TF_CONFIG" in refused.stderr


SERVER = """\
import json, os, sys, time
import tensorflow as tf
os.chdir(sys.argv[2])  # nothing may be written into the checkout
config = json.loads(os.environ["TF_CONFIG"])
server = tf.distribute.Server(tf.train.ClusterSpec(config["cluster"]),
                              job_name="worker", task_index=1, start=True)
print("serving", flush=True)
time.sleep(float(sys.argv[1]))
"""


@ALL
@pytest.mark.slow
def test_a_worker_not_run_by_compat_distribute_is_named(tmp_path):
  (tmp_path / "loop.py").write_text(LOOP)
  (tmp_path / "server.py").write_text(SERVER)
  with local_served.MultiWorkerCluster(2, env=ENV) as cluster:
    plain = cluster.start_task("worker", 1, [sys.executable,
                                             str(tmp_path / "server.py"),
                                             str(TIMEOUT), str(tmp_path)])
    local_served.wait_for_text(plain, "serving", 90, stream="out")
    driver = cluster.start_task("worker", 0, [*RUN, str(tmp_path / "loop.py")])
    result = local_served.collect(driver, TIMEOUT)
  assert result.returncode == 1 and not result.timed_out
  assert ("/job:worker/task:1 at " + cluster.cluster["worker"][1] +
          " is not run by compat_distribute") in result.stderr
  assert sorted(os.listdir(tmp_path)) == ["loop.py", "server.py"]  # nothing written


@ALL
@pytest.mark.slow
@pytest.mark.skipif(not multi_worker_run.keras_3() or not importlib.util
                    .find_spec("tf_keras"), reason="needs tf-keras beside "
                    "Keras 3 (TensorFlow 2.16 on)")
@pytest.mark.parametrize("workers", [2, 3])
def test_keras_2_program_equals_tensorflows_own_strategy_on_the_cluster(
    tmp_path, workers):
  """The page's program with tf-keras (Keras 2), where TensorFlow's own
  strategy trains: ours (``--multi-worker ours``) on two (three) workers
  against TensorFlow's on as many, each running the program, the
  dataset's default auto-shard policy splitting the data between them
  (three workers: batches of 48 over 480 examples, as in the three-worker
  test above)."""
  program = block("python", "# train.py")
  if workers == 3:
    program = program.replace("GLOBAL_BATCH = 64", "GLOBAL_BATCH = 48"
                              ).replace("size=(512, 8)", "size=(480, 8)")
  (tmp_path / "train.py").write_text(program)
  keras_2 = {**ENV, "TF_USE_LEGACY_KERAS": "1"}
  with local_served.MultiWorkerCluster(workers, env=keras_2) as cluster:
    ours = cluster.start([*RUN, str(tmp_path / "train.py")]).collect(TIMEOUT)
  with local_served.MultiWorkerCluster(workers, env=keras_2) as cluster:
    native = cluster.start([sys.executable, str(tmp_path / "train.py")]
                          ).collect(TIMEOUT)
  driver, reference = ours[("worker", 0)], native[("worker", 0)]
  assert "compat_distribute run: tf.distribute.MultiWorkerMirroredStrategy" \
      " is compat_distribute's (--multi-worker ours;" in driver.stderr
  assert printed(driver, "replicas") == printed(reference, "replicas") == (
      workers)
  for key in ("losses", "evaluate"):
    np.testing.assert_allclose(printed(driver, key), printed(reference, key),
                               rtol=1e-5)
  assert_close(printed(driver, "final weights"),
               printed(reference, "final weights"))


ENDLESS = '''\
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
  total = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)


@tf.function
def step():
  strategy.run(lambda: total.assign_add(1.0))


for i in range(10 ** 7):
  step()
  if i == 10:
    print("step 10", flush=True)
'''


@ALL
@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_lost_worker_is_named_and_the_program_ends(tmp_path, how,
                                                     monkeypatch):
  """Worker 1 killed (SIGKILL) or stalled (SIGSTOP: it holds its port
  and answers nothing) while the program runs: the program ends with
  TaskLostError naming the task and what was seen, within the task
  timeout (here 5 s) and the watchdog's period, with room for 2 busy
  cores."""
  (tmp_path / "endless.py").write_text(ENDLESS)
  # The lost worker's serve leaves its file in its folder: this test's.
  monkeypatch.chdir(tmp_path)
  env = {**ENV, "COMPAT_DISTRIBUTE_TASK_TIMEOUT": "5"}
  with local_served.MultiWorkerCluster(2, env=env) as cluster:
    cluster.start([*RUN, str(tmp_path / "endless.py")])
    driver = cluster.processes[("worker", 0)]
    lost = cluster.processes[("worker", 1)]
    local_served.wait_for_text(driver, "step 10", TIMEOUT, stream="out")
    try:
      os.kill(lost.pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
      since = time.monotonic()
      result = local_served.collect(driver, 90)
      took = time.monotonic() - since
    finally:
      if how == "stop":
        os.kill(lost.pid, signal.SIGCONT)
        lost.kill()
  assert result.returncode == 1 and not result.timed_out
  assert took < (20 if how == "kill" else 45), took
  assert "TaskLostError: Lost cluster task /job:worker/task:1 at " in (
      result.stderr)
  if how == "stop":
    assert "no answer for 5 s" in result.stderr, result.stderr[-2000:]


@ALL
@pytest.mark.slow
@pytest.mark.skipif(not multi_worker_run.keras_3(),
                    reason="Keras 2's BackupAndRestore refuses our strategy")
def test_max_restarts_resumes_after_a_lost_worker_at_uninterrupted_weights(
    tmp_path):
  """tests/fixtures/restart_train.py (Keras fit with BackupAndRestore) made
  with MultiWorkerMirroredStrategy on two workers; worker 0 under ``run
  --max-restarts``.  At the end of its first epoch the program holds, the
  test ends worker 1 and starts it again (as a cluster manager would); the
  program resumes from its backup and ends at the weights of the same
  program run on one machine without a loss (the fixture's reference,
  without TF_CONFIG: TensorFlow's CentralStorageStrategy on two CPUs)."""
  fixture = (support.FIXTURES / "restart_train.py").read_text()
  constructor = "strategy = tf.distribute.experimental.CentralStorageStrategy()"
  assert fixture.count(constructor) == 1
  program = tmp_path / "restart_mwms.py"
  program.write_text(fixture.replace(
      constructor, "strategy = tf.distribute.MultiWorkerMirroredStrategy()"))
  holds, backup = tmp_path / "holds", tmp_path / "backup"
  holds.mkdir()
  (holds / "release-1").touch()  # the fixture's second hold: no stop
  args = [str(program), "fit", str(backup), str(holds)]
  with native_run(program, ["fit", str(tmp_path / "reference")],
                  tf_config="") as reference:
    with local_served.MultiWorkerCluster(2, env=ENV) as cluster:
      cluster.start_task("worker", 1, [*RUN, *args])
      driver = cluster.start_task("worker", 0, [
          *RUN, "--max-restarts", "2", "--checkpoint-dir", str(backup),
          *args])
      local_served.wait_for_file(str(holds / "hold-0"), driver, TIMEOUT)
      cluster.processes[("worker", 1)].terminate()  # its serve ends, port shut
      cluster.processes[("worker", 1)].wait(30)
      (holds / "release-0").touch()
      local_served.wait_for_text(driver, "restart 1 of 2: waiting up to",
                                 TIMEOUT)
      cluster.start_task("worker", 1, [*RUN, *args])
      results = cluster.collect(TIMEOUT)
    want = reference()
  assert results[("worker", 0)].returncode == 0, (
      results[("worker", 0)].stderr[-6000:])
  err = results[("worker", 0)].stderr
  assert "because a cluster task was lost: " in err
  assert "/job:worker/task:1" in err
  resumed = [line for line in err.splitlines() if line.startswith(
      "compat_distribute run: restart 1 of 2: resuming from")]
  assert resumed and "epoch 1" in resumed[0], err[-4000:]
  assert_close(printed(results[("worker", 0)], "final weights"),
               printed(want, "final weights"))
