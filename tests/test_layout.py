"""The package layout (#14): what sits where, and which way imports run.

Guards against a module or subpackage reappearing directly in ``varcheck/`` under a public name:
importing it (as the command line does) replaced the lazily exported function of that name, so
``varcheck.explain(...)`` failed once ``varcheck.explain`` the module had been loaded.
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import varcheck


def _all_modules() -> list[str]:
    # varcheck.__main__ runs the command line when imported
    found = pkgutil.walk_packages(varcheck.__path__, prefix="varcheck.")
    return sorted(m.name for m in found if not m.name.endswith("__main__"))


def test_every_module_imports() -> None:
    """Every module of the package imports on its own (no cycle, no stale path)."""
    for name in _all_modules():
        importlib.import_module(name)


@pytest.mark.parametrize("name", sorted(set(varcheck.__all__) - {"__version__"}))
def test_public_names_are_not_shadowed_by_modules(name: str) -> None:
    """After every module is imported, each public name is still the function or class the
    API exports, never a module of the same name."""
    for module in _all_modules():
        importlib.import_module(module)
    value = getattr(varcheck, name)
    assert not isinstance(value, types.ModuleType), f"varcheck.{name} is a module"
