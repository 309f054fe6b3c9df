"""The built site, as a reader sees it in a real browser (headless Chromium).

Not collected by ``pytest tests`` (its name does not start with ``test_``):
``tox -e docs`` runs it by path, and so can you::

    pytest tests/docs/browser_check.py

It needs Debian's ``chromium`` and ``chromium-driver`` packages and the
``docs-browser`` extra (selenium); without them it FAILS, naming the
command that installs them -- it never skips.  The site is served by
Python's ``http.server`` on 127.0.0.1 (a free port), stopped at the end.
Screenshots are saved in ``<site>/screenshots/`` (``build/site`` in the
checkout, ``.tox/docs/site`` under tox).
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import pathlib
import shutil
import tempfile
import threading
import urllib.parse
from typing import Iterator

import pytest

import site_support
from site_support import built_site  # pylint: disable=unused-import  (a fixture)

CHROMIUM = pathlib.Path("/usr/bin/chromium")
CHROMEDRIVER = pathlib.Path("/usr/bin/chromedriver")
APT_INSTALL = "sudo apt-get install chromium chromium-driver"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
    "--window-size=1280,1000",
]
PAGES = {
    "v1": "reference/v1/experimental/CentralStorageStrategy.html",
    "v2": "reference/v2/experimental/CentralStorageStrategy.html",
}
WAIT_SECONDS = 30


def _require_browser() -> None:
  missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
  if missing:
    pytest.fail(f"The browser check needs Chromium and its driver; missing: "
                f"{', '.join(missing)}. Install them with: {APT_INSTALL}",
                pytrace=False)
  if importlib.util.find_spec("selenium") is None:
    pytest.fail("The browser check needs selenium: pip install -e "
                "'.[docs-browser]' (or run `tox -e docs`).", pytrace=False)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):

  def log_message(self, format, *args):  # pylint: disable=redefined-builtin
    del format, args


@contextlib.contextmanager
def _serve(root: pathlib.Path) -> Iterator[str]:
  handler = functools.partial(_QuietHandler, directory=str(root))
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{server.server_address[1]}/"
  finally:
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def site(request) -> site_support.BuiltSite:
  _require_browser()  # before the build, so a missing browser fails fast
  return request.getfixturevalue("built_site")  # site_support: once per run


@pytest.fixture(scope="module")
def browser(site):
  from selenium import webdriver  # pylint: disable=g-import-not-at-top
  from selenium.webdriver.chrome.service import Service  # pylint: disable=g-import-not-at-top
  # Chromium's profile in a folder of the build, removed afterwards.
  profile = pathlib.Path(tempfile.mkdtemp(prefix="chromium-profile-",
                                          dir=site.path.parent))
  options = webdriver.ChromeOptions()
  options.binary_location = str(CHROMIUM)
  for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]:
    options.add_argument(flag)
  driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)),
                            options=options)
  try:
    with _serve(site.path) as base_url:
      yield driver, base_url
  finally:
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _screenshot(driver, site, name: str) -> pathlib.Path:
  folder = site.path / "screenshots"
  folder.mkdir(exist_ok=True)
  path = folder / f"{name}.png"
  assert driver.save_screenshot(str(path)), path
  assert path.stat().st_size > 10_000, f"{path} looks empty"
  return path


@pytest.mark.parametrize("facade", ["v1", "v2"])
def test_strategy_page_shows_signature_example_and_navigation(
    browser, site, facade):
  from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top
  from selenium.webdriver.support import expected_conditions  # pylint: disable=g-import-not-at-top
  from selenium.webdriver.support.ui import WebDriverWait  # pylint: disable=g-import-not-at-top
  driver, base_url = browser
  driver.get(base_url + PAGES[facade])
  WebDriverWait(driver, WAIT_SECONDS).until(
      expected_conditions.visibility_of_element_located(
          (By.CSS_SELECTOR, ".doc-signature")))
  signature = driver.find_element(By.CSS_SELECTOR, ".doc-signature")
  assert signature.is_displayed()
  lines = [line.strip() for line in signature.text.splitlines()]
  assert lines[0] == "CentralStorageStrategy(", lines
  assert lines[1].startswith("compute_devices:"), lines
  # The class docstring's example, as highlighted code on screen.
  examples = [block for block in driver.find_elements(
      By.CSS_SELECTOR, ".doc-contents .highlight")
              if ">>> " in block.text]
  assert examples and examples[0].is_displayed()
  assert "CentralStorageStrategy(" in examples[0].text
  # The navigation: the guides and this facade's reference section.
  nav = driver.find_element(By.CSS_SELECTOR, "nav.md-nav--primary")
  assert nav.is_displayed()
  nav_text = nav.get_attribute("textContent")
  for entry in ("Overview", "TF1 graph-mode scripts", "Reference",
                f"compat_distribute.{facade}",
                "experimental.CentralStorageStrategy"):
    assert entry in nav_text, entry
  title = driver.find_element(By.CSS_SELECTOR, "article h1")
  assert title.text.rstrip("¶").strip() == (
      f"{facade}.experimental.CentralStorageStrategy")
  active = driver.find_element(By.CSS_SELECTOR, "a.md-nav__link--active")
  assert active.get_attribute("href").endswith(PAGES[facade])
  _screenshot(driver, site, f"{facade}-CentralStorageStrategy")
  # The example, scrolled into view: on screen, not only in the page.
  driver.execute_script("arguments[0].scrollIntoView({block: 'center'});",
                        examples[0])
  top = driver.execute_script(
      "return arguments[0].getBoundingClientRect().top;", examples[0])
  assert 0 <= top < driver.execute_script("return window.innerHeight;")
  _screenshot(driver, site, f"{facade}-CentralStorageStrategy-example")


def test_search_finds_experimental_distribute_dataset(browser, site):
  from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top
  from selenium.webdriver.support import expected_conditions  # pylint: disable=g-import-not-at-top
  from selenium.webdriver.support.ui import WebDriverWait  # pylint: disable=g-import-not-at-top
  driver, base_url = browser
  driver.get(base_url + PAGES["v2"])
  # The search box in the page header: click into it, then type.
  box = WebDriverWait(driver, WAIT_SECONDS).until(
      expected_conditions.element_to_be_clickable(
          (By.CSS_SELECTOR, "input.md-search__input")))
  box.click()
  box.send_keys("experimental_distribute_dataset")

  def results(d):
    items = d.find_elements(By.CSS_SELECTOR, ".md-search-result__item")
    return items or False

  items = WebDriverWait(driver, WAIT_SECONDS).until(results)
  links = [link.get_attribute("href") for item in items
           for link in item.find_elements(By.CSS_SELECTOR, "a")]
  texts = " ".join(item.text for item in items)
  assert "experimental_distribute_dataset" in texts
  # The method itself, on a CentralStorageStrategy page (a result may be
  # folded under "more on this page", so its link is looked for, not its
  # text).
  found = {(parsed.path, parsed.fragment)
           for parsed in map(urllib.parse.urlsplit, links)}
  assert any(
      (f"/{PAGES[v]}", f"compat_distribute.{v}.experimental."
       "CentralStorageStrategy.experimental_distribute_dataset") in found
      for v in ("v1", "v2")), links
  meta = driver.find_element(By.CSS_SELECTOR, ".md-search-result__meta").text
  assert "matching document" in meta, meta
  _screenshot(driver, site, "search-experimental_distribute_dataset")
