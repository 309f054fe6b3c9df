"""The documentation site, built once per test run (``site_support``)."""
import pytest

import site_support


@pytest.fixture(scope="session")
def built_site() -> site_support.BuiltSite:
  return site_support.build_site(site_support.site_dir())
