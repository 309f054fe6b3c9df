"""Values across replicas (above ``runtime``).

* ``distributed``: ``PerReplica`` and ``Mirrored``, their ``TypeSpec``,
  selecting a replica's part and regrouping replicas' results;
* ``reduction``: reduction's argument checks and what it computes (SUM,
  MEAN across replicas, and along an axis for ``Strategy.reduce``);
* ``cross_device``: moving values for a reduction, a gather or a broadcast
  across devices (to one device and out, or by collective ops).
"""
