"""README.md, as a newcomer reads it: two set-up commands (the demo and the
tests), and the parts of the package it must not leave out (the cluster
strategy, the command line, installing for one's own code); every link
resolves."""
import re
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
                    "pip install tox && tox p\n"]


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
