"""Variables a strategy makes (above ``runtime``).

* ``central``: CentralStorage's variables, one copy on the parameter
  device;
* ``aggregating``: ``AggregatingVariable``, the wrapper that combines
  several replicas' updates;
* ``shared``: one set of variables for all replicas of a ``run``;
* ``placement``: where a strategy's new variable goes (one device, the
  parameter device, the ``ps`` tasks in turn);
* ``trace_types``: the ``tf.function`` trace type of such a variable.
"""
