"""verify(), `varcheck assert` and the pytest helper."""

from __future__ import annotations

import json
import math

import pytest

from varcheck import VarcheckError, verify
from varcheck.testing import assert_variance


@pytest.mark.parametrize(
    ("kwargs", "outcome"),
    [
        ({"claim": "dk"}, "pass"),
        ({"claim": "1", "scaled": True}, "pass"),
        ({"claim": "theory", "dist": "uniform:mean=1"}, "pass"),
        ({"claim": "dk*(1+rho**2)", "rho": 0.5}, "pass"),
        # the zero-mean formula applied to non-zero means: Var is 1.5 dk
        ({"claim": "dk", "dist": "normal:mean=0.5"}, "fail"),
        ({"claim": "1.03*dk"}, "fail"),
        ({"claim": "0.97*dk"}, "fail"),
        ({"claim": "dk", "tolerance": 0.02}, "pass"),
        ({"claim": "dk", "tolerance": 1e-5}, "inconclusive"),
        ({"claim": "dk", "dist": "t:df=3"}, "unreliable"),
        ({"claim": "dk", "dist": "t:df=2"}, "infinite"),
    ],
)
def test_outcomes(kwargs: dict, outcome: str) -> None:
    res = verify(64, seed=1, **kwargs)
    assert res.outcome == outcome, res
    assert (
        res.exit_code
        == {"pass": 0, "fail": 1, "inconclusive": 3, "unreliable": 4, "infinite": 4}[outcome]
    )


def test_inconclusive_says_how_many_more_samples() -> None:
    """A tolerance of 0.5% against a 1% interval is inconclusive; ``more_samples`` is what makes
    a half-width (shrinking as 1/sqrt(products)) reach the room left: the equivalence test's
    90% interval's to the band's nearer edge when the estimate is inside the band (a pass),
    else the 95% interval's to the claim (where more data would fail it). Seeds 0 and 1 put the
    estimate outside the band, 5 and 6 inside: both branches."""
    branches = set()
    for seed in (0, 1, 5, 6):
        res = verify(64, claim="dk", tolerance=0.005, seed=seed)
        assert res.outcome == "inconclusive", res
        band = (64 * 0.995, 64 * 1.005)
        inside = band[0] < res.estimate < band[1]
        lo, hi = res.equivalence_interval if inside else res.confidence_interval
        half = (hi - lo) / 2
        branches.add(inside)
        if inside:
            room = min(res.estimate - band[0], band[1] - res.estimate)
        else:
            room = abs(res.estimate - 64)
        assert res.more_samples is not None
        shrunk = half * math.sqrt(res.samples / (res.samples + res.more_samples))
        assert shrunk == pytest.approx(room, rel=1e-4), seed
    assert branches == {True, False}


@pytest.mark.parametrize("seed", range(20))
def test_tiny_tolerance_is_never_pass(seed: int) -> None:
    assert verify(16, claim="dk", tolerance=1e-5, seed=seed, precision=0.05).outcome != "pass"


def test_confidence_alpha_and_errors() -> None:
    assert verify(8, claim="dk", alpha=0.1, seed=1).confidence == pytest.approx(0.9)
    with pytest.raises(VarcheckError, match="disagree"):
        verify(8, claim="dk", alpha=0.1, confidence=0.95)
    with pytest.raises(VarcheckError, match="tolerance"):
        verify(8, claim="dk", tolerance=0)
    with pytest.raises(VarcheckError, match="must be > 0"):
        verify(8, claim="dk - 8")
    with pytest.raises(VarcheckError, match="one d_k"):
        verify("2..8", claim="dk")  # type: ignore[arg-type]


def test_pytest_helper_message() -> None:
    assert assert_variance(32, "dk", seed=1).outcome == "pass"
    with pytest.raises(AssertionError) as err:
        assert_variance(32, "dk", dist="normal:mean=0.5", seed=1)
    text = str(err.value)
    for fragment in (
        "FAIL",
        "claimed value 32",
        "interval",
        "p = ",
        "--seed 1",
        "varcheck assert --dk 32 --dist normal:mean=0.5",
    ):
        assert fragment in text
    assert assert_variance(32, "dk", tolerance=1e-6, seed=1, allow_inconclusive=True)


def test_cli_assert(run_cli) -> None:
    """Guards against `varcheck assert` reporting other numbers than verify() for the same
    arguments, or an outcome and exit code that do not follow its interval."""
    res = run_cli("assert", "--dk", "64", "--claim", "dk", "--seed", "1", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["command"] == "assert" and doc["outcome"] == "pass" and doc["seed"] == 1
    api = verify(64, claim="dk", seed=1)
    assert doc["claim_value"] == doc["theory_value"] == 64.0  # standard normal: Var(q·k) = d_k
    assert (doc["estimate"], doc["ci_low"], doc["ci_high"]) == (
        api.estimate, *api.confidence_interval,
    )  # fmt: skip
    assert (doc["p_value"], doc["samples"]) == (api.p_value, api.samples)
    assert doc["ci_low"] <= 64.0 <= doc["ci_high"] and doc["p_value"] >= 0.05  # hence "pass"
    assert (doc["ci_high"] - doc["ci_low"]) / 2 <= 0.01 * doc["estimate"]  # default precision
    res = run_cli("assert", "--dk", "64", "--claim", "dk", "--tolerance", "1e-5", "--seed", "1")
    assert res.exit_code == 3, res.output
    assert "INCONCLUSIVE" in res.output and "more products" in res.output
    more = verify(64, claim="dk", tolerance=1e-5, seed=1).more_samples
    assert more is not None and f"about {more:,} more products" in res.output, res.output
    # Var(q·k) = 64 ((1 + 0.25)² - 0.25²) = 96 for mean 0.5: the claim 64 is 33 % low
    res = run_cli(
        "assert", "--dk", "64", "--claim", "dk", "--dist", "normal:mean=0.5", "--seed", "1",
        "--format", "json",
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    doc = json.loads(res.output)
    assert doc["outcome"] == "fail" and doc["theory_value"] == pytest.approx(96.0)
    assert not doc["ci_low"] <= 64.0 <= doc["ci_high"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--dk", "64", "--claim", "import os"), "not a valid expression"),
        (("--dk", "64", "--claim", "dk**dk**dk"), "cannot be evaluated"),
        (("--dk", "0", "--claim", "dk"), "not in the range"),
        (("--claim", "dk"), "Missing option '--dk'"),
        (("--dk", "8", "--claim", "dk", "--tolerance", "2"), "out of range"),
    ],
)
def test_cli_assert_usage_errors(run_cli, args: tuple[str, ...], fragment: str) -> None:
    res = run_cli("assert", *args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output and len(res.output.strip().splitlines()) == 1
