"""The runner's multi-worker decision (compat_distribute/runner/
multi_worker.py): a task serves the program instead of running it only
where the program's code -- or a module of its own that it imports --
makes ``MultiWorkerMirroredStrategy`` in a branch the running TensorFlow
takes; a comment, a docstring or a string naming it is not a use.

In this process, on dictionaries as the environment: nothing is run or
served here.  The same answer at any load is the look's (files and bytes
bounds, no clock: tests/runner/test_keras_choice.py); the decision on
real clusters: tests/clients/cluster/test_multi_worker.py.
"""
import json
import textwrap

import pytest

from compat_distribute.runner import evidence as evidence_lib
from compat_distribute.runner import multi_worker as multi_worker_run
from compat_distribute.runner import program_look

WORKER_1 = json.dumps({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
                       "task": {"type": "worker", "index": 1}})


def use(source, tf_version=None):
  return evidence_lib.first_use(source.encode("latin-1"),
                                evidence_lib.MULTI_WORKER,
                                tf_version=tf_version)


@pytest.mark.parametrize("source,found", [
    ("import tensorflow as tf\ns = tf.distribute.MultiWorkerMirroredStrategy()",
     "line 2: tf.distribute.MultiWorkerMirroredStrategy"),
    ("import tensorflow as tf\n\n"
     "s = tf.distribute.experimental.MultiWorkerMirroredStrategy(\n"
     "    communication_options=None)",
     "line 3: tf.distribute.experimental.MultiWorkerMirroredStrategy"),
    ("import tensorflow.compat.v1 as tf\n"
     "s = tf.distribute.experimental.MultiWorkerMirroredStrategy()",
     "line 2: tf.distribute.experimental.MultiWorkerMirroredStrategy"),
    ("import tensorflow as tf\n"
     "s = tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy()",
     "line 2: tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy"),
    ("from tensorflow.distribute import MultiWorkerMirroredStrategy\n",
     "line 1: from tensorflow.distribute import MultiWorkerMirroredStrategy"),
    ("from tensorflow.distribute.experimental import (\n"
     "    MultiWorkerMirroredStrategy as Strategy)",
     "line 1: from tensorflow.distribute.experimental import "
     "MultiWorkerMirroredStrategy"),
    ("from tensorflow import distribute as d\n"
     "s = d.MultiWorkerMirroredStrategy()",
     "line 2: d.MultiWorkerMirroredStrategy"),
    ("from tensorflow.python.distribute import collective_all_reduce_strategy"
     " as c\ns = c.CollectiveAllReduceStrategy()",
     "line 2: c.CollectiveAllReduceStrategy"),
    ("import tensorflow as tf\ns = tf.distribute.experimental.auto_strategy()",
     "line 2: tf.distribute.experimental.auto_strategy"),
    ("import compat_distribute\n"
     "s = compat_distribute.v2.experimental.auto_strategy()",
     "line 2: compat_distribute.v2.experimental.auto_strategy"),
    ("from compat_distribute.v2 import MultiWorkerMirroredStrategy",
     "line 1: from compat_distribute.v2 import MultiWorkerMirroredStrategy"),
    # In a function the program calls later: still its code.
    ("import tensorflow as tf\ndef make():\n"
     "  return tf.distribute.MultiWorkerMirroredStrategy()",
     "line 3: tf.distribute.MultiWorkerMirroredStrategy"),
])
def test_uses_of_the_strategy_are_found_with_their_line(source, found):
  assert use(source) == found


@pytest.mark.parametrize("source", [
    "# tf.distribute.MultiWorkerMirroredStrategy()\nimport tensorflow as tf",
    '"""Trains with tf.distribute.MultiWorkerMirroredStrategy."""\n'
    "import tensorflow as tf",
    "import tensorflow as tf\nNAME = 'MultiWorkerMirroredStrategy'",
    "import tensorflow as tf\nprint('see tf.distribute.auto_strategy')",
    "import tensorflow as tf\n"
    "s = getattr(tf.distribute, 'MultiWorkerMirroredStrategy')",
    "import tensorflow as tf\ns = tf.distribute.MirroredStrategy()",
    "self.MultiWorkerMirroredStrategy = None",          # not a module's
    "import mylib\nmylib.MultiWorkerMirroredStrategy()",  # not TF's
    "s = tf.distribute.MultiWorkerMirroredStrategy()",  # tf never imported
    "import tensorflow as tf\ns = tf.distribute.MultiWorkerMirroredStrategy(",
])
def test_mentions_are_not_uses(source):
  assert use(source) is None


def test_a_branch_the_running_tensorflow_cannot_take_is_not_a_use():
  source = ("import tensorflow as tf\n"
            "if tf.__version__.startswith('1.'):\n"
            "  s = tf.distribute.experimental.MultiWorkerMirroredStrategy()\n"
            "else:\n  s = tf.distribute.MirroredStrategy()\n")
  assert use(source, tf_version="2.21.0") is None
  assert use(source, tf_version="1.15.5") == (
      "line 3: tf.distribute.experimental.MultiWorkerMirroredStrategy")


def _write(root, files):
  for name, text in files.items():
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


@pytest.fixture
def keras_3(monkeypatch):
  """``auto`` gives ours, whichever Keras is installed here."""
  monkeypatch.setattr(multi_worker_run, "keras_3", lambda environ=None: True)


def test_a_program_that_only_mentions_the_strategy_runs_on_every_task(
    tmp_path, monkeypatch, keras_3):
  _write(tmp_path, {"main.py": '''\
      """Could use tf.distribute.MultiWorkerMirroredStrategy; does not."""
      import tensorflow as tf
      import helpers  # helpers.MultiWorkerMirroredStrategy is not TF's
      # strategy = tf.distribute.MultiWorkerMirroredStrategy()
      NAMES = ["MultiWorkerMirroredStrategy", "auto_strategy"]
      strategy = tf.distribute.MirroredStrategy()
      ''', "helpers.py": "MultiWorkerMirroredStrategy = 'a name'\n"})
  monkeypatch.chdir(tmp_path)
  decision = multi_worker_run.decide("main.py", {"TF_CONFIG": WORKER_1})
  assert decision.serves is None and decision.lines == []


def test_a_use_in_a_module_of_the_program_makes_the_other_tasks_serve(
    tmp_path, monkeypatch, keras_3):
  _write(tmp_path, {
      "main.py": "import tensorflow as tf\nfrom trainlib import setup\n"
                 "strategy = setup.make()\n",
      "trainlib/__init__.py": "raise RuntimeError('executed')\n",
      "trainlib/setup.py": '''\
          import tensorflow as tf

          def make():
            return tf.distribute.MultiWorkerMirroredStrategy()
          '''})
  monkeypatch.chdir(tmp_path)
  decision = multi_worker_run.decide("main.py", {"TF_CONFIG": WORKER_1})
  assert decision.ours and decision.serves is not None
  assert (decision.serves.job, decision.serves.index) == ("worker", 1)
  assert decision.lines == [
      "tf.distribute.MultiWorkerMirroredStrategy is compat_distribute's (the "
      "program makes it at trainlib/setup.py:4: tf.distribute."
      "MultiWorkerMirroredStrategy, and tf.keras is Keras 3, whose fit fails "
      "on TensorFlow's; run --multi-worker native keeps TensorFlow's)",
      "TF_CONFIG names this task /job:worker/task:1 of (worker: 2): it serves "
      "the program, which /job:worker/task:0 runs (main.py does not run "
      "here)"]
  # Worker 0 drives: it runs the program.
  driver = multi_worker_run.decide("main.py", {
      "TF_CONFIG": WORKER_1.replace('"index": 1', '"index": 0')})
  assert driver.ours and driver.serves is None
  assert driver.lines[1].endswith(": it runs main.py; the other tasks serve it")


def test_run_m_package_module_is_looked_at_as_python_m_finds_it(
    tmp_path, monkeypatch, keras_3):
  _write(tmp_path, {
      "pkg/__init__.py": "raise RuntimeError('executed')\n",
      "pkg/train.py": "from . import cluster\nstrategy = cluster.STRATEGY\n",
      "pkg/cluster.py": "import tensorflow as tf\n"
                        "STRATEGY = tf.distribute.MultiWorkerMirroredStrategy()\n"})
  monkeypatch.chdir(tmp_path)
  decision = multi_worker_run.decide(program_look.module_program("pkg.train"),
                                     {"TF_CONFIG": WORKER_1})
  assert decision.serves is not None
  assert ("makes it at pkg/cluster.py:2: tf.distribute."
          "MultiWorkerMirroredStrategy") in decision.lines[0]
  assert decision.lines[1].endswith("(pkg.train does not run here)")


def test_with_keras_2_the_line_says_where_and_leaves_tensorflows(
    tmp_path, monkeypatch):
  monkeypatch.setattr(multi_worker_run, "keras_3", lambda environ=None: False)
  _write(tmp_path, {"main.py": "import tensorflow as tf\n"
                               "s = tf.distribute.MultiWorkerMirroredStrategy()\n"})
  monkeypatch.chdir(tmp_path)
  decision = multi_worker_run.decide("main.py", {"TF_CONFIG": WORKER_1})
  assert not decision.ours and decision.serves is None
  assert decision.lines == [
      "tf.keras is tf-keras (Keras 2): tf.distribute.MultiWorkerMirroredStrategy"
      ", which the program makes at main.py:2: tf.distribute."
      "MultiWorkerMirroredStrategy, stays TensorFlow's own on every task (run "
      "--multi-worker ours for compat_distribute's)"]


def test_a_look_that_cannot_tell_says_the_default_and_the_override(
    tmp_path, monkeypatch, keras_3):
  files = {"main.py": "import m0\n"}
  files.update({f"m{i}.py": f"import m{i + 1}\n" for i in range(5)})
  files["m5.py"] = ("import tensorflow as tf\n"
                    "s = tf.distribute.MultiWorkerMirroredStrategy()\n")
  _write(tmp_path, files)
  monkeypatch.chdir(tmp_path)
  assert multi_worker_run.decide("main.py", {"TF_CONFIG": WORKER_1}).serves
  monkeypatch.setattr(program_look, "MAX_FILES", 3)
  decision = multi_worker_run.decide("main.py", {"TF_CONFIG": WORKER_1})
  assert decision.serves is None
  assert decision.lines == [
      "the look through main.py stopped at its bound (3 files, 4000000 bytes)"
      " after 3 files: it runs on every task as under python (run "
      "--multi-worker ours if it makes tf.distribute."
      "MultiWorkerMirroredStrategy)"]
  # Without a cluster it matters not: nothing is said.
  assert multi_worker_run.decide("main.py", {}).lines == []
  (tmp_path / "app.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)
  decision = multi_worker_run.decide("app.zip", {"TF_CONFIG": WORKER_1})
  assert decision.serves is None
  assert decision.lines[0].startswith(
      "app.zip is not a Python source the runner can read: it runs on every "
      "task as under python")
