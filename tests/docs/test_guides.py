"""The guides' complete programs run as files and print what the page shows.

A guide's (or README.md's) complete program is a ```python block whose first line is its file
name (``# keras_fit.py``); the ```text block after it is what it prints.
Each runs here as a file, in a process of its own (as a user would run it:
no 4-CPU split made beforehand, no globals), with a bounded timeout.  The
text is compared line by line; the numbers in it exactly (to the digits
shown) on the TensorFlow the page names; on another TensorFlow only the
text around them (its Keras initialises weights differently, so the
numbers differ).  The programs compare ours with TensorFlow's strategies
themselves and print the verdict, which is compared as text everywhere.

TensorFlow's own strategy can crash by itself (docs/compatibility.md, "A
crash in TensorFlow's MultiDeviceIterator"): a program killed by a signal
while its main thread is on a line that runs TensorFlow's strategy (the
line names ``native``) is run again, at most ``ATTEMPTS`` times in all, and
each such crash is reported as a warning with its stacks.  A crash anywhere
else fails at once.

The programs of cluster.md and estimator.md need a cluster or Estimator and
run in tests/clients/cluster/test_cluster_v2.py (cluster.md's
train_resume.py and one_machine.sh: tests/docs/test_cluster_recipes.py) and
tests/clients/estimator/test_estimator_programs.py (estimator.md's
keras_check.py and its commands: tests/clients/runner/test_runner_keras_choice.py).

Also here: the test-only set-up the ``>>>`` examples need is hidden (in an
HTML comment), is the same on every page, and is the one index.md shows.
"""
import os
import pathlib
import re
import subprocess
import sys
import warnings

import pytest
import tensorflow as tf

# Each program runs in a process of its own and prints ours beside native.
pytestmark = [pytest.mark.subprocess, pytest.mark.parity]

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Where a program's page says it printed its numbers.
MEASURED_ON = "TensorFlow 2.21"
RUN_ELSEWHERE = {
    "cluster.md": "tests/clients/cluster/test_cluster_v2.py",
    "estimator.md": "tests/clients/estimator/test_estimator_programs.py"}
TIMEOUT = 600  # seconds; the busiest run seen took 60 s
ATTEMPTS = 3  # runs of a program TensorFlow's own strategy keeps crashing
NUMBER = re.compile(r"-?\d+\.\d+")
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
COMMENT = re.compile(r"<!--.*?-->", re.S)


def programs():
  """(page, file name, source, expected output, label) of every complete
  program in docs/ and README.md that runs here."""
  found = []
  for page in sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]:
    text = page.read_text()
    blocks = list(BLOCK.finditer(text))
    for i, block in enumerate(blocks):
      lang, body = block.groups()
      name = re.match(r"# (\w+\.py)\n", body)
      if lang != "python" or not name or page.name in RUN_ELSEWHERE:
        continue
      following = blocks[i + 1] if i + 1 < len(blocks) else None
      assert following and following.group(1) == "text", (
          f"docs/{page.name}: {name.group(1)} has no ```text block after it "
          "showing what it prints")
      label = text[block.end():following.start()]
      found.append(pytest.param(page.name, name.group(1), body,
                                following.group(2), label,
                                id=f"{page.name}:{name.group(1)}"))
  return found


PROGRAMS = programs()


def test_the_guides_have_their_programs():
  names = {p.values[:2] for p in PROGRAMS}
  assert {("index.md", "quickstart.py"), ("keras.md", "keras_fit.py"),
          ("custom_loops.md", "custom_loop.py"),
          ("v1.md", "v1_session.py"), ("README.md", "first.py")} <= names, names


def same_output(got: str, want: str, exact_numbers: bool) -> list[str]:
  """The lines where ``got`` differs from ``want`` (empty: the same)."""
  got_lines, want_lines = got.strip().splitlines(), want.strip().splitlines()
  if len(got_lines) != len(want_lines):
    return [f"{len(got_lines)} lines printed, the page shows "
            f"{len(want_lines)}"]
  wrong = []
  for g, w in zip(got_lines, want_lines):
    if NUMBER.sub("#", g) != NUMBER.sub("#", w):
      wrong.append(f"printed {g!r}, the page shows {w!r}")
      continue
    if exact_numbers and NUMBER.findall(g) != NUMBER.findall(w):
      wrong.append(f"printed {g!r}, the page shows {w!r}")
  return wrong


@pytest.mark.parametrize("page,name,source,expected,label", PROGRAMS)
def test_program_runs_and_prints_what_the_page_shows(
    tmp_path, page, name, source, expected, label):
  assert MEASURED_ON in label, (
      f"docs/{page}: say where {name}'s output was printed ({MEASURED_ON})")
  script = tmp_path / name
  script.write_text(source)
  # Unbuffered, with Python's stacks printed on a fatal signal: a crash
  # shows how far the program got and where each thread was.
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
         "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1",
         "PYTHONPATH": os.pathsep.join(
             [str(ROOT), os.environ.get("PYTHONPATH", "")])}
  for attempt in range(1, ATTEMPTS + 1):
    done = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path),
                          env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)
    if not crashed_in_native(script, done) or attempt == ATTEMPTS:
      break
    warnings.warn(
        f"docs/{page}: {name} run {attempt} of {ATTEMPTS} died by signal "
        f"{-done.returncode} in TensorFlow's own strategy; running it "
        f"again. Its stacks:\n{done.stderr[-3000:]}")
  assert done.returncode == 0, (
      f"docs/{page}: {name} failed:\n{done.stdout[-3000:]}\n"
      f"{done.stderr[-3000:]}")
  exact = tf.__version__.startswith(MEASURED_ON.split()[-1] + ".")
  wrong = same_output(done.stdout, expected, exact)
  assert not wrong, f"docs/{page}: {name}:\n" + "\n".join(wrong)


def crashed_in_native(script: pathlib.Path,
                      done: subprocess.CompletedProcess) -> bool:
  """Whether ``script`` died by a signal while its main thread was on a
  line of it that names ``native`` (runs TensorFlow's own strategy), as
  Python's fault handler printed its stack."""
  if done.returncode >= 0:
    return False
  lines = script.read_text().splitlines()
  frame = re.compile(
      rf'File "{re.escape(str(script))}", line (\d+) in <module>')
  at = [int(n) for n in frame.findall(done.stderr)]
  return bool(at) and all("native" in lines[n - 1] for n in at)


# Each reads address 0 (SIGSEGV) on its third line.
CRASHES = {
    True: 'import ctypes\n\nctypes.string_at(0)  # the native run\n',
    False: 'import ctypes\n\nctypes.string_at(0)  # our run\n',
}


@pytest.mark.parametrize("in_native", [True, False])
def test_only_a_crash_on_a_line_naming_native_is_run_again(
    tmp_path, in_native):
  script = tmp_path / "crash.py"
  script.write_text(CRASHES[in_native])
  done = subprocess.run([sys.executable, "-X", "faulthandler", str(script)],
                        capture_output=True, text=True, timeout=60)
  assert done.returncode < 0, done
  assert crashed_in_native(script, done) is in_native, done.stderr
  for returncode in (0, 1):  # ended by itself: never run again
    ended = subprocess.CompletedProcess(done.args, returncode, "", done.stderr)
    assert not crashed_in_native(script, ended)


def test_output_comparison_can_fail():
  assert same_output("a 1.0000\n", "a 1.0000\n", True) == []
  assert same_output("a 1.0001\n", "a 1.0000\n", True)
  assert same_output("a 1.0001\n", "a 1.0000\n", False) == []
  assert same_output("b 1.0000\n", "a 1.0000\n", False)
  assert same_output("a: True\n", "a: False\n", False)
  assert same_output("a 1.0000\n", "a 1.0000\nb\n", False)


# -- the hidden set-up ----------------------------------------------------------


def doctest_source(text: str) -> str:
  """The code of the ``>>>`` / ``...`` lines of ``text``, prompts removed."""
  return "\n".join(line[4:] for line in text.splitlines()
                   if line.startswith((">>> ", "... ")))


def shown_setup() -> str:
  index = (DOCS / "index.md").read_text()
  section = index.split("## Running the examples", 1)[1]
  return BLOCK.search(section).group(2).strip()


def test_the_shown_setup_is_what_the_tests_run():
  setup = shown_setup()
  assert "set_logical_device_configuration" in setup
  with_setup = set()
  for page in sorted(DOCS.glob("*.md")):
    text = page.read_text()
    hidden = [c for c in COMMENT.findall(text) if ">>> " in c]
    if not hidden:
      continue
    with_setup.add(page.name)
    assert len(hidden) == 1 and doctest_source(hidden[0]).strip() == setup, (
        f"docs/{page.name}: its hidden set-up is not the one index.md shows")
    assert ">>> " not in text[:text.index(hidden[0])], (
        f"docs/{page.name}: an example before the hidden set-up")
  assert {"index.md", "strategy.md", "one_device.md", "central_storage.md",
          "custom_loops.md", "v1.md", "migration.md",
          "differences.md"} <= with_setup, with_setup


def test_no_visible_example_opens_with_the_setup():
  for page in sorted(DOCS.glob("*.md")):
    visible = COMMENT.sub("", page.read_text())
    for block in BLOCK.finditer(visible):
      if ">>> " in block.group(2):
        assert "set_logical_device_configuration" not in block.group(2), (
            f"docs/{page.name}: test set-up in a visible example; hide it "
            "in the page's first HTML comment")
