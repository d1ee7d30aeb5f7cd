"""sweep, check and assert fit 80- and 100-column terminals (#18): no line wider than the
terminal, every d_k and verdict word whole; the claimed value and the ratio to it shown when
the claim is not the theory."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

import varcheck
from varcheck.checks.render import render_check_table, render_sweep_table, render_verify


def _render(draw, result, width: int) -> list[str]:
    out = io.StringIO()
    draw(result, Console(width=width, file=out, no_color=True, force_terminal=False))
    return out.getvalue().splitlines()


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    return {
        "sweep": varcheck.sweep("2..512", precision=0.05, seed=1),
        "claim": varcheck.sweep(
            "16,64", dist="normal:mean=0.5", claim="dk", precision=0.05, seed=1
        ),
        "check": varcheck.check("examples/claims.toml", precision=0.05, seed=1),
    }


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("name", ["sweep", "claim"])
def test_sweep_fits_and_keeps_dk_and_verdicts(results, name: str, width: int) -> None:
    result = results[name]
    lines = _render(render_sweep_table, result, width)
    assert max(map(len, lines)) <= width
    text = "\n".join(lines)
    for row in result.rows:
        assert re.search(rf"│ +{row.dk} │", text), row.dk
        assert row.verdict in text
    assert "…" not in text


@pytest.mark.parametrize("width", [80, 100])
def test_check_fits_and_keeps_dk_and_outcomes(results, width: int) -> None:
    result = results["check"]
    lines = _render(render_check_table, result, width)
    assert max(map(len, lines)) <= width
    rows = [line for line in lines if line.startswith("│")]
    cell = re.compile(r"│ +(\d+) │ +[\d.]+(?: ±[\d.]+%)? │")  # d_k, then the claimed value (± T)
    dks = [int(m.group(1)) for line in rows if (m := cell.search(line))]
    assert dks == [r.dk for co in result.claims for r in co.results]
    assert "…" not in "\n".join(lines)


def test_assert_paragraph_fits_but_for_the_command_to_copy() -> None:
    result = varcheck.verify(64, claim=1, scaled=True, tolerance=0.05, precision=0.05, seed=1)
    for width in (80, 100):
        lines = _render(lambda r, c: render_verify(r, "table", c), result, width)
        wide = [line for line in lines if len(line) > width]
        assert all(line.startswith("  reproduce: ") for line in wide), wide


def test_a_claim_other_than_the_theory_shows_the_claimed_value_and_the_ratio_to_it(
    results,
) -> None:
    lines = _render(render_sweep_table, results["claim"], 120)
    header = next(line for line in lines if "claimed" in line)
    assert "theory Var" in header and "ratio" in header
    row = next(line for line in lines if re.match(r"│ +16 │", line))
    cells = [c.strip() for c in row.strip("│").split("│")]
    theory, claimed, estimate, ratio = cells[1], cells[2], cells[3], cells[4]
    assert (theory, claimed) == ("24.00", "16.00")
    assert float(ratio) == pytest.approx(float(estimate.split()[0]) / 16, rel=2e-3)
    assert "ratio = estimate / claim" in " ".join(lines)
