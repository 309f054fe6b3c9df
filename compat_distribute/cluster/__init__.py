"""Past one machine: the cluster strategy family.

* ``tasks``: the cluster and this task, from ``TF_CONFIG`` or a cluster
  resolver (checked, with errors that show the value and the fix), and a
  bounded wait for tasks to be up.
* (which ``ps`` task a new variable goes to: ``variables/placement.py``,
  where every strategy asks where its variables go).
* ``parameter_server``: the v1 ``ParameterServerStrategy`` and its extended,
  on the replica machinery of ``CentralStorageStrategy``.
* ``local``: ``LocalCluster``, TensorFlow server processes on 127.0.0.1 for
  tests and the demo (``compat_distribute.demo.cluster``: ``python -m
  compat_distribute demo --cluster WxP``).

The transport is TensorFlow's own distributed runtime (``tf.distribute.Server``,
gRPC); nothing here carries tensors.
"""
