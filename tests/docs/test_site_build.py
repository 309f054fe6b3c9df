"""The documentation site builds without warnings and its API reference is
complete: a page per public name, signatures, examples, TensorFlow's member
choices, the guides in the navigation, search, nothing fetched online.

The site is built once (``site_support.built_site``); the browser check
(``browser_check.py``, run by ``tox -e docs``) looks at the same build.
"""
from __future__ import annotations

import ast
import html
import json
import pathlib
import re

import pytest

from site_support import INSTALL_HINT
from site_support import built_site  # pylint: disable=unused-import  (a fixture)
from site_support import ROOT

# mkdocs builds the site in a process of its own (the `docs` extra).
pytestmark = pytest.mark.subprocess

DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"

# The facade modules whose names the reference documents, and the folder of
# their pages under docs/reference/.
FACADES = {
    "compat_distribute": ("compat_distribute/__init__.py", "compat_distribute"),
    "compat_distribute.v1": ("v1/__init__.py", "v1"),
    "compat_distribute.v1.experimental": ("v1/experimental/__init__.py",
                                          "v1/experimental"),
    "compat_distribute.v2": ("v2/__init__.py", "v2"),
    "compat_distribute.v2.experimental": ("v2/experimental/__init__.py",
                                          "v2/experimental"),
}
STRATEGY_PAGES = [
    "v1/Strategy", "v1/OneDeviceStrategy", "v1/experimental/CentralStorageStrategy",
    "v1/experimental/ParameterServerStrategy",
    "v2/Strategy", "v2/OneDeviceStrategy", "v2/experimental/CentralStorageStrategy",
]
# Methods that need an example of their own on every page that shows them.
MAIN_METHODS = [
    "run", "reduce", "scope", "experimental_distribute_dataset",
    "distribute_datasets_from_function", "gather", "make_dataset_iterator",
    "make_input_fn_iterator", "experimental_run", "update_config_proto",
]
# Strategy members that TensorFlow's generated TF2 pages leave out
# (tf.distribute.Strategy and tf.distribute.experimental.
# CentralStorageStrategy) while its v1 pages list them.
HIDDEN_IN_V2 = [
    "make_dataset_iterator", "make_input_fn_iterator", "experimental_run",
    "update_config_proto", "configure", "unwrap", "experimental_run_v2",
]
# Pages whose directive names the defining object: griffe reads
# ``compat_distribute.install`` as the submodule, which the function of that
# name shadows only at import.
TARGETS = {"compat_distribute.install": "compat_distribute.install.install"}
# The guides, in the order of tensorflow.org's distribution guides.
GUIDE_ORDER = ["index.md", "keras.md", "custom_loops.md", "v1.md",
               "migration.md", "cluster.md", "estimator.md"]


def _implemented_names(module_file: pathlib.Path) -> list[str]:
  """The names a facade module imports from compat_distribute (its own
  implementations), leaving out submodules and TensorFlow's names."""
  tree = ast.parse(module_file.read_text(encoding="utf-8"))
  names = []
  for node in tree.body:
    if isinstance(node, ast.ImportFrom) and (
        node.module or "").startswith("compat_distribute"):
      for alias in node.names:
        name = alias.asname or alias.name
        if name not in ("experimental",) and not name.startswith("_"):
          names.append(name)
  return names


def _public_pages() -> list[tuple[str, str]]:
  """(object path, page path relative to docs/ without .md) per name."""
  pages = []
  for module, (source, folder) in FACADES.items():
    for name in _implemented_names(ROOT / source):
      identifier = f"{module}.{name}"
      pages.append((TARGETS.get(identifier, identifier),
                    f"reference/{folder}/{name}"))
  return pages


def _nav_files(entries) -> list[str]:
  files = []
  for entry in entries:
    if isinstance(entry, str):
      files.append(entry)
    elif isinstance(entry, dict):
      for value in entry.values():
        files += _nav_files(value) if isinstance(value, list) else [value]
  return files


def _config() -> dict:
  try:
    import yaml  # pylint: disable=g-import-not-at-top
  except ImportError:
    pytest.fail(f"PyYAML (installed with mkdocs) is missing; {INSTALL_HINT}.",
                pytrace=False)
  return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def _sections(page_html: str, identifier: str) -> dict[str, str]:
  """{member name: its HTML} for the members rendered under ``identifier``,
  in page order (a dict keeps it)."""
  anchors = [(m.start(), m.group(1)) for m in re.finditer(
      r'id="' + re.escape(identifier) + r'\.(\w+)"', page_html)]
  ends = [start for start, _ in anchors[1:]] + [len(page_html)]
  return {name: page_html[start:end]
          for (start, name), end in zip(anchors, ends)}


def _text(fragment: str) -> str:
  return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def test_build_has_no_warnings(built_site):
  # --strict already fails on a warning; this also catches errors logged
  # without failing and says what the build printed.
  problems = [line for line in built_site.output.splitlines()
              if re.match(r"\s*(WARNING|ERROR)\b", line)]
  assert problems == []
  assert "Documentation built in" in built_site.output


def test_every_public_name_has_a_page_in_the_nav(built_site):
  pages = _public_pages()
  # The facades export these (and more) today; a parser that finds none
  # would make the loop below vacuous.
  assert ("compat_distribute.v2.experimental.CentralStorageStrategy",
          "reference/v2/experimental/CentralStorageStrategy") in pages
  assert len(pages) >= 20
  nav = _nav_files(_config()["nav"])
  for identifier, page in pages:
    assert f"{page}.md" in nav, page
    source = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    assert f"::: {identifier}" in source, page
    assert f'id="{identifier}"' in built_site.page(page), page


def test_every_page_shows_a_signature_and_an_example(built_site):
  for identifier, page in _public_pages():
    page_html = built_site.page(page)
    assert 'class="doc-signature' in page_html, page
    # The object's own docstring (before its first member) has an example.
    own = page_html.split(f'id="{identifier}.', 1)[0]
    assert "&gt;&gt;&gt;" in own, f"{page}: no example in the docstring"


def test_signatures_put_one_argument_per_line(built_site):
  page_html = built_site.page("reference/v2/experimental/CentralStorageStrategy")
  signature = _text(page_html.split('class="doc-signature', 1)[1].split(
      "</code>", 1)[0])
  lines = [line.strip() for line in signature.splitlines() if line.strip()]
  assert lines[0].endswith("CentralStorageStrategy(")
  assert lines[1].startswith("compute_devices: ")
  assert lines[2].startswith("parameter_device: ")
  assert lines[3].startswith("cluster_resolver: ")


@pytest.mark.parametrize("page", STRATEGY_PAGES)
def test_strategy_pages_document_their_main_methods(built_site, page):
  identifier = "compat_distribute." + page.replace("/", ".")
  sections = _sections(built_site.page(f"reference/{page}"), identifier)
  assert {"scope", "run", "reduce"} <= set(sections)
  for method in MAIN_METHODS:
    if method in sections:
      assert "&gt;&gt;&gt;" in sections[method], f"{page}.{method}"
      assert "Returns:" in _text(sections[method]), f"{page}.{method}"


@pytest.mark.parametrize("page", STRATEGY_PAGES)
def test_tensorflow_hidden_members_are_hidden_on_v2_pages(built_site, page):
  identifier = "compat_distribute." + page.replace("/", ".")
  shown = set(_sections(built_site.page(f"reference/{page}"), identifier))
  if page.startswith("v2/"):
    assert shown.isdisjoint(HIDDEN_IN_V2), shown & set(HIDDEN_IN_V2)
  else:
    assert set(HIDDEN_IN_V2) <= shown


@pytest.mark.parametrize("page", STRATEGY_PAGES)
def test_deprecated_members_come_after_the_current_ones(built_site, page):
  identifier = "compat_distribute." + page.replace("/", ".")
  sections = _sections(built_site.page(f"reference/{page}"), identifier)
  deprecated = [
      name for name, section in sections.items()
      if re.search(r'class="doc doc-contents[^"]*">\s*<p>Deprecated', section)]
  # v2: experimental_distribute_datasets_from_function; v1 also
  # experimental_run_v2, experimental_run, configure, unwrap, ...
  assert len(deprecated) >= (1 if page.startswith("v2/") else 4), page
  order = list(sections)
  first_deprecated = min(order.index(name) for name in deprecated)
  current_after = [name for name in order[first_deprecated:]
                   if name not in deprecated]
  assert current_after == [], f"{page}: current after deprecated"


def test_search_index_finds_the_api(built_site):
  index = json.loads((built_site.path / "search" / "search_index.json")
                     .read_text(encoding="utf-8"))
  locations = {doc["location"] for doc in index["docs"]}
  for facade in ("v1", "v2"):
    assert (f"reference/{facade}/experimental/CentralStorageStrategy.html#"
            f"compat_distribute.{facade}.experimental.CentralStorageStrategy."
            "experimental_distribute_dataset") in locations


def test_the_site_fetches_nothing_online(built_site):
  remote = re.compile(
      r'<(?:script|img|iframe)[^>]+src="(?:https?:)?//|'
      r'<link[^>]+rel="(?:stylesheet|preconnect|preload)"[^>]+href="(?:https?:)?//|'
      r'fonts\.(?:googleapis|gstatic)\.com')
  pages = list(built_site.path.rglob("*.html"))
  assert len(pages) >= 30
  for page in pages:
    match = remote.search(page.read_text(encoding="utf-8"))
    assert match is None, f"{page}: {match and match.group(0)}"


def test_every_guide_is_in_the_nav_in_tensorflow_order():
  nav = _config()["nav"]
  listed = _nav_files(nav)
  guides = sorted(p.name for p in DOCS.glob("*.md"))
  missing = [g for g in guides if g not in listed]
  assert missing == [], f"docs pages missing from mkdocs.yml's nav: {missing}"
  first_section = _nav_files(list(nav[0].values())[0])
  present = [g for g in GUIDE_ORDER if (DOCS / g).is_file()]
  assert first_section == present
  assert _nav_files([nav[-1]])[0] == "reference/index.md"
