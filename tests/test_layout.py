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
    if name == "audit":  # the audit family's package is also its public function
        assert callable(value), "varcheck.audit is not callable"
        return
    assert not isinstance(value, types.ModuleType), f"varcheck.{name} is a module"


FAMILIES = ("checks", "teaching", "paper", "audit", "kernels")
#: old package paths kept as aliases of a family
ALIASES = {"encoder": "audit"}
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
    """Data flows one way: core → output → families (checks, teaching, paper, audit, kernels) → cli.
    core imports nothing above it, output only core, a family only core, output and itself
    (never another family), and nothing below cli imports cli."""
    here = path.relative_to(ROOT / "varcheck").with_suffix("").parts
    layer = here[0] if len(here) > 1 else "top"
    layer = ALIASES.get(layer, layer)
    allowed = {
        "core": {"core"},
        "output": {"core", "output"},
        **{f: {"core", "output", f} for f in FAMILIES},
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


def test_fmt_skip_only_on_numeric_tables() -> None:
    """``ruff format`` owns the layout: ``# fmt: skip`` only keeps a row of a numeric table
    aligned, so the line lengths measured below are the ones ruff format gives."""
    import re

    # a row holds numbers (a closing bracket alone is packing, not a table)
    row = re.compile(r"^(?=[^#]*\d)[\s\d.,+\-e_()\[\]{}:]*#\s*fmt:\s*skip\s*$")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "varcheck").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "fmt: skip" in line and not row.match(line)
    ]
    assert not found, found


def test_functions_fit_on_a_screen() -> None:
    """No function in varcheck/ is longer than 80 lines as ruff format lays it out (no
    ``# fmt: skip`` packs one: see above), docstring and signature included."""
    import ast

    long = []
    for path in sorted((ROOT / "varcheck").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = node.end_lineno - node.lineno + 1
                if size > 80:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({size})")
    assert not long, long


#: each small idea and the one module that defines it (a function, class or constant of that
#: name anywhere else in varcheck/ is a copy that will drift)
HOMES = {
    "shown": "core/messages.py",
    "cut": "core/messages.py",
    "size_text": "core/messages.py",
    "format_size": "core/messages.py",
    "duration_text": "core/messages.py",
    "format_duration": "core/messages.py",
    "duration": "core/messages.py",
    "normal_quantile": "core/estimation.py",
    "worst": "core/verdicts.py",
    "ProgressCallback": "core/progress.py",
}


def _definitions(path) -> set[str]:
    """The names a file defines: functions and classes at any depth, and module-level names."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_each_small_idea_has_one_home() -> None:
    """A value quoted in an error, a size, a duration, ... is defined by one module only."""
    copies = []
    for path in sorted((ROOT / "varcheck").rglob("*.py")):
        where = path.relative_to(ROOT / "varcheck").as_posix()
        for name in _definitions(path) & set(HOMES):
            if where != HOMES[name]:
                copies.append(f"{where} defines {name} (its home is {HOMES[name]})")
    assert not copies, copies


#: spellings of the normal quantile other than core.estimation.normal_quantile
Z_SPELLINGS = r"inv_cdf\(|ndtri\(|NormalDist\(|norm\.ppf\(|\b1\.9599|\b1\.96\b|_Z95"


def test_one_normal_quantile() -> None:
    """Every z (of an interval, a budget, an error bar) comes from ``normal_quantile``."""
    import re

    home = ROOT / "varcheck" / "core" / "estimation.py"
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "varcheck").rglob("*.py"))
        if path != home
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(Z_SPELLINGS, line)
    ]
    assert not found, found


def test_one_json_header() -> None:
    """Every command's JSON (and CSV comment line) starts with ``output.formats.json_header``:
    no other module writes a ``"command"`` key."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "varcheck").rglob("*.py"))
        if path != ROOT / "varcheck" / "output" / "formats.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if '"command":' in line
    ]
    assert not found, found


@pytest.mark.parametrize("family", FAMILIES)
def test_results_import_no_presenter(family: str) -> None:
    """Results are leaf data: in a family only the presenters (render.py, figures.py) import
    the presenters; a result finds its own through ``output.presenters``."""
    presenters = {f"{family}.render", f"{family}.figures"}
    wrong = [
        path.name
        for path in sorted((ROOT / "varcheck" / family).rglob("*.py"))
        if path.stem not in ("render", "figures") and _imports(path) & presenters
    ]
    assert not wrong, wrong


def test_the_audit_family_old_paths_still_import() -> None:
    """Code written against ``varcheck.encoder.*`` gets the modules of ``varcheck.audit``."""
    import varcheck.encoder.heads as old

    import varcheck.audit.encoder
    from varcheck.encoder import decoder

    assert old is varcheck.audit.encoder and decoder is importlib.import_module(
        "varcheck.audit.decoder"
    )
