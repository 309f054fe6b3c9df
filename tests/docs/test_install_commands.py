"""The commands of README.md and docs/estimator.md that no test runs as
printed, checked line by line, as printed, against the files that define
what they name.

They install into the environment running the tests (``pip install``),
build what another test builds (``mkdocs build --strict``: the site tests,
tests/docs/site_support.py), or serve until stopped on a fixed port
(``python -m http.server``), so running them here would change or block
the run.  Instead:

* every ``pip install`` of README's "Install" and "The documentation site"
  and of estimator.md's "Install" (and the ``pip install ".[estimator]"``
  the latter names): each ``.[extra]`` is an extra of setup.py; each
  requirement it names admits the version that tox's ``tf221`` environment
  -- where the Estimator tests run on TensorFlow 2.21 -- installs;
* README's site commands write and serve mkdocs.yml's ``site_dir``.

The other commands of both pages run in tests: README's "Getting started"
is CI's command (test_readme.py) and "The command line" runs there too;
estimator.md's ``run train.py`` in
tests/clients/estimator/test_estimator_programs.py and its
``keras_check.py`` commands in tests/clients/runner/test_runner_keras_choice.py.
"""
import ast
import configparser
import re
import shlex

from packaging.requirements import Requirement

import support

ROOT = support.ROOT


def sh_lines(page, heading):
  """The command lines (comments dropped) of the ```sh blocks of the
  section ``heading`` of ``page``, as shell words; ``&&`` splits a line."""
  text = (ROOT / page).read_text()
  section = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text,
                      re.M | re.S)
  assert section, f"{page} has no section {heading!r}"
  commands = []
  for block in re.findall(r"^```sh\n(.*?)^```$", section.group(1),
                          re.M | re.S):
    for line in block.splitlines():
      words = shlex.split(line, comments=True)
      while "&&" in words:
        commands.append(words[:words.index("&&")])
        words = words[words.index("&&") + 1:]
      if words:
        commands.append(words)
  assert commands, f"{page}, {heading!r}: no commands"
  return commands


def extras():
  """setup.py's extras: {name: [requirement, ...]}."""
  tree = ast.parse((ROOT / "setup.py").read_text())
  for node in ast.walk(tree):
    if isinstance(node, ast.keyword) and node.arg == "extras_require":
      return ast.literal_eval(node.value)
  raise AssertionError("setup.py has no extras_require")


def tf221_installs():
  """{distribution: version} that tox's tf221 environment pins (its deps
  and commands_pre)."""
  tox = configparser.ConfigParser(interpolation=None)
  tox.read(ROOT / "tox.ini")
  lines = (tox["testenv"]["deps"] + "\n"
           + tox["testenv"]["commands_pre"]).splitlines()
  return dict(re.findall(r"^\s*tf221: .*?([\w.-]+)==(\S+)$", "\n".join(lines),
                         re.M))


def check_pip(command, pinned):
  """A ``pip install ...`` line: its extras exist, its requirements admit
  ``pinned``'s versions."""
  assert command[:2] == ["pip", "install"], command
  known = extras()
  for word in command[2:]:
    if word.startswith("-"):
      assert word in ("-e", "--no-deps"), command
      continue
    match = re.fullmatch(r"\.(?:\[(\w+)\])?", word)
    if match:
      assert match.group(1) is None or match.group(1) in known, word
      continue
    requirement = Requirement(word)
    assert requirement.name in pinned, (word, pinned)
    assert requirement.specifier.contains(pinned[requirement.name]), (
        word, pinned[requirement.name])


def test_readme_install_lines_name_setup_py_extras():
  commands = sh_lines("README.md", "Install")
  assert [command[2] for command in commands] == [".[cpu]", ".[gpu]", "."]
  for command in commands:
    check_pip(command, {})


def test_readme_site_commands_build_and_serve_mkdocs_site_dir():
  pip, build, serve = sh_lines("README.md", "The documentation site")
  check_pip(pip, {})
  assert pip[-1] == ".[docs]"
  assert build == ["mkdocs", "build", "--strict"]
  site_dir = re.search(r"^site_dir: (\S+)$",
                       (ROOT / "mkdocs.yml").read_text(), re.M).group(1)
  assert serve[:4] == ["python", "-m", "http.server", "-d"]
  assert serve[4] == site_dir


def test_estimator_install_lines_admit_what_tf221_runs_estimator_with():
  pinned = tf221_installs()
  assert {"tensorflow-estimator", "tensorboard", "tf-keras"} <= set(pinned)
  commands = sh_lines("docs/estimator.md", "Install")
  assert len(commands) == 2
  for command in commands:
    check_pip(command, pinned)
  # The extra the page offers instead of the first line: the same pins.
  text = (ROOT / "docs" / "estimator.md").read_text()
  assert '`pip install ".[estimator]"`' in text
  for requirement in extras()["estimator"]:
    check_pip(["pip", "install", requirement], pinned)
