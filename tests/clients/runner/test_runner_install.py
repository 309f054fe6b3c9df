"""``compat_distribute.install()`` / ``uninstall()``: which TensorFlow names
they rebind, idempotence, exact restoration, the context-manager form, and a
fresh process where ``tf.distribute`` has not been loaded yet."""
import importlib
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import compat_distribute
from compat_distribute import v1
from compat_distribute import v2
import support

install_lib = importlib.import_module("compat_distribute.install")

NAMES = {
    "tf.distribute.OneDeviceStrategy": ("v2", "OneDeviceStrategy"),
    "tf.distribute.experimental.CentralStorageStrategy":
        ("v2", "experimental.CentralStorageStrategy"),
    "tf.compat.v2.distribute.OneDeviceStrategy": ("v2", "OneDeviceStrategy"),
    "tf.compat.v2.distribute.experimental.CentralStorageStrategy":
        ("v2", "experimental.CentralStorageStrategy"),
    "tf.compat.v1.distribute.OneDeviceStrategy": ("v1", "OneDeviceStrategy"),
    "tf.compat.v1.distribute.experimental.CentralStorageStrategy":
        ("v1", "experimental.CentralStorageStrategy"),
    "tf.compat.v1.distribute.experimental.ParameterServerStrategy":
        ("v1", "experimental.ParameterServerStrategy"),
}
# TensorFlow 2.23 on: auto_strategy too (where TensorFlow lacks it, install()
# adds no name; tests/strategies/test_auto_strategy.py).
if hasattr(tf.distribute.experimental, "auto_strategy"):
  NAMES.update({
      f"tf.{path}.auto_strategy": ("v2", "experimental.auto_strategy")
      for path in ("distribute.experimental",
                   "compat.v2.distribute.experimental")})


def resolve(dotted):
  """Looks ``tf.a.b.C`` up attribute by attribute, as user code does."""
  value = tf
  for part in dotted.split(".")[1:]:
    value = getattr(value, part)
  return value


def ours(facade, path):
  value = {"v1": v1, "v2": v2}[facade]
  for part in path.split("."):
    value = getattr(value, part)
  assert value.__module__.startswith("compat_distribute"), value
  return value


@pytest.fixture(autouse=True)
def always_uninstall():
  originals = {name: resolve(name) for name in NAMES}
  assert not install_lib.is_installed()
  yield originals
  compat_distribute.uninstall()
  for name, original in originals.items():
    assert resolve(name) is original, name


def test_install_rebinds_every_name_and_uninstall_restores(always_uninstall):
  originals = always_uninstall
  for name, original in originals.items():
    assert original.__module__.startswith("tensorflow."), name
  installation = compat_distribute.install()
  assert installation.swapped and install_lib.is_installed()
  assert set(install_lib.installed_names()) == set(NAMES)
  for name, (facade, path) in NAMES.items():
    assert resolve(name) is ours(facade, path), name
  compat_distribute.uninstall()
  assert not install_lib.is_installed()
  for name, original in originals.items():
    assert resolve(name) is original, name


def test_install_twice_is_idempotent_and_uninstall_twice_is_harmless(
    always_uninstall):
  first = compat_distribute.install()
  second = compat_distribute.install()
  assert first.swapped and not second.swapped
  for name, (facade, path) in NAMES.items():
    assert resolve(name) is ours(facade, path), name
  compat_distribute.uninstall()
  compat_distribute.uninstall()
  for name, original in always_uninstall.items():
    assert resolve(name) is original


def test_context_manager_undoes_only_its_own_install(always_uninstall):
  with compat_distribute.install() as outer:
    assert outer.swapped
    with compat_distribute.install() as inner:
      assert not inner.swapped
    assert install_lib.is_installed()  # the inner block did not uninstall
    assert tf.distribute.OneDeviceStrategy is v2.OneDeviceStrategy
  assert not install_lib.is_installed()

  compat_distribute.install()
  with compat_distribute.install():
    pass
  assert install_lib.is_installed()  # installed before the block: kept


def test_context_manager_restores_on_exception(always_uninstall):
  with pytest.raises(KeyError):
    with compat_distribute.install():
      raise KeyError("boom")
  assert not install_lib.is_installed()
  assert tf.distribute.OneDeviceStrategy is always_uninstall[
      "tf.distribute.OneDeviceStrategy"]


def test_strategies_made_through_tf_names_are_ours():
  with compat_distribute.install():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:1")
    central = tf.distribute.experimental.CentralStorageStrategy(
        ["/cpu:0", "/cpu:1"])
    v1_strategy = tf.compat.v1.distribute.OneDeviceStrategy("/cpu:0")
  assert type(strategy) is v2.OneDeviceStrategy
  assert type(central) is v2.experimental.CentralStorageStrategy
  assert type(v1_strategy) is v1.OneDeviceStrategy
  assert central.num_replicas_in_sync == 2
  with strategy.scope():
    assert tf.distribute.get_strategy() is strategy


def test_repr():
  installation = compat_distribute.install()
  assert repr(installation) == "Installation(swapped=True, installed=True)"
  again = compat_distribute.install()
  assert repr(again) == "Installation(swapped=False, installed=True)"
  compat_distribute.uninstall()
  assert repr(installation) == "Installation(swapped=True, installed=False)"


def test_missing_class_fails_clearly_and_changes_nothing(monkeypatch,
                                                         always_uninstall):
  monkeypatch.setattr(install_lib, "_TARGETS", install_lib._TARGETS + (
      ("distribute", "MirroredStrategy", "compat_distribute.v2",
       "MirroredStrategy"),))
  with pytest.raises(ImportError) as info:
    compat_distribute.install()
  message = str(info.value)
  assert "compat_distribute.v2.MirroredStrategy" in message
  assert "does not define it" in message and "nothing was installed" in message
  assert not install_lib.is_installed()
  for name, original in always_uninstall.items():
    assert resolve(name) is original


def test_missing_module_fails_clearly(monkeypatch):
  monkeypatch.setattr(install_lib, "_TARGETS", (
      ("distribute", "OneDeviceStrategy", "compat_distribute.no_such_facade",
       "OneDeviceStrategy"),))
  with pytest.raises(ImportError, match="compat_distribute.no_such_facade "
                     "cannot be imported"):
    compat_distribute.install()
  assert not install_lib.is_installed()


FRESH = textwrap.dedent("""
    import sys
    import compat_distribute
    assert "tensorflow" not in sys.modules, "importing the shim loaded TF"
    {before}
    compat_distribute.install()
    import tensorflow as tf
    from compat_distribute import v1, v2
    assert tf.distribute.OneDeviceStrategy is v2.OneDeviceStrategy
    assert (tf.distribute.experimental.CentralStorageStrategy
            is v2.experimental.CentralStorageStrategy)
    assert tf.compat.v1.distribute.OneDeviceStrategy is v1.OneDeviceStrategy
    assert (tf.compat.v1.distribute.experimental.CentralStorageStrategy
            is v1.experimental.CentralStorageStrategy)
    from tensorflow.compat.v1.distribute import OneDeviceStrategy
    assert OneDeviceStrategy is v1.OneDeviceStrategy
    s = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert isinstance(s, tf.distribute.Strategy)
    compat_distribute.uninstall()
    assert tf.distribute.OneDeviceStrategy.__module__.startswith("tensorflow")
    print("ok")
""")


@pytest.mark.subprocess
@pytest.mark.parametrize("before", [
    "",
    "import tensorflow as tf; tf.distribute.MirroredStrategy; "
    "tf.compat.v1.distribute.experimental",
], ids=["tf_untouched", "tf_distribute_loaded_first"])
def test_fresh_process(before):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  # cwd: not the repository root, whose compat_distribute/ source directory
  # would shadow the installed package under `python -c`.
  result = subprocess.run(
      [sys.executable, "-c", FRESH.format(before=before)], env=env,
      cwd=str(support.TESTS), capture_output=True,
      text=True, timeout=300)
  assert result.returncode == 0, result.stderr
  assert result.stdout == "ok\n"
