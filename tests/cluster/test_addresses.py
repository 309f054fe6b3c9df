"""cluster/addresses.py: the one port check and the one seconds reader.

The port check is what the client's wait, the supervisor's wait before a
restart and ``serve``'s look at its chief use; a bracketed IPv6 address
(``[::1]:2222``) must split at the port's colon, or every restart of an
IPv6 cluster waits for tasks that answer (issue 43).
"""
import socket

import pytest

from compat_distribute.cluster import addresses
from compat_distribute.cluster import supervisor


def _listening(family, host):
  s = socket.socket(family, socket.SOCK_STREAM)
  s.bind((host, 0))
  s.listen()
  return s


def _has_ipv6_loopback():
  try:
    _listening(socket.AF_INET6, "::1").close()
    return True
  except OSError:
    return False


@pytest.mark.parametrize("address, expected", [
    ("127.0.0.1:2222", ("127.0.0.1", 2222)),
    ("[::1]:2222", ("::1", 2222)),
    ("[fe80::1%eth0]:80", ("fe80::1%eth0", 80)),
    ("host-1.example.com:65535", ("host-1.example.com", 65535)),
])
def test_split(address, expected):
  assert addresses.split(address) == expected


@pytest.mark.parametrize("address, message", [
    ("::1:2222", "IPv6 address without brackets"),
    ("host", "host:port or [IPv6 host]:port"),
    ("[::1]2222", "host:port or [IPv6 host]:port"),
    ("host:0", "port from 1 to 65535, got 'host:0'"),
])
def test_split_refuses_with_the_fix(address, message):
  with pytest.raises(ValueError, match=message.replace("[", r"\[")):
    addresses.split(address)


def test_accepts_ipv4_and_a_closed_port():
  with _listening(socket.AF_INET, "127.0.0.1") as s:
    address = f"127.0.0.1:{s.getsockname()[1]}"
    assert addresses.accepts(address)
  assert not addresses.accepts(address)
  assert not addresses.accepts("not an address")


@pytest.mark.skipif(not _has_ipv6_loopback(),
                    reason="this machine has no IPv6 loopback (::1)")
def test_the_supervisor_sees_an_ipv6_task_answer():
  with _listening(socket.AF_INET6, "::1") as s:
    task = ("/job:ps/task:0", f"[::1]:{s.getsockname()[1]}")
    assert addresses.accepts(task[1])
    assert supervisor.wait_for_tasks([task], timeout=5) == []
  assert supervisor.wait_for_tasks([task], timeout=0.2) == [task]


@pytest.mark.parametrize("text, kwargs, expected", [
    (" 2.5 ", {}, 2.5),
    ("0", {}, 0.0),
    ("", {}, 30.0),
    ("Off", {"none_means": "no wait"}, None),
])
def test_parse_seconds(text, kwargs, expected):
  assert addresses.parse_seconds(text, "--wait", 30.0, **kwargs) == expected


@pytest.mark.parametrize("text, kwargs, message", [
    ("0", {"above_zero": True}, "--wait must be a number of seconds above 0, "
     "got '0'. Give e.g. 60, or leave it out for 30."),
    ("nan", {}, "--wait must be a number of seconds (at least 0), got 'nan'"),
    ("off", {}, "got 'off'"),
    ("soon", {"none_means": "no wait"}, "or one of none, off, no, never "
     "(no wait), got 'soon'. Set it to e.g. 60 or none, or unset it for 30."),
])
def test_parse_seconds_refuses_with_the_value_and_the_fix(text, kwargs,
                                                          message):
  with pytest.raises(ValueError) as raised:
    addresses.parse_seconds(text, "--wait", 30.0, **kwargs)
  assert message in str(raised.value)
