"""`varcheck derive`: each step's value, its Monte-Carlo check, and the step that breaks."""

from __future__ import annotations

import csv
import io
import json
import math
import re

import numpy as np
import pytest

from varcheck.errors import VarcheckError
from varcheck.output.formats import fmt as fmt_value
from varcheck.teaching.derive import derive


def _seed(literal: int) -> int:
    return int(np.random.default_rng(literal).integers(2**31))


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("kwargs", "broken"),
    [
        ({}, None),
        ({"dist": "laplace"}, None),
        ({"dist": "normal:mean=0.5"}, 2),
        ({"q_dist": "uniform:mean=1", "k_dist": "normal"}, 2),
        ({"rho": 0.5}, 2),
        ({"dist": "uniform:sd=2"}, 2),
    ],
)
def test_every_check_agrees_with_its_formula(kwargs: dict, broken: int | None) -> None:
    res = derive(16, seed=11, precision=0.03, **kwargs)
    assert res.broken_step == broken
    for step in res.steps:
        # Holm-adjusted over the steps: a true formula gets p_adjusted < 1e-3 with probability
        # <= 1e-3 for the whole table (asserting the verdict, i.e. p >= 0.05, would fail 5% of
        # the time whenever the draws change)
        assert step.p_adjusted >= 1e-3, step
        # and the estimate is within 4 standard errors (two-sided tail 6e-5 per step)
        assert abs(step.estimate - step.value) < 4 * step.se, step
    if broken is not None:
        assert res.steps[broken - 1].status == "breaks"
        # the textbook value is far outside the interval for these settings: rejected
        assert res.steps[broken - 1].textbook_p_value < 1e-6
    # 0 unless a check rejected its (true) formula, which Holm allows in 5% of tables: a
    # breaking textbook step is derive's answer, not a failure
    rejected = any(step.verdict == "rejected" for step in res.steps)
    assert res.exit_code == (1 if rejected else 0)


def test_non_zero_mean_names_the_variance_step() -> None:
    res = derive(16, dist="normal:mean=0.5", seed=1, precision=0.05)
    assert [s.status for s in res.steps] == ["breaks", "breaks", "inherits", "inherits"]
    assert "Var X · Var Y" in res.steps[1].reason
    # 16 * ((1 + 0.25)^2 - 0.25^2) = 24, scaled 1.5
    assert res.correct_var == pytest.approx(24.0)
    assert res.correct_scaled_var == pytest.approx(1.5)
    assert res.steps[0].value == pytest.approx(0.25)


def test_one_zero_mean_keeps_step_one() -> None:
    res = derive(8, q_dist="normal:mean=1", k_dist="normal", seed=2, precision=0.05)
    assert res.steps[0].status == "holds" and res.steps[1].status == "breaks"
    assert res.steps[1].value == pytest.approx(2.0)  # (1 + 1)(1 + 0) - 0


def test_constant_square_is_flagged_not_rejected() -> None:
    # a Rademacher product is +-1: its square is constant, the delta-method interval degenerates
    res = derive(4, dist="rademacher", seed=5, precision=0.05)
    assert res.steps[1].verdict == "unreliable"
    assert res.steps[2].verdict == "consistent"


def test_infinite_variance_has_no_valid_test() -> None:
    res = derive(8, dist="t:df=2", seed=3, precision=0.05)
    assert res.broken_step == 2 and math.isinf(res.correct_var)
    assert res.steps[1].verdict == "infinite"
    assert res.exit_code == 4


def test_infinite_fourth_moment_is_unreliable() -> None:
    res = derive(4, dist="t:df=3", seed=3, samples=20_000)
    assert res.broken_step is None
    assert {s.verdict for s in res.steps[1:]} == {"unreliable"}
    assert res.exit_code == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"dk": 0}, "dk"), ({"rho": 0.5, "dist": "uniform"}, "rho"), ({"rho": 2.0}, "rho")],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(VarcheckError, match=message):
        derive(**{"seed": 1, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dk": 0}, "dk must be a whole number in 1..1000000, got 0"),
        ({"dk": True}, "dk must be a whole number in 1..1000000, got True"),
        ({"dk": 4.0}, "dk must be a whole number in 1..1000000, got 4.0"),
        ({"dk": 10**7}, "dk must be a whole number in 1..1000000, got 10000000"),
        ({"dist": None}, "distribution spec must be a non-empty string like 'normal', got None"),
        (
            {"dist": None, "q_dist": "normal", "k_dist": "normal"},
            "distribution spec must be a non-empty string like 'normal', got None",
        ),
    ],
)
def test_refusals_say_what_is_accepted(kwargs: dict, message: str) -> None:
    """Guards the messages of the shared option checks (core.options) as derive words them, and
    that ``dist=None`` is refused rather than read as normal (unlike sweep's entry laws)."""
    with pytest.raises(VarcheckError) as err:
        derive(**{"seed": 1, "samples": 1000, **kwargs})
    assert str(err.value) == message


def test_numpy_integer_dk_is_a_whole_number() -> None:
    res = derive(np.int64(4), samples=1000, seed=1)
    assert res.dk == 4 and type(res.dk) is int


def test_cli_json_and_reproducible(run_cli) -> None:
    args = ("derive", "--dk", "8", "--seed", "4", "--precision", "0.05", "--format", "json")
    first, second = run_cli(*args), run_cli(*args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    doc = json.loads(first.output)
    assert doc["command"] == "derive" and doc["seed"] == 4 and "version" in doc
    assert [s["step"] for s in doc["steps"]] == [1, 2, 3, 4]
    assert doc["broken_step"] is None


def test_cli_broken_step_is_explained_not_failed(run_cli) -> None:
    res = run_cli(
        "derive", "--dk", "8", "--dist", "normal:mean=0.5", "--seed", "1", "--precision", "0.05"
    )
    assert res.exit_code == 0, res.output
    assert "Step 2 breaks" in res.output


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?")
# table cells carry 4 significant digits (relative rounding error <= 5e-4), markdown 6
TABLE_REL, MARKDOWN_REL = 5e-4, 5e-6


def _numbers(text: str) -> list[float]:
    return [float(x) for x in _NUMBER.findall(text)]


@pytest.mark.parametrize("fmt", ["table", "csv-meta", "markdown"])
def test_cli_formats_show_the_seed_and_the_same_numbers(run_cli, fmt: str) -> None:
    """Guards against a format that reports another seed or d_k than the run's, or numbers
    other than the JSON (the API result) of the same run; the exact step values for normal
    entries at d_k = 4 are E[XY] = 0, Var(XY) = 1, Var(q·k) = 4 and Var(q·k/√d_k) = 1."""
    args = ("derive", "--dk", "4", "--seed", "6", "--precision", "0.05")
    steps = json.loads(run_cli(*args, "--format", "json").output)["steps"]
    assert [s["value"] for s in steps] == [0.0, 1.0, 4.0, 1.0]
    res = run_cli(*args, "--format", fmt)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    if fmt == "csv-meta":
        meta = dict(item.split("=", 1) for item in lines[0].removeprefix("# ").split())
        assert (meta["command"], meta["seed"], meta["dk"]) == ("derive", "6", "4")
        rows = list(csv.DictReader(lines[1:]))
        for row, step in zip(rows, steps, strict=True):
            assert int(row["step"]) == step["step"] and row["verdict"] == step["verdict"]
            for key in ("value", "estimate", "ci_low", "ci_high", "se", "p_adjusted"):
                assert float(row[key]) == step[key], key  # repr: exact
            assert int(row["samples"]) == step["samples"]
    elif fmt == "markdown":
        assert "seed: `6`" in lines[0] and "dk: `4`" in lines[0]
        rows = [line.split("|")[1:-1] for line in lines if re.match(r"\| \d \|", line)]
        for cells, step in zip(rows, steps, strict=True):
            # step | quantity | formula | value | textbook | estimate | ci_low | ci_high | p_adj
            got = [float(cells[i]) for i in (0, 3, 5, 6, 7, 8)]
            want = [step[k] for k in ("step", "value", "estimate", "ci_low", "ci_high")]
            assert got == pytest.approx([*want, step["p_adjusted"]], rel=MARKDOWN_REL)
            assert cells[9].strip() == step["verdict"] and cells[10].strip() == step["status"]
    else:
        assert re.search(r"· seed 6 · varcheck ", " ".join(res.output.split())), res.output
        for step in steps:
            # each step as lines: its name; textbook and status; exact formula = value;
            # simulated estimate [low, high]; exact value: p, then the check's verdict
            i = next(i for i, line in enumerate(lines) if f"step {step['step']}: " in line)
            textbook, exact, simulated = lines[i + 1], lines[i + 2], lines[i + 3]
            assert textbook.split()[-1] == step["status"]
            assert exact.rstrip().endswith(f"= {fmt_value(step['value'])}")
            assert simulated.split()[-1] == step["verdict"]
            numbers = _numbers(simulated.split("simulated", 1)[1])
            assert numbers[0] == pytest.approx(step["estimate"], rel=TABLE_REL)
            assert numbers[1:3] == pytest.approx([step["ci_low"], step["ci_high"]], rel=TABLE_REL)
            assert numbers[3] == pytest.approx(step["p_adjusted"], abs=5e-5)


def test_cli_usage_error(run_cli) -> None:
    """Guards against a bad --dk that fails without saying which option and which range."""
    res = run_cli("derive", "--dk", "0")
    assert res.exit_code == 2, res.output
    [line] = res.output.strip().splitlines()
    assert line.startswith("varcheck derive: error: Invalid value for '--dk': 0 "), line
    assert "1<=x<=1000000" in line and "Traceback" not in res.output


def test_large_dk_uses_a_fixed_budget_and_says_so(monkeypatch) -> None:
    # a smaller budget makes d_k = 64 "large": step 3 then uses STEP_BUDGET / d_k products
    # instead of chasing the precision, and the notes say its interval is wider than asked
    import varcheck.teaching.derive as mod
    from varcheck.teaching.render import derive_notes

    monkeypatch.setattr(mod, "STEP_BUDGET", 64 * 5000)
    res = derive(64, seed=_seed(12), precision=0.01)
    assert [s.stop_reason for s in res.steps] == ["", "precision", "budget", "budget"]
    assert res.steps[2].samples >= 5000
    assert any("fixed budget" in n for n in derive_notes(res, markup=False))
    assert res.steps[2].verdict == "consistent"


def test_render_refuses_an_unknown_format() -> None:
    """Guards the one format switch (output.formats.write): no silent fallback to Markdown."""
    from rich.console import Console

    from varcheck.teaching.render import render_derive

    res = derive(4, samples=1000, seed=1)
    with pytest.raises(ValueError, match="unknown format 'yaml'"):
        render_derive(res, "yaml", Console(file=io.StringIO()))


def test_a_step_excluded_by_its_own_interval_is_marked(run_cli) -> None:
    """The derive table marks † a step whose own interval excludes its exact value while Holm
    over the steps keeps it consistent, with the sweep's footnote (issue #22, item 4)."""
    from varcheck import derive
    from varcheck.output.formats import MARGINAL_NOTE

    result = derive(8, dist="normal:mean=0.5", seed=25, precision=0.05)
    alpha = 1.0 - result.confidence
    assert [s.number for s in result.steps if s.marginal_only(alpha)] == [2]
    step = result.steps[1]
    assert step.verdict == "consistent" and step.p_value < alpha <= step.p_adjusted
    args = ("derive", "--dk", "8", "--dist", "normal:mean=0.5", "--seed", "25")
    out = run_cli(*args, "--precision", "0.05").output
    assert out.count("†") == 2 and MARGINAL_NOTE[:40] in out
