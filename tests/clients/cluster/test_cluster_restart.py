"""``run --max-restarts``: a TF2 cluster program resumes after lost tasks.

One loopback cluster per program (1 ps x 2 workers, every task under
``serve``, the chief under ``run --max-restarts 2 --checkpoint-dir``).
The program (tests/fixtures/restart_train.py) stops at two hold points;
at the first the test SIGKILLs worker 1, at the second the ps (which holds
every variable), and starts each again once the chief's supervisor says
the program ended on the lost task -- as a cluster manager restarts a pod.
The program resumes from its checkpoint (Keras ``BackupAndRestore``, or a
custom loop's ``tf.train.CheckpointManager``) and must end with the
weights of the same program run uninterrupted by native TensorFlow (the
reference: ``python`` alone, without ``TF_CONFIG``, TensorFlow's own
``CentralStorageStrategy`` on two logical CPUs of one machine -- two
replicas, as the cluster's two workers; ``rtol=1e-5`` as
tests/clients/cluster/test_cluster_v2.py: the same ops on the same
values, only placed elsewhere).  Every wait is on an event (a hold file,
a line of the supervisor), bounded.
"""
import pytest

from compat_distribute.cluster import local_served
import support
from support import native_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.subprocess, pytest.mark.slow]

PROGRAM = str(support.FIXTURES / "restart_train.py")
ENV = {"PYTHONPATH": str(support.ROOT), "COMPAT_DISTRIBUTE_CLUSTER_WAIT": "90"}
TIMEOUT = 300
VICTIMS = [("worker", 1), ("ps", 0)]
KERAS2_REFUSES = "BackupAndRestore callback only supports"


def final_weights(result):
  return native_cluster.final_weights(
      result.stdout, f"{result.task} (exit {result.returncode}, timed out "
      f"{result.timed_out}; stderr: {result.stderr[-6000:]})")


def uninterrupted(api, tmp_path):
  """The program run by native TensorFlow alone, never killed: the
  reference weights."""
  result = native_cluster.run_native(
      PROGRAM, [api, str(tmp_path / "reference")], TIMEOUT)
  if KERAS2_REFUSES in result.stderr:
    pytest.skip("this Keras' tf.keras.callbacks.BackupAndRestore refuses "
                "every strategy but Mirrored, MultiWorkerMirrored and TPU "
                "(NotImplementedError at on_train_begin, for TensorFlow's "
                "own CentralStorageStrategy too); the custom loop with "
                "CheckpointManager covers the restart here")
  return final_weights(result)


def run_with_kills(api, tmp_path):
  checkpoints, holds = tmp_path / "checkpoints", tmp_path / "holds"
  holds.mkdir()
  with local_served.ServedCluster(2, 1, env=ENV) as cluster:
    chief = cluster.start_chief(
        PROGRAM, [api, str(checkpoints), str(holds)],
        run_options=["--max-restarts", "2", "--checkpoint-dir",
                     str(checkpoints)])
    for n, (job, index) in enumerate(VICTIMS):
      local_served.wait_for_file(str(holds / f"hold-{n}"), chief, TIMEOUT)
      cluster.kill_server(job, index)
      (holds / f"release-{n}").touch()
      local_served.wait_for_text(
          chief, f"restart {n + 1} of 2: waiting up to", TIMEOUT)
      cluster.start_server(job, index)  # as a cluster manager would
    chief_result = cluster.collect(chief, TIMEOUT)
    servers = cluster.wait_servers(timeout=60)
  return chief_result, servers


@pytest.mark.parametrize("api, resumed_at", [
    ("loop", ["step 10", "step 15"]),
    pytest.param("fit", ["epoch 1", "epoch 3"], marks=support.MORE),
])
def test_resumes_after_a_lost_worker_and_a_lost_ps_at_uninterrupted_weights(
    tmp_path, api, resumed_at):
  reference = uninterrupted(api, tmp_path)
  chief, servers = run_with_kills(api, tmp_path)
  assert chief.returncode == 0 and not chief.timed_out, (
      f"chief exit {chief.returncode}:\n{chief.stderr[-8000:]}")
  native_cluster.assert_same(final_weights(chief), reference)
  # Each restart: what was lost, when, and where training resumed.
  err = chief.stderr
  for n, ((job, index), point) in enumerate(zip(VICTIMS, resumed_at)):
    address = local_served_address(servers, job, index)
    assert (f"because a cluster task was lost: " in err and
            f"not answering now: /job:{job}/task:{index} at {address})"
            f"; restart {n + 1} of 2") in err, err[-6000:]
    line = next(l for l in err.splitlines()
                if l.startswith(f"compat_distribute run: restart {n + 1} of 2:"
                                " resuming from"))
    assert point in line, line
  # The tasks that survived waited for the chief and served the next one;
  # every task ended once the last chief said the job was done.
  for task, result in servers.items():
    assert result.returncode == 0 and not result.timed_out, (
        f"{task}: exit {result.returncode}\n{result.stdout}")
    assert "the chief says its job is done" in result.stdout
  assert "a chief is back at" in servers["/job:worker/task:0"].stdout


def local_served_address(servers, job, index):
  """The address of a task, from its serve's first line."""
  out = servers[f"/job:{job}/task:{index}"].stdout
  return out.split(" serving at ", 1)[1].split()[0]
