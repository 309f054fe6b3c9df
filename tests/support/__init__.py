"""Helpers the test folders share (no tests here), and the repository's paths.

``tests/`` is on ``sys.path`` while pytest runs (``tests/conftest.py`` sits in
a folder without ``__init__.py``), so every test file, in whatever folder,
imports these as ``from support import keras`` or
``from support.central_storage import pair``.

>>> (TESTS.name, FIXTURES.parent == TESTS, ROOT == TESTS.parent)
('tests', True, True)
"""
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
