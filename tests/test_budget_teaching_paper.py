"""Issue #16's budget rule in the teaching and paper commands: `derive` and `project`.

A fixed budget below the products (or blocks) a valid interval needs gives the estimate with the
verdict ``unreliable`` (exit 4), no interval and no p-value, and names the budget it needs
(``min_samples``); at or above it the verdict is the usual one. An adaptive run draws at least
that many.
"""

from __future__ import annotations

import json
import math

import pytest

from varcheck.core.distributions import parse_distribution
from varcheck.core.estimation import minimum_products
from varcheck.core.theory import dot_product_theory
from varcheck.teaching.derive import derive
from varcheck.teaching.render import derive_dict, derive_notes

LAPLACE = parse_distribution("laplace")


def _need(dk: int) -> int:
    return int(minimum_products(LAPLACE, LAPLACE, dot_product_theory(dk, LAPLACE, LAPLACE)))


# --- derive --------------------------------------------------------------------------------------


@pytest.mark.statistical
def test_derive_fixed_budget_below_the_rule_is_unreliable_with_the_number() -> None:
    res = derive(2, dist="laplace", samples=1000, seed=5)
    assert (_need(1), _need(2)) == (24_749, 13_082)
    step1, step2, step3, step4 = res.steps
    assert step1.verdict in ("consistent", "rejected") and step1.min_samples is None
    assert [s.min_samples for s in (step2, step3, step4)] == [24_749, 13_082, 13_082]
    for s in (step2, step3, step4):
        assert s.verdict == "unreliable"
        assert math.isfinite(s.estimate) and s.samples >= 1000
        assert all(math.isnan(v) for v in (*s.confidence_interval, s.p_value, s.p_adjusted))
        assert math.isnan(s.textbook_p_value)
    assert res.exit_code == 4
    data = json.loads(json.dumps(derive_dict(res), default=str))
    assert [st["min_samples"] for st in data["steps"]] == [None, 24_749, 13_082, 13_082]
    assert data["steps"][1]["ci_low"] is None or math.isnan(data["steps"][1]["ci_low"])
    note = next(n for n in derive_notes(res, markup=False) if n.startswith("unreliable:"))
    assert "24,749 for step 2, 13,082 for step 3 (and 4)" in note
    assert "--samples 24749" in note


@pytest.mark.statistical
def test_derive_fixed_budget_above_the_rule_gets_a_verdict() -> None:
    res = derive(2, dist="laplace", samples=30_000, seed=5)
    for s in res.steps:
        assert s.min_samples is None
        assert s.verdict in ("consistent", "rejected")
        lo, hi = s.confidence_interval
        assert lo < s.estimate < hi
    assert res.exit_code in (0, 1)
    assert not any(n.startswith("unreliable") for n in derive_notes(res, markup=False))


@pytest.mark.statistical
def test_derive_at_a_precision_draws_at_least_the_rule() -> None:
    res = derive(2, dist="laplace", precision=0.2, seed=5)
    assert res.steps[1].samples >= _need(1)
    assert res.steps[2].samples >= _need(2)
    assert all(s.min_samples is None for s in res.steps)
    assert all(s.verdict in ("consistent", "rejected") for s in res.steps)


@pytest.mark.statistical
def test_derive_shows_no_interval_where_no_moment_allows_one() -> None:
    # t with 3 degrees of freedom: E[(q·k)^4] infinite, so steps 2-4 have no valid interval;
    # with 2, E[(XY)^2] is infinite too and step 1's t-interval goes as well
    res = derive(4, dist="t:df=3", samples=2000, seed=5)
    for s in res.steps[1:]:
        assert s.verdict == "unreliable" and s.min_samples is None
        assert math.isnan(s.confidence_interval.low) and math.isfinite(s.estimate)
    step1 = derive(4, dist="t:df=2", samples=2000, seed=5).steps[0]
    assert step1.verdict == "unreliable" and math.isnan(step1.confidence_interval.high)
