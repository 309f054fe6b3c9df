"""The base strategy API (above ``input`` and ``replicas``).

* ``strategy``: ``Strategy`` (TF2) and the methods both generations share;
* ``strategy_v1``: ``StrategyV1``, the v1 additions;
* ``dataset_methods``: the input and logical-device methods both
  generations have;
* ``iterators``: the input-iterator methods both generations have;
* ``extended``: the base ``StrategyExtended`` (abstract hooks, shared
  defaults);
* ``extended_v1``: the v1-only part of ``strategy.extended``;
* ``configuration``: ``update_config_proto``, ``configure`` (and its
  cluster hook), deep and shallow copies, both generations;
* ``session_config``: the ``ConfigProto`` a strategy asks a session for;
* ``errors``: errors for bad arguments to ``strategy.extended``.
"""
