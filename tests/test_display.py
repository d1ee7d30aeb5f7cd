"""Results in Python and notebooks (#18): ``to_dict()`` is the ``--format json`` document, the
``repr`` is one line, and ``_repr_html_`` draws the terminal's table."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

import varcheck

#: (the API call, the command line giving the same result)
CASES = {
    "explain": (lambda: varcheck.explain(seed=1), ("explain", "--seed", "1")),
    "softmax": (
        lambda: varcheck.softmax_study("4,16", seed=1),
        ("softmax", "--dk", "4,16", "--seed", "1"),
    ),
    "derive": (
        lambda: varcheck.derive(dk=8, precision=0.05, seed=1),
        ("derive", "--dk", "8", "--precision", "0.05", "--seed", "1"),
    ),
    "sweep": (
        lambda: varcheck.sweep("2..16", precision=0.05, seed=1),
        ("sweep", "--dk", "2..16", "--precision", "0.05", "--seed", "1"),
    ),
    "assert": (
        lambda: varcheck.verify(16, claim="dk", precision=0.05, seed=1),
        ("assert", "--dk", "16", "--claim", "dk", "--precision", "0.05", "--seed", "1"),
    ),
    "check": (
        lambda: varcheck.check("examples/claims.toml", precision=0.05, seed=1),
        ("check", "examples/claims.toml", "--precision", "0.05", "--seed", "1"),
    ),
    "project": (
        lambda: varcheck.project(dx=8, dk=4, blocks=400, seed=2),
        ("project", "--dx", "8", "--dk", "4", "--blocks", "400", "--seed", "2"),
    ),
}


@pytest.fixture(params=sorted(CASES), scope="module")
def case(request):
    make, argv = CASES[request.param]
    return request.param, make(), argv


def test_to_dict_is_what_the_json_format_prints(case, run_cli) -> None:
    name, result, argv = case
    printed = json.loads(run_cli(*argv, "--format", "json").stdout)
    assert result.to_dict() == printed


def test_repr_is_one_short_line(case) -> None:
    name, result, _ = case
    text = repr(result)
    assert "\n" not in text and len(text) < 120
    assert text.startswith(f"<{type(result).__name__} {name}") and "seed=" in text


def test_repr_html_draws_the_table(case) -> None:
    _, result, _ = case
    html = result._repr_html_()
    assert html.startswith("<pre") and html.rstrip().endswith("</pre>")
    text = unescape(re.sub(r"<[^>]+>", "", html))
    assert re.search(r"seed[\s:=]+[12]\b", text), text[-300:]


def test_every_json_says_its_exit_code(case, run_cli) -> None:
    """Top-level ``exit_code`` in every command's JSON (and ``outcome`` where the run has one):
    a CI script reads the verdict without parsing rows."""
    name, _, argv = case
    res = run_cli(*argv, "--format", "json")
    doc = json.loads(res.stdout)
    assert doc["exit_code"] == res.exit_code
    if name in ("sweep", "assert", "check"):
        assert doc["outcome"] in (
            "consistent",
            "rejected",
            "pass",
            "fail",
            "inconclusive",
            "unreliable",
            "infinite",
        )


def test_str_is_the_table_as_plain_text(monkeypatch) -> None:
    """Guards against ``print(result)`` in a terminal showing only the one-line repr: it prints
    the terminal's table, without colour codes, at the terminal's width."""
    monkeypatch.setenv("COLUMNS", "80")
    res = varcheck.sweep("2..16", precision=0.05, seed=1)
    text = str(res)
    assert "\x1b[" not in text and "consistent" in text and "growth law" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_an_assert_paragraph_wraps_with_a_hanging_indent() -> None:
    """Guards against long paragraph lines wrapping to column 0 on a narrow terminal; the
    reproduce command alone stays one line, to copy."""
    import io

    from rich.console import Console

    from varcheck.checks.render import render_verify

    res = varcheck.verify(64, claim=1, scaled=True, tolerance=0.02, seed=1)
    console = Console(file=io.StringIO(), width=80, color_system=None)
    render_verify(res, "table", console)
    lines = console.file.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines if "reproduce:" not in line)
    assert [line for line in lines if line and not line.startswith(" ")] == [lines[0]]
