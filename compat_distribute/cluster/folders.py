"""Folders of the served tasks: where a relative path lands on a ps, and
the file that tells a ``serve`` its chief is done.

``serve`` runs in the folder it was started in and makes no folder of its
own, as TensorFlow's server processes do.  So:

* a relative path the client's program gives an op that runs on a task --
  a ps writes its own part of every checkpoint (``SaveV2`` runs where the
  variables are) -- is resolved in that task's folder.  At connect, the
  client checks (``folders_elsewhere``: a file it makes in its own folder,
  looked up by its relative name on each ps) and warns, naming each ps
  that resolves relative paths elsewhere and the fix: an absolute folder
  on storage the chief and every ps can write, or ``serve`` started in
  the chief's folder.
* ``done_file``: the name of the file the client writes on a task at its
  exit, relative, so into the folder that task's ``serve`` runs in; one
  name per task (its job, index and address), so tasks started in one
  folder do not end each other.  ``serve`` removes it on sight, and at its
  start one a killed ``serve`` of the task left.
"""
from __future__ import annotations

import os
import re
import tempfile

import tensorflow as tf

from compat_distribute.runtime import logs

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


def folders_elsewhere(cluster: dict[str, list[str]]) -> list[str]:
  """The ps tasks (``/job:ps/task:I at address``) that resolve a relative
  path in another folder than this process's working folder (they do not
  see a file made here under a relative name); empty also when that cannot
  be told (this folder cannot be written)."""
  try:
    handle, marker = tempfile.mkstemp(prefix=".compat_distribute-folder-",
                                      dir=os.getcwd())
  except OSError:
    return []
  os.close(handle)
  elsewhere = []
  try:
    for i, address in enumerate(cluster.get("ps", ())):
      with tf.device(f"/job:ps/replica:0/task:{i}/device:CPU:0"):
        found = tf.io.matching_files(os.path.basename(marker))
      if not int(tf.size(found)):
        elsewhere.append(f"/job:ps/task:{i} at {address}")
  finally:
    os.remove(marker)
  return elsewhere


def warn_of_folders(cluster: dict[str, list[str]]) -> None:
  """Logs a warning naming the ps tasks of ``folders_elsewhere``."""
  try:
    elsewhere = folders_elsewhere(cluster)
  except tf.errors.OpError as e:  # the program's first op will say it
    logs.logger().debug("could not compare the ps tasks' folders: %s", e)
    return
  if elsewhere:
    logs.logger().warning(
        "%s: a relative path resolves there in the folder its `serve` runs "
        "in, not in %s where this program runs; a ps writes its own part of "
        "every checkpoint, so a relative checkpoint or model folder (e.g. "
        "'model/') fails there (NotFoundError) or lands elsewhere. Give the "
        "program an absolute folder on storage this task and every ps can "
        "write, or start serve in %s.", "; ".join(elsewhere), os.getcwd(),
        os.getcwd())
