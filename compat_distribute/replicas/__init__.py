"""How replicas run (above ``values`` and ``variables``).

* ``plan``: ``ReplicaPlan``, all the layer is told of a strategy (built
  once by ``extended``), and ``Replicas``, the plan with the layer's caches;
* ``runner``: the one place that chooses how ``fn`` runs on the replicas,
  and the one-replica paths;
* ``threads``: several replicas, the per-replica loop of one run;
* ``rendezvous``: where they meet at ``merge_call`` (lease, workers,
  requests, results), made by the first one;
* ``own_thread``: a graph's replicas built on a thread of their own, as
  TensorFlow's are;
* ``workers``: the long-lived worker threads and their pool;
* ``caller_state``: what a worker borrows from the calling thread;
* ``context``: ``ReplicaContext``, what ``fn`` sees;
* ``errors``: how a failed run unwinds and which error the caller sees.
"""
