"""Past one machine: the cluster strategy family.

* ``addresses``: task addresses (``host:port``, ``[IPv6]:port``), the one
  "does this address accept connections" check and the one reader of a
  number of seconds; imports no TensorFlow (the supervisor and ``serve``
  use it before TensorFlow starts).
* ``tasks``: the cluster and this task, from ``TF_CONFIG`` or a cluster
  resolver (checked, with errors that show the value and the fix), and a
  bounded wait for tasks to be up.
* (which ``ps`` task a new variable goes to: ``variables/placement.py``,
  where every strategy asks where its variables go).
* ``parameter_server``: the v1 ``ParameterServerStrategy``, graph mode
  only; ``parameter_server_extended``: its extended (cluster, task, the
  wait, where variables go), on the replica machinery of
  ``CentralStorageStrategy``; ``configured``:
  the checks of ``configure(cluster_spec=...)``.
* ``central_storage``: the facades' ``CentralStorageStrategy`` classes,
  cluster-aware (TF2, remote eager); ``remote``: its client (which
  cluster, connecting, telling the tasks the job is done); ``reachability``:
  the tasks' first exchange at connect; ``failures``: the watchdog;
  ``causes``: which errors a lost task caused (``TaskLostError``);
  ``folders``: where relative paths land on a ps, and each served task's
  files (the chief's "done", a MultiWorkerMirroredStrategy's cluster check).
* ``multi_worker``: ``MultiWorkerMirroredStrategy`` (v2, experimental, v1)
  on that TF2 cluster form, the chief (else worker 0) driving;
  ``multi_worker_config``: its cluster and task from ``TF_CONFIG``, and
  the refusals (a ``ps`` job, an ``evaluator``).  Whether a task runs the
  program or serves it is the runner's decision (``runner.multi_worker``).
* ``serve``: ``python -m compat_distribute serve``, every worker and ps
  task's program; ``supervisor``: ``run --max-restarts``; ``lifetime``:
  task processes that end with the process that started them.
* ``local``: ``LocalCluster``, TensorFlow server processes on 127.0.0.1 for
  tests and the demo (``compat_distribute.demo.cluster``: ``python -m
  compat_distribute demo --cluster WxP``); ``local_served``:
  ``ServedCluster``, a TF2 served cluster on this machine for tests, the
  demo and the benchmarks.  Production code does not import them.

The transport is TensorFlow's own distributed runtime (``tf.distribute.Server``,
gRPC); nothing here carries tensors.
"""
