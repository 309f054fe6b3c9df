"""cluster/failures.py and causes.py in one process: what a probe says of
a server that answers, refuses, hangs up or says nothing; shutting a
connection; a lost task that answers again; the named error and which
errors a lost task caused; the timeout's setting.

The servers here are plain loopback sockets that behave as a task does
(a gRPC server greets with an HTTP/2 SETTINGS frame; a stopped process's
port still accepts connections, in the kernel, and then says nothing).
Real tasks killed, closed and stopped: tests/clients/cluster/
test_cluster_failures.py.
"""
import socket
import threading

import pytest
import tensorflow as tf

import compat_distribute
from compat_distribute.cluster import causes
from compat_distribute.cluster import failures

SETTINGS_FRAME = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


@pytest.fixture
def listener():
  server = socket.socket()
  server.bind(("127.0.0.1", 0))
  server.listen(8)
  yield server
  server.close()


def address_of(server):
  return "127.0.0.1:%d" % server.getsockname()[1]


def serve_once(server, reply):
  """Accepts one connection, reads the greeting, then ``reply(conn)``."""
  def run():
    conn, _ = server.accept()
    with conn:
      conn.recv(64)
      reply(conn)
  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  return thread


def test_a_server_that_greets_is_alive(listener):
  thread = serve_once(listener, lambda conn: conn.sendall(SETTINGS_FRAME))
  assert failures.probe(address_of(listener), 5.0) is None
  thread.join(5)


def test_a_closed_port_refuses(listener):
  address = address_of(listener)
  listener.close()
  assert failures.probe(address, 5.0) == failures.REFUSED


def test_a_server_that_hangs_up_closed_the_connection(listener):
  thread = serve_once(listener, lambda conn: None)
  assert failures.probe(address_of(listener), 5.0) == failures.CLOSED
  thread.join(5)


def test_a_port_that_accepts_but_says_nothing_is_silent(listener):
  # Nobody calls accept(): the kernel completes the connection, as for a
  # stopped process.
  what = failures.probe(address_of(listener), 0.3)
  assert what.startswith("no answer for 0.3 s (it accepts connections")


def test_something_else_on_the_port_is_not_a_server(listener):
  thread = serve_once(listener, lambda conn: conn.sendall(b"HTTP/1.1 400 x"))
  what = failures.probe(address_of(listener), 5.0)
  assert what.startswith("does not answer as a TensorFlow server")
  thread.join(5)


def test_close_connections_to_shuts_only_that_address(listener):
  other = socket.socket()
  other.bind(("127.0.0.1", 0))
  other.listen(1)
  try:
    to_task = socket.create_connection(listener.getsockname(), timeout=5)
    to_other = socket.create_connection(other.getsockname(), timeout=5)
    with to_task, to_other:
      assert failures.close_connections_to(address_of(listener)) == 1
      assert to_task.recv(1) == b""  # shut: reads end at once
      to_other.setblocking(False)
      with pytest.raises(BlockingIOError):  # still open, nothing to read
        to_other.recv(1)
  finally:
    other.close()


def test_task_lost_error_names_the_task_and_keeps_tf_class():
  lost = [failures.LostTask("ps", 0, "127.0.0.1:5", failures.REFUSED),
          failures.LostTask("worker", 1, "127.0.0.1:6", "no answer for 8 s")]
  error = failures.TaskLostError(lost)
  assert isinstance(error, compat_distribute.Error)
  assert isinstance(error, tf.errors.UnavailableError)
  assert error.error_code == tf.errors.UNAVAILABLE
  assert (error.job, error.index, error.address, error.what) == (
      "ps", 0, "127.0.0.1:5", failures.REFUSED)
  assert error.lost == tuple(lost)
  assert str(error).startswith(
      "Lost cluster tasks /job:ps/task:0 at 127.0.0.1:5: refused the "
      "connection (its process ended or its port closed); /job:worker/task:1 "
      "at 127.0.0.1:6: no answer for 8 s. ")


def test_explain_names_the_lost_task_of_a_tf_error(listener):
  address = address_of(listener)
  listener.close()
  spec = tf.train.ClusterSpec({"worker": [address]})
  watchdog = failures.Watchdog(spec, [("worker", 0)], 5.0)  # not started
  original = tf.errors.UnavailableError(None, None, "Socket closed")
  named = causes.explain(original, watchdog)
  watchdog.stop()
  assert isinstance(named, failures.TaskLostError)
  assert named.__cause__ is original
  assert (named.job, named.index, named.address) == ("worker", 0, address)
  assert named.what == failures.REFUSED
  # Not a TensorFlow error, or no watchdog: unchanged.
  assert causes.explain(KeyError("x"), watchdog).__class__ is KeyError
  assert causes.explain(original, None) is original


def test_explain_leaves_an_error_alone_when_every_task_answers(listener):
  thread = serve_once(listener, lambda conn: conn.sendall(SETTINGS_FRAME))
  spec = tf.train.ClusterSpec({"worker": [address_of(listener)]})
  watchdog = failures.Watchdog(spec, [("worker", 0)], 5.0)
  # Of the lost-task family, naming no task: checked, found answering.
  original = tf.errors.UnavailableError(None, None, "Socket closed")
  assert causes.explain(original, watchdog) is original
  watchdog.stop()
  thread.join(5)
  assert not thread.is_alive()  # it was checked


ADDRESSES = ("127.0.0.1:2222", "127.0.0.1:2223")
TF_ERRORS = {"unavailable": tf.errors.UnavailableError,
             "aborted": tf.errors.AbortedError,
             "internal": tf.errors.InternalError,
             "invalid": tf.errors.InvalidArgumentError}


@pytest.fixture
def worker_1_lost():
  """A watchdog (not started) of two workers that found worker 1 lost."""
  spec = tf.train.ClusterSpec({"worker": list(ADDRESSES)})
  watchdog = failures.Watchdog(spec, [("worker", 0), ("worker", 1)], 5.0)
  watchdog.report(failures.LostTask("worker", 1, ADDRESSES[1],
                                    failures.REFUSED))
  yield watchdog
  watchdog.stop()


@pytest.mark.parametrize("kind, message, named", [
    # TensorFlow's bare error names no task: the task lost now.
    ("unavailable", "recvmsg:Connection reset by peer", True),
    ("unavailable", "failed to connect to all addresses; last error: "
     f"ipv4:{ADDRESSES[1]}: Connection refused", True),
    ("aborted", "Unable to find a context_id matching the specified one. "
     "Perhaps the worker was restarted? from remote target "
     "/job:worker/replica:0/task:1/device:CPU:0", True),
    ("internal", "originally returned UnavailableError, and was replaced "
     "by InternalError ... /job:worker/task:1", True),
    # Errors a lost task did not cause stay themselves.
    ("invalid", "Incompatible shapes: [2] vs. [3]", False),
    ("invalid", "Incompatible shapes on /job:worker/replica:0/task:1", False),
    ("internal", "Failed to allocate on /job:worker/task:1", False),
    ("unavailable", f"Socket closed from {ADDRESSES[0]}", False),
    ("unavailable", f"Socket closed from {ADDRESSES[1]}0", True),
])
def test_only_an_error_a_lost_task_caused_is_named(worker_1_lost, kind,
                                                   message, named):
  """By what TensorFlow's message names: the lost task (address or task),
  no task at all (lost-task family only), or only tasks that answer (the
  last: 127.0.0.1:22230 is not worker 1's address, so it names none)."""
  original = TF_ERRORS[kind](None, None, message)
  result = causes.explain(original, worker_1_lost)
  if named:
    assert isinstance(result, failures.TaskLostError), result
    assert (result.job, result.index, result.__cause__) == (
        "worker", 1, original)
  else:
    assert result is original


def test_a_lost_task_on_the_errors_chain_is_named(worker_1_lost):
  lost = tf.errors.UnavailableError(None, None, "Socket closed")
  try:
    try:
      raise lost
    except tf.errors.UnavailableError as e:
      raise RuntimeError("the program's wrapper: could not save") from e
  except RuntimeError as e:
    wrapped, named = e, causes.explain(e, worker_1_lost)
  assert isinstance(named, failures.TaskLostError)
  assert named.__cause__ is wrapped
  try:
    try:
      raise lost
    except tf.errors.UnavailableError:
      raise tf.errors.InvalidArgumentError(None, None, "bad") from None
  except tf.errors.InvalidArgumentError as hidden:
    assert causes.explain(hidden, worker_1_lost) is hidden


def test_an_unrelated_error_does_not_probe_the_tasks(listener):
  address = address_of(listener)
  listener.close()  # a check would find it lost
  spec = tf.train.ClusterSpec({"worker": [address]})
  watchdog = failures.Watchdog(spec, [("worker", 0)], 5.0)  # not started
  original = tf.errors.InvalidArgumentError(None, None, "bad shape")
  assert causes.explain(original, watchdog) is original
  assert watchdog.found == []


def greeter(server):
  """Greets every connection as a gRPC server does, until ``server``
  closes."""
  def run():
    while True:
      try:
        conn, _ = server.accept()
      except OSError:
        return
      with conn:
        try:
          conn.recv(64)
          conn.sendall(SETTINGS_FRAME)
        except OSError:
          pass
  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  return thread


def sweeps(job, index, address):
  return [t for t in threading.enumerate()
          if t.name == f"compat_distribute-lost-{job}-{index}-{address}"]


def test_a_lost_task_that_answers_again_is_no_longer_shut(listener):
  """Refused, then a new server at the same address: the sweep that shut
  its connections ends, it is lost no more (still in ``found``), and the
  regular checks find it again when it is lost again."""
  host, port = listener.getsockname()
  address = address_of(listener)
  listener.close()
  spec = tf.train.ClusterSpec({"worker": [address]})
  shut = []
  found = threading.Event()

  def on_lost(task):
    shut.append(task)
    found.set()
  watchdog = failures.Watchdog(spec, [("worker", 0)], 1.0, on_lost).start()
  back = socket.socket()
  try:
    assert found.wait(30)
    [lost] = watchdog.lost
    assert lost.what == failures.REFUSED
    [sweep] = sweeps("worker", 0, address)
    back.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    back.bind((host, port))
    back.listen(8)
    greeter(back)
    sweep.join(30)  # ends once the task answers
    assert not sweep.is_alive()
    assert watchdog.lost == [] and watchdog.found == [lost]
    calls = len(shut)
    found.clear()
    back.close()
    assert found.wait(30)  # watched again: lost again
    assert len(shut) == calls + 1 and len(watchdog.found) == 2
  finally:
    watchdog.stop()
    back.close()


def test_the_watchdog_finds_a_silent_task_within_its_timeout(listener):
  spec = tf.train.ClusterSpec({"worker": [address_of(listener)]})
  found = threading.Event()
  watchdog = failures.Watchdog(spec, [("worker", 0)], 0.5,
                               lambda task: found.set()).start()
  try:
    assert found.wait(30)
  finally:
    watchdog.stop()
  [lost] = watchdog.lost
  assert (lost.job, lost.index) == ("worker", 0)
  assert lost.what.startswith("no answer for 0.5 s")


@pytest.mark.parametrize("text,seconds", [("", 30.0), ("12.5", 12.5),
                                          ("NONE", None), ("off", None)])
def test_task_timeout_setting(text, seconds):
  assert failures.parse_task_timeout(text) == seconds


@pytest.mark.parametrize("text", ["0", "-1", "soon", "nan"])
def test_task_timeout_setting_refused(text):
  with pytest.raises(ValueError, match=(
      f"COMPAT_DISTRIBUTE_TASK_TIMEOUT must be a number of seconds above 0 "
      f".*got '{text}'")):
    failures.parse_task_timeout(text)
