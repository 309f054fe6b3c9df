"""``ParameterServerStrategy`` (v1): CentralStorage spread over a cluster.

Variables live on the tasks of the ``ps`` job (in turn, in creation order);
each worker runs its own copy of the program (between-graph) and replicates
the computation over its local compute devices -- its GPUs, else its CPU as
one replica -- with the same replica machinery as ``CentralStorageStrategy``.
The cluster and this task come from ``TF_CONFIG`` or a cluster resolver;
the wire is TensorFlow's distributed runtime (``tf.distribute.Server``,
gRPC).  Without a cluster the strategy runs on this machine alone, as
``CentralStorageStrategy``.

Building the graph, ``configure`` and ``update_config_proto`` need no
running servers and return at once, as TensorFlow's do (TensorFlow's
distribute coordinator, behind Estimator's ``train_and_evaluate``, calls
``configure`` before it starts the task's server).  The one wait is
``extended.wait_for_cluster()``, called before the first ``Session``: it
waits (at most ``extended.cluster_wait_timeout`` seconds, None: not at all)
for this task and the ``ps`` tasks to accept connections, saying what it
waits for, and names the tasks still missing:

>>> from compat_distribute import v1 as distribute
>>> resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
...     tf.train.ClusterSpec({"worker": ["127.0.0.1:2222", "127.0.0.1:2223"],
...                           "ps": ["127.0.0.1:2224", "127.0.0.1:2225"]}),
...     task_type="worker", task_id=1)
>>> with tf.Graph().as_default():
...   strategy = distribute.experimental.ParameterServerStrategy(resolver)
...   with strategy.scope():
...     a = tf.compat.v1.get_variable("a", initializer=1.0)
...     b = tf.compat.v1.get_variable("b", initializer=2.0)
>>> config = strategy.update_config_proto(tf.compat.v1.ConfigProto())
>>> strategy
ParameterServerStrategyV1(task='/job:worker/task:1', parameter_devices=('/job:ps/task:0', '/job:ps/task:1'), worker_devices=['/job:worker/replica:0/task:1/device:CPU:0'])
>>> a.device, b.device, strategy.num_replicas_in_sync
('/job:ps/task:0', '/job:ps/task:1', 1)
>>> list(config.device_filters)
['/job:worker/task:1', '/job:ps']
>>> strategy.extended.should_checkpoint  # worker 1 is not the chief
False
>>> strategy.extended.wait_for_cluster(timeout=0.2)  # nothing listens there
Traceback (most recent call last):
...
compat_distribute.cluster.tasks.TaskUnavailableError: Cluster tasks not reachable after 0.2 s: /job:worker/task:1 at 127.0.0.1:2223, /job:ps/task:0 at 127.0.0.1:2224, /job:ps/task:1 at 127.0.0.1:2225. ...
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import tensorflow as tf

from compat_distribute.api import strategy_v1
from compat_distribute.cluster import configured as configured_lib
from compat_distribute.cluster.parameter_server_extended import (
    ParameterServerExtended, configure_extended, copy_extended)


class ParameterServerStrategyV1(
    strategy_v1.StrategyV1,
    tf.compat.v1.distribute.experimental.ParameterServerStrategy):
  """``tf.compat.v1.distribute.experimental.ParameterServerStrategy``:
  variables on the ``ps`` tasks, computation on each worker's devices.

  Every worker runs the same TF1 graph program with its own ``TF_CONFIG``
  and connects a ``tf.compat.v1.Session`` to its own server, with the
  config from ``update_config_proto``.  Unlike TensorFlow's, ``run`` and
  ``experimental_run`` return the replicas' results (TensorFlow's return
  None).

  Args:
    cluster_resolver: where the cluster and this task come from; None reads
      ``TF_CONFIG``.  An empty cluster means this machine alone.

  Raises:
    ValueError: a malformed ``TF_CONFIG`` or cluster (see
      ``compat_distribute.cluster.check_tf_config``).

  Examples:
    Without ``TF_CONFIG`` (and without a resolver) the strategy uses this
    machine alone: one replica, and the variables on its CPU.

    >>> from compat_distribute import v1 as distribute
    >>> strategy = distribute.experimental.ParameterServerStrategy()
    >>> strategy.num_replicas_in_sync
    1
    >>> strategy.extended.parameter_devices
    ('/job:localhost/replica:0/task:0/device:CPU:0',)
  """

  def __init__(self, cluster_resolver: Any = None) -> None:
    super().__init__(ParameterServerExtended(self, cluster_resolver))

  def _with_same_configuration(self) -> Any:
    copied = type(self).__new__(type(self))
    super(ParameterServerStrategyV1, copied).__init__(
        copy_extended(self.extended, copied))
    return copied

  def __repr__(self) -> str:
    return f"{type(self).__name__}({self.extended.describe()})"

  @property
  def cluster_resolver(self) -> Any:
    """The cluster resolver the cluster and task were read from."""
    return self.extended._cluster_resolver  # pylint: disable=protected-access

  def _configure_cluster(self, cluster_spec: configured_lib.ClusterSpecLike,
                         task_type: configured_lib.TaskType,
                         task_id: configured_lib.TaskId) -> None:
    """``configure`` with ``cluster_spec``: points the strategy at that
    cluster as task ``task_type``/``task_id`` (as TensorFlow's does; build
    the graph afterwards); the wait setting is kept."""
    extended = self.extended
    configured = configure_extended(
        self, cluster_spec, task_type, task_id,
        extended._task_info.num_gpus, extended.cluster_wait_timeout)  # pylint: disable=protected-access
    if configured is not None:
      self._extended = configured

  def _refuse_eager(self, method: str) -> None:
    if tf.executing_eagerly():
      raise NotImplementedError(
          f"ParameterServerStrategy (v1).{method} builds TF1 graphs, but "
          "eager execution is on. Call tf.compat.v1.disable_eager_execution() "
          "at the start of the program or build the model inside `with "
          "tf.Graph().as_default():`. For TF2-style training use "
          "tf.distribute.experimental.ParameterServerStrategy with a "
          "ClusterCoordinator (TensorFlow's own).")

  def scope(self) -> Any:
    """``Strategy.scope``; graph mode only (as TensorFlow's).

    Returns:
      The context manager; variables made in it go to the ``ps`` tasks.

    Raises:
      NotImplementedError: eager execution is on.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> with tf.Graph().as_default():
      ...   strategy = distribute.experimental.ParameterServerStrategy()
      ...   with strategy.scope():
      ...     bias = tf.compat.v1.get_variable("bias", initializer=0.5)
      ...   print(bias.device.split("/")[-1])
      device:CPU:0
    """
    self._refuse_eager("scope()")
    return super().scope()

  def experimental_distribute_dataset(self, dataset: Any,
                                      options: Any = None) -> Any:
    """``Strategy.experimental_distribute_dataset``; graph mode only.

    Args:
      dataset: a ``tf.data.Dataset`` whose elements are global batches.
      options: a ``tf.distribute.InputOptions``, or None for the defaults.

    Returns:
      A distributed dataset; make its iterator with
      ``tf.compat.v1.data.make_initializable_iterator``.

    Raises:
      NotImplementedError: eager execution is on.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> with tf.Graph().as_default():
      ...   strategy = distribute.experimental.ParameterServerStrategy()
      ...   batches = strategy.experimental_distribute_dataset(
      ...       tf.data.Dataset.range(6).batch(3))
      ...   iterator = tf.compat.v1.data.make_initializable_iterator(batches)
      ...   batch = iterator.get_next()
      ...   with tf.compat.v1.Session() as session:
      ...     session.run(iterator.initializer)
      ...     print(session.run(batch).tolist())
      [0, 1, 2]
    """
    self._refuse_eager("experimental_distribute_dataset()")
    return super().experimental_distribute_dataset(dataset, options)

  def distribute_datasets_from_function(self, dataset_fn: Callable[..., Any],
                                        options: Any = None) -> Any:
    """``Strategy.distribute_datasets_from_function``; graph mode only.
    ``dataset_fn`` gets this worker's ``InputContext``.

    Args:
      dataset_fn: a function of an ``InputContext`` returning a
        ``tf.data.Dataset`` of per-replica batches.
      options: a ``tf.distribute.InputOptions``, or None for the defaults.

    Returns:
      A distributed dataset; make its iterator with
      ``tf.compat.v1.data.make_initializable_iterator``.

    Raises:
      NotImplementedError: eager execution is on.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> def dataset_fn(context):
      ...   return tf.data.Dataset.range(10).shard(
      ...       context.num_input_pipelines, context.input_pipeline_id).batch(2)
      >>> with tf.Graph().as_default():
      ...   strategy = distribute.experimental.ParameterServerStrategy()
      ...   batches = strategy.distribute_datasets_from_function(dataset_fn)
      ...   iterator = tf.compat.v1.data.make_initializable_iterator(batches)
      ...   batch = iterator.get_next()
      ...   with tf.compat.v1.Session() as session:
      ...     session.run(iterator.initializer)
      ...     print(session.run(batch).tolist())
      [0, 1]
    """
    self._refuse_eager("distribute_datasets_from_function()")
    return super().distribute_datasets_from_function(dataset_fn, options)

  def run(self, fn: Callable[..., Any], args: Any = (),
          kwargs: Optional[dict] = None, options: Any = None) -> Any:
    """``Strategy.run``; graph mode only.

    Args:
      fn: the function each replica runs.
      args: positional arguments of ``fn``, a tuple or list.
      kwargs: keyword arguments of ``fn``, a dict or None.
      options: accepted for TensorFlow's signature and ignored.

    Returns:
      The replicas' results (TensorFlow's returns None).

    Raises:
      NotImplementedError: eager execution is on.

    Examples:
      >>> import tensorflow as tf
      >>> from compat_distribute import v1 as distribute
      >>> with tf.Graph().as_default():
      ...   strategy = distribute.experimental.ParameterServerStrategy()
      ...   doubled = strategy.run(lambda x: 2 * x, args=(tf.constant(21),))
      ...   with tf.compat.v1.Session() as session:
      ...     print(session.run(doubled))
      42
    """
    self._refuse_eager("run()")
    return super().run(fn, args=args, kwargs=kwargs, options=options)
