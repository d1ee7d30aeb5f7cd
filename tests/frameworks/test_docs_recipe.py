"""docs/probe.md's "A whole module" recipe runs, and gives what the page says (the main suite
skips it: it imports torch)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "probe.md"


def _recipe() -> str:
    section = PAGE.read_text(encoding="utf-8").split("## A whole module", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_whole_module_recipe_gives_what_the_page_shows() -> None:
    code = _recipe()
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(code, str(PAGE), "exec"), namespace)  # noqa: S102 - the page's own example
    stated = [line.split("  # ", 1) for line in code.splitlines() if "  # " in line]
    assert len(stated) >= 3
    for expression, value in stated:
        assert repr(eval(expression, namespace)) == value.strip(), expression  # noqa: S307
