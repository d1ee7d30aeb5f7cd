"""The examples in the public API's docstrings run and give what they say."""

from __future__ import annotations

import doctest
import importlib

import pytest


def _modules_with_examples() -> list[str]:
    """Every module of the package whose docstrings hold an example (``>>>``)."""
    import inspect
    import pkgutil

    import varcheck

    found = ["varcheck"]
    for info in pkgutil.walk_packages(varcheck.__path__, prefix="varcheck."):
        if info.name.endswith("__main__"):
            continue
        if ">>>" in inspect.getsource(importlib.import_module(info.name)):
            found.append(info.name)
    return sorted(found)


MODULES = _modules_with_examples()


def test_examples_are_found_across_the_families() -> None:
    """The walk finds the examples of every family (a broken walk would test nothing)."""
    for name in ("varcheck.checks.verify", "varcheck.core.theory", "varcheck.paper.beta"):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
