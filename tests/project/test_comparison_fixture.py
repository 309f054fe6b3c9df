"""The comparison fixture itself (fixtures/strategies.py): its examples run,
its points build the classes they name, and bad choices say what is wrong."""
import doctest

import pytest
import tensorflow as tf

from fixtures import strategies
import support


@pytest.mark.parametrize("module", [strategies, support],
                         ids=lambda m: m.__name__)
def test_examples_in_the_docstrings_run(module):
  result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
  assert result.attempted > 0
  assert result.failed == 0


@pytest.mark.parametrize("facade", strategies.FACADES)
@pytest.mark.parametrize("kind,replicas", [("one_device", 1),
                                           ("central_storage", 1),
                                           ("central_storage", 3)])
def test_a_pair_is_ours_then_natives_of_the_same_kind(kind, replicas, facade):
  ours, native = strategies.pair(kind, replicas, facade=facade)
  assert type(ours).__module__.startswith("compat_distribute.")
  assert type(native).__module__.startswith("tensorflow.")
  assert type(ours).__name__ == type(native).__name__
  assert ours.num_replicas_in_sync == native.num_replicas_in_sync == replicas
  assert (ours.extended.worker_devices == native.extended.worker_devices)
  assert isinstance(native, tf.compat.v1.distribute.Strategy
                    if facade == "v1" else tf.distribute.Strategy)


def test_both_runs_the_program_in_each_mode():
  for mode in strategies.MODES:
    ours, native = strategies.both(
        "central_storage", lambda s: tf.constant(s.num_replicas_in_sync) * 2,
        2, mode=mode)
    assert int(ours) == int(native) == 4, mode


def test_cases_give_one_replica_to_one_device_and_unique_ids():
  params = strategies.cases(replicas=(1, 2, 4), modes=("eager", "function"),
                            facades=("v2", "v1"))
  ids = [p.id for p in params]
  assert len(ids) == len(set(ids)) == 2 * 2 + 3 * 2 * 2
  assert all(p.values[0].replicas == 1 for p in params
             if p.values[0].kind == "one_device")


@pytest.mark.parametrize("compare", strategies.cases(
    kinds=("central_storage",), replicas=(2,), modes=("function",)),
                         indirect=True)
def test_the_compare_fixture_hands_out_its_parameter(compare):
  assert compare == strategies.Comparison("central_storage", 2, "function")
  ours, native = compare.both(lambda s: s.num_replicas_in_sync)
  assert int(ours) == int(native) == 2


def test_the_compare_fixture_defaults_to_one_device_eagerly(compare):
  ours, native = compare.pair()
  assert ours.extended.worker_devices == native.extended.worker_devices == (
      "/job:localhost/replica:0/task:0/device:CPU:1",)


@pytest.mark.parametrize("call,message", [
    (lambda: strategies.strategy("theirs", "one_device"),
     "impl must be 'ours' or 'native', got 'theirs'"),
    (lambda: strategies.strategy("ours", "one_device", facade="v3"),
     r"facade must be one of \('v2', 'v1'\), got 'v3'"),
    (lambda: strategies.strategy("ours", "one_device", 2),
     "one_device runs one replica, got replicas=2"),
    (lambda: strategies.run_in("later", lambda: 1),
     r"mode must be one of \('eager', 'function', 'graph'\), got 'later'"),
])
def test_bad_choices_name_the_rule_and_the_value(call, message):
  with pytest.raises(ValueError, match=message):
    call()
