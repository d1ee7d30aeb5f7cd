"""`varcheck derive`: each step's value, its Monte-Carlo check, and the step that breaks."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from varcheck.derive import derive
from varcheck.errors import VarcheckError


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
        # Holm-adjusted at 0.05 over the steps: a true formula is rejected with probability
        # <= 0.05 for the whole table; the pinned seed keeps this deterministic
        assert step.verdict == "consistent", step
        assert step.p_adjusted >= 0.05
        # and the estimate is within 4 standard errors (two-sided tail 6e-5 per step)
        assert abs(step.estimate - step.value) < 4 * step.se, step
    if broken is not None:
        assert res.steps[broken - 1].status == "breaks"
        assert res.exit_code == 1
        # the textbook value is far outside the interval for these settings: rejected
        assert res.steps[broken - 1].textbook_p_value < 1e-6
    else:
        assert res.exit_code == 0


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


def test_cli_json_and_reproducible(run_cli) -> None:
    args = ("derive", "--dk", "8", "--seed", "4", "--precision", "0.05", "--format", "json")
    first, second = run_cli(*args), run_cli(*args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    doc = json.loads(first.output)
    assert doc["command"] == "derive" and doc["seed"] == 4 and "version" in doc
    assert [s["step"] for s in doc["steps"]] == [1, 2, 3, 4]
    assert doc["broken_step"] is None


def test_cli_broken_step_exit_one(run_cli) -> None:
    res = run_cli("derive", "--dk", "8", "--dist", "normal:mean=0.5", "--seed", "1",
                  "--precision", "0.05")  # fmt: skip
    assert res.exit_code == 1, res.output
    assert "Step 2 breaks" in res.output


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_cli_formats_show_seed(run_cli, fmt: str) -> None:
    res = run_cli("derive", "--dk", "4", "--seed", "6", "--precision", "0.05", "--format", fmt)
    assert res.exit_code == 0, res.output
    assert "seed" in res.output and "6" in res.output


def test_cli_usage_error(run_cli) -> None:
    res = run_cli("derive", "--dk", "0")
    assert res.exit_code == 2, res.output


def test_large_dk_uses_a_fixed_budget_and_says_so(monkeypatch) -> None:
    # a smaller budget makes d_k = 64 "large": step 3 then uses STEP_BUDGET / d_k products
    # instead of chasing the precision, and the notes say its interval is wider than asked
    import varcheck.derive as mod
    from varcheck.render_teaching import derive_notes

    monkeypatch.setattr(mod, "STEP_BUDGET", 64 * 5000)
    res = derive(64, seed=_seed(12), precision=0.01)
    assert [s.stop_reason for s in res.steps] == ["", "precision", "budget", "budget"]
    assert res.steps[2].samples >= 5000
    assert any("fixed budget" in n for n in derive_notes(res, markup=False))
    assert res.steps[2].verdict == "consistent"
