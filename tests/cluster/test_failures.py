"""cluster/failures.py in one process: what a probe says of a server that
answers, refuses, hangs up or says nothing; shutting a connection; the
named error and how an error is explained; the timeout's setting.

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
  named = failures.explain(original, watchdog)
  assert isinstance(named, failures.TaskLostError)
  assert named.__cause__ is original
  assert (named.job, named.index, named.address) == ("worker", 0, address)
  assert named.what == failures.REFUSED
  # Not a TensorFlow error, or no watchdog: unchanged.
  assert failures.explain(KeyError("x"), watchdog).__class__ is KeyError
  assert failures.explain(original, None) is original


def test_explain_leaves_an_error_alone_when_every_task_answers(listener):
  thread = serve_once(listener, lambda conn: conn.sendall(SETTINGS_FRAME))
  spec = tf.train.ClusterSpec({"worker": [address_of(listener)]})
  watchdog = failures.Watchdog(spec, [("worker", 0)], 5.0)
  original = tf.errors.InvalidArgumentError(None, None, "bad shape")
  assert failures.explain(original, watchdog) is original
  thread.join(5)


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
