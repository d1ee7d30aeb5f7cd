"""Every non-pass outcome ends with one next step: the cause the run established and the
command to run next, in the table (at most two lines at 80 columns, the command pasteable) and
under one key, ``next_step``, in JSON, CSV and Markdown."""

from __future__ import annotations

import csv
import io
import json
import shlex
import textwrap

import pytest

import varcheck
from varcheck.checks.render import render_check, render_sweep, render_verify


def _out(render, result, fmt: str, width: int = 80) -> str:
    from rich.console import Console

    buf = io.StringIO()
    render(result, fmt, Console(file=buf, width=width, no_color=True, force_terminal=False))
    return buf.getvalue()


def _next_lines(text: str) -> list[str]:
    """The next step's lines of a table: from ``next`` to the end of its command."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("next"))
    end = start + 1
    while end < len(lines) and (
        lines[end - 1].endswith("\\") or lines[end].lstrip().startswith("run:")
    ):
        end += 1
    return lines[start:end]


@pytest.fixture(scope="module")
def means_sweep():
    return varcheck.sweep("16,64", dist="normal:mean=0.5", claim="dk", precision=0.05, seed=1)


def test_sweep_rejection_names_the_exact_theory_and_derive(means_sweep) -> None:
    table = _out(render_sweep, means_sweep, "table")
    said = " ".join(_next_lines(table))
    assert "exact theory 24 at d_k = 16, not dk" in said
    assert "--claim theory" in said
    assert "varcheck derive --dk 16 --dist normal:mean=0.5" in said
    assert max(map(len, table.splitlines())) <= 80


def test_sweep_keeps_the_theory_column_at_80_columns_when_the_claim_differs(means_sweep) -> None:
    table = _out(render_sweep, means_sweep, "table")
    assert "theory Var" in table
    assert "24.0" in table


def test_the_next_step_is_one_field_in_json_csv_and_markdown(means_sweep) -> None:
    doc = json.loads(_out(render_sweep, means_sweep, "json"))
    assert doc["next_step"].startswith("exact theory 24 at d_k = 16")
    assert [row["next_step"] is not None for row in doc["rows"]] == [True, True]
    rows = list(csv.DictReader(io.StringIO(_out(render_sweep, means_sweep, "csv"))))
    assert "varcheck derive --dk 64" in rows[1]["next_step"]
    assert "next_step" in _out(render_sweep, means_sweep, "markdown")


def test_a_consistent_sweep_has_no_next_step() -> None:
    result = varcheck.sweep("4", precision=0.1, seed=1)
    assert result.to_dict()["next_step"] is None
    assert "next" not in _out(render_sweep, result, "table")


def test_an_unreliable_row_names_its_one_cause_and_derive() -> None:
    result = varcheck.sweep("4", dist="t:df=3", samples=20_000, seed=1)
    said = result.to_dict()["next_step"]
    assert "E[(q·k)^4] is infinite for t:df=3" in said
    assert " or " not in said.split(";")[0]
    assert said.endswith("varcheck derive --dk 4 --dist t:df=3")


def test_too_few_products_names_the_budget_that_suffices() -> None:
    result = varcheck.verify(8, dist="laplace", claim="theory", samples=1000, seed=1)
    assert result.outcome == "unreliable"
    step = result.to_dict()["next_step"]
    assert f"--samples {result.min_samples}" in step
    assert f"{result.min_samples:,} needed" in step


def test_an_undecided_claim_names_the_samples_that_settle_it() -> None:
    result = varcheck.verify(64, claim="1", scaled=True, tolerance=0.02, precision=0.05, seed=1)
    assert result.outcome == "inconclusive"
    text = _out(render_verify, result, "table")
    total = result.samples + result.more_samples
    assert f"about {result.more_samples:,} more products would settle it" in text
    assert f"--samples {total}" in " ".join(_next_lines(text))
    assert max(map(len, text.splitlines()[:-2])) <= 80  # the reproduce line stays whole


CLAIMS = """
[defaults]
seed = 2024
samples = 20000

[[claim]]
name = "no-scale"
sampler = "attention.py:logits_unscaled"
dk = 8
claim = 1
tolerance = 0.02
"""


def test_a_failing_sampler_claim_gets_its_own_command(tmp_path, monkeypatch) -> None:
    import shutil

    (tmp_path / "ci").mkdir()
    shutil.copy("examples/attention.py", tmp_path / "ci" / "attention.py")
    (tmp_path / "ci" / "claims.toml").write_text(textwrap.dedent(CLAIMS))
    monkeypatch.chdir(tmp_path)
    result = varcheck.check("ci/claims.toml")
    assert result.outcome == "fail"
    doc = result.to_dict()
    step = doc["claims"][0]["next_step"]
    assert "the 1/√d_k is forgotten" in step
    command = step.split("; run: ", 1)[1]
    words = shlex.split(command)
    assert words[:2] == ["varcheck", "assert"]
    assert "ci/attention.py:logits_unscaled" in words  # from here, not from the file's folder
    table = _out(render_check, result, "table")
    lines = _next_lines(table)
    assert lines[0].startswith("next (no-scale): variance × ")
    assert max(map(len, table.splitlines())) <= 80
    pasted = shlex.split(" ".join(line.rstrip("\\").strip() for line in lines[1:])[5:])
    assert pasted == words


def test_csv_is_plain_by_default_and_carries_metadata_on_request(means_sweep) -> None:
    plain = _out(render_sweep, means_sweep, "csv")
    assert plain.startswith("dk,theory_var,")
    rows = list(csv.DictReader(io.StringIO(plain)))
    assert [row["dk"] for row in rows] == ["16", "64"]
    meta = _out(render_sweep, means_sweep, "csv-meta")
    first, rest = meta.split("\n", 1)
    assert first.startswith("# command=sweep version=") and "seed=1" in first
    assert rest == plain


def test_pandas_reads_the_csv_with_its_defaults(means_sweep) -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_csv(io.StringIO(_out(render_sweep, means_sweep, "csv")))
    assert list(frame["dk"]) == [16, 64]


def test_a_time_capped_row_shows_its_blocks_and_the_time_it_needs() -> None:
    import dataclasses

    # a run of 0.05 s that drew 10 blocks at d_k = 64: fewer than the 200 a valid interval needs
    result = varcheck.sweep("4,64", precision=0.1, seed=1)
    capped = dataclasses.replace(result.rows[1].estimate, stop_reason="max-seconds", blocks=10)
    row = dataclasses.replace(result.rows[1], estimate=capped, verdict="unreliable")
    result = dataclasses.replace(result, rows=(result.rows[0], row), max_seconds=0.05)
    table = _out(render_sweep, result, "table")
    assert "fewer than the 200 blocks a valid interval needs (10 at d_k = 64)" in " ".join(
        table.split()
    )
    # 0.05 s × 200 / 10 blocks, a fifth to spare: 1.2 s
    assert _next_lines(table) == [
        "next: --max-seconds stopped d_k = 64 at 10 of 200 blocks; needs about 1.2 s",
        "  run: varcheck sweep --dk 4,64 --precision 0.1 --max-seconds 1.2 --seed 1",
    ]


def test_the_table_shows_the_entry_mean_and_variance_each_law_uses() -> None:
    built_in = varcheck.sweep("4", dist="uniform", samples=20_000, seed=1)
    scipy_law = varcheck.sweep("4", dist="scipy.uniform", samples=20_000, seed=1)
    assert "uniform (mean 0, var 1)" in _out(render_sweep, built_in, "table", 120)
    # scipy's uniform keeps its own scale: uniform on [0, 1], variance 1/12
    assert "scipy.uniform (mean 0.5, var 0.08333)" in _out(render_sweep, scipy_law, "table", 120)
    one = varcheck.verify(4, dist="scipy.uniform", claim="theory", samples=20_000, seed=1)
    assert "scipy.uniform (mean 0.5, var 0.08333)" in _out(render_verify, one, "table", 120)


def test_the_heavy_tail_caution_names_symmetric_heavy_tails() -> None:
    from varcheck.checks.verify import SAMPLER_TAILS_CAUTION

    assert "symmetric heavy-tailed" in SAMPLER_TAILS_CAUTION
    assert "Laplace" in SAMPLER_TAILS_CAUTION and "93.3%" in SAMPLER_TAILS_CAUTION
    with open("docs/own-code.md", encoding="utf-8") as f:
        page = " ".join(f.read().split())
    assert "93.3% [92.5, 93.9] at 200 calls" in page and "93.3% at 1,000 calls" in page


def test_the_count_column_says_what_it_counts_and_help_explains_it(means_sweep, run_cli) -> None:
    assert "q·k pairs" in _out(render_sweep, means_sweep, "table", 150)
    shown = " ".join(run_cli("sweep", "--help").output.split())
    assert 'The "q·k pairs" column counts the products a row\'s estimate pools' in shown


def test_project_names_the_blocks_that_suffice() -> None:
    from varcheck.paper.render import render_project

    result = varcheck.project(dx=8, dk=4, blocks=200, seed=1)
    need = max(r.min_blocks for r in result.rows if r.min_blocks is not None)
    command = f"varcheck project --dx 8 --dk 4 --blocks {need} --seed 1"
    assert result.to_dict()["next_step"].endswith(f"{need:,} needed; run: {command}")
    assert _next_lines(_out(render_project, result, "table", 150))[-1] == f"  run: {command}"


def test_a_failing_sampler_assert_offers_a_sweep_that_takes_its_options() -> None:
    from varcheck.checks.next_steps import verify_step

    result = varcheck.verify(
        8, claim="1", sampler="examples/attention.py:logits_unscaled", samples=20_000, seed=1
    )
    step = verify_step(result)
    assert step.cause.startswith("variance × ") and "forgotten" in step.cause
    assert step.command.startswith("varcheck sweep --dk 2,8,32 --sampler ")
    assert "--tolerance" not in step.command and "--scaled" not in step.command
