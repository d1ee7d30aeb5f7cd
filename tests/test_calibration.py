"""Calibration and power of the variance intervals and of sweep verdicts.

Coverage: over R independent seeds the number of 95% intervals that contain the true variance is
Binomial(R, 0.95) when the intervals are calibrated. We require the two-sided binomial test to
give p > 0.001 (so a calibrated estimator fails this test once in a thousand runs per
configuration), and pin the exact count for the fixed seeds so that any change in behaviour is
noticed. One configuration alone has little power (92% coverage passes a quarter of the time), so
the pooled count over all configurations is tested too: 4400 intervals detect a one-point
shortfall most of the time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from varcheck import dot_product_theory, estimate_variance, parse_distribution, sweep
from varcheck.sampling import BlockPlan

pytestmark = pytest.mark.statistical

R = 400


def _plan(side: int, dk: int) -> BlockPlan:
    blocks = max(1, (1 << 20) // (side * side + 2 * side * dk))
    return BlockPlan(side=side, paired=False, blocks_per_chunk=blocks, row_correlation=0.0)


# (q, k, dk, rho, forced block side, precision, samples, pinned coverage count out of R)
CONFIGS = {
    "normal-16": ("normal", "normal", 16, 0.0, None, 0.05, None, 383),
    "uniform-8": ("uniform", "uniform", 8, 0.0, None, 0.05, None, 385),
    "rademacher-4": ("rademacher", "rademacher", 4, 0.0, None, 0.05, None, 375),
    "t6-16": ("t:df=6", "t:df=6", 16, 0.0, None, 0.02, None, 382),
    "t6-4": ("t:df=6", "t:df=6", 4, 0.0, None, 0.02, None, 371),
    "mean0.5-8": ("normal:mean=0.5", "normal:mean=0.5", 8, 0.0, None, 0.05, None, 373),
    "gamma-vs-uniform-8": ("scipy.gamma:a=2", "uniform:mean=1", 8, 0.0, None, 0.05, None, 377),
    "rho0.5-8": ("normal", "normal", 8, 0.5, None, 0.05, None, 371),
    # large blocks: 128 x 128 products per block share rows/columns (correlation 1/7 at d=4)
    "big-blocks-normal-4": ("normal", "normal", 4, 0.0, 128, 0.05, None, 386),
    "big-blocks-mean0.5-32": ("normal:mean=0.5", "normal:mean=0.5", 32, 0.0, 64, 0.05, None, 384),
    "fixed-samples-64": ("normal", "normal", 64, 0.0, None, None, 20_000, 370),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_interval_coverage(name: str) -> None:
    qs, ks, dk, rho, side, precision, samples, pinned = CONFIGS[name]
    q, k = parse_distribution(qs), parse_distribution(ks)
    th = dot_product_theory(dk, q, k, rho)
    plan = None if side is None else _plan(side, dk)
    covered = 0
    for seed in range(R):
        est = estimate_variance(
            q, k, th, seed=seed, stream=(dk,), precision=precision, samples=samples, plan=plan
        )
        lo, hi = est.confidence_interval
        covered += lo <= th.var <= hi
    p = binomtest(covered, R, 0.95).pvalue
    assert p > 1e-3, f"{name}: coverage {covered}/{R} = {covered / R:.3f} (binomial p = {p:.2g})"
    if pinned is not None:
        assert covered == pinned


def test_naive_interval_over_one_big_product_is_too_narrow() -> None:
    """Treating the 128 x 128 entries of Q K^T as independent undercovers badly.

    Two products sharing a row have correlated squares (r = 1/(d+3) for normal entries), so the
    variance of the sample variance is (1 + 2 (n - 1) r) = 37 times the independent value at
    d = 4, n = 128; the naive interval is about 6 times too narrow.
    """
    rng = np.random.default_rng(42)
    dk, n, reps = 4, 128, 300
    covered = 0
    for _ in range(reps):
        s = rng.standard_normal((n, dk)) @ rng.standard_normal((dk, n))
        v = s.var()
        m4 = ((s - s.mean()) ** 4).mean()
        half = 1.96 * math.sqrt((m4 - v * v) / s.size)
        covered += v - half <= dk <= v + half
    assert covered / reps < 0.5


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


def test_pooled_coverage_of_the_pinned_counts() -> None:
    """All configurations together: sum of Binomial(400, 0.95) counts is Binomial(4400, 0.95)."""
    pinned = [config[-1] for config in CONFIGS.values()]
    total = R * len(pinned)
    p = binomtest(sum(pinned), total, 0.95).pvalue
    assert p > 1e-3, f"pooled coverage {sum(pinned)}/{total} (binomial p = {p:.2g})"
