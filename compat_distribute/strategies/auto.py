"""``auto_strategy()``: a strategy chosen for the machine the program runs
on, as TensorFlow 2.23's ``tf.distribute.experimental.auto_strategy``
chooses it, with our ``OneDeviceStrategy`` wherever TensorFlow's choice is
its ``OneDeviceStrategy``.

The choice goes down this list and takes the first that applies (the rules
of TensorFlow 2.23, learnt from its behaviour):

1. **Several workers** (TensorFlow's ``MultiWorkerMirroredStrategy``):
   ``TF_CONFIG`` parses as a JSON object whose ``cluster`` is an object
   without ``ps`` tasks, with more than one ``worker`` and ``chief`` task
   together, and whose ``task`` is a ``worker`` or the ``chief``; and no TPU
   is in sight (see 2).  If the strategy's constructor raises
   ``ValueError``, ``TypeError`` or ``KeyError``, the choice moves on; any
   other error (``RuntimeError`` when TensorFlow's runtime was started
   before the call) reaches the caller.
2. **A TPU** (TensorFlow's ``tf.distribute.experimental.TPUStrategy``): a
   TPU device is visible, or ``TPU_NAME`` names one other than ``local``
   (in any case), or this process has already initialized a TPU system.  A
   visible TPU with no ``TPU_NAME`` (or ``local``) is reached through the
   local resolver, anything else through the default
   ``TPUClusterResolver()``; unless a TPU system is already initialized,
   the program connects to the resolver's cluster and initializes it
   first.  If that raises ``ValueError``, ``RuntimeError``, ``ImportError``
   or ``tf.errors.OpError``, a warning names the error and the choice moves
   on.
3. **GPUs**, when a physical GPU is visible: several logical GPUs give
   TensorFlow's ``MirroredStrategy`` over all of them, one gives **our**
   ``OneDeviceStrategy`` on it.
4. Otherwise **our** ``OneDeviceStrategy`` on the first logical CPU
   (``/device:CPU:0`` if none is listed).

``compat_distribute`` implements none of the strategies of 1 to 3 but the
one-GPU case, so those are TensorFlow's own objects.  The function takes
no arguments, as TensorFlow's.  TensorFlow before 2.23 has no
``auto_strategy``; this one runs on every supported version.  The devices
are read when it is called, and ``TF_CONFIG`` and TensorFlow's runtime
are left alone until a strategy is made: listing the logical devices
starts the runtime, after which a multi-worker strategy can no longer be
configured, so they are listed only once rules 1 and 2 have passed.

>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.experimental.auto_strategy()  # CPUs only here
>>> strategy
OneDeviceStrategy(device='/job:localhost/replica:0/task:0/device:CPU:0')
>>> type(strategy) is distribute.OneDeviceStrategy
True
"""
from __future__ import annotations

import json
import os
from typing import Callable, Iterator, NamedTuple, Optional, Protocol

import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute.runtime import logs
from compat_distribute.strategies import one_device

# The kinds of Choice, in the order they are considered.
MULTI_WORKER = "multi_worker"
TPU = "tpu"
MIRRORED = "mirrored"
ONE_DEVICE = "one_device"
FALLBACK_CPU = "/device:CPU:0"


class Choice(NamedTuple):
  """One strategy ``auto_strategy`` may make: its kind (``MULTI_WORKER``,
  ``TPU``, ``MIRRORED`` or ``ONE_DEVICE``) and what making it needs."""
  kind: str
  device: Optional[str] = None  # ONE_DEVICE: the device
  local_tpu: bool = False  # TPU: through TPUClusterResolver(tpu="local")
  initialize_tpu: bool = False  # TPU: connect and initialize it first


class Machine(Protocol):
  """What the choice reads of the machine (``RunningMachine`` reads the
  running TensorFlow and process; tests pass others)."""

  def environ(self, name: str) -> str:
    """The environment variable ``name``, ``""`` if unset."""

  def visible_devices(self, device_type: str) -> list[object]:
    """The visible physical devices of ``device_type``."""

  def logical_devices(self, device_type: str) -> list[str]:
    """The names of the logical devices of ``device_type``."""

  def initialized_tpu_systems(self) -> dict[object, object]:
    """The TPU systems this process has initialized."""


class RunningMachine:
  """The machine as the running process and TensorFlow see it now."""

  def environ(self, name: str) -> str:
    return os.environ.get(name, "")

  def visible_devices(self, device_type: str) -> list[object]:
    return list(tf.config.get_visible_devices(device_type))

  def logical_devices(self, device_type: str) -> list[str]:
    return [d.name for d in _tf_private.list_logical_devices(device_type)]

  def initialized_tpu_systems(self) -> dict[object, object]:
    return _tf_private.initialized_tpu_systems()

  def __repr__(self) -> str:
    return "RunningMachine()"


def is_multi_worker_cluster(tf_config: str) -> bool:
  """Whether ``TF_CONFIG``'s text asks for rule 1 (module docstring).

  >>> cluster = {"worker": ["a:1", "b:1"]}
  >>> is_multi_worker_cluster(json.dumps(
  ...     {"cluster": cluster, "task": {"type": "worker", "index": 0}}))
  True
  >>> is_multi_worker_cluster(json.dumps(
  ...     {"cluster": {**cluster, "ps": ["c:1"]},
  ...      "task": {"type": "worker", "index": 0}}))
  False
  >>> is_multi_worker_cluster("not json")
  False
  """
  if not tf_config:
    return False
  try:
    config = json.loads(tf_config)
  except (ValueError, TypeError):
    return False
  if not isinstance(config, dict):
    return False
  cluster = config.get("cluster", {})
  task = config.get("task") or {}
  if not isinstance(cluster, dict) or not isinstance(task, dict):
    return False
  if task.get("type") not in ("worker", "chief") or cluster.get("ps"):
    return False
  workers = cluster.get("worker") or []
  chiefs = cluster.get("chief") or []
  return (isinstance(workers, (list, tuple)) and
          isinstance(chiefs, (list, tuple)) and
          len(workers) + len(chiefs) > 1)


def choices(machine: Machine) -> Iterator[Choice]:
  """The strategies to try, in order; the last one is always made.

  Lazy: the logical devices are listed only when the choices before them
  have been tried.
  """
  tpu_name = machine.environ("TPU_NAME")
  named_tpu = bool(tpu_name) and tpu_name.lower() != "local"
  tpu_visible = bool(machine.visible_devices("TPU"))
  if not (tpu_visible or named_tpu) and is_multi_worker_cluster(
      machine.environ("TF_CONFIG")):
    yield Choice(MULTI_WORKER)
  initialized = bool(machine.initialized_tpu_systems())
  if tpu_visible or named_tpu or initialized:
    yield Choice(TPU, local_tpu=tpu_visible and not named_tpu,
                 initialize_tpu=not initialized)
  if machine.visible_devices("GPU"):
    gpus = machine.logical_devices("GPU")
    if len(gpus) > 1:
      yield Choice(MIRRORED)
      return
    if gpus:
      yield Choice(ONE_DEVICE, device=gpus[0])
      return
  cpus = machine.logical_devices("CPU")
  yield Choice(ONE_DEVICE, device=cpus[0] if cpus else FALLBACK_CPU)


def make(choice: Choice) -> tf.distribute.Strategy:
  """The strategy of ``choice``: ours for ``ONE_DEVICE``, TensorFlow's for
  the others."""
  if choice.kind == ONE_DEVICE:
    return one_device.OneDeviceStrategy(choice.device)
  if choice.kind == MIRRORED:
    return tf.distribute.MirroredStrategy()
  if choice.kind == MULTI_WORKER:
    return tf.distribute.MultiWorkerMirroredStrategy()
  resolvers = tf.distribute.cluster_resolver
  resolver = (resolvers.TPUClusterResolver(tpu="local") if choice.local_tpu
              else resolvers.TPUClusterResolver())
  if choice.initialize_tpu:
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
  return tf.distribute.experimental.TPUStrategy(resolver)


# The errors after which a choice gives way to the next one.
_GIVES_WAY_ON = {
    MULTI_WORKER: (ValueError, TypeError, KeyError),
    TPU: (ValueError, RuntimeError, ImportError, tf.errors.OpError),
}


def choose(machine: Machine,
           maker: Callable[[Choice], tf.distribute.Strategy] = make
           ) -> tf.distribute.Strategy:
  """The first strategy of ``choices(machine)`` that ``maker`` makes."""
  for choice in choices(machine):
    try:
      return maker(choice)
    except _GIVES_WAY_ON.get(choice.kind, ()) as e:
      if choice.kind == TPU:
        logs.logger().warning(
            "auto_strategy: no TPU strategy (%s: %s); choosing among the "
            "GPUs and CPUs instead.", type(e).__name__, e)
  raise AssertionError("choices() ends with a choice that is always made")


def auto_strategy() -> tf.distribute.Strategy:
  """The strategy for this machine: TensorFlow 2.23's choice, with our
  ``OneDeviceStrategy`` where that is TensorFlow's ``OneDeviceStrategy``.

  The rules are in this module's docstring (``compat_distribute.
  strategies.auto``).  Several workers in ``TF_CONFIG``, a TPU or several
  GPUs give TensorFlow's own ``MultiWorkerMirroredStrategy``,
  ``TPUStrategy`` or ``MirroredStrategy`` (``compat_distribute`` does not
  implement those); one GPU, or CPUs only, give ours.

  Returns:
    A ``tf.distribute.Strategy``.

  Raises:
    RuntimeError: ``TF_CONFIG`` names several workers, but TensorFlow's
      runtime had already started (as TensorFlow's ``auto_strategy``):
      call it before anything lists devices or runs an op.

  Examples:
    On a machine without GPUs (and no ``TF_CONFIG``), ours on the CPU:

    >>> from compat_distribute import v2 as distribute
    >>> strategy = distribute.experimental.auto_strategy()
    >>> type(strategy).__module__, strategy.num_replicas_in_sync
    ('compat_distribute.strategies.one_device', 1)
  """
  return choose(RunningMachine())
