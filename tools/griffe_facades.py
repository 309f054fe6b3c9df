"""Griffe extension: the v1/ and v2/ folders as ``compat_distribute.v1``/``.v2``.

``setup.py`` installs the folders ``v1/`` and ``v2/`` of the checkout as
subpackages of ``compat_distribute`` (its ``package_dir``), and a checkout
finds them the same way at import (``compat_distribute/__init__.py``).
Griffe reads the source without importing it, so this extension makes the
same mapping when it loads ``compat_distribute``: the API reference
(``mkdocs.yml``) then names every object by the path users import it from,
e.g. ``compat_distribute.v2.experimental.CentralStorageStrategy``.
"""
from __future__ import annotations

import pathlib
from typing import Any

import griffe

_FACADES = ("v1", "v2")


def _visit(name: str, init: pathlib.Path, parent: griffe.Module,
           loader: griffe.GriffeLoader) -> griffe.Module:
  module = griffe.visit(
      name, filepath=init, code=init.read_text(encoding="utf-8"),
      parent=parent, docstring_parser=loader.docstring_parser,
      docstring_options=loader.docstring_options,
      lines_collection=loader.lines_collection,
      modules_collection=loader.modules_collection)
  parent.set_member(name, module)
  for child in sorted(init.parent.iterdir()):
    if (child / "__init__.py").is_file():
      _visit(child.name, child / "__init__.py", module, loader)
  return module


class CheckoutFacades(griffe.Extension):
  """Adds ``v1`` and ``v2`` (beside the package folder) to the package."""

  def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader,
                 **kwargs: Any) -> None:
    del kwargs
    if pkg.name != "compat_distribute":
      return
    root = pathlib.Path(pkg.filepath).parent.parent
    for name in _FACADES:
      init = root / name / "__init__.py"
      if name not in pkg.members or not pkg.members[name].is_module:
        _visit(name, init, pkg, loader)
