"""A TF2 cluster program of docs/cluster.md beside its native reference.

The reference of a ``CentralStorageStrategy`` cluster program (1 ps x 2
workers) is the same program run by ``python`` alone on one machine, with
TensorFlow's own ``CentralStorageStrategy`` given two logical CPUs: as many
replicas as the cluster's two workers, the same ops on the same values,
only placed elsewhere (docs/cluster.md: ``rtol=1e-5``).

>>> print(native_source(
...     "import tensorflow as tf\\n"
...     "s = tf.distribute.experimental.CentralStorageStrategy()\\n"
... ).splitlines()[-1])
s = tf.distribute.experimental.CentralStorageStrategy(["/cpu:0", "/cpu:1"])
"""
import json
import sys

import numpy as np

from compat_distribute.cluster import local as local_cluster
from compat_distribute.cluster import local_served

CONSTRUCTOR = "tf.distribute.experimental.CentralStorageStrategy()"
TWO_CPUS = (
    "import tensorflow as tf\n"
    "tf.config.set_logical_device_configuration(\n"
    "    tf.config.list_physical_devices('CPU')[0],\n"
    "    [tf.config.LogicalDeviceConfiguration()] * 2)\n")


def native_source(program: str) -> str:
  """``program`` (which makes the strategy once, with no devices) on two
  logical CPUs of this machine, TensorFlow's own strategy under ``python``."""
  assert program.count(CONSTRUCTOR) == 1, program
  return TWO_CPUS + program.replace(
      CONSTRUCTOR, CONSTRUCTOR[:-1] + '["/cpu:0", "/cpu:1"])')


def run_native(script: str, args: list, timeout: float) -> local_cluster.TaskResult:
  """``python script args`` alone, without ``TF_CONFIG``; bounded."""
  logs: list = []
  try:
    process = local_cluster.start_process([sys.executable, script, *args],
                                          {"TF_CONFIG": ""}, logs)
    process.task = "native"
    return local_served.collect(process, timeout)
  finally:
    for log in logs:
      log.close()


def final_weights(stdout: str, what: str = "the program") -> list:
  """The arrays of the ``final weights: [...]`` line a program printed."""
  for line in stdout.splitlines():
    if line.startswith("final weights: "):
      return [np.asarray(w) for w in json.loads(line[len("final weights: "):])]
  raise AssertionError(f"{what} printed no final weights:\n{stdout[-3000:]}")


def assert_same(ours: list, reference: list) -> None:
  """Equal to float32 round-off: ``rtol=1e-5`` (``atol=1e-6`` near 0)."""
  assert len(ours) == len(reference)
  for a, b in zip(ours, reference):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
