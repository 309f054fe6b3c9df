"""The supported TensorFlow range: declared once, enforced on import, tested
in tox on every minor.

* An older TensorFlow is refused with ImportError, a newer one warned about
  once; both messages name the installed version, the range and the fix.
  (The subprocess runs fake ``tf.__version__`` before the package loads.)
* setup.py's extras, ``_tf_compat`` and tox.ini agree on the range, and tox
  has one environment per minor in it, with tf-keras where it exists.
* Only ``_tf_compat`` and ``_tf_private`` reach ``tf.__internal__`` or a
  ``tf.function`` class whose name changed between versions.
"""
import ast
import configparser
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
import warnings

import pytest

from compat_distribute import _tf_compat
import support

pytestmark = pytest.mark.parity

ROOT = support.ROOT
VERSION_DOORS = {"_tf_compat.py", "_tf_private"}  # a module; a package


def test_parse_version_takes_major_and_minor():
  assert _tf_compat.parse_version("2.12.1") == (2, 12)
  assert _tf_compat.parse_version("2.16.0-rc0") == (2, 16)
  assert _tf_compat.parse_version("2.22.0.dev20260101") == (2, 22)
  with pytest.raises(ValueError, match=r"'nightly' does not start with "
                     r"MAJOR\.MINOR.*>=2\.12,<2\.23"):
    _tf_compat.parse_version("nightly")


@pytest.mark.parametrize("version", ["2.12.0", "2.12.1", "2.15.0.post1",
                                     "2.16.2", "2.21.0", "2.22.0rc0",
                                     "2.22.0", "2.22.1"])
def test_supported_versions_pass_silently(version):
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    _tf_compat.check_supported(version)


@pytest.mark.parametrize("version", ["2.11.1", "2.4.0", "1.15.5"])
def test_older_versions_are_refused(version):
  with pytest.raises(ImportError) as info:
    _tf_compat.check_supported(version)
  message = str(info.value)
  assert f"TensorFlow {version} is installed" in message
  assert ">=2.12,<2.23" in message
  assert 'pip install "tensorflow-cpu>=2.12,<2.23"' in message


@pytest.mark.parametrize("version", ["2.23.0", "2.23.0.dev20261026",
                                     "2.30.1", "3.0.0"])
def test_newer_versions_warn(version):
  with pytest.warns(_tf_compat.UnsupportedTensorFlowWarning) as record:
    _tf_compat.check_supported(version)
  message = str(record[0].message)
  assert f"TensorFlow {version} is installed" in message
  assert ">=2.12,<2.23" in message


@pytest.mark.subprocess
def test_running_version_imports_as_its_place_in_the_range_says(tmp_path):
  # Inside the range (every tfNNN env): the import is silent.  Newer (the
  # nightly canary): one warning naming the running version, at the user's
  # import line.  Older is refused before anything runs here.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  running = _tf_compat.parse_version(tf.__version__)
  assert _tf_compat.OLDEST_SUPPORTED <= running
  caught = _warnings_of_script(tmp_path, {"main.py": "import compat_distribute.v2\n"})
  if running < _tf_compat.NEWEST_SUPPORTED_EXCLUSIVE:
    assert caught == []
  else:
    assert caught == [[str(tmp_path / "main.py"), 1,
                       f"TensorFlow {tf.__version__} is installed"]]


def _import_with_faked_version(version):
  program = textwrap.dedent(f"""
      import warnings
      warnings.simplefilter("always")
      import tensorflow as tf
      tf.__version__ = {version!r}
      with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
          import compat_distribute.v2
          import compat_distribute.v1
          from compat_distribute import _tf_private, _tf_compat
          print("imported")
        except ImportError as e:
          print("ImportError:", e)
      ours = [w for w in caught
              if w.category.__name__ == "UnsupportedTensorFlowWarning"]
      print("warnings:", len(ours))
      for w in ours:
        print("warning:", w.message)
  """)
  result = subprocess.run([sys.executable, "-c", program],
                          capture_output=True, text=True, timeout=300,
                          env={"TF_CPP_MIN_LOG_LEVEL": "3",
                               **_inherited_env()})
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


def _inherited_env():
  import os  # pylint: disable=g-import-not-at-top
  return {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


@pytest.mark.subprocess
def test_import_under_too_old_tensorflow_raises():
  out = _import_with_faked_version("2.11.0")
  assert "ImportError: compat_distribute needs TensorFlow >=2.12,<2.23, but " \
         "TensorFlow 2.11.0 is installed." in out
  assert "imported" not in out.replace("ImportError", "")


@pytest.mark.subprocess
def test_import_under_too_new_tensorflow_warns_once():
  out = _import_with_faked_version("2.23.0")
  assert "imported" in out
  assert "warnings: 1" in out
  assert "TensorFlow 2.23.0 is installed" in out


# -- the warning names the user's line ------------------------------------------

# Runs main.py of ``files`` (written to ``folder``) in a fresh process and
# returns each UnsupportedTensorFlowWarning as [filename, lineno, message
# part]; FAKE_VERSION, if given, replaces tf.__version__ before the package
# loads.
_RECORDER = """
import json, runpy, sys, warnings
with warnings.catch_warnings(record=True) as caught:
  warnings.simplefilter("always")
  if len(sys.argv) > 2:
    import tensorflow as tf
    tf.__version__ = sys.argv[2]
  runpy.run_path(sys.argv[1], run_name="__main__")
import tensorflow as tf
print(json.dumps([[w.filename, w.lineno,
                   f"TensorFlow {tf.__version__} is installed"]
                  for w in caught
                  if w.category.__name__ == "UnsupportedTensorFlowWarning"
                  and f"TensorFlow {tf.__version__} is installed"
                  in str(w.message)]))
"""


def _warnings_of_script(folder, files, fake_version=None):
  for name, text in files.items():
    (folder / name).write_text(text)
  result = subprocess.run(
      [sys.executable, "-c", _RECORDER, str(folder / "main.py"),
       *([fake_version] if fake_version else [])],
      capture_output=True, text=True, timeout=300, cwd=str(ROOT),
      env={**_inherited_env(), "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": str(folder) + os.pathsep + str(ROOT)})
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.subprocess
@pytest.mark.parametrize("statement", [
    "import compat_distribute.v2",
    "from compat_distribute import v1 as distribute",
    "import compat_distribute; compat_distribute.install()",
])
def test_warning_names_the_line_that_first_loads_the_package(tmp_path,
                                                             statement):
  caught = _warnings_of_script(
      tmp_path, {"main.py": f"import os\n\n{statement}\n"}, "2.23.0")
  assert caught == [[str(tmp_path / "main.py"), 3,
                     "TensorFlow 2.23.0 is installed"]]


@pytest.mark.subprocess
def test_warning_names_the_import_in_the_users_own_module(tmp_path):
  # The import runs in a module of the user's that main.py imports: the
  # warning names that module's line, not main.py's and not the package's.
  caught = _warnings_of_script(tmp_path, {
      "main.py": "import user_helpers\nuser_helpers.setup()\n",
      "user_helpers.py": ("def setup():\n"
                          "  from compat_distribute import v2\n"
                          "  return v2\n")}, "2.30.1")
  assert caught == [[str(tmp_path / "user_helpers.py"), 2,
                     "TensorFlow 2.30.1 is installed"]]


def test_warning_called_directly_names_the_caller():
  with pytest.warns(_tf_compat.UnsupportedTensorFlowWarning) as record:
    _tf_compat.check_supported("2.23.0")
  assert record[0].filename == __file__


# -- the range is declared once ------------------------------------------------


def _setup_extras():
  tree = ast.parse((ROOT / "setup.py").read_text())
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup":
      for keyword in node.keywords:
        if keyword.arg == "extras_require":
          return ast.literal_eval(keyword.value)
  raise AssertionError("setup.py declares no extras_require")


def test_setup_extras_declare_the_supported_range():
  extras = _setup_extras()
  assert extras["cpu"] == [f"tensorflow-cpu{_tf_compat.SUPPORTED_RANGE}"]
  assert extras["gpu"] == [f"tensorflow{_tf_compat.SUPPORTED_RANGE}"]
  assert _tf_compat.SUPPORTED_RANGE == ">=%d.%d,<%d.%d" % (
      _tf_compat.OLDEST_SUPPORTED + _tf_compat.NEWEST_SUPPORTED_EXCLUSIVE)


def _tox():
  parser = configparser.ConfigParser(interpolation=None)
  parser.read(ROOT / "tox.ini")
  return parser


def _minors():
  major, oldest = _tf_compat.OLDEST_SUPPORTED
  _, newest_exclusive = _tf_compat.NEWEST_SUPPORTED_EXCLUSIVE
  return [(major, minor) for minor in range(oldest, newest_exclusive)]


def _label(name):
  labels = _tox()["tox"]["labels"]
  line = next(line for line in labels.splitlines()
              if line.strip().startswith(name))
  return [n.strip() for n in line.split("=", 1)[1].split(",")]


def _pinned_versions():
  """{(major, minor): the tensorflow-cpu version its tfNNN env pins}."""
  pins = re.findall(r"^\s*tf(\d)(\d+): tensorflow-cpu==(\S+)$",
                    _tox()["testenv"]["deps"], re.MULTILINE)
  return {(int(a), int(b)): version for a, b, version in pins}


def _is_release(version):
  return re.fullmatch(r"[\d.]+(\.post\d+)?", version) is not None


def test_tox_has_one_environment_per_supported_minor():
  assert _label("matrix") == [f"tf{a}{b}" for a, b in _minors()]
  pins = _pinned_versions()
  assert sorted(pins) == _minors()
  for (major, minor), version in pins.items():
    assert _tf_compat.parse_version(version) == (major, minor)


def test_default_tox_runs_the_oldest_and_the_newest_released_minor():
  # A minor still at its release candidate is in the matrix and in
  # `between`, not in the default: `tox` runs what users can install.
  pins = _pinned_versions()
  released = [minor for minor in _minors() if _is_release(pins[minor])]
  envlist = [n.strip() for n in _tox()["tox"]["envlist"].split(",")]
  oldest, newest = _minors()[0], released[-1]
  assert set(envlist) == {"tf%d%d" % oldest, "tf%d%d" % newest}
  assert _label("between") == [
      "tf%d%d-core" % minor for minor in _minors()
      if minor not in (oldest, newest)]


def test_tox_installs_tf_keras_of_the_same_minor():
  # The release of that minor; for a minor with no tf-keras release yet
  # (2.22 at its release candidate), a tf-keras nightly of that minor.
  pre = _tox()["testenv"]["commands_pre"]
  pins = _pinned_versions()
  for line in pre.strip().splitlines():
    factor, command = line.split(":", 1)
    minor = int(factor.strip()[len("tf2"):])
    package = "tf-keras" if _is_release(pins[(2, minor)]) else (
        "tf-keras-nightly")
    assert f" {package}==2.{minor}." in command, line
    assert "--no-deps" in command, line


def test_nightly_canary_runs_the_core_outside_the_default():
  tox = _tox()
  nightly = tox["testenv:nightly"]
  assert "nightly" not in tox["tox"]["envlist"]
  assert nightly["commands"].strip() == (
      "pytest -q -p no:cacheprovider -m parity {posargs:tests}")
  assert nightly["commands_pre"].strip() == "python tools/install_nightly.py"
  # No released TensorFlow beside the nightly: no extra pulls one in.
  assert nightly["extras"].strip() == ""


def test_core_envs_select_the_parity_marker_and_the_rest_the_whole_suite():
  # The differential core is a marker, not a list of files: a moved or a new
  # parity file is in the core by its `pytestmark`.
  commands = _tox()["testenv"]["commands"].strip().splitlines()
  pytest_lines = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
                  for line in commands if "pytest" in line}
  # -rs: every skipped test's reason is printed (docs/architecture.md,
  # "Skipped tests", lists them; the default environments check it).
  assert pytest_lines == {
      "!core": ("pytest -q -rs -p no:cacheprovider "
                "--junitxml={envlogdir}/junit.xml {posargs:tests}"),
      "core": "pytest -q -rs -p no:cacheprovider -m parity {posargs:tests}"}
  assert "[core]" not in (ROOT / "tox.ini").read_text()
  assert "tf221,tf212: COMPAT_DISTRIBUTE_CHECK_SKIPS = 1" in (
      _tox()["testenv"]["setenv"])


def test_quick_env_leaves_out_processes_clusters_and_slow_tests():
  quick = _tox()["testenv:quick"]
  assert quick["commands"].strip() == (
      'pytest -q -p no:cacheprovider '
      '-m "not subprocess and not cluster and not slow" {posargs:tests}')
  assert "quick" not in _tox()["tox"]["envlist"]


def test_markers_are_registered_and_strict():
  config = tomllib.loads((ROOT / "pyproject.toml").read_text())
  options = config["tool"]["pytest"]["ini_options"]
  assert "--strict-markers" in options["addopts"].split()
  names = sorted(line.split(":", 1)[0] for line in options["markers"])
  assert names == ["cluster", "more", "parity", "slow", "subprocess"]


def test_more_env_runs_what_the_default_environments_skip():
  """tests/conftest.py skips a `more` test unless COMPAT_DISTRIBUTE_MORE=1;
  only `tox -e more` sets it, and runs nothing else; CI runs it."""
  more = _tox()["testenv:more"]
  assert "COMPAT_DISTRIBUTE_MORE = 1" in more["setenv"]
  assert "-m more {posargs:tests}" in more["commands"]
  assert "COMPAT_DISTRIBUTE_MORE" not in _tox()["testenv"]["setenv"]
  assert "more" in (ROOT / ".ci" / "run").read_text().split("tox -e ")[-1]


# -- one door for what moves between versions ----------------------------------


def _package_files():
  for folder in ("compat_distribute", "v1", "v2"):
    yield from sorted((ROOT / folder).rglob("*.py"))


def _moving_names(path):
  tree = ast.parse(path.read_text())
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and node.attr in (
        "__internal__", "PolymorphicFunction", "GenericFunction") and not (
            isinstance(node.value, ast.Name) and node.value.id == "_tf_compat"):
      found.append(f"line {node.lineno}: .{node.attr}")
  return found


@pytest.mark.parametrize(
    "path", [p for p in _package_files() if p.name not in VERSION_DOORS
             and p.parent.name not in VERSION_DOORS],
    ids=lambda p: str(p.relative_to(ROOT)))
def test_version_dependent_names_go_through_one_door(path):
  found = _moving_names(path)
  assert not found, (
      f"{path.relative_to(ROOT)} uses {found}; names that move between "
      "TensorFlow versions are looked up in compat_distribute/_tf_compat.py "
      "(or _tf_private/ for private ones). Use the helper there.")


def test_the_door_check_sees_such_names():
  door = ROOT / "compat_distribute" / "_tf_compat.py"
  assert _moving_names(door)
