"""Variables a strategy makes (above ``runtime``).

* ``central``: CentralStorage's variables, one copy on the parameter
  device;
* ``aggregating``: ``AggregatingVariable``, the wrapper that combines
  several replicas' updates;
* ``shared``: one set of variables for all replicas of a ``run``;
* ``trace_types``: the ``tf.function`` trace type of such a variable.
"""
