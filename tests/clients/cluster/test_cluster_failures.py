"""A TF2 cluster that loses a task mid-training names it; a program that
catches the error can retry.

A custom training loop runs as the chief of a loopback cluster (2 workers,
1 ps, each ``serve``); once it has trained a few steps, one task is lost:

* killed (SIGKILL) -- its connections reset, its port refuses;
* its process ends cleanly (SIGTERM: ``serve`` exits), its port closes;
* stopped (SIGSTOP) -- alive, its port still accepting connections, silent
  (the case TensorFlow waits on for ever); the ps as well as a worker.

Each time the chief exits non-zero within the bound (the stall timeout is
``COMPAT_DISTRIBUTE_TASK_TIMEOUT``, 8 s here, plus the watchdog's period
and room for a loaded machine), its error is ``TaskLostError`` naming the
job, index, address and what happened, and every other task's ``serve``
ends by itself, told by the chief.  One run is a plain ``python``
program (the error comes through ``sys.excepthook``), the others run under
``python -m compat_distribute run``.
"""
import os
import signal
import sys
import time

import pytest

from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import local_served
import support

pytestmark = [pytest.mark.cluster, pytest.mark.subprocess, pytest.mark.slow]

ROOT = str(support.ROOT)
TASK_TIMEOUT = 8
ENV = {"PYTHONPATH": ROOT, "COMPAT_DISTRIBUTE_CLUSTER_WAIT": "60",
       "COMPAT_DISTRIBUTE_TASK_TIMEOUT": str(TASK_TIMEOUT)}
# From the loss to the chief's exit: the stall timeout and one period, the
# error's way out, the chief's bounded goodbyes; room for 2 busy cores.
BOUND = 60
STRATEGY = {"run": "tf.distribute.experimental.CentralStorageStrategy()",
            "python": "__import__('compat_distribute.v2').v2.experimental."
                      "CentralStorageStrategy()"}

SETUP = """\
import sys

import numpy as np
import tensorflow as tf

strategy = {strategy}
GLOBAL_BATCH = 64


def dataset_fn(context):
  rng = np.random.RandomState(0)
  x = rng.normal(size=(1024, 8)).astype("float32")
  y = (x @ rng.normal(size=(8, 1))).astype("float32")
  batch = context.get_per_replica_batch_size(GLOBAL_BATCH)
  dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch)
  return dataset.shard(context.num_input_pipelines, context.input_pipeline_id)


with strategy.scope():
  layer = tf.keras.layers.Dense(1)
  layer.build((None, 8))
  optimizer = tf.keras.optimizers.SGD(0.01)


@tf.function
def train_step(iterator):
  def step_fn(inputs):
    x, y = inputs
    with tf.GradientTape() as tape:
      loss = tf.reduce_sum(tf.square(layer(x) - y)) / GLOBAL_BATCH
    grads = tape.gradient(loss, layer.trainable_variables)
    optimizer.apply_gradients(zip(grads, layer.trainable_variables))
    return loss
  losses = strategy.run(step_fn, args=(next(iterator),))
  return strategy.reduce("SUM", losses, axis=None)


iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
"""
PROGRAM = SETUP + """\
step = 0
while True:
  loss = train_step(iterator)
  if step % 10 == 0:
    print(f"step {{step}}: loss {{float(loss):.6f}}", flush=True)
  step += 1
"""

# docs/cluster.md's retrying.py around each step; the step says what it
# caught.
RETRYING = SETUP + """\
from retrying import run_retrying


def step(iterator):
  try:
    return train_step(iterator)
  except tf.errors.UnavailableError as e:
    print(f"caught {{type(e).__module__}}.{{type(e).__name__}}", flush=True)
    raise


for n in range({steps}):
  loss = run_retrying(step, iterator)
  if n % 10 == 0:
    print(f"step {{n}}: loss {{float(loss):.6f}}", flush=True)
print(f"trained {{n + 1}} steps", flush=True)
"""
STEPS = 40

SIGNALS = {"kill": signal.SIGKILL, "exit": signal.SIGTERM,
           "stop": signal.SIGSTOP}
WHAT = {"kill": ("refused the connection", "closed the connection"),
        "exit": ("refused the connection", "closed the connection"),
        "stop": (f"no answer for {TASK_TIMEOUT} s",)}


def wait_for(process, text, timeout):
  deadline = time.monotonic() + timeout
  while text not in local_cluster.read_log(process.out):
    assert process.poll() is None and time.monotonic() < deadline, (
        f"no {text!r} (exit {process.poll()}):\n"
        f"{local_cluster.read_log(process.err)[-3000:]}")
    time.sleep(0.1)


@pytest.mark.parametrize("job,index,how,runner", [
    ("worker", 1, "kill", "run"),
    ("worker", 0, "exit", "python"),
    pytest.param("worker", 1, "stop", "run", marks=support.MORE),
    pytest.param("ps", 0, "stop", "run", marks=support.MORE),
])
def test_lost_task_is_named_and_the_chief_ends(tmp_path, job, index, how,
                                               runner):
  script = tmp_path / "train.py"
  script.write_text(PROGRAM.format(strategy=STRATEGY[runner]))
  with local_served.ServedCluster(2, 1, env=ENV) as cluster:
    server = cluster.servers[(job, index)]
    try:
      chief = cluster.start_chief(str(script), installed=runner == "run")
      wait_for(chief, "step 10:", 180)
      os.kill(server.pid, SIGNALS[how])
      lost_at = time.monotonic()
      result = cluster.collect(chief, BOUND + 30)
      took = time.monotonic() - lost_at
      others = {task: process for task, process in cluster.servers.items()
                if task != (job, index)}
      ended = {f"/job:{t}/task:{i}": cluster.collect(p, 60)
               for (t, i), p in others.items()}
    finally:
      if how == "stop":
        os.kill(server.pid, signal.SIGCONT)
        server.kill()
  assert result.returncode == 1 and not result.timed_out, (
      result.returncode, result.stderr[-3000:])
  assert took < BOUND, took
  address = cluster.cluster[job][index]
  # The exception the program ended with: the named error (TensorFlow may
  # log more lines as the process ends).
  named = [line for line in result.stderr.splitlines() if line.startswith(
      "compat_distribute.cluster.failures.TaskLostError: ")]
  assert len(named) == 1, result.stderr[-3000:]
  assert named[0].split(": ", 1)[1].startswith(
      f"Lost cluster task /job:{job}/task:{index} at {address}: "), named
  assert any(what in named[0] for what in WHAT[how]), named
  assert "The above exception was the direct cause" in result.stderr
  # Every other task ends by itself, told by the chief.
  for task, other in ended.items():
    assert other.returncode == 0 and not other.timed_out, (
        task, other.returncode, other.stdout[-1000:])
    assert "the chief says its job is done" in other.stdout


@pytest.mark.parametrize("how", [pytest.param("stop", marks=support.MORE),
                                 "kill"])
def test_a_program_that_catches_the_error_retries_in_the_same_process(
    tmp_path, how):
  """docs/cluster.md's ``retrying.py`` (run_retrying: a step again after
  each ``UnavailableError``) around a custom loop's step, under ``run``.
  Worker 1 is lost; once the program caught TensorFlow's own
  ``UnavailableError`` it comes back:

  * stopped (SIGSTOP), then continued -- the same process: the watchdog
    finds it answering, stops shutting its connections, a retry goes
    through and the program trains to its end; every task is told done;
  * killed, then started again -- a new process, which has none of the
    program's state: the retry fails with TensorFlow's ``AbortedError``
    (the worker "was probably restarted"), which the program does not
    catch; it ends as the ``TaskLostError`` naming worker 1.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if tuple(map(int, tf.__version__.split(".")[:2])) < (2, 13):
    pytest.skip("on TensorFlow 2.12 the lost worker did not reach the "
                "program as the UnavailableError this recipe retries on "
                "within the test's bounds in CI runs (tox p: both "
                "environments at once on 2 cores); not reproduced alone on "
                "the machine, where both cases pass on 2.12 (the stopped "
                "worker caught 10 s after SIGSTOP, bound 60 s); tf221 runs "
                "it")
  (tmp_path / "retrying.py").write_text(
      support.doc_program("cluster.md", "retrying.py"))
  script = tmp_path / "train.py"
  script.write_text(RETRYING.format(strategy=STRATEGY["run"], steps=STEPS))
  with local_served.ServedCluster(2, 1, env=ENV) as cluster:
    server = cluster.servers[("worker", 1)]
    try:
      chief = cluster.start_chief(str(script))
      wait_for(chief, "step 10:", 180)
      if how == "stop":
        os.kill(server.pid, signal.SIGSTOP)
      else:
        cluster.kill_server("worker", 1)
      wait_for(chief, "caught ", BOUND)
      if how == "stop":
        os.kill(server.pid, signal.SIGCONT)
      else:
        cluster.start_server("worker", 1)
      result = cluster.collect(chief, BOUND + 120)
      servers = cluster.wait_servers(60) if how == "stop" else {}
    finally:
      if how == "stop" and server.returncode is None:
        os.kill(server.pid, signal.SIGCONT)  # left stopped by a failure
  assert not result.timed_out, result.stderr[-3000:]
  assert ("caught tensorflow.python.framework.errors_impl.UnavailableError"
          in result.stdout), result.stdout
  address = cluster.cluster["worker"][1]
  if how == "stop":
    assert (f"cluster task /job:worker/task:1 at {address} answers again"
            in result.stderr), result.stderr[-3000:]
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"trained {STEPS} steps" in result.stdout
    assert "TaskLostError" not in result.stderr
    for task, ended in servers.items():
      assert ended.returncode == 0, (task, ended.stdout[-1000:],
                                     result.stderr[-3000:])
      assert "the chief says its job is done" in ended.stdout
  else:
    # (Whether the watchdog's next look, once a second, sees the new process
    # answer before the retry fails is a race: not checked here.)
    assert result.returncode == 1 and "trained" not in result.stdout
    assert "errors_impl.AbortedError: " in result.stderr
    assert "was restarted" in result.stderr or (
        "was probably restarted" in result.stderr)
    named = [line for line in result.stderr.splitlines() if line.startswith(
        "compat_distribute.cluster.failures.TaskLostError: Lost cluster "
        f"task /job:worker/task:1 at {address}: ")]
    # Renamed while the watchdog still counts the task lost; once its next
    # look saw the new process answer, TensorFlow's AbortedError (naming
    # the task) ends the program as it is.
    assert len(named) == 1 or (
        "/job:worker/replica:0/task:1" in result.stderr), (
            result.stderr[-3000:])
