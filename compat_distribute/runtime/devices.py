"""Device names: canonical spelling, a one-time report of missing devices,
the host CPU.  (Where a strategy's variable creator places a new variable
is ``variables/placement.py``.)

>>> canonicalize("/cpu:0")
'/job:localhost/replica:0/task:0/device:CPU:0'
>>> canonicalize("GPU:1")
'/job:localhost/replica:0/task:0/device:GPU:1'
"""
from __future__ import annotations

from typing import Any, Iterable

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.runtime import logs
from compat_distribute.runtime.errors import Error

_log = logs.logger()
_reported: set[str] = set()

# The host's CPU, where input pipelines and (by default) central variables go.
HOST_CPU = "/device:CPU:0"

# The job and task of this process's own devices when executing eagerly:
# ``localhost`` task 0, until a cluster layer connects this process to a
# cluster as another task (``set_eager_task``).
_eager_task = tf.DeviceSpec(job="localhost", replica=0, task=0)


def set_eager_task(job: str, task: int) -> None:
  """Names this process's own devices ``/job:JOB/replica:0/task:TASK``.

  What the cluster layer calls after it connects this process to a cluster
  with ``tf.config.experimental_connect_to_cluster`` (whose local devices
  are then no longer ``/job:localhost``), so that ``canonicalize`` names
  them as TensorFlow does.

  >>> set_eager_task("chief", 0); canonicalize("/cpu:0")
  '/job:chief/replica:0/task:0/device:CPU:0'
  >>> set_eager_task("localhost", 0); canonicalize("/cpu:0")
  '/job:localhost/replica:0/task:0/device:CPU:0'
  """
  global _eager_task
  _eager_task = tf.DeviceSpec(job=job, replica=0, task=int(task))


def eager_task() -> str:
  """This process's own task when executing eagerly, e.g.
  ``/job:localhost/replica:0/task:0``."""
  return _eager_task.to_string()


def canonicalize(device: Any) -> str:
  """Full device name, completed the way TensorFlow completes it.

  Missing parts come from the innermost ``tf.device`` scope, then from
  replica 0, task 0, device CPU:0; the job is ``localhost`` when executing
  eagerly (this process's task once connected to a cluster, see
  ``set_eager_task``) and left out in a TF1 graph, as TensorFlow does.  ``None`` or
  ``""`` names no device, so the scope or CPU:0 is used (TensorFlow's
  ``OneDeviceStrategy(None)`` too).

  Raises:
    DeviceTypeError: ``device`` is not a string (nor a ``LogicalDevice``).
    ValueError: TensorFlow cannot parse it (e.g. ``"/foo:0"``), or its
      device type is not in capitals (e.g. ``"/device:foo:0"``; also an
      ``AssertionError``, as in TensorFlow).
  """
  if device is None:
    device = ""
  if not isinstance(device, str):
    device = getattr(device, "name", device)
  if not isinstance(device, str):
    raise DeviceTypeError(
        f"A device must be a string such as '/cpu:0' or 'GPU:1', got "
        f"{device!r} of type {type(device).__name__}. Pass the device's "
        "name (for a tf.DeviceSpec, spec.to_string()).")
  try:
    spec = tf.DeviceSpec.from_string(device)
  except ValueError as e:
    raise ValueError(
        f"Cannot parse device {device!r} ({e}). Use a name such as '/cpu:0', "
        "'/gpu:1' or '/job:localhost/replica:0/task:0/device:CPU:0'.") from e
  if spec.device_type and spec.device_type != spec.device_type.upper():
    raise DeviceTypeCaseError(
        f"Device type {spec.device_type!r} in device {device!r} must be in "
        f"capitals (TensorFlow's rule). Write "
        f"'/device:{spec.device_type.upper()}:...'.")
  result = tf.DeviceSpec(replica=0, task=0, device_type="CPU", device_index=0)
  if tf.compat.v1.executing_eagerly_outside_functions():
    result = result.replace(job=_eager_task.job, task=_eager_task.task)
  scope = _tf_private.current_device()
  if scope:
    result = result.make_merged_spec(tf.DeviceSpec.from_string(scope))
  return result.make_merged_spec(spec).to_string()


class DeviceTypeError(Error, TypeError, AttributeError):
  """A device that is not a string.

  TensorFlow fails on it with ``AttributeError`` (numbers, ``DeviceSpec``)
  or ``TypeError`` (lists, bytes); this error is both.
  """


class DeviceTypeCaseError(Error, ValueError, AssertionError):
  """A device type not in capitals (TensorFlow: ``AssertionError``)."""


def default_compute_devices() -> list[str]:
  """All local GPUs, else the host CPU (TensorFlow's default compute
  devices), canonical."""
  gpus = _tf_private.list_logical_devices("GPU")
  if gpus:
    return [canonicalize(f"/device:GPU:{i}") for i in range(len(gpus))]
  return [canonicalize(HOST_CPU)]


def host_of(device: str) -> str:
  """The CPU device of the host that owns ``device``."""
  spec = tf.DeviceSpec.from_string(device)
  return spec.replace(device_type="CPU", device_index=0).to_string()


def local_device_names() -> list[str]:
  return [canonicalize(d.name) for d in _tf_private.list_logical_devices()]


def report_missing(devices: Iterable[str], owner: str,
                   session_creates_cpus: bool = False) -> None:
  """Logs once per device a warning for each device that does not exist.

  TensorFlow's soft placement silently runs such a device's ops elsewhere
  (on the host CPU); we say so, by name.  With ``session_creates_cpus`` (a
  v1 strategy, whose ``update_config_proto`` asks a ``Session`` for every
  CPU it uses) a missing CPU is not missing from such a session, and the
  warning says so instead of claiming the work moves.
  """
  existing = local_device_names()
  known = {_type_and_index(d) for d in existing}
  for device in devices:
    if _type_and_index(device) in known or device in _reported:
      continue
    _reported.add(device)
    fallback = host_of(device)
    if session_creates_cpus and _type_and_index(device)[0] == "CPU":
      _log.warning(
          "%s: device %s is not one of this process's devices (%s). A "
          "tf.compat.v1.Session made with config=strategy.update_config_proto"
          "(tf.compat.v1.ConfigProto()) creates it and runs its work there; "
          "elsewhere (eager execution, tf.function, other sessions) "
          "TensorFlow places its work on %s. To have it everywhere, split the "
          "CPU with tf.config.set_logical_device_configuration before "
          "TensorFlow starts.", owner, device, ", ".join(existing), fallback)
      continue
    _log.warning(
        "%s: device %s does not exist on this machine; TensorFlow will place "
        "its work on %s instead. Local devices: %s. Pass one of those to use "
        "a specific device.", owner, device, fallback, ", ".join(existing))


def _type_and_index(device: str) -> tuple[str, int]:
  """What identifies a local device, whether or not the name has a job."""
  spec = tf.DeviceSpec.from_string(device)
  return spec.device_type, spec.device_index
