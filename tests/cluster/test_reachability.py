"""cluster/reachability.py: connecting waits until the tasks a step
connects reach one another.

The retry rules with a scripted exchange; the real exchange on a loopback
cluster of in-process servers (in a child process: a process connects to
one cluster only), where the value it returns proves every read happened.
The restart it exists for (a ps restarted while the workers ran):
tests/clients/cluster/test_cluster_restart.py.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from compat_distribute.cluster import reachability
import support

SERVED = [("worker", 0), ("worker", 1), ("ps", 0)]


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
  monkeypatch.setattr(reachability, "RETRY_PERIOD", 0.01)


def scripted(*outcomes):
  """An exchange that raises or returns each outcome in turn."""
  calls = []

  def exchange():
    outcome = outcomes[len(calls)]
    calls.append(outcome)
    if isinstance(outcome, Exception):
      raise outcome
    return tf.constant(outcome)

  return exchange, calls


def unavailable():
  return tf.errors.UnavailableError(None, None,
                                    "failed to connect to all addresses")


def test_only_the_pairs_a_step_connects_exchange_once_each_way():
  chief = ("chief", 0)
  pairs = reachability.pairs(SERVED + [("ps", 1)], chief)
  workers, ps = [("worker", 0), ("worker", 1)], [("ps", 0), ("ps", 1)]
  expected = ({(w, p) for w in workers for p in ps} |
              {(p, w) for w in workers for p in ps} |
              {(chief, t) for t in workers + ps} |
              {(t, chief) for t in workers + ps})
  assert len(pairs) == len(expected) == 16 and set(pairs) == expected
  # Two workers or two ps tasks never exchange values in a step.
  assert not [(a, b) for a, b in pairs if a[0] == b[0]]
  # Linear in the tasks (workers x ps + tasks), not every ordered pair.
  assert len(reachability.pairs(
      [("worker", i) for i in range(8)] + [("ps", 0)], chief)) == 2 * 8 + 2 * 9


def test_retries_through_unavailable_until_the_exchange_succeeds():
  exchange, calls = scripted(unavailable(), unavailable(), 1.0)
  assert reachability.wait_until_reachable(SERVED, 30, exchange=exchange) == 3
  assert len(calls) == 3


def test_a_cluster_of_one_task_needs_no_exchange():
  exchange, calls = scripted()
  assert reachability.wait_until_reachable(SERVED[:1], 30,
                                           exchange=exchange) == 0
  assert calls == []


def test_another_error_is_raised_at_once():
  exchange, calls = scripted(
      tf.errors.InvalidArgumentError(None, None, "bad graph"), 1.0)
  with pytest.raises(tf.errors.InvalidArgumentError, match="bad graph"):
    reachability.wait_until_reachable(SERVED, 30, exchange=exchange)
  assert len(calls) == 1


def test_a_lost_task_ends_the_wait_with_the_error():
  exchange, calls = scripted(unavailable(), 1.0)
  with pytest.raises(tf.errors.UnavailableError, match="failed to connect"):
    reachability.wait_until_reachable(SERVED, 30, lambda: True,
                                      exchange=exchange)
  assert len(calls) == 1


def test_the_wait_is_bounded_by_its_timeout():
  exchange, calls = scripted(*[unavailable()] * 1000)
  with pytest.raises(tf.errors.UnavailableError):
    reachability.wait_until_reachable(SERVED, 0.2, exchange=exchange)
  # 0.2 s at one attempt per 0.01 s (and the time each attempt takes).
  assert 1 < len(calls) <= 21


EXCHANGE_ON_A_CLUSTER = textwrap.dedent("""
    import os
    import time
    import tensorflow as tf
    from compat_distribute.cluster import local, reachability
    ports = local.free_ports(4)
    cluster = {"chief": [f"127.0.0.1:{ports[0]}"],
               "worker": [f"127.0.0.1:{p}" for p in ports[1:3]],
               "ps": [f"127.0.0.1:{ports[3]}"]}
    servers = [tf.distribute.Server(tf.train.ClusterSpec(cluster), job, i)
               for job, i in [("worker", 0), ("worker", 1), ("ps", 0)]]
    tf.config.experimental_connect_to_cluster(
        tf.train.ClusterSpec(cluster), job_name="chief", task_index=0)
    served = [("worker", 0), ("worker", 1), ("ps", 0)]
    before = time.time()
    chief = ("chief", 0)
    total = reachability.exchange_function(served, chief)().numpy()
    print(reachability.wait_until_reachable(served, 30, client=chief),
          total / before,
          flush=True)
    os._exit(0)  # the in-process servers never stop by themselves
""")


@pytest.mark.subprocess
def test_the_exchange_reads_a_timestamp_from_every_other_task():
  result = subprocess.run(
      [sys.executable, "-c", EXCHANGE_ON_A_CLUSTER], capture_output=True,
      text=True, timeout=180,
      env={**os.environ, "PYTHONPATH": str(support.ROOT)})
  assert result.returncode == 0, result.stderr[-3000:]
  attempts, ratio = result.stdout.split()
  assert attempts == "1"
  # The sum of ten timestamps taken on the tasks (each worker with the ps
  # and the chief with every task, both ways): a fold of the reads away
  # (as of ``x * 0``) would leave 0.
  assert float(ratio) == pytest.approx(10.0, rel=1e-6)
