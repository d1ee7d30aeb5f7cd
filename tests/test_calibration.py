"""Calibration and power of the variance intervals and of sweep verdicts.

Coverage: over R independent seeds the number of 95% intervals that contain the true variance is
Binomial(R, 0.95) when the intervals are calibrated. We require the two-sided binomial test to
give p > 0.001 (so a calibrated estimator fails this test once in a thousand runs per
configuration), and pin the exact count for the fixed seeds so that any change in behaviour is
noticed. One configuration alone has little power (92% coverage passes a quarter of the time), so
the pooled coverage over all configurations, computed from the same runs, is tested too: over
4400 intervals (sd of the mean coverage about 0.33 points when the configurations are nearly
independent) a coverage 1.5 points short fails that test about 75-80% of the time, and 2 points
short about 98% (measured by an independent reviewer; configurations that share a d_k share
random streams, so the real power is somewhat lower).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy.stats import binomtest

from varcheck import dot_product_theory, estimate_variance, parse_distribution, sweep
from varcheck.core.blocks import BlockPlan

pytestmark = pytest.mark.statistical

R = 400


def _plan(side: int, dk: int) -> BlockPlan:
    blocks = max(1, (1 << 20) // (side * side + 2 * side * dk))
    return BlockPlan(side=side, paired=False, blocks_per_chunk=blocks, row_correlation=0.0)


# (q, k, dk, rho, forced block side, precision, samples, pinned coverage count out of R)
CONFIGS = {
    "normal-16": ("normal", "normal", 16, 0.0, None, 0.05, None, 378),
    "uniform-8": ("uniform", "uniform", 8, 0.0, None, 0.05, None, 382),
    "rademacher-4": ("rademacher", "rademacher", 4, 0.0, None, 0.05, None, 379),
    "t6-16": ("t:df=6", "t:df=6", 16, 0.0, None, 0.02, None, 372),
    "t6-4": ("t:df=6", "t:df=6", 4, 0.0, None, 0.02, None, 383),
    "mean0.5-8": ("normal:mean=0.5", "normal:mean=0.5", 8, 0.0, None, 0.05, None, 377),
    "gamma-vs-uniform-8": ("scipy.gamma:a=2", "uniform:mean=1", 8, 0.0, None, 0.05, None, 380),
    "rho0.5-8": ("normal", "normal", 8, 0.5, None, 0.05, None, 378),
    # large blocks: 128 x 128 products per block share rows/columns (correlation 1/7 at d=4)
    "big-blocks-normal-4": ("normal", "normal", 4, 0.0, 128, 0.05, None, 383),
    "big-blocks-mean0.5-32": ("normal:mean=0.5", "normal:mean=0.5", 32, 0.0, 64, 0.05, None, 385),
    "fixed-samples-64": ("normal", "normal", 64, 0.0, None, None, 20_000, 373),
}


@functools.cache
def _covered(name: str) -> tuple[bool, ...]:
    """For each seed 0..R-1: does the configuration's interval contain the true variance?

    Computed once per session: the pooled test reuses the per-configuration runs.
    """
    qs, ks, dk, rho, side, precision, samples, _ = CONFIGS[name]
    q, k = parse_distribution(qs), parse_distribution(ks)
    th = dot_product_theory(dk, q, k, rho)
    plan = None if side is None else _plan(side, dk)
    covered = []
    for seed in range(R):
        est = estimate_variance(
            q, k, th, seed=seed, stream=(dk,), precision=precision, samples=samples, plan=plan
        )
        lo, hi = est.confidence_interval
        covered.append(lo <= th.var <= hi)
    return tuple(covered)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_interval_coverage(name: str) -> None:
    """Guards against intervals that miss the true variance more (or less) often than 5 %;
    the pinned count flags any change of behaviour for these seeds."""
    covered = sum(_covered(name))
    p = binomtest(covered, R, 0.95).pvalue
    assert p > 1e-3, f"{name}: coverage {covered}/{R} = {covered / R:.3f} (binomial p = {p:.2g})"
    assert covered == CONFIGS[name][-1]


def test_big_blocks_standard_error_counts_the_shared_rows_and_columns() -> None:
    """Guards against an interval that treats the products of one block as independent.

    A block of n x n products s_ab = q_a·k_b (n = 128 rows of Q against 128 of K, d = 4, normal
    entries): two products sharing a row (or a column) have correlated squares, with
    Cov(s_ab², s_ac²) = E|q|^4 - d² = 2d against Var(s²) = 3d(d+2) - d² = 2d(d+3), i.e.
    r = 1/(d+3); products sharing neither are independent. So the mean of the n² squares has
    variance (2d / n²) (d + 3 + 2 (n-1)) = 2d (d + 2n + 1) / n², which over B blocks gives the
    standard error of the variance estimate (the mean's own terms are O(1/n²) smaller). Treating
    the n² products as independent would give 2d (d+3) / n²: sqrt(37.3) = 6.1 times too small a
    standard error; counting shared rows but not columns, 0.72 times the right one.

    The reported standard error is the square root of a sample variance over B = 800 blocks: its
    relative sd is about sqrt((kappa - 1) / (4B)) = 2.5 % for the near-normal kurtosis kappa ~ 3
    of a block mean of 16384 squares (2.35 % over 60 seeds); 10 % is 4 sd (false failure 6e-5).
    """
    d, n, blocks = 4, 128, 800
    q = parse_distribution("normal")
    th = dot_product_theory(d, q, q)
    est = estimate_variance(q, q, th, seed=3, stream=(d,), samples=blocks * n * n, plan=_plan(n, d))
    assert (est.blocks, est.block_side, est.samples) == (blocks, n, blocks * n * n)
    exact_se = math.sqrt(2 * d * (d + 2 * n + 1) / n**2 / blocks)
    independent_se = math.sqrt(2 * d * (d + 3) / n**2 / blocks)
    assert est.se == pytest.approx(exact_se, rel=0.10)
    assert est.se / independent_se == pytest.approx(6.106, rel=0.10)


def test_sweep_family_wise_error() -> None:
    """A true claim over 7 rows: any rejection at most alpha = 5% of the time (Holm)."""
    runs, alpha = 150, 0.05
    failures = sum(
        sweep("2..128", seed=seed, precision=0.05).exit_code != 0 for seed in range(runs)
    )
    # one-sided: is the failure count compatible with a rate <= alpha?
    p = binomtest(failures, runs, alpha, alternative="greater").pvalue
    assert p > 1e-3, f"{failures}/{runs} sweeps of a true claim rejected something"


@pytest.mark.parametrize("factor", ["1.05", "0.95"])
def test_power_five_percent_off_rejected_at_default_precision(factor: str) -> None:
    res = sweep("2..512", claim=f"{factor}*theory", seed=1)
    assert {r.verdict for r in res.rows} == {"rejected"}
    assert res.exit_code == 1


def test_power_textbook_claim_with_nonzero_mean() -> None:
    res = sweep("2..512", dist="normal:mean=0.5", claim="dk", seed=4)
    assert {r.verdict for r in res.rows} == {"rejected"}
    # and the exact formula for the same entries is consistent
    assert sweep("2..512", dist="normal:mean=0.5", seed=4).exit_code == 0


def test_pooled_coverage(pooled_coverage_p_value) -> None:
    """Guards against a coverage shortfall too small for one configuration's test to see.

    All configurations together, from varcheck's runs (those of test_interval_coverage, or
    computed here when it did not run): 11 intervals per seed, 4400 in all, judged per seed
    (tests/conftest.py: configurations with the same d_k share random streams).
    """
    indicators = np.array([_covered(name) for name in CONFIGS]).T
    p = pooled_coverage_p_value(indicators)
    assert p > 1e-3, f"pooled coverage {indicators.mean():.4f} of {indicators.size} (p = {p:.2g})"


def test_pooled_coverage_p_value_detects_a_shortfall(pooled_coverage_p_value) -> None:
    """Guards against a pooled test that cannot fail (as one on pinned constants could not).

    Independent Bernoulli indicators, 400 seeds x 11 intervals: at 95 % coverage the p-value is
    uniform; at 93 % the mean total is 0.22 below 10.45 with standard error 0.042 (z = 5.2).
    """
    rng = np.random.default_rng(20240611)
    assert pooled_coverage_p_value(rng.random((400, 11)) < 0.95) > 1e-3
    assert pooled_coverage_p_value(rng.random((400, 11)) < 0.93) < 1e-3
    assert pooled_coverage_p_value(rng.random((400, 11)) < 0.97) < 1e-3
    # fully dependent intervals (one draw per seed, copied 11 times): 0.95 is still consistent,
    # where counting 4400 independent trials would overstate the evidence eleven-fold
    same = np.repeat(rng.random((400, 1)) < 0.95, 11, axis=1)
    assert pooled_coverage_p_value(same) > 1e-3
    assert pooled_coverage_p_value(np.ones((400, 11), dtype=bool)) == 0.0
