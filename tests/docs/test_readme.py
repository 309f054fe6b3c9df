"""README.md, as a newcomer reads it: two set-up commands (the demo and the
tests), and the parts of the package it must not leave out (the cluster
strategy, the command line, installing for one's own code); every link
resolves; the tf.distribute spelling of first.py runs under
``python -m compat_distribute run`` with ours and prints what it shows;
the commands of "The command line" run as printed."""
import os
import re
import shlex
import subprocess
import sys

import pytest
import tensorflow as tf

import support

ROOT = support.ROOT
README = (ROOT / "README.md").read_text()


def section(title):
  match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README,
                    re.M | re.S)
  assert match, f"README.md has no '## {title}' section"
  return match.group(1)


def test_getting_started_has_exactly_two_commands():
  blocks = re.findall(r"```sh\n(.*?)```", section("Getting started"), re.S)
  assert blocks == ["pip install tox && tox -e demo\n",
                    "pip install tox && tox p && "
                    "tox -e estimator-libs,multi-worker,more\n"]


def test_ci_runs_the_readme_test_command_verbatim():
  test_command = re.findall(r"```sh\n(.*?)```", section("Getting started"),
                            re.S)[1].strip()
  ci = (ROOT / ".ci" / "run").read_text().splitlines()
  commands = [line for line in ci
              if line.strip() and not line.startswith(("#", "set ", "cd "))]
  assert commands == [test_command]
  # The newest TF runs the Estimator libraries and every multi-worker case.
  assert "tox -e estimator-libs,multi-worker,more" in test_command


def test_mentions_what_a_newcomer_needs():
  for text in ("ParameterServerStrategy", "TF_CONFIG", "docs/cluster.md",
               "python -m compat_distribute run",
               "python -m compat_distribute demo",
               "demo --cluster 2x1", 'pip install ".[cpu]"',
               'pip install ".[gpu]"', "4.8 GB"):
    assert text in README, text


def test_relative_links_resolve():
  links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
  assert links
  for link in links:
    if "://" not in link:
      assert (ROOT / link).exists(), link


def test_the_extras_named_exist():
  setup = (ROOT / "setup.py").read_text()
  for extra in ("cpu", "gpu"):
    assert f'"{extra}": [' in setup, extra


def test_two_commands_are_named_where_they_are_promised():
  sentence = re.search(r"two commands set up\s+everything themselves(.*?)\n\n",
                       README, re.S)
  assert sentence, "README.md no longer says 'two commands set up ...'"
  text = " ".join(sentence.group(1).split())
  for command in ("pip install tox && tox -e demo",
                  "pip install tox && tox p && tox -e estimator-libs,multi-worker,more"):
    assert f"`{command}`" in text, command


RUN_PROGRAM = re.search(
    r"```python\n(# first\.py, as written for tf\.distribute\n.*?)```\n"
    r".*?```text\n(.*?)```", README, re.S)


@pytest.mark.subprocess
def test_the_tf_distribute_first_py_runs_under_run_with_ours(tmp_path):
  assert RUN_PROGRAM, "README.md: the tf.distribute first.py and its output"
  source, shown = RUN_PROGRAM.groups()
  assert "compat_distribute" not in source  # TensorFlow's spelling only
  script = tmp_path / "first.py"
  script.write_text(source)
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  printed = {}
  shown_command = re.search(r"`(python -m compat_distribute run first\.py)` "
                            r"prints \(`(python first\.py)`", README)
  assert shown_command, "README.md: the command that runs first.py"
  for how, line in (("run", shown_command.group(1)),
                    ("plain", shown_command.group(2))):
    command = shlex.split(line)  # as printed, in the folder of first.py
    result = subprocess.run([sys.executable, *command[1:]],
                            cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    printed[how] = result.stdout.strip().splitlines()
  shown = shown.strip().splitlines()
  assert printed["run"][0] == shown[0] == (
      "compat_distribute.strategies.one_device")
  assert printed["plain"][0] == (
      "tensorflow.python.distribute.one_device_strategy")
  assert re.fullmatch(r"learnt: y = -?\d+\.\d\d x \+ -?\d+\.\d\d",
                      printed["run"][1])
  assert len(printed["run"]) == len(shown) == 2
  if tf.__version__ == "2.21.0":  # the numbers the README shows
    assert printed["run"][1] == printed["plain"][1] == shown[1]


@pytest.mark.subprocess
def test_the_command_line_section_runs_as_printed():
  blocks = re.findall(r"```sh\n(.*?)```", section("The command line"), re.S)
  assert len(blocks) == 1, blocks
  lines = blocks[0].splitlines()
  assert len(lines) == 4, lines
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  for line in lines:
    command = shlex.split(line, comments=True)
    assert command[:3] == ["python", "-m", "compat_distribute"], line
    result = subprocess.run([sys.executable, *command[1:]], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{line}: {result.stderr[-3000:]}"
    # Each help names its own command, and the top one every command.
    names = command[3:-1] or ["run", "demo", "serve"]
    for name in names:
      assert name in result.stdout, f"{line}:\n{result.stdout}"
