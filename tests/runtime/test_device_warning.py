"""The warning about a device the process does not have: true, once, and
always in one format (issue 15).

A v1 strategy's ``update_config_proto`` makes its ``Session`` create every
CPU the strategy lists, so for a missing CPU a v1 strategy's warning says
that instead of claiming the work will go to CPU:0; a v2 strategy's (and
any strategy's for a missing GPU) says the work goes to CPU:0.  Whether or
not the program configured logging, the line starts with
``WARNING:compat_distribute:``.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from compat_distribute.runtime import devices
from compat_distribute import v1
from compat_distribute import v2

MISSING_CPU = "/job:localhost/replica:0/task:0/device:CPU:7"
MISSING_GPU = "/job:localhost/replica:0/task:0/device:GPU:6"


def _warnings_for(make, device, caplog):
  devices._reported.discard(device)  # pylint: disable=protected-access
  with caplog.at_level("WARNING", logger="compat_distribute"):
    make(device)
    make(device)  # reported once
  return [r.getMessage() for r in caplog.records
          if r.name == "compat_distribute" and device in r.getMessage()]


@pytest.mark.parametrize("make", [
    v1.OneDeviceStrategy,
    lambda d: v1.experimental.CentralStorageStrategy([d], "/cpu:0")],
    ids=["one_device", "central_storage"])
def test_v1_missing_cpu_says_the_session_creates_it(make, caplog):
  (message,) = _warnings_for(make, MISSING_CPU, caplog)
  assert "update_config_proto" in message
  assert "does not exist" not in message
  assert "elsewhere (eager execution, tf.function, other sessions)" in message


@pytest.mark.parametrize("make,device,", [
    (v2.OneDeviceStrategy, MISSING_CPU),
    (v1.OneDeviceStrategy, MISSING_GPU),
    (lambda d: v2.experimental.CentralStorageStrategy([d], "/cpu:0"),
     MISSING_GPU)], ids=["v2_cpu", "v1_gpu", "v2_central_storage_gpu"])
def test_missing_elsewhere_says_where_work_goes(make, device, caplog):
  (message,) = _warnings_for(make, device, caplog)
  assert "does not exist on this machine" in message
  assert "device:CPU:0 instead" in message


SCRIPT = textwrap.dedent("""
    import logging
    import tensorflow as tf
    from compat_distribute import v1, v2
    tf.compat.v1.disable_eager_execution()
    v1.OneDeviceStrategy("/cpu:1")    # root logger has no handler yet
    logging.basicConfig()             # now it has one
    v2.OneDeviceStrategy("/gpu:4")
    logging.getLogger().handlers.clear()
    v1.OneDeviceStrategy("/gpu:5")    # silent again
    """)


@pytest.mark.subprocess
def test_one_format_with_and_without_logging_configured():
  done = subprocess.run([sys.executable, "-c", SCRIPT],
                        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  ours = [line for line in done.stderr.splitlines()
          if "Strategy: device" in line]
  assert len(ours) == 3, done.stderr[-3000:]
  assert all(line.startswith("WARNING:compat_distribute:OneDeviceStrategy: "
                             "device /") for line in ours), ours
  assert "CPU:1" in ours[0] and "update_config_proto" in ours[0]
  assert "GPU:4" in ours[1] and "GPU:5" in ours[2]
