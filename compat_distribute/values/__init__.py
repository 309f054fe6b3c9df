"""Values across replicas (above ``runtime``).

* ``distributed``: ``PerReplica`` and ``Mirrored``, their ``TypeSpec``,
  selecting a replica's part and regrouping replicas' results;
* ``reduce``: checking ``reduce_op`` and ``axis`` arguments;
* ``cross_device``: reducing, gathering and broadcasting across devices.
"""
