"""What ``MultiWorkerMirroredStrategy`` programs save, and who loads it
(docs/cluster.md, "Checkpoints").

One program, tests/fixtures/mwms_checkpoints.py, writes every form
(``model.save`` as ``.keras`` and legacy ``.h5``, ``save_weights`` as
``.weights.h5``, ``tf.train.Checkpoint`` of the model and optimizer and of
a ``tf.Module`` of plain variables, the ``BackupAndRestore`` folder) and
reads each back.  It writes three times: Keras 3 under ours on two loopback
workers, Keras 3 on one machine (``MirroredStrategy`` on two CPUs) and
tf-keras under TensorFlow's own strategy on two workers (the chief writes,
the other worker into a folder of its own that it removes, as TensorFlow's
tutorial does).  Then Keras 3 on one machine without a strategy and
tf-keras under TensorFlow's strategy read what ours wrote, and ours reads
what the other two wrote.  Where the format is shared the weights (and the
optimizer's state where it is kept) come back bit for bit; where it is not,
the reader's own error (or, for ``BackupAndRestore``, a fresh start) is
what the page says.

Several TensorFlow processes each: they run where
``COMPAT_DISTRIBUTE_MULTI_WORKER_ALL=1`` (``tox -e multi-worker``).
"""
import importlib.util
import json
import os
import sys
import zipfile

import numpy as np
import pytest

from compat_distribute.cluster import local_served
from compat_distribute.runner import multi_worker as multi_worker_run
import support
# pylint: disable-next=import-error
from test_multi_worker import ALL, CONSTRUCTOR, ENV, RUN, TIMEOUT
# pylint: disable-next=import-error
from test_multi_worker import native_program, native_run, printed

pytestmark = [
    pytest.mark.cluster, pytest.mark.subprocess, pytest.mark.slow, ALL,
    pytest.mark.skipif(
        not multi_worker_run.keras_3() or not importlib.util.find_spec(
            "tf_keras"),
        reason="needs tf-keras beside Keras 3 (TensorFlow 2.16 on)")]

PROGRAM = support.FIXTURES / "mwms_checkpoints.py"
KERAS_2 = {**ENV, "TF_USE_LEGACY_KERAS": "1"}

# What a reader gets from each form: the parts of the saved state that come
# back exactly, or the reader's error (type, words of its message).
SAME_KERAS = {
    "model.keras": ("weights", "optimizer"),
    "model.keras, compile=False": ("weights",),
    # Keras 3's own legacy HDF5 file keeps a compile config it cannot read.
    "model.h5": ("ValueError", "Could not deserialize 'keras.metrics.mse'"),
    "model.h5, compile=False": ("weights",),
    "model.weights.h5": ("weights", "optimizer"),
    "model.h5 weights": ("weights",),
    "keras": ("weights", "optimizer"),
    "module": ("module", "weights"),
    "backup": ("weights", "optimizer"),
}
# tf-keras reads no Keras 3 model config; the weights files share the
# layers' layout (Adam's slots differ: 10 variables against 9, skipped with
# a warning); the object graphs of Keras models differ.
TF_KERAS_READS_KERAS_3 = {
    "model.keras": ("TypeError", "Unrecognized keyword arguments: "
                    "['batch_shape']"),
    "model.keras, compile=False": ("TypeError", "Unrecognized keyword "
                                   "arguments: ['batch_shape']"),
    "model.h5": ("TypeError", "Unrecognized keyword arguments: "
                 "['batch_shape']"),
    "model.h5, compile=False": ("TypeError", "Unrecognized keyword "
                                "arguments: ['batch_shape']"),
    "model.weights.h5": ("weights",),
    "model.h5 weights": ("weights",),
    "keras": ("ValueError", "Shape mismatch"),
    "module": ("module", "weights"),
    "backup": None,  # not found: fit starts afresh
}
KERAS_3_READS_TF_KERAS = {
    **TF_KERAS_READS_KERAS_3,
    "model.keras": ("ValueError", "Argument(s) not recognized: "
                    "{'jit_compile': False, 'is_legacy_optimizer': False}"),
    "model.keras, compile=False": ("weights",),
    "model.h5": ("ValueError", "Could not deserialize 'keras.metrics.mse'"),
    "model.h5, compile=False": ("weights",),
    "keras": ("ValueError", "Received incompatible tensor with shape"),
}


def assert_loaded(loaded, saved, expected, who):
  assert sorted(loaded) == sorted(expected), who
  for form, want in expected.items():
    got, where = loaded[form], f"{who}: {form}"
    if want is None:  # BackupAndRestore found no backup of its own format
      assert got.get("epochs") == [0, 1], (where, got.get("error"))
    elif want[0].endswith("Error"):
      assert got.get("error", "").startswith(want[0] + ": "), (where, got)
      assert want[1] in got["error"], (where, got["error"][:600])
    else:
      assert "error" not in got, (where, got.get("error", "")[:600])
      for part in want:
        assert got[part] == saved[part], (where, part)
      if form == "backup":
        assert got["epochs"] == [], where  # resumed after the last epoch


@pytest.fixture(scope="module")
def written(tmp_path_factory):
  """Each writer's folder and what it printed: {writer: (path, saved)}."""
  root = tmp_path_factory.mktemp("written")
  mirrored = root / "mirrored.py"
  mirrored.write_text(native_program(PROGRAM.read_text(), 2))
  with native_run(mirrored, ["save", str(root / "keras_3")]) as keras_3, \
      local_served.MultiWorkerCluster(2, env=ENV) as cluster:
    ours = cluster.start([*RUN, str(PROGRAM), "save", str(root / "ours")]
                         ).collect(TIMEOUT)
    one_machine = keras_3()
  with local_served.MultiWorkerCluster(2, env=KERAS_2) as cluster:
    tf_keras = cluster.start([sys.executable, str(PROGRAM), "save",
                              str(root / "tf_keras")]).collect(TIMEOUT)
  assert ours[("worker", 1)].returncode == 0, ours[("worker", 1)].stderr[-3000:]
  assert "saved:" not in ours[("worker", 1)].stdout  # it serves, no program
  # TensorFlow's strategy: every worker saves the same, one writes it.
  assert printed(tf_keras[("worker", 1)], "saved") == printed(
      tf_keras[("worker", 0)], "saved")
  assert sorted(os.listdir(root)) == ["keras_3", "mirrored.py", "ours",
                                      "tf_keras"]
  # tf-keras's BackupAndRestore: a TensorFlow checkpoint in chief/.
  assert "backup/chief/checkpoint" in files(root / "tf_keras")
  return {"ours": (root / "ours", printed(ours[("worker", 0)], "saved")),
          "keras_3": (root / "keras_3", printed(one_machine, "saved")),
          "tf_keras": (root / "tf_keras",
                       printed(tf_keras[("worker", 0)], "saved"))}


def files(folder):
  return sorted(os.path.relpath(os.path.join(top, name), folder)
                for top, _, names in os.walk(folder) for name in names)


def h5_arrays(path):
  import h5py  # pylint: disable=import-outside-toplevel
  arrays = {}
  with h5py.File(path, "r") as f:
    f.visititems(lambda name, item: arrays.__setitem__(name, item[()])
                 if isinstance(item, h5py.Dataset) else None)
  return arrays


def checkpoint_arrays(prefix):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  reader = tf.train.load_checkpoint(str(prefix))
  return {name: reader.get_tensor(name)
          for name, _ in tf.train.list_variables(str(prefix))
          if name != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def model_config(keras_file):
  """A ``.keras`` file's model config, without the ids Keras numbers
  shared objects by (a Python ``id``: other in every process)."""
  def strip(value):
    if isinstance(value, dict):
      return {k: strip(v) for k, v in value.items() if k != "shared_object_id"}
    if isinstance(value, list):
      return [strip(v) for v in value]
    return value
  return strip(json.loads(keras_file.read("config.json")))


def assert_same_arrays(ours, theirs, where):
  assert sorted(ours) == sorted(theirs), where
  for name, value in ours.items():
    assert value.shape == theirs[name].shape, (where, name)
    np.testing.assert_allclose(value, theirs[name], rtol=1e-5, atol=1e-6,
                               err_msg=f"{where}: {name}")


def test_ours_writes_the_files_keras_3_writes_on_one_machine(written):
  """The driving task writes each file once, as Keras 3 on one machine
  does: the same files, the same names and shapes inside, values within
  float32 round-off of one machine's (the gradients summed in another
  order), nothing from the serving worker."""
  (ours, saved), (theirs, saved_there) = written["ours"], written["keras_3"]
  assert files(ours) == files(theirs) == [
      "backup/latest.weights.h5", "backup/training_metadata.json",
      "keras.data-00000-of-00001", "keras.index", "model.h5", "model.keras",
      "model.weights.h5", "module.data-00000-of-00001", "module.index"]
  for name in ("model.h5", "model.weights.h5", "backup/latest.weights.h5"):
    assert_same_arrays(h5_arrays(ours / name), h5_arrays(theirs / name), name)
  for prefix in ("keras", "module"):
    assert_same_arrays(checkpoint_arrays(ours / prefix),
                       checkpoint_arrays(theirs / prefix), prefix)
  assert json.loads((ours / "backup/training_metadata.json").read_text()) == \
      json.loads((theirs / "backup/training_metadata.json").read_text()) == \
      {"epoch": 2, "batch": 0}
  with zipfile.ZipFile(ours / "model.keras") as mine, \
      zipfile.ZipFile(theirs / "model.keras") as other:
    assert mine.namelist() == other.namelist()
    assert model_config(mine) == model_config(other)
  for part in ("weights", "optimizer", "module"):
    for a, b in zip(saved[part], saved_there[part]):
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=part)


def test_keras_3_on_one_machine_loads_what_ours_saves(written, tmp_path):
  folder, saved = written["ours"]
  program = tmp_path / "plain.py"
  program.write_text(PROGRAM.read_text().replace(
      CONSTRUCTOR, "tf.distribute.get_strategy()"))  # no strategy
  with native_run(program, ["load", str(tmp_path / "out"), str(folder)]
                  ) as result:
    loaded = printed(result(), "loaded")
  assert_loaded(loaded["ours"], saved, SAME_KERAS, "Keras 3")


def test_tf_keras_under_tensorflows_strategy_loads_what_ours_saves_where_shared(
    written, tmp_path):
  folder, saved = written["ours"]
  with local_served.MultiWorkerCluster(2, env=KERAS_2) as cluster:
    results = cluster.start([sys.executable, str(PROGRAM), "load",
                             str(tmp_path / "out"), str(folder)]
                            ).collect(TIMEOUT)
  for task, result in results.items():
    assert_loaded(printed(result, "loaded")["ours"], saved,
                  TF_KERAS_READS_KERAS_3, f"tf-keras {task}")


def test_ours_loads_what_keras_3_and_tensorflows_strategy_save(written,
                                                               tmp_path):
  with local_served.MultiWorkerCluster(2, env=ENV) as cluster:
    results = cluster.start([
        *RUN, str(PROGRAM), "load", str(tmp_path / "out"),
        str(written["keras_3"][0]), str(written["tf_keras"][0])]
                            ).collect(TIMEOUT)
  assert results[("worker", 1)].returncode == 0, (
      results[("worker", 1)].stderr[-3000:])
  loaded = printed(results[("worker", 0)], "loaded")
  assert_loaded(loaded["keras_3"], written["keras_3"][1], SAME_KERAS,
                "ours from Keras 3")
  assert_loaded(loaded["tf_keras"], written["tf_keras"][1],
                KERAS_3_READS_TF_KERAS, "ours from tf-keras")
