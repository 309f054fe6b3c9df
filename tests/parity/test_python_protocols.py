"""Python's protocols on every object a strategy hands out, next to native.

For each object (the strategy, its ``extended``, a ``scope()``, variables
made in scope, distributed datasets (from a dataset and from a function) and
an iterator, values from a function, the v1 ``make_dataset_iterator`` and
``make_input_fn_iterator`` iterators, a per-replica result of ``run``, the
replica context, a ``ReduceOp``) and each protocol (``next``, ``iter``,
``len``, ``bool``, ``with``, ``[0]``, ``repr``, ``hash``, ``==``) the
outcome is reduced to a word -- the kind of result, or the exception's type
-- under ours and under TensorFlow's strategies, in a TF1 graph, eagerly and
while a ``tf.function`` is traced.  The two tables must be the same: where
TensorFlow accepts a protocol, so do we, and where it refuses one, so do we.

One known difference: ``with replica_context as c`` binds the context to
``c`` under ours, ``None`` under TensorFlow (docs/differences.md).
"""
import warnings

import pytest
import tensorflow as tf
from fixtures import strategies

pytestmark = pytest.mark.parity

PROTOCOLS = ("next", "iter", "len", "bool", "with", "index", "repr", "hash",
             "eq")
# (object, protocol) -> (native's word, ours) where we differ on purpose.
KNOWN = {("replica_ctx", "with"): ("None", "self")}


def _apply(obj, protocol):
  if protocol == "next":
    return next(obj)
  if protocol == "iter":
    return iter(obj)
  if protocol == "len":
    return len(obj)
  if protocol == "bool":
    return bool(obj)
  if protocol == "with":
    with obj as bound:
      return bound
  if protocol == "index":
    return obj[0]
  if protocol == "repr":
    return repr(obj)
  if protocol == "hash":
    return hash(obj)
  assert protocol == "eq"
  return obj == obj  # pylint: disable=comparison-with-itself


def _word(obj, protocol):
  """The kind of ``protocol``'s result on ``obj``, or "!ExceptionType"."""
  try:
    result = _apply(obj, protocol)
  except Exception as e:  # pylint: disable=broad-except
    return "!" + type(e).__name__
  if result is obj:
    return "self"
  if result is None:
    return "None"
  if tf.is_tensor(result):
    return "tensor"
  for kind, word in ((tf.distribute.DistributedValues, "distributed"),
                     (tf.distribute.DistributedIterator, "iterator"),
                     (tf.distribute.Strategy, "strategy")):
    if isinstance(result, kind):
      return word
  return type(result).__name__  # bool, int, str


def _strategy(impl, kind, api):
  """A fresh ``kind`` strategy of ``impl`` (``ours`` or ``native``) through
  the ``api`` facade: OneDevice on ``/cpu:0``, CentralStorage on two CPUs."""
  replicas = 1 if kind == "one_device" else 2
  return strategies.strategy(impl, kind, replicas, facade=api,
                             device="/cpu:0")


def _run_objects(strategy):
  """A per-replica result of ``run`` and the replica context it ran in."""
  contexts = []

  def replica_fn():
    contexts.append(tf.distribute.get_replica_context())
    return tf.distribute.get_replica_context().replica_id_in_sync_group

  return {"per_replica": strategy.run(replica_fn),
          "replica_ctx": contexts[0]}


def _objects(impl, kind, api, iterate_dataset):
  strategy = _strategy(impl, kind, api)
  dataset = tf.data.Dataset.range(8).batch(2)
  objects = {"strategy": strategy, "extended": strategy.extended,
             "scope": strategy.scope(),
             "reduce_op": tf.distribute.ReduceOp.SUM}
  with strategy.scope():
    objects["variable"] = tf.Variable([1.0, 2.0])
    objects["scalar_variable"] = tf.Variable(1.0)
  objects["dist_dataset"] = strategy.experimental_distribute_dataset(dataset)
  objects["dataset_from_fn"] = strategy.distribute_datasets_from_function(
      lambda ctx: dataset)
  if api == "v2":  # not in the v1 API
    objects["values_from_fn"] = (
        strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant(ctx.replica_id_in_sync_group)))
  if iterate_dataset:
    objects["dist_iterator"] = iter(objects["dist_dataset"])
  if api == "v1":
    objects["v1_iterator"] = strategy.make_dataset_iterator(dataset)
    objects["input_fn_iterator"] = strategy.make_input_fn_iterator(
        lambda ctx: dataset)
  return objects


def _table(impl, kind, api, mode):
  table = {}

  def fill(objects):
    for name, obj in objects.items():
      for protocol in PROTOCOLS:
        table[(name, protocol)] = _word(obj, protocol)

  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if mode == "graph":
      with tf.Graph().as_default():
        objects = _objects(impl, kind, api, iterate_dataset=False)
        objects.update(_run_objects(objects["strategy"]))
        fill(objects)
    elif mode == "eager":
      objects = _objects(impl, kind, api, iterate_dataset=True)
      objects.update(_run_objects(objects["strategy"]))
      fill(objects)
    else:
      # Variables cannot be made on every trace: made eagerly, used inside.
      objects = _objects(impl, kind, api, iterate_dataset=True)

      def traced():
        objects.update(_run_objects(objects["strategy"]))
        objects["scope"] = objects["strategy"].scope()
        fill(objects)

      tf.function(traced, autograph=False)()
  return table


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["graph", "eager", "tf_function"])
@pytest.mark.parametrize("kind", ["one_device", "central_storage"])
@pytest.mark.parametrize("api", ["v1", "v2"])
def test_protocols_as_native(api, kind, mode):
  native = _table("native", kind, api, mode)
  ours = _table("ours", kind, api, mode)
  assert set(ours) == set(native)
  differences = {key: (native[key], ours[key]) for key in native
                 if native[key] != ours[key]}
  assert differences == {k: v for k, v in KNOWN.items() if k in native}
  if mode == "graph" and api == "v1":
    # The TF1 idiom: next() builds a read into the graph.
    expected = "tensor" if kind == "one_device" else "distributed"
    assert ours[("v1_iterator", "next")] == expected
