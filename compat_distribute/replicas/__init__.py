"""How replicas run (above ``values`` and ``variables``).

* ``runner``: the one place that chooses how ``fn`` runs on the replicas,
  and the one-replica paths;
* ``threads``: several replicas, ``merge_call`` across them;
* ``workers``: the long-lived worker threads and their pool;
* ``caller_state``: what a worker borrows from the calling thread;
* ``context``: ``ReplicaContext``, what ``fn`` sees;
* ``errors``: how a failed run unwinds and which error the caller sees.
"""
