"""Task addresses and waits, read without TensorFlow.

``run``'s supervisor and ``serve`` decide things before TensorFlow is
imported (the supervisor never imports it), so what they share with the
rest of ``cluster/`` lives here, free of TensorFlow:

* ``split``: a ``TF_CONFIG`` address, ``host:port`` or a bracketed IPv6
  ``[host]:port``, as ``(host, port)``;
* ``accepts``: the one check of "does something accept TCP connections at
  this address" (the client's wait for its tasks, the supervisor's wait
  before a restart, ``serve``'s look at its chief);
* ``parse_seconds``: the one reader of a number of seconds given on the
  command line or in an environment variable.

>>> split("[::1]:2222"), split("127.0.0.1:2222"), split("host-0.example:80")
(('::1', 2222), ('127.0.0.1', 2222), ('host-0.example', 80))
>>> parse_seconds("2.5", "--task-wait", 30.0), parse_seconds("", "X", 30.0)
(2.5, 30.0)
>>> parse_seconds("never", "COMPAT_DISTRIBUTE_CLUSTER_WAIT", 300.0,
...               none_means="no wait") is None
True
>>> parse_seconds("0", "--client-wait", 600.0, above_zero=True)
Traceback (most recent call last):
...
ValueError: --client-wait must be a number of seconds above 0, got '0'. Give e.g. 60, or leave it out for 600.
"""
from __future__ import annotations

import socket
from typing import Optional

# Values of a wait meaning "do not wait" (where a wait may be turned off).
NO_WAIT_WORDS = ("none", "off", "no", "never")


def split(address: str) -> tuple[str, int]:
  """``(host, port)`` of ``host:port`` or ``[IPv6 host]:port``.

  Raises:
    ValueError: no port after the last colon, or a bare IPv6 address
      (``::1:2222``: where its port starts cannot be told), with the fix.
  """
  text = address.strip()
  if text.startswith("["):
    host, bracket, rest = text[1:].partition("]")
    port = rest[1:] if rest.startswith(":") else ""
  else:
    host, bracket, port = text.rpartition(":")
    if ":" in host:
      raise ValueError(
          f"The address {address!r} is an IPv6 address without brackets: "
          f"where its port starts cannot be told. Write it as "
          f"'[{host}]:{port}'.")
  if not (bracket and host and port.isdigit() and 0 < int(port) < 65536):
    raise ValueError(
        f"A task's address must be host:port or [IPv6 host]:port with a "
        f"port from 1 to 65535, got {address!r}. Write e.g. "
        "'10.0.0.5:2222' or '[::1]:2222'.")
  return host, int(port)


def accepts(address: str, timeout: float = 0.5) -> bool:
  """Whether something accepts TCP connections at ``address`` (one
  connection, at most ``timeout`` seconds); False for an address that
  does not parse."""
  try:
    with socket.create_connection(split(address), timeout=timeout):
      return True
  except (OSError, ValueError):
    return False


def parse_seconds(text: str, name: str, default: float,
                  none_means: Optional[str] = None,
                  above_zero: bool = False) -> Optional[float]:
  """A number of seconds from ``name``'s value ``text`` (a flag or an
  environment variable): empty is ``default``; with ``none_means`` (what
  no wait does), a word of ``NO_WAIT_WORDS`` is None.

  Raises:
    ValueError: anything else that is not a number at least 0 (above 0
      with ``above_zero``), with the value and the fix.
  """
  text = text.strip()
  if not text:
    return default
  if none_means is not None and text.lower() in NO_WAIT_WORDS:
    return None
  try:
    seconds = float(text)
  except ValueError:
    seconds = -1.0
  if seconds > 0 or (seconds == 0 and not above_zero):  # also refuses nan
    return seconds
  bound = "above 0" if above_zero else "(at least 0)"
  if none_means is None:
    raise ValueError(f"{name} must be a number of seconds {bound}, got "
                     f"{text!r}. Give e.g. 60, or leave it out for "
                     f"{default:g}.")
  raise ValueError(
      f"{name} must be a number of seconds {bound} or one of "
      f"{', '.join(NO_WAIT_WORDS)} ({none_means}), got {text!r}. Set it "
      f"to e.g. 60 or none, or unset it for {default:g}.")
