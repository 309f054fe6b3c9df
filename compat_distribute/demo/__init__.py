"""The demo: ``python -m compat_distribute demo [--cluster WxP]``.

* ``single``: the command line, and the single-machine demo (one process,
  the host CPU split into logical devices);
* ``cluster``: the cluster demo (``--cluster WxP``) and its worker program,
  ``python -m compat_distribute.demo.cluster``;
* ``common``: what both share (data, weights, the TF1 step, the table);
* ``cluster_v2_chief``: the chief program of ``--cluster WxP --api v2``;
* ``cluster_restart``, ``cluster_v2_restart_chief``: ``--kill_worker_after
  N`` and its chief program;
* ``cluster_multi_worker``, ``multi_worker_program``: ``--cluster Wx0 --api
  v2 --multi_worker`` (``MultiWorkerMirroredStrategy``, ours beside
  TensorFlow's own) and its program.
"""
