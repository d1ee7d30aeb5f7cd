"""A failing probe names the law its scale reads as and the probe to run next: a token count
in place of d_k as 1/√n, a law a user may intend as its --expect, in every format."""

from __future__ import annotations

import io

import pytest

import varcheck
from varcheck.kernels.render import render_probe

KERNELS = "examples/attention_kernels.py"


def _table(result, width: int = 80) -> str:
    from rich.console import Console

    buf = io.StringIO()
    render_probe(result, "table", Console(file=buf, width=width, no_color=True))
    return buf.getvalue()


def test_a_kernel_dividing_by_the_square_root_of_the_queries_reads_as_1_over_sqrt_n() -> None:
    result = varcheck.probe_sweep(f"{KERNELS}:scaled_by_tokens", "64", seed=1, samples=200)
    row = result.rows[0]
    assert row.outcome == "fail"
    assert row.law.law == "1/sqrt(n)" and row.law.factor_label == "1"
    table = _table(result)
    assert "next: scale is 1/√n (n = 48 queries), not 1/√d_k; --queries moves it" in table
    assert "--queries 96" in table
    assert result.to_dict()["next_step"].endswith("--queries 96 --samples 200 --seed 1")


@pytest.fixture(scope="module")
def layer_scaled():
    return varcheck.probe_sweep(f"{KERNELS}:layer_scaled", "16,64", seed=1, samples=200)


def test_a_law_a_user_may_intend_is_offered_as_its_expect(layer_scaled) -> None:
    result = layer_scaled
    step = result.to_dict()["next_step"]
    assert step.startswith("scale reads as 1/sqrt(dk) × 1/3; if intended, test --expect")
    assert "--dk 16,64 --expect '1/3/sqrt(dk)'" in step
    lines = _table(result).splitlines()
    # every line fits but the reproduce line, which stays whole to copy
    assert max(len(line) for line in lines if "reproduce:" not in line) <= 80
    assert [line for line in lines if line.lstrip().startswith("next:")] == [
        "  next: scale reads as 1/sqrt(dk) × 1/3; if intended, test --expect 1/3/sqrt(dk)"
    ]


def test_the_multi_dk_table_shows_what_each_row_detects_where_it_fits(layer_scaled) -> None:
    exact = varcheck.probe_sweep(f"{KERNELS}:attention", "16,64", seed=1, samples=200)
    header = next(line for line in _table(exact).splitlines() if "nearest law" in line)
    assert header.split()[-1] == "detects"
    assert "±0.01%" in _table(exact)  # an exact kernel: the floor percent_up shows
    # with its longer law the table would be 84 columns: detects is the one left out, and the
    # table says so, on any terminal (probe lays its text out at 80 columns)
    for width in (80, 150):
        narrow = _table(layer_scaled, width)
        assert "not shown at 80 columns: detects" in narrow and "±0.01%" not in narrow
