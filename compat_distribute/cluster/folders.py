"""Folders of the served tasks: where a relative checkpoint path lands, and
the file that tells a ``serve`` its chief is done.

``serve`` runs in the folder it was started in and makes no folder of its
own, as TensorFlow's server processes do.  So:

* a relative checkpoint path means the chief's folder, as on one machine:
  at connect the chief routes the files of every checkpoint saved or
  restored under a relative prefix through its own CPU
  (``relative_checkpoints_on``: TensorFlow's
  ``CheckpointOptions.experimental_io_device``, filled in where the program
  gave none).  The ps tasks send it their variables' values; they need no
  storage.  An absolute prefix is left to TensorFlow: each ps writes its
  own part of the checkpoint (``SaveV2`` runs where the variables are), so
  it must be storage the chief and every ps can write, at that path.
* ``done_file``: the name of the file the client writes on a task at its
  exit, relative, so into the folder that task's ``serve`` runs in; one
  name per task (its job, index and address), so tasks started in one
  folder do not end each other.  ``serve`` removes it on sight, and at its
  start one a killed ``serve`` of the task left.
"""
from __future__ import annotations

import os
import re

import tensorflow as tf

from compat_distribute import _tf_private

# The start of every task_file name.
FILE_PREFIX = ".compat_distribute-"
# The start of every done_file name.
DONE_PREFIX = FILE_PREFIX + "done-"


def task_file(kind: str, job: str, index: int, address: str) -> str:
  """The name of the ``kind`` file of ``job``/``index``'s ``serve`` at
  ``address`` in its folder: one per task, so tasks started in one folder
  (one machine, or a shared one) never read or end each other's.  Kinds:
  ``done`` (the chief's "the job is done"), ``cluster`` (the cluster of the
  task's TF_CONFIG, which a MultiWorkerMirroredStrategy client compares with
  its own), ``refused`` (that client's reason to refuse the task).

  >>> task_file("cluster", "worker", 1, "h:2")
  '.compat_distribute-cluster-worker-1-h_2'
  """
  return (f"{FILE_PREFIX}{kind}-{job}-{index}-"
          + re.sub(r"[^A-Za-z0-9.]+", "_", address))


def done_file(job: str, index: int, address: str) -> str:
  """The name of the file that tells ``job``/``index``'s ``serve`` at
  ``address`` the job is done (``task_file``).

  >>> done_file("ps", 0, "[::1]:2222"), done_file("worker", 1, "h:2")
  ('.compat_distribute-done-ps-0-_1_2222', '.compat_distribute-done-worker-1-h_2')
  """
  return task_file("done", job, index, address)


def tell_done(job: str, index: int, address: str) -> None:
  """Tells ``job``/``index``'s ``serve`` (at ``address``) the job is done:
  writes its ``done_file`` there, by an op on that task."""
  with tf.device(f"/job:{job}/replica:0/task:{index}/device:CPU:0"):
    tf.io.write_file(done_file(job, index, address), "done")


def is_relative(prefix: object) -> bool:
  """Whether a checkpoint prefix -- a ``str``, ``bytes`` or eager string
  tensor -- is a relative path (no leading ``/``, no ``scheme://``); False
  for a symbolic tensor, whose value is not known when its ops are made.

  >>> is_relative("model/ckpt-1"), is_relative(tf.constant("/m/ckpt-1"))
  (True, False)
  >>> is_relative(b"gs://bucket/ckpt-1")
  False
  """
  if isinstance(prefix, _tf_private.EagerTensor):
    prefix = prefix.numpy()
  if not isinstance(prefix, (str, bytes)):
    return False
  path = os.fsdecode(prefix)
  return not (os.path.isabs(path) or "://" in path)


def relative_checkpoints_on(job: str, index: int) -> None:
  """From now on, this process's TF2 checkpoints saved or restored under a
  relative prefix are read and written by ``job``/``index``'s CPU -- this
  process's task: the prefix then means this process's folder -- unless
  the program names an ``experimental_io_device`` itself."""
  device = f"/job:{job}/replica:0/task:{index}/device:CPU:0"
  _tf_private.route_io(lambda prefix: device if is_relative(prefix) else None)
