"""docs/tutorial.md, the notebook-style tutorial: its outputs are what its cells print today.

The page's generator (docs/_generate/tutorial.py) runs the ``python`` blocks as notebook cells,
in one namespace, and writes each one's output under it. Here it reruns them and compares, so
the page cannot go stale; the generator's own rules (cells found, outputs placed, renumbered and
replaced, a result shown as its notebook table) are checked on small pages of their own.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorial.md"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    path = ROOT / "docs" / "_generate" / "tutorial.py"
    spec = importlib.util.spec_from_file_location("_tutorial_docs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_shows_what_its_cells_print_today(generator: ModuleType) -> None:
    page = PAGE.read_text(encoding="utf-8")
    rebuilt = generator.build(page, None)
    assert rebuilt == page, "docs/tutorial.md is stale: run `make docs`"


def test_every_cell_is_followed_by_its_output(generator: ModuleType) -> None:
    """Short (10-14 cells), and each cell's output block sits right under it, numbered in order."""
    page = PAGE.read_text(encoding="utf-8")
    cells = generator.cells(page)
    assert 10 <= len(cells) <= 14
    after = re.findall(r"^```\n\n<!-- generated:out-(\d+) -->\n", page, re.MULTILINE)
    assert after == [str(n) for n in range(1, len(cells) + 1)]
    assert page.count("```python\n") == len(cells)


def test_every_call_is_seeded_and_every_figure_linked(generator: ModuleType) -> None:
    """A call without a seed would draw a fresh one and change the page at every run; a figure a
    cell saves is linked from the page and written to docs/figures."""
    page = PAGE.read_text(encoding="utf-8")
    source = "\n".join(generator.cells(page))
    calls = re.findall(r"varcheck\.\w+\((?:[^()]|\([^()]*\))*\)", source)
    assert len(calls) >= 8
    for call in calls:
        if "__version__" not in call:
            assert "seed=" in call, call
    saved = re.findall(r'"(tutorial_\w+\.png)"', source)
    assert saved
    for name in saved:
        assert f"](figures/{name})" in page
        assert (ROOT / "docs" / "figures" / name).stat().st_size > 0


def test_the_doc_example_reader_leaves_the_cells_to_the_generator() -> None:
    """tests/test_doc_examples.py would run each block alone, where the later cells fail."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import test_doc_examples as reader
    finally:
        sys.path.remove(str(ROOT / "tests"))
    assert reader.NOTEBOOKS["docs/tutorial.md"] == "docs/_generate/tutorial.py"
    mine = [e for e in reader.EXAMPLES if e.page == "docs/tutorial.md"]
    assert {e.kind for e in mine if e.code.startswith("import varcheck")} == {"notebook"}
    assert not [e for e in mine if e.kind in {"python", "doctest", "pytest"}]


SMALL_PAGE = """\
# A page

```python
x = 2
print("two")
```

Some prose.

```python
x * 21
```

```python
y = x
```
"""


def test_cells_share_one_namespace_and_show_print_then_value(generator: ModuleType) -> None:
    built = generator.build(SMALL_PAGE, None)
    assert built == SMALL_PAGE.replace(
        'print("two")\n```\n',
        'print("two")\n```\n\n<!-- generated:out-1 -->\n```text\ntwo\n```\n'
        "<!-- /generated:out-1 -->\n",
    ).replace(
        "x * 21\n```\n",
        "x * 21\n```\n\n<!-- generated:out-2 -->\n```text\n42\n```\n<!-- /generated:out-2 -->\n",
    ).replace("y = x\n```\n", "y = x\n```\n\n<!-- generated:out-3 -->\n<!-- /generated:out-3 -->\n")
    assert generator.build(built, None) == built  # rebuilt in place, byte for byte


def test_a_changed_output_or_a_moved_cell_is_rewritten(generator: ModuleType) -> None:
    built = generator.build(SMALL_PAGE, None)
    stale = built.replace("```text\n42\n```", "```text\n41\n```")
    assert generator.build(stale, None) == built
    moved = built.replace("Some prose.\n", "Some prose.\n\n```python\nx + 1\n```\n")
    rebuilt = generator.build(moved, None)
    assert "```text\n3\n```\n<!-- /generated:out-2 -->" in rebuilt
    assert "```text\n42\n```\n<!-- /generated:out-3 -->" in rebuilt
    assert "generated:out-4" in rebuilt


def test_check_mode_reports_a_stale_page_and_leaves_it(
    generator: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    page = tmp_path / "tutorial.md"
    current = generator.build(SMALL_PAGE, None)
    page.write_text(current.replace("```text\n42\n```", "```text\n41\n```"), encoding="utf-8")
    monkeypatch.setattr(generator, "PAGE", page)
    assert generator.main(["--check"]) == 1
    assert "stale generated docs: tutorial.md" in capsys.readouterr().err
    assert "41" in page.read_text(encoding="utf-8")
    assert generator.main([]) == 0
    assert page.read_text(encoding="utf-8") == current
    assert generator.main(["--check"]) == 0


def test_a_result_is_shown_as_the_text_of_its_notebook_table(generator: ModuleType) -> None:
    import varcheck

    res = varcheck.verify(8, claim="dk", seed=3, precision=0.05)
    text = generator.shown(res)
    assert text.startswith(f"varcheck: {res.outcome.upper()}: claim Var(q·k) = dk at d_k=8")
    assert "reproduce: varcheck assert --dk 8 --claim 'dk' --precision 0.05 --seed 3" in text
    assert "<" not in text and "&#x27;" not in text  # tags gone, entities decoded
    assert all(line == line.rstrip() for line in text.splitlines())
    assert generator.shown({"a": 1, "b": [1, 2]}) == "{'a': 1, 'b': [1, 2]}"
    assert generator.shown(None) == ""
