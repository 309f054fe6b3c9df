"""TensorFlow's other public APIs behave under our strategies as under native.

Each test runs the same program under a native strategy and ours and
compares what a user sees.
"""
import concurrent.futures
import copy
import threading

import pytest
import tensorflow as tf

from compat_distribute import _tf_private
from fixtures import strategies

pytestmark = pytest.mark.parity

_STRATEGIES = {
    "one_device": strategies.Comparison("one_device", device="/cpu:0"),
    "central_1": strategies.Comparison("central_storage", 1),
    "central_2": strategies.Comparison("central_storage", 2),
}


def _numpy(structure):
  return tf.nest.map_structure(
      lambda x: x.numpy().tolist() if tf.is_tensor(x) else x, structure)


def _creator_calls(strategy, use_function):
  """Names a creator entered inside the scope sees, creating one variable in
  the scope and one inside ``run``."""
  seen = []

  def creator(next_creator, **kwargs):
    seen.append(kwargs.get("name"))
    return next_creator(**kwargs)

  made = []

  def replica_fn():
    if len(made) < strategy.num_replicas_in_sync:
      made.append(tf.Variable(2.0, name="in_run"))
    return made[-1].read_value()

  call = lambda: strategy.run(replica_fn)
  if use_function:
    call = tf.function(call)
  with strategy.scope(), tf.variable_creator_scope(creator):
    tf.Variable(1.0, name="in_scope")
    result = call()
  shared = len({id(v) for v in made})
  return sorted(seen), shared, _numpy(
      strategy.experimental_local_results(result))


@pytest.mark.parametrize("kind", sorted(_STRATEGIES))
@pytest.mark.parametrize("use_function", [False, True])
def test_creator_inside_scope_called_once_per_variable(kind, use_function):
  # The variable-sharing creator of a multi-replica run is innermost, so a
  # creator entered inside the scope sees a variable made in `run` once,
  # not once per replica.
  ours, native = _STRATEGIES[kind].pair()
  expected = _creator_calls(native, use_function)
  assert _creator_calls(ours, use_function) == expected
  assert expected[0] == ["in_run", "in_scope"]


def _creators_in_run_and_merge(strategy):
  seen = []

  def creator(next_creator, **kwargs):
    seen.append((kwargs.get("name"), tf.distribute.in_cross_replica_context()))
    return next_creator(**kwargs)

  def replica_fn():
    v = tf.Variable(1.0, name="replica")
    tf.distribute.get_replica_context().merge_call(
        lambda _: tf.Variable(3.0, name="merged"))
    with tf.variable_creator_scope(creator):
      tf.Variable(1.0, name="inner")  # entered in fn: every replica
    return v.read_value()

  with strategy.scope(), tf.variable_creator_scope(creator):
    strategy.run(replica_fn)
  return sorted(seen)


@pytest.mark.parametrize("kind", sorted(_STRATEGIES))
def test_creators_in_merge_fn_and_in_the_replica_function(kind):
  ours, native = _STRATEGIES[kind].pair()
  assert _creators_in_run_and_merge(ours) == _creators_in_run_and_merge(
      native)


def _losses(strategy, use_function):
  def replica_fn():
    x = tf.constant([1.0, 2.0, 3.0, 4.0])
    return (tf.nn.compute_average_loss(x),
            tf.nn.compute_average_loss(x, global_batch_size=8),
            tf.nn.compute_average_loss(
                x, sample_weight=tf.constant([1.0, 0.0, 1.0, 0.0])),
            tf.nn.scale_regularization_loss(tf.constant(2.0)))
  call = lambda: strategy.run(replica_fn)
  if use_function:
    call = tf.function(call)
  return _numpy([strategy.experimental_local_results(r) for r in call()])


@pytest.mark.parametrize("kind", sorted(_STRATEGIES))
@pytest.mark.parametrize("use_function", [False, True])
def test_loss_scaling_matches_native(kind, use_function):
  ours, native = _STRATEGIES[kind].pair()
  assert _losses(ours, use_function) == _losses(native, use_function)
  with ours.scope(), pytest.raises(RuntimeError, match="cross replica"):
    tf.nn.compute_average_loss(tf.constant([1.0]))


def _generator_draws(strategy):
  with strategy.scope():
    generator = tf.random.Generator.from_seed(1)
    split = generator.split(2)
  replica_fn = lambda: (generator.normal([2]), split[0].uniform([1]))
  eager = strategy.run(replica_fn)
  traced = tf.function(lambda: strategy.run(replica_fn))()
  return _numpy([strategy.experimental_local_results(r)
                 for r in list(eager) + list(traced)])


@pytest.mark.parametrize("kind", sorted(_STRATEGIES))
def test_random_generator_under_scope_matches_native(kind):
  ours, native = _STRATEGIES[kind].pair()
  assert _generator_draws(ours) == _generator_draws(native)


def _contexts(strategy):
  seen = []

  def replica_fn():
    seen.append(("replica", tf.distribute.in_cross_replica_context(),
                 tf.distribute.get_strategy() is strategy,
                 tf.__internal__.distribute.strategy_supports_no_merge_call()))

    def merge_fn(s):
      seen.append(("merge", tf.distribute.get_replica_context() is None,
                   tf.distribute.in_cross_replica_context(), s is strategy))
      return 1
    return tf.__internal__.distribute.interim.maybe_merge_call(
        merge_fn, strategy)

  tf.function(lambda: strategy.run(replica_fn))()
  strategy.run(replica_fn)
  tf.distribute.experimental_set_strategy(strategy)
  try:
    seen.append(("set", tf.distribute.get_strategy() is strategy,
                 tf.distribute.in_cross_replica_context()))
  finally:
    tf.distribute.experimental_set_strategy(None)
  return sorted(seen)


@pytest.mark.parametrize("kind", sorted(_STRATEGIES))
def test_context_queries_match_native(kind):
  ours, native = _STRATEGIES[kind].pair()
  assert _contexts(ours) == _contexts(native)


def _summary_state_after_run(strategy, logdir, use_function):
  writer = tf.summary.create_file_writer(logdir)

  def replica_fn():
    tf.summary.experimental.set_step(42)
    writer.set_as_default()
    return tf.constant(0)

  call = lambda: strategy.run(replica_fn)
  if use_function:
    call = tf.function(call)
  def program():
    tf.summary.experimental.set_step(5)
    call()
    step = tf.summary.experimental.get_step()
    return int(step), bool(tf.summary.should_record_summaries())

  # Summary state is per thread and TF offers no public way to unset a
  # default writer: run on a thread of its own so nothing leaks into the
  # tests that follow (OneDevice leaks the replica's writer, as TF's does).
  with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
    return pool.submit(program).result()


@pytest.mark.parametrize("kind", sorted(_STRATEGIES))
@pytest.mark.parametrize("use_function", [False, True])
def test_summary_state_set_in_a_replica_stays_there(kind, use_function,
                                                    tmp_path):
  # Native CentralStorage replicas run on threads of their own, so the
  # caller's step and writer are untouched; OneDevice runs fn directly.
  ours, native = _STRATEGIES[kind].pair()
  expected = _summary_state_after_run(native, str(tmp_path / "n"),
                                      use_function)
  got = _summary_state_after_run(ours, str(tmp_path / "o"), use_function)
  assert got == expected
  assert expected[0] == (42 if kind == "one_device" else 5)


def _under_another_strategy(strategy, other):
  """What each way of touching ``strategy``'s input and variables raises
  (exception type name, or "ok") while ``other``'s scope is current."""
  dataset = tf.data.Dataset.range(8).batch(2)
  dist = strategy.experimental_distribute_dataset(dataset)
  from_fn = strategy.distribute_datasets_from_function(lambda ctx: dataset)
  early, early_from_fn = iter(dist), iter(from_fn)
  with strategy.scope():
    variable = tf.Variable(1.0)
  take_next = tf.function(lambda iterator: next(iterator))
  cases = {
      "iter": lambda: iter(dist),
      "next": lambda: next(early),
      "get_next": early.get_next,
      "get_next_as_optional": early.get_next_as_optional,
      "next_from_function": lambda: next(early_from_fn),
      "next_in_tf_function": lambda: take_next(early),
      "element_spec": lambda: early.element_spec,
      "assign": lambda: variable.assign(3.0),
      "assign_add": lambda: variable.assign_add(1.0),
      "assign_sub": lambda: variable.assign_sub(1.0),
      "read": variable.read_value,
      "deepcopy": lambda: copy.deepcopy(variable),
  }
  seen = {}
  with other.scope():
    for name, case in cases.items():
      try:
        case()
        seen[name] = "ok"
      except Exception as e:  # pylint: disable=broad-except
        seen[name] = type(e).__name__
  seen["value_after"] = float(variable.numpy())
  seen["still_usable"] = _numpy(strategy.experimental_local_results(
      next(iter(dist))))
  return seen


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(_STRATEGIES))
def test_input_and_variables_refuse_another_strategys_scope(kind):
  # TensorFlow reads a step and updates a central-storage variable only
  # with no strategy or the owning one current ("Mixing different
  # tf.distribute.Strategy objects").
  ours, native = _STRATEGIES[kind].pair()
  another_ours, another_native = strategies.pair("one_device")
  expected = _under_another_strategy(native, another_native)
  got = _under_another_strategy(ours, another_ours)
  assert got == expected
  assert expected["next"] == "RuntimeError"



def _exit_on_another_thread(strategy):
  """Enters a scope here, tries to exit it on another thread, then exits
  it here: (the other thread's error, has_strategy() afterwards, whether
  this thread's variable creators are as before).  The creators are put
  back afterwards whatever the strategy left behind."""
  graph = tf.compat.v1.get_default_graph()
  creators = _tf_private.variable_creator_stack(graph)
  scope = strategy.scope()
  scope.__enter__()
  errors = []

  def exit_there():
    try:
      scope.__exit__(None, None, None)
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  thread = threading.Thread(target=exit_there)
  thread.start()
  thread.join()
  try:
    scope.__exit__(None, None, None)
    return (errors, tf.distribute.has_strategy(),
            _tf_private.variable_creator_stack(graph) == creators)
  finally:
    _tf_private.set_variable_creator_stack(graph, creators)


@pytest.mark.parametrize("kind", sorted(_STRATEGIES))
def test_scope_exited_on_the_wrong_thread_still_exits_on_its_own(kind):
  # Both fail the wrong-thread exit (TensorFlow with an AttributeError from
  # its thread-local stacks; ours says what happened) and the entering
  # thread's exit then leaves no strategy current.  TensorFlow's leaves its
  # variable creator behind (later variables under another strategy fail);
  # ours undoes everything, and a variable made afterwards under a native
  # strategy works.
  ours, native = _STRATEGIES[kind].pair()
  native_errors, native_after, native_clean = _exit_on_another_thread(native)
  errors, after, clean = _exit_on_another_thread(ours)
  assert (len(errors), after) == (len(native_errors), native_after) == (1,
                                                                          False)
  assert isinstance(errors[0], RuntimeError)
  assert "entered on another thread" in str(errors[0])
  assert not native_clean
  assert clean
  with tf.distribute.OneDeviceStrategy("/cpu:1").scope():
    assert tf.Variable(1.0).device.endswith("CPU:1")


@pytest.mark.parametrize("kind", ["central_1", "central_2"])
def test_per_replica_values_made_by_tensorflow_are_taken(kind):
  # A PerReplica built by TensorFlow's own code (here by its strategy; its
  # test utilities build the same type) is used per replica by
  # TensorFlow's CentralStorage: ours too.
  ours, native = _STRATEGIES[kind].pair()
  n = native.num_replicas_in_sync
  made = native.experimental_distribute_values_from_function(
      lambda ctx: tf.constant([float(ctx.replica_id_in_sync_group + 1)]))
  assert not type(made).__module__.startswith("compat_distribute")

  def program(strategy):
    double = lambda x: x * 2.0
    return _numpy((
        list(strategy.experimental_local_results(made)),
        list(strategy.experimental_local_results(
            strategy.run(double, args=(made,)))),
        list(strategy.experimental_local_results(
            tf.function(lambda: strategy.run(double, args=(made,)))())),
        strategy.reduce("SUM", made, axis=None),
        strategy.reduce("MEAN", made, axis=0),
        list(strategy.experimental_local_results(
            strategy.extended.reduce_to("SUM", made, "/cpu:0"))),
        strategy.gather(made, axis=0)))

  result = program(ours)
  assert result == program(native)
  assert result[0] == [[float(i + 1)] for i in range(n)]
  assert result[3] == [n * (n + 1) / 2]
