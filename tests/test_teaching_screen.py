"""The teaching commands work in a lecture: explain answers first and fits one 80-column screen,
derive keeps its derivation at 80 columns and speaks one vocabulary, softmax's Markdown is a
table a person reads, and every ± is the half-width of a 95% interval, as in the figures."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

import varcheck
from varcheck.output.formats import fmt
from varcheck.teaching.render import render_derive, render_explain, render_softmax

SCREEN_LINES, SCREEN_COLUMNS = 25, 80


def _shown(render, result, fmt_name: str = "table", width: int = SCREEN_COLUMNS) -> str:  # noqa: ANN001
    console = Console(file=io.StringIO(), width=width, color_system=None)
    render(result, fmt_name, console)
    return console.file.getvalue()


@pytest.fixture(scope="module")
def seed_case():  # noqa: ANN201
    return varcheck.explain(seed=1, replicates=2000)


@pytest.fixture(scope="module")
def broken():  # noqa: ANN201
    return varcheck.derive(8, dist="normal:mean=0.5", precision=0.1, seed=1)


@pytest.fixture(scope="module")
def study():  # noqa: ANN201
    return varcheck.softmax_study("4,16", keys=16, queries=960, seed=1)


def test_explain_fits_one_screen_and_answers_first(seed_case) -> None:  # noqa: ANN001
    text = _shown(render_explain, seed_case)
    lines = text.rstrip("\n").split("\n")
    assert len(lines) <= SCREEN_LINES, text
    assert max(len(line.rstrip()) for line in lines) <= SCREEN_COLUMNS, text
    # the sentence right under the title is the answer: 1.6 is ordinary at this size, from
    # the exact sd of np.var (2.179 for 2x2 normal entries) and where 1.6 falls
    answer = " ".join(" ".join(lines[1:4]).split())
    assert answer.startswith("1.6 is unremarkable: ")
    assert f"exact sd {fmt(seed_case.raw.sd)}" in answer and "2.179" in answer
    assert "1.6 sits at percentile " in answer
    # no simulated sd on the screen, where students took it for the exact one
    assert "simulated sd" not in text and fmt(seed_case.mc_sd) not in text
    assert "--long" in text


def test_explain_long_is_the_full_account_with_simulated_values_labelled(run_cli) -> None:  # noqa: ANN001
    res = run_cli("explain", "--replicates", "2000", "--seed", "1", "--long")
    assert res.exit_code == 0, res.output
    assert "Why" in res.output and "97.5% quantile" in res.output
    assert "simulated sd" in res.output and "(exact 2.179)" in res.output
    short = run_cli("explain", "--replicates", "2000", "--seed", "1")
    assert "Why" not in short.output and len(short.output) < len(res.output)


def test_explain_says_unusual_for_a_rejected_value() -> None:
    result = varcheck.explain(observed=40.0, seed=1, replicates=2000, growing=None)
    answer = varcheck.teaching.render.explain_answer(result)
    assert answer.startswith("40 is unusual: ") and "rejected" in answer
    assert "percentile above 99.9" in answer  # not rounded up to 100


def test_derive_keeps_the_formula_and_the_textbook_at_80_columns(broken) -> None:  # noqa: ANN001
    text = _shown(render_derive, broken)
    lines = text.split("\n")
    assert max(len(line.rstrip()) for line in lines) <= SCREEN_COLUMNS, text
    for step in broken.steps:
        # each on one line: the derivation is the answer, never dropped or cut
        assert any(step.formula in line for line in lines), step.formula
        assert any(step.textbook in line for line in lines), step.textbook
    assert "not shown at 80 columns" not in text


def test_derive_speaks_one_vocabulary_and_does_not_fail_for_the_lesson(broken, run_cli) -> None:  # noqa: ANN001
    """A breaking textbook step is what derive explains: the table, the notes and the figure say
    "breaks" (never "fails"), and the run exits 0 when the checks agree with the exact values."""
    text = _shown(render_derive, broken)
    assert [s.status for s in broken.steps] == ["breaks", "breaks", "inherits", "inherits"]
    assert re.search(r"textbook\s+Var X · Var Y = 1\s+breaks", text), text
    assert "fails" not in text and "Step 2 breaks" in text
    assert all(s.verdict == "consistent" for s in broken.steps)
    assert broken.exit_code == 0 and broken.outcome == "consistent"
    res = run_cli(
        "derive", "--dk", "8", "--dist", "normal:mean=0.5", "--precision", "0.1", "--seed", "1"
    )
    assert res.exit_code == 0, res.output
    from varcheck.teaching.figures import _derive_verdict

    assert _derive_verdict(broken) == "textbook steps 1 and 2 break; Var(q·k) = 12"


def test_softmax_markdown_is_a_table_a_person_reads(study) -> None:  # noqa: ANN001
    text = _shown(render_softmax, study, "markdown")
    header = "| d_k | logits | sd | entropy (nats) | entropy / log L | max weight | ‖J‖_F |"
    assert header in text
    rows = [line for line in text.split("\n") if line.startswith("| ") and line != header]
    assert len(rows) == 2 * len(study.rows)  # raw and scaled for each d_k
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", text.replace("d_k", "")), text  # no field names
    # the machine formats keep the field names
    doc = json.loads(_shown(render_softmax, study, "json"))
    assert "entropy_fraction_se" in doc["rows"][0]["raw"]
    assert "entropy_fraction_se_raw" in _shown(render_softmax, study, "csv")


@pytest.mark.parametrize("fmt_name", ["table", "markdown"])
def test_softmax_tables_show_95_percent_intervals_as_the_figure(study, fmt_name: str) -> None:  # noqa: ANN001
    text = _shown(render_softmax, study, fmt_name, width=150)
    assert "half-width of its 95% interval (1.96 standard errors" in " ".join(text.split())
    first = study.rows[0].raw
    z = varcheck.core.estimation.normal_quantile(0.95)
    # the first row's entropy cell: the mean ± 1.96 se, as the figure's error bar
    assert f"{fmt(first.entropy)} ± {fmt(z * first.entropy_se, 2)}" in text
