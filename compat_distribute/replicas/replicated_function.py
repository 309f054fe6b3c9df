"""``strategy.run(f)`` for a ``tf.function`` ``f``: one function, every
replica traced into it.

As TensorFlow does, the replicas do not each call ``f``: its Python
function runs once per replica (``threads.call_for_each_replica``) inside
a single new ``tf.function`` made with ``f``'s options (``autograph``,
``jit_compile``, ``input_signature``, ...).  A ``merge_call`` inside a
separate per-replica call of ``f`` could not synchronise with the other
replicas; inside one graph it can.  The new function is made once per
(strategy, ``f``) and kept by ``f`` itself.

>>> import tensorflow as tf
>>> from compat_distribute import v2 as distribute
>>> strategy = distribute.experimental.CentralStorageStrategy(
...     ["/cpu:0", "/cpu:1"])
>>> @tf.function
... def step(x):
...   ctx = tf.distribute.get_replica_context()
...   own = x * tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)
...   return ctx.all_reduce("SUM", own)
>>> result = strategy.run(step, args=(tf.constant(1.0),))
>>> [float(t) for t in strategy.experimental_local_results(result)]
[3.0, 3.0]
"""
from __future__ import annotations

import weakref
from typing import Any

from compat_distribute import _tf_compat
from compat_distribute import _tf_private
from compat_distribute.replicas import threads
from compat_distribute.replicas.plan import Replicas
from compat_distribute.runtime.types import Nest

# Each tf.function keeps its replicated versions itself, one per strategy
# (weakly keyed): a process-wide table keyed by the tf.function would keep
# alive every function whose Python body refers back to it (a method that
# stores ``self.step = tf.function(self._step)``), as TensorFlow's own
# cache does.
_REPLICATED_ATTRIBUTE = "_compat_distribute_replicated"


def call_for_each_replica(replicas: Replicas, fn: Any, args: tuple,
                          kwargs: dict) -> Nest:
  """Runs the ``tf.function`` ``fn`` on every replica of ``replicas`` (a
  strategy's ``plan.Replicas``), all traced into one function; returns the
  regrouped results."""
  return replicated(replicas, fn)(*args, **kwargs)


def replicated(replicas: Replicas, fn: Any) -> Any:
  """``fn`` (a ``tf.function``) turned into one ``tf.function`` that runs
  its Python function on every replica; made once per (strategy, fn)."""
  per_strategy = getattr(fn, _REPLICATED_ATTRIBUTE, None)
  if per_strategy is None:
    per_strategy = weakref.WeakKeyDictionary()
    setattr(fn, _REPLICATED_ATTRIBUTE, per_strategy)
  wrapped = per_strategy.get(replicas)
  if wrapped is None:
    replicas_ref = weakref.ref(replicas)
    python_function = fn.python_function

    def run_every_replica(*args, **kwargs):
      body = _tf_compat.convert_as_caller(python_function)
      return threads.call_for_each_replica(replicas_ref(), body, args, kwargs)

    wrapped = _tf_private.clone_function(fn, run_every_replica)
    per_strategy[replicas] = wrapped
  return wrapped
