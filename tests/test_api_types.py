"""The public API as type checkers see it: ``varcheck/__init__.py`` loads each name on first use
(``_LAZY``), which a type checker cannot follow, so the same names are imported for it under
``TYPE_CHECKING``; the two lists must name the same objects."""

from __future__ import annotations

import ast
import inspect

import varcheck


def _type_checking_imports() -> list[tuple[str, str, str | None]]:
    """(module, name, alias) of every import under ``if TYPE_CHECKING:``."""
    tree = ast.parse(inspect.getsource(varcheck))
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    )
    return [
        (node.module or "", alias.name, alias.asname)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]


def test_type_checkers_see_every_lazy_name_from_its_module() -> None:
    lazy = {name: module for name, module in varcheck._LAZY.items() if name != "audit"}
    assert {name: module for module, name, _ in _type_checking_imports()} == lazy


def test_every_name_is_exported_explicitly() -> None:
    # `X as X`: a re-export that mypy --strict and pyright accept from a py.typed package
    assert all(alias == name for _, name, alias in _type_checking_imports())
