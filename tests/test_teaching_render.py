"""The teaching commands' tables at 80 and 100 columns, and their notes about cut runs.

No line may be wider than the terminal; every d_k, every verdict and status word stays whole;
a column that did not fit is named in a note.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from varcheck.teaching.derive import derive
from varcheck.teaching.explain import explain
from varcheck.teaching.render import full_account, render_derive, render_explain, render_softmax
from varcheck.teaching.softmax import softmax_study

WIDTHS = (80, 100)
VERDICTS = ("consistent", "rejected", "unreliable", "infinite", "interrupted")


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[object, object]]:
    return {
        "explain": (explain(replicates=2000, seed=1), render_explain),
        "explain-rejected": (explain(observed=40.0, replicates=2000, seed=1), render_explain),
        "explain-gamma": (explain("1111x111x1111", 110.56, seed=1), render_explain),
        "explain-uniform": (
            explain("4x8x4", 3.0, ddof=1, dist="uniform", replicates=2000, seed=1),
            render_explain,
        ),
        "softmax": (softmax_study("2..1024", queries=960, seed=1), render_softmax),
        "softmax-laws": (
            softmax_study([4, 32], keys=8, queries=960, q_dist="laplace", k_dist="t:df=5", seed=1),
            render_softmax,
        ),
        "derive": (derive(1024, samples=2000, seed=1), render_derive),
        "derive-means": (
            derive(8, dist="normal:mean=0.5", samples=2000, seed=1),
            render_derive,
        ),
        "derive-rho": (derive(8, rho=0.5, samples=2000, seed=1), render_derive),
        "derive-t2": (derive(8, dist="t:df=2", samples=2000, seed=1), render_derive),
    }


def _render(result: object, render: object, width: int) -> str:
    """The table form; explain's full account (``--long``), which holds the growing shapes."""
    console = Console(file=io.StringIO(), width=width, soft_wrap=False)
    with full_account():
        render(result, "table", console)  # type: ignore[operator]
    return console.file.getvalue()


CASES = [
    "explain",
    "explain-rejected",
    "explain-gamma",
    "explain-uniform",
    "softmax",
    "softmax-laws",
    "derive",
    "derive-means",
    "derive-rho",
    "derive-t2",
]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", CASES)
def test_tables_fit_the_terminal_and_keep_every_word(results, case: str, width: int) -> None:
    result, render = results[case]
    text = _render(result, render, width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, "\n".join(
        line for line in lines if len(line) > width
    )
    assert "…" not in text  # nothing cut
    words = re.findall(r"[\w.·/√()\[\]]+", text)
    if case.startswith("derive"):
        for step in result.steps:  # type: ignore[attr-defined]
            # a step's name, then its textbook line (status) and, two lines on, its check
            i = next(i for i, line in enumerate(lines) if f"step {step.number}: " in line)
            assert step.quantity in lines[i]
            block = " ".join(lines[i + 1 : i + 6]).split()
            assert step.status in block and step.verdict in block, lines[i : i + 6]
        assert f"d_k = {result.dk}" in text  # type: ignore[attr-defined]
    elif case.startswith("softmax"):
        for row in result.rows:  # type: ignore[attr-defined]
            assert any(re.match(rf"│\s+{row.dk} │", line) for line in lines), row.dk
    else:
        for reading in (result.raw, result.scaled):  # type: ignore[attr-defined]
            if reading.verdict in VERDICTS:
                assert reading.verdict in words
        for row in result.growing:  # type: ignore[attr-defined]
            assert any(line.split()[:1] == [str(row.shape)] for line in lines), row.shape


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", ["explain", "softmax", "derive"])
def test_a_dropped_column_is_named_with_where_to_find_it(results, case: str, width: int) -> None:
    result, render = results[case]
    text = " ".join(_render(result, render, width).split())
    wide = " ".join(_render(result, render, 200).split())
    assert "not shown" not in wide  # at 200 columns everything fits
    if "not shown" in text:
        assert f"not shown at {width} columns:" in text
        assert "--format json, or a wider terminal, shows them" in text


def test_footnotes_wrap_to_the_width(results) -> None:
    """derive's notes ("Step 2 breaks ...") and explain's "Why" lines are wrapped, not left at
    150 characters."""
    for case in ("derive-means", "derive-t2", "explain"):
        result, render = results[case]
        lines = _render(result, render, 80).splitlines()
        assert max(len(line) for line in lines) <= 80
        assert sum(len(line) > 60 for line in lines) > 3  # the notes are there, wrapped


def test_derive_time_limited_says_so(run_cli) -> None:
    """A check cut by --max-seconds is marked: its interval depends on the machine's speed."""
    res = derive(16, samples=10**6, max_seconds=1e-4, seed=1)
    assert res.time_limited
    assert "max-seconds" in {s.stop_reason for s in res.steps}
    args = ("derive", "--dk", "16", "--samples", "1e6", "--max-seconds", "0.0001", "--seed", "1")
    out = run_cli(*args)
    assert out.exit_code == 0, out.output
    assert "time-limited: --max-seconds 0.0001" in " ".join(out.output.split())
    doc = json.loads(run_cli(*args, "--format", "json").output)
    assert doc["time_limited"] is True and doc["interrupted"] is False
    assert any("time-limited" in note for note in doc["notes"])
    assert not derive(8, samples=2000, seed=1).time_limited
