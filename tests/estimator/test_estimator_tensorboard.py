"""TensorBoard and Estimator on TensorFlow 2.16+, where ``tensorflow-cpu`` no
longer installs TensorBoard.

Estimator writes its own summaries with TensorFlow 1's ops, which need no
TensorBoard; TensorFlow 2's ``tf.summary.scalar`` & co. do.  Called in an
Estimator program under ``install()`` without TensorBoard, they raise one
``TensorBoardMissingError`` (a ``TBNotInstalledError``, as TensorFlow
raises) with the pip command, instead of TensorFlow's bare
``TBNotInstalledError``.  The program runs with TensorBoard hidden by a
``sitecustomize`` in the test's own folder, whether or not the environment
has it.
"""
import importlib.util
import os
import sys

import pytest
import tensorflow as tf

from compat_distribute import _tf_private
from compat_distribute import estimator
from compat_distribute.estimator import api
from compat_distribute.estimator import errors
from compat_distribute.estimator import summaries
from support import estimator as estimator_support

TB_ERROR = _tf_private.tb_not_installed_error()
MINOR = ".".join(tf.__version__.split(".")[:2])
# TensorBoard releases up to the running TensorFlow minor's.
REQUIREMENT = f'"tensorboard>=2.16,<2.{int(MINOR.split(".")[1]) + 1}"'

supplied_only = pytest.mark.skipif(
    estimator.has_estimator_support() or TB_ERROR is None,
    reason="TensorFlow 2.12-2.15 require TensorBoard and have Estimator; "
    "nothing is supplied there")

HIDE_TENSORBOARD = '''
import importlib.abc
import sys


class HideTensorBoard(importlib.abc.MetaPathFinder):
  def find_spec(self, fullname, path=None, target=None):
    if fullname.split(".")[0] == "tensorboard":
      raise ModuleNotFoundError(f"No module named {fullname!r}",
                                name=fullname)
    return None


sys.meta_path.insert(0, HideTensorBoard())
'''


def test_the_requirement_names_the_running_minor():
  assert errors.tensorboard_requirement("2.16") == '"tensorboard>=2.16,<2.17"'
  assert errors.tensorboard_requirement("2.21") == '"tensorboard>=2.16,<2.22"'


@supplied_only
def test_the_error_is_tensorflows_class_and_ours():
  error = errors.TensorBoardMissingError("tf.summary.scalar", MINOR)
  assert isinstance(error, TB_ERROR) and isinstance(error, errors.Error)
  assert error.error_message == str(error)


@supplied_only
def test_guard_covers_each_stand_in_only_without_tensorboard():
  before = {path: dict(vars(api.api_module(path)))
            for path in summaries.SUMMARY_PATHS}
  guarded = summaries.guard(MINOR)
  try:
    if summaries.tensorboard_installed():
      # The summary functions stay TensorFlow's, and do their work.
      assert guarded == []
      assert not bool(tf.summary.scalar("x", 1.0, step=0))  # no writer
      return
    assert sorted({name for _, name, _ in guarded}) == [
        "audio", "histogram", "image", "scalar", "text"]
    assert summaries.guard(MINOR) == []  # nothing guarded twice
    with pytest.raises(errors.TensorBoardMissingError,
                       match="pip install") as raised:
      tf.summary.scalar("x", 1.0, step=0)
    assert isinstance(raised.value, TB_ERROR)
    assert isinstance(raised.value.__cause__, ImportError)
  finally:
    summaries.unguard(guarded)
  for path, names in before.items():
    after = vars(api.api_module(path))
    assert all(after[k] is v for k, v in names.items()), path


def _run(folder, python_path):
  process = estimator_support.start(
      [sys.executable, "-m", "compat_distribute", "run",
       os.path.join(estimator_support.FIXTURES, "estimator_tensorboard.py"),
       str(folder)], cwd=estimator_support.ROOT,
      env=estimator_support.environment({"PYTHONPATH": python_path}))
  return estimator_support.finish(process, "estimator_tensorboard.py")


needs_estimator = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow_estimator") is None,
    reason="tensorflow-estimator is not installed")


@pytest.mark.subprocess
@supplied_only
@needs_estimator
@pytest.mark.skipif(not summaries.tensorboard_installed(),
                    reason="TensorBoard is not installed here (tox -e tf221 "
                    "installs it, as the estimator extra does)")
def test_summary_with_tensorboard_trains(tmp_path):
  result = _run(tmp_path, os.environ.get("PYTHONPATH", ""))
  assert result["tensorboard_hidden"] is False
  assert result["canned_step"] == 2
  assert result["errors"] == [None, None]


@pytest.mark.subprocess
@supplied_only
@needs_estimator
def test_summary_without_tensorboard_names_the_install_command(tmp_path):
  (tmp_path / "site").mkdir()
  (tmp_path / "site" / "sitecustomize.py").write_text(HIDE_TENSORBOARD)
  result = _run(tmp_path, str(tmp_path / "site"))
  assert result["tensorboard_hidden"] is True
  # Estimator's own summaries need no TensorBoard: training ran.
  assert result["canned_step"] == 2
  for error in result["errors"]:  # the same error at each attempt
    assert error["classes"][:3] == [
        "TensorBoardMissingError", "Error", "TBNotInstalledError"], error
    assert error["message"].startswith(
        "tf.summary.scalar needs TensorBoard, which is not installed")
    assert f"pip install {REQUIREMENT}" in error["message"]
    assert 'pip install "compat_distribute[estimator]"' in error["message"]
    assert error["cause"][0] == "ModuleNotFoundError"
    assert "tensorboard" in error["cause"][1]
