"""The block accumulator, the skewness-corrected interval and the estimator's bookkeeping."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from varcheck import dot_product_theory, estimate_variance, parse_distribution
from varcheck.core.estimation import BlockAccumulator, _hall_inverse, hall_interval, hall_transform


@pytest.mark.parametrize("splits", [[1000], [1, 999], [137] * 7 + [41], [500, 1, 499]])
def test_accumulator_merge_equals_one_pass(splits: list[int]) -> None:
    rng = np.random.default_rng(3)
    m = rng.normal(1.0, 2.0, 1000)
    a = rng.gamma(2.0, 3.0, 1000) + m
    acc = BlockAccumulator()
    start = 0
    for size in splits:
        acc.add(m[start : start + size], a[start : start + size])
        start += size
    mu = m.mean()
    psi = a - 2 * mu * m
    est, se, mean = acc.variance_and_se()
    assert mean == pytest.approx(mu, rel=1e-12)
    assert est == pytest.approx(a.mean() - mu**2 + m.var(ddof=1) / m.size, rel=1e-12)
    second = 2 * m.var(ddof=1) ** 2 / (m.size - 1)
    assert se == pytest.approx(math.sqrt((psi.var(ddof=1) + second) / m.size), rel=1e-10)
    skew = ((psi - psi.mean()) ** 3).mean() / psi.var(ddof=1) ** 1.5
    assert acc.skewness() == pytest.approx(skew, rel=1e-9)


@given(st.floats(-5, 5), st.floats(-3, 3), st.integers(3, 10**6))
def test_hall_transform_is_monotone_and_inverts(t: float, skew: float, n: int) -> None:
    y = hall_transform(t, skew, n)
    assert float(_hall_inverse(y, skew, n)) == pytest.approx(t, abs=1e-7)
    assert hall_transform(t + 1e-3, skew, n) > y


def test_hall_interval_leans_with_the_skewness() -> None:
    sym = hall_interval(10.0, 1.0, 0.0, 100, 2.0)
    assert sym.low == pytest.approx(8.0) and sym.high == pytest.approx(12.0)
    right = hall_interval(10.0, 1.0, 2.0, 100, 2.0)
    # right-skewed data: the mean is more likely above a low estimate -> longer upper arm
    assert right.high - 10.0 > 10.0 - right.low


def test_estimate_reports_its_budget_and_method() -> None:
    q = parse_distribution("normal")
    th = dot_product_theory(32, q, q)
    est = estimate_variance(q, q, th, seed=1, samples=50_000)
    assert est.stop_reason == "samples" and est.samples >= 50_000
    assert est.samples == est.blocks * est.block_side**2 and est.interval_method == "hall"
    heavy = parse_distribution("t:df=5")
    th = dot_product_theory(8, heavy, heavy)
    assert th.slow_convergence
    assert estimate_variance(heavy, heavy, th, seed=1, precision=0.05).interval_method == "log"


def test_interval_and_p_value_agree() -> None:
    q = parse_distribution("laplace:mean=1")
    th = dot_product_theory(8, q, q)
    est = estimate_variance(q, q, th, seed=2, precision=0.03)
    lo, hi = est.confidence_interval
    # the interval is exactly the set of claims with p >= 1 - confidence
    assert est.p_value(lo * 1.0001) > 0.05 > est.p_value(lo * 0.999)
    assert est.p_value(hi * 0.9999) > 0.05 > est.p_value(hi * 1.001)


def test_max_seconds_stops_early() -> None:
    q = parse_distribution("normal")
    th = dot_product_theory(64, q, q)
    est = estimate_variance(q, q, th, seed=1, precision=1e-5, max_seconds=0.3)
    assert est.stop_reason == "max-seconds" and est.precision > 1e-5


@pytest.mark.parametrize("df", [100, 199, 1000, 10**5, 10**9])
def test_student_t_without_scipy_matches_scipy(df: int) -> None:
    """From T_LARGE_DF on, p-values and quantiles skip scipy (start-up); they must agree."""
    from scipy.special import stdtr, stdtrit

    from varcheck.core.estimation import T_LARGE_DF, t_quantile, t_two_sided_p

    assert df >= T_LARGE_DF
    for t in (0.0, 0.3, 1.0, 1.96, 2.6, 4.0, 7.0, 11.0):
        exact = 2.0 * stdtr(df, -t)
        assert t_two_sided_p(t, df) == pytest.approx(exact, rel=1e-7, abs=1e-300)
    for conf in (0.5, 0.9, 0.95, 0.99, 0.9999):
        assert t_quantile(conf, df) == pytest.approx(stdtrit(df, 0.5 + conf / 2), rel=1e-10)
    assert t_two_sided_p(math.inf, df) == 0.0 and math.isnan(t_two_sided_p(math.nan, df))
