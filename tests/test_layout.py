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


FAMILIES = ("checks", "teaching", "paper", "encoder", "kernels", "audit")
#: a family's imports of another family, allowed for now: the checkpoint audit reuses the encoder
#: audit's file guards and intervals until those modules move into varcheck/audit/
TRANSITIONAL = {"audit": {"encoder"}}
BASE = {"errors", "_version"}


def _imports(path) -> set[str]:
    """Every varcheck module a file imports (inside functions and TYPE_CHECKING blocks too),
    as the part after ``varcheck.``."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(ROOT).with_suffix("")
    package = list(rel.parts[:-1])  # a module's package; for __init__.py, the package itself
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [f"{mod}.{a.name}" for a in node.names] if node.module is None else [mod]
            found.update(names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m[len("varcheck.") :] for m in found if m.startswith("varcheck.")}


ROOT = __import__("pathlib").Path(varcheck.__file__).resolve().parents[1]


def _layer(module: str) -> str:
    return module.split(".")[0]


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "varcheck").rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT / "varcheck")),
)
def test_imports_run_one_way(path) -> None:
    """Data flows one way: core → output → families (checks, teaching, paper, encoder) → cli.
    core imports nothing above it, output only core, a family only core, output and itself
    (never another family), and nothing below cli imports cli."""
    here = path.relative_to(ROOT / "varcheck").with_suffix("").parts
    layer = here[0] if len(here) > 1 else "top"
    allowed = {
        "core": {"core"},
        "output": {"core", "output"},
        **{f: {"core", "output", f, *TRANSITIONAL.get(f, ())} for f in FAMILIES},
        "cli": {"core", "output", "cli", *FAMILIES},
        "top": {"core", "output", *FAMILIES},
    }[layer] | BASE
    if path.name in ("__main__.py",) or (layer == "top" and path.name == "__init__.py"):
        allowed = allowed | {"cli"}
    wrong = sorted(m for m in _imports(path) if _layer(m) not in allowed)
    assert not wrong, f"{'/'.join(here)} imports {wrong}"


def test_few_modules_at_the_top() -> None:
    """At most ten modules directly in varcheck/; the rest live in one subpackage per family."""
    top = sorted(p.name for p in (ROOT / "varcheck").glob("*.py"))
    assert len(top) <= 10, top


def test_functions_fit_on_a_screen() -> None:
    """No function in varcheck/ is longer than 80 lines, docstring and signature included."""
    import ast

    long = []
    for path in sorted((ROOT / "varcheck").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = node.end_lineno - node.lineno + 1
                if size > 80:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({size})")
    assert not long, long
