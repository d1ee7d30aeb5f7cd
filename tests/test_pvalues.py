"""p-values against independent references.

- Claim p-values at fixed budgets (few blocks, so Student's t differs from the normal and the
  degrees of freedom matter): the studentised statistic recomputed here from the estimate's
  fields with the formula of ``varcheck/core/estimation.py`` (Hall's transform, or the log scale),
  and its two-sided p-value from ``scipy.stats.t`` on ``blocks - 1`` degrees of freedom.
- ``explain``'s Monte-Carlo p-value of ``np.var(A @ B)``: recomputed from the replicates as
  ``2 min((k_le + 1) / (R + 1), (k_ge + 1) / (R + 1))`` (docs/anomaly.md, ``Reading``), and
  compared with the exact law of a shape where it is known; its quantile intervals' exact
  binomial coverage.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from varcheck import dot_product_theory, estimate_variance, parse_distribution, verify
from varcheck.core.estimation import T_LARGE_DF
from varcheck.teaching.explain import explain


def _statistic(var: float, se: float, claim: float, skew: float, blocks: int, method: str):
    """Hall's g((V - c) / SE), g(t) = t + A t^2 + A^2 t^3 / 3 + b, A = skew / (3 sqrt B),
    b = skew / (6 sqrt B); on the log scale (log V - log c) V / SE."""
    if method == "log":
        return (math.log(var) - math.log(claim)) * var / se
    t = (var - claim) / se
    big_a, small_b = skew / (3.0 * math.sqrt(blocks)), skew / (6.0 * math.sqrt(blocks))
    return t + big_a * t * t + big_a * big_a * t**3 / 3.0 + small_b


def _reference_p(est, claim: float) -> float:
    g = _statistic(est.var, est.se, claim, est.skewness, est.blocks, est.interval_method)
    return float(2.0 * stats.t.sf(abs(g), est.blocks - 1))


# distances of the claims from the estimate, in standard errors: both sides, up to p ~ 0.005
CLAIM_OFFSETS = (-3.0, -1.2, 0.6, 2.5)


def _p_tolerance(df: int) -> float:
    # from T_LARGE_DF on varcheck uses Hill's approximation, documented (and tested in
    # tests/test_estimation.py) to 1e-7 relative; below it scipy.special, i.e. the same function
    # scipy.stats.t uses. df - 1 instead of df moves p by >= 1e-5 relative at df <= 249 for
    # |t| >= 1 (by 4e-4 at t = 3), far outside either tolerance.
    return 1e-6 if df >= T_LARGE_DF else 1e-10


@pytest.mark.parametrize(
    ("kwargs", "scaled"),
    [
        ({"dk": 16, "dist": "normal:mean=0.5"}, False),
        ({"dk": 16, "dist": "normal:mean=0.5"}, True),
        ({"dk": 16}, False),  # zero means: with a fixed budget, still row by row
        ({"dk": 4, "q_dist": "scipy.gamma:a=2", "k_dist": "uniform:mean=1"}, False),
        ({"dk": 8, "dist": "t:df=5"}, True),  # E[(q·k)^6] infinite: the log-scale statistic
    ],
)
def test_fixed_budget_p_value_is_two_sided_student_t(kwargs: dict, scaled: bool) -> None:
    """Guards against a one-sided p-value, df off by one (B - 2 or B instead of B - 1 degrees
    of freedom), a p-value from the normal instead of Student's t, a dropped skewness term in
    the statistic, and a scaled claim not converted to the raw scale: verify's p-value at
    samples=1000 (the smallest budget it accepts; today 250 blocks of 4 products, 1000 of 1 for
    non-zero means), or the smallest budget the budget rule accepts for heavier tails, must
    equal 2 P(T_{B-1} > |g|) with g recomputed from the estimate's fields.
    """
    dk = kwargs["dk"]
    samples = verify(**kwargs, samples=1000, seed=31).min_samples or 1000
    base = verify(**kwargs, samples=samples, seed=31)
    est = base.raw
    assert est.stop_reason == "samples" and est.df >= T_LARGE_DF
    factor = 1.0 / dk if scaled else 1.0
    for offset in CLAIM_OFFSETS:
        raw_claim = est.var + offset * est.se
        r = verify(**kwargs, samples=samples, seed=31, claim=raw_claim * factor, scaled=scaled)
        assert r.raw.var == est.var  # same seed, same draws: only the claim changed
        ref = _reference_p(est, raw_claim)
        assert r.p_value == pytest.approx(ref, rel=_p_tolerance(est.df)), offset


@pytest.mark.parametrize(
    ("q_spec", "k_spec", "dk", "samples"),
    [
        ("normal:mean=0.5", "normal:mean=0.5", 16, 12),
        ("scipy.gamma:a=2", "uniform:mean=1", 4, 30),
        ("normal", "normal", 64, 60),
        ("t:df=5", "t:df=5", 8, 40),
    ],
)
def test_small_df_p_value_is_two_sided_student_t(
    q_spec: str, k_spec: str, dk: int, samples: int
) -> None:
    """Guards against df off by one, a one-sided p-value and a normal in place of Student's t
    where they matter most: below MIN_BLOCKS (only through ``estimate_variance``; one product
    per block, so df = samples - 1 = 11..59, where df - 1 moves p by 0.3-10% at |t| = 2.5-3).

    Tolerance: rtol 1e-10; below T_LARGE_DF varcheck calls scipy.special.stdtr, the function
    behind scipy.stats.t, so only rounding separates them."""
    q, k = parse_distribution(q_spec), parse_distribution(k_spec)
    th = dot_product_theory(dk, q, k)
    est = estimate_variance(q, k, th, seed=47, stream=(dk,), samples=samples)
    assert est.blocks == samples and est.df == samples - 1 < T_LARGE_DF
    for offset in CLAIM_OFFSETS:
        claim = est.var + offset * est.se
        if claim <= 0:
            continue
        assert est.p_value(claim) == pytest.approx(_reference_p(est, claim), rel=1e-10), offset


# --- explain: the Monte-Carlo p-value ------------------------------------------------------------


def _mc_reference(samples: np.ndarray, observed: float) -> tuple[float, float]:
    """(two-sided p, percentile) from the replicates by counting, as docs/anomaly.md defines."""
    r = samples.size
    k_le = int(np.count_nonzero(samples <= observed))
    k_ge = int(np.count_nonzero(samples >= observed))
    ties = k_le + k_ge - r
    p = min(1.0, 2.0 * min((k_le + 1) / (r + 1), (k_ge + 1) / (r + 1)))
    pct = 100.0 * (r - k_ge + 0.5 * ties) / r
    return p, pct


@pytest.mark.parametrize(
    ("shape", "observed", "ddof", "replicates"),
    [
        ("2x2x2", 1.6, 0, None),  # the seed case
        ("2x2x2", 1e-3, 1, None),  # lower tail
        ("2x2x2", 1e3, 0, None),  # beyond every replicate: p = 2 / (R + 1), never 0
        ("3x5x2", 2.0, 0, 2000),
    ],
)
def test_explain_p_value_is_the_two_sided_plus_one_count(
    shape: str, observed: float, ddof: int, replicates: int | None
) -> None:
    """Guards against a wrong Monte-Carlo p-value formula: k / R (which gives p = 0), one-sided,
    counting only one tail, or the scaled reading judged on unscaled replicates. Exact
    equality: the count is recomputed from the very replicates explain simulated."""
    res = explain(shape, observed, ddof=ddof, replicates=replicates, seed=2718, growing=None)
    assert res.method == "monte-carlo"
    sims = res.samples
    assert sims.size == res.replicates
    for reading, factor in ((res.raw, 1.0), (res.scaled, 1.0 / res.shape.d)):
        p, pct = _mc_reference(sims * factor, observed)
        assert reading.p_value == pytest.approx(p, rel=1e-12), reading.name
        assert reading.percentile == pytest.approx(pct, rel=1e-12, abs=1e-12), reading.name
    if observed == 1e3:
        assert res.raw.p_value == pytest.approx(2.0 / (res.replicates + 1), rel=1e-12)


def _exact_cdf_1xdx2(w: float, d: int, ddof: int) -> float:
    """P(np.var(A @ B, ddof) <= w) for A 1 x d, B d x 2, standard normal entries.

    The product is (C1, C2) with C_j = a · b_j; given a, C1 - C2 ~ N(0, 2 |a|^2), so
    np.var = (C1 - C2)^2 / (2 (2 - ddof)) = c X Y with X = |a|^2 ~ chi2_d, Y ~ chi2_1
    independent and c = 1 / (2 - ddof); P(c X Y <= w) = E_X[F_chi2_1(w / (c X))].
    """
    c = 1.0 / (2 - ddof)
    fx = stats.chi2(d).pdf
    f1 = stats.chi2(1).cdf
    val, err = integrate.quad(lambda x: fx(x) * f1(w / (c * x)), 0.0, np.inf, limit=200)
    assert err < 1e-6  # far below the Monte-Carlo tolerance (> 1e-3)
    return val


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("d", "ddof", "observed"),
    [(4, 0, 1.5), (4, 1, 30.0), (2, 0, 0.3), (3, 1, 0.02)],
)
def test_explain_p_value_matches_the_exact_law(d: int, ddof: int, observed: float) -> None:
    """Guards against a simulation or p-value that is wrong as a probability (one-sided,
    reading the wrong tail, replicates of the wrong experiment), which recounting the
    replicates cannot see: for A 1 x d and B d x 2 the law of np.var is c chi2_d chi2_1
    (see ``_exact_cdf_1xdx2``), so the exact two-sided p is 2 min(F, 1 - F).

    Tolerance: the tail count below (or above) the observed value is Binomial(R, F_t), F_t =
    min(F, 1 - F), so the Monte-Carlo p has sd 2 sqrt(F_t (1 - F_t) / R); allow 5 of them plus
    2 / (R + 1) for the +1 in (k + 1) / (R + 1).
    """
    res = explain(f"1x{d}x2", observed, ddof=ddof, replicates=100_000, seed=1618, growing=None)
    r = res.replicates
    assert res.method == "monte-carlo" and r == 100_000
    for reading, factor in ((res.raw, 1.0), (res.scaled, 1.0 / d)):
        f = _exact_cdf_1xdx2(observed / factor, d, ddof)
        tail = min(f, 1.0 - f)
        exact_p = min(1.0, 2.0 * tail)
        tol = 5.0 * 2.0 * math.sqrt(tail * (1.0 - tail) / r) + 2.0 / (r + 1)
        assert abs(reading.p_value - exact_p) < tol, (reading.name, reading.p_value, exact_p)
        assert abs(reading.percentile / 100.0 - f) < tol / 2, (reading.name, reading.percentile)


@pytest.mark.parametrize("replicates", [2000, 100_000])
def test_explain_quantile_intervals_have_binomial_coverage(replicates: int) -> None:
    """Guards against quantile intervals of the wrong width (a wrong z, sqrt(R p) for
    sqrt(R p (1 - p)), the interval's order statistics counted from the wrong end).

    Reference: with K ~ Binomial(R, p) replicates below the true p-quantile, the order
    statistics X_(lo) < X_(hi) (0-based) bracket it exactly when lo + 1 <= K <= hi, so the
    interval's coverage is F_K(hi) - F_K(lo), computed exactly whatever the law of np.var.
    It must be the nominal 95% to within one order statistic at each end (the
    indices are whole numbers): |coverage - 0.95| <= pmf_K(lo) + pmf_K(hi).
    """
    res = explain("2x2x2", 1.6, replicates=replicates, seed=1414, growing=None)
    for reading, factor in ((res.raw, 1.0), (res.scaled, 1.0 / res.shape.d)):
        s = res.samples * factor
        assert np.unique(s).size == s.size  # continuous: positions are unambiguous
        for q in reading.quantiles:
            lo = int(np.searchsorted(s, q.low))
            hi = int(np.searchsorted(s, q.high))
            assert (s[lo], s[hi]) == (q.low, q.high)
            law = stats.binom(replicates, q.level)
            coverage = law.cdf(hi) - law.cdf(lo)
            slack = law.pmf(lo) + law.pmf(hi)
            assert abs(coverage - 0.95) <= slack, (reading.name, q.level, coverage, slack)
