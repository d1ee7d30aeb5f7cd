"""``varcheck plan`` and ``varcheck.plan``: the samples a run needs, in every format; bad input.

That a run at the planned samples has the planned power is shown by simulation in
tests/test_power.py; here the plan's forms, floors and limits.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math

import numpy as np
import pytest
from rich.console import Console

import varcheck
from varcheck.checks.plan_render import render_plan
from varcheck.errors import VarcheckError
from varcheck.output.formats import percent_up

GATE = ("plan", "--dk", "64", "--claim", "dk", "--detect", "0.03", "--power", "0.9")


@pytest.fixture(scope="module")
def gate() -> varcheck.PlanResult:
    return varcheck.plan(64, claim="dk", detect=0.03, power=0.9, seed=1)


def _qk_block(rng: np.random.Generator, dk: int, calls: int) -> np.ndarray:
    """A vectorised sampler of 8 × 8 blocks of q·k/√d_k (values sharing rows)."""
    q = rng.standard_normal((calls, 8, dk))
    k = rng.standard_normal((calls, dk, 8))
    return (q @ k / math.sqrt(dk)).reshape(calls, 64)


def test_the_json_gives_the_samples_the_api_returns(run_cli, gate) -> None:
    """The command's JSON is the API result's document; ``samples`` is the row's need."""
    out = run_cli(*GATE, "--seed", "1", "--format", "json")
    assert out.exit_code == 0
    doc = json.loads(out.output)
    api = gate.to_dict()
    for doc_ in (doc, api):  # wall times differ between the two pilots
        doc_.pop("seconds")
        doc_["rows"][0].pop("seconds")
    assert doc == api
    assert doc["samples"] == gate.samples == gate.rows[0].samples
    assert gate.rows[0].floor == "power" and gate.rows[0].detectable_error <= 0.03
    with pytest.raises(dataclasses.FrozenInstanceError):
        gate.power = 0.5  # type: ignore[misc]


@pytest.mark.parametrize("fmt", ["csv", "markdown"])
def test_csv_and_markdown_carry_the_samples(run_cli, fmt: str) -> None:
    out = run_cli(*GATE, "--seed", "1", "--format", fmt)
    assert out.exit_code == 0
    assert "samples" in out.output and "detectable_error" in out.output


def test_the_table_fits_80_columns_and_says_what_to_run(gate) -> None:
    buf = io.StringIO()
    render_plan(gate, "table", Console(file=buf, width=80, color_system=None))
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    text = " ".join(buf.getvalue().split())
    assert f"--samples {gate.samples}" in text and "±3.0%" in text


def test_a_range_plans_each_row_at_its_share_of_the_family() -> None:
    """Two rows: each at α/2 (a guaranteed lower bound on its power under Holm)."""
    res = varcheck.plan("16,64", claim="dk", detect=0.05, seed=2)
    assert res.family == 2 and [r.dk for r in res.rows] == [16, 64]
    assert res.samples == max(r.samples for r in res.rows)
    single = varcheck.plan(64, claim="dk", detect=0.05, seed=2)
    assert res.rows[1].samples > single.rows[0].samples


def test_a_floor_that_binds_is_named_and_the_run_is_stronger_than_asked() -> None:
    res = varcheck.plan(16, claim="dk", detect=0.5, seed=1)
    row = res.rows[0]
    assert row.floor != "power" and row.detectable_error < 0.5
    assert row.samples >= 1000


def test_a_tolerance_plan_gives_the_probability_a_true_claim_passes() -> None:
    res = varcheck.plan(64, claim="dk", tolerance=0.02, power=0.9, seed=1)
    assert res.rows[0].power_at_claim == pytest.approx(0.9, abs=0.03)


def test_a_sampler_is_planned_in_whole_calls() -> None:
    """200 pilot calls; the plan counts the sampler's values, a multiple of 64 per call."""
    res = varcheck.plan(16, sampler=_qk_block, claim=1, detect=0.05, seed=1)
    row = res.rows[0]
    assert res.sampler and row.pilot_blocks == 200 and row.samples % 64 == 0
    assert row.blocks >= 200


def test_percentages_are_rounded_up() -> None:
    """The printed figure is never smaller than the one computed."""
    assert percent_up(0.02912) == "3.0%" and percent_up(0.0291) == "3.0%"
    assert percent_up(0.1234) == "13%" and percent_up(0.00123) == "0.13%"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--detect", "0"), "--detect"),
        (("--detect", "1.5"), "--detect"),
        (("--detect", "nan"), "--detect"),
        (("--detect", "0.03", "--power", "1.2"), "--power"),
        (("--detect", "0.03", "--tolerance", "0.02"), "one of --detect"),
        ((), "one of --detect"),
        (("--detect", "0.0001"), "detect 0.0001"),
        (("--detect", "0.03", "--dist", "bogus"), "bogus"),
        (("--detect", "0.03", "--sampler", "no_such_file.py:f", "--claim", "1"), "no_such_file"),
    ],
)
def test_bad_options_are_one_line_errors(run_cli, args: tuple[str, ...], said: str) -> None:
    out = run_cli("plan", "--dk", "64", *args)
    assert out.exit_code == 2
    assert len(out.stderr.strip().splitlines()) == 1 and said in out.stderr


def test_a_tolerance_over_a_range_and_a_pilot_too_large_are_refused() -> None:
    with pytest.raises(VarcheckError, match="one d_k"):
        varcheck.plan("8,16", tolerance=0.02)
    with pytest.raises(VarcheckError, match="pilot"):
        varcheck.plan(4096, claim="dk", detect=0.001, seed=1)


def test_a_signal_after_the_first_row_keeps_the_rows_planned(monkeypatch) -> None:
    """Ctrl-C during the second row's pilot: the first row stays, exit 130."""
    from varcheck.checks import plan as planning

    made = planning.builtin_row
    calls: list[int] = []

    def second_interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return made(*args, **kwargs)

    monkeypatch.setattr(planning, "builtin_row", second_interrupted)
    res = varcheck.plan("16,64", claim="dk", detect=0.05, seed=1)
    assert res.interrupted and [r.dk for r in res.rows] == [16]
    assert res.to_dict()["exit_code"] == 130 and "Interrupted" in str(res)
