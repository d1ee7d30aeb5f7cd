"""Distribution specs: parsing, canonical form, moments against simulation, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from varcheck import VarcheckError, parse_distribution


@pytest.mark.parametrize(
    ("spec", "canonical", "mean", "var"),
    [
        ("normal", "normal", 0.0, 1.0),
        ("normal:mean=0.5,sd=2", "normal:mean=0.5,sd=2", 0.5, 4.0),
        (" uniform : sd=3 ", "uniform:sd=3", 0.0, 9.0),
        ("rademacher:mean=1", "rademacher:mean=1", 1.0, 1.0),
        ("laplace", "laplace", 0.0, 1.0),
        ("t:df=5", "t:df=5", 0.0, 1.0),
        ("t:df=5,sd=2,mean=1", "t:df=5,mean=1,sd=2", 1.0, 4.0),
        ("scipy.gamma:a=2", "scipy.gamma:a=2", 2.0, 2.0),
        ("scipy.gamma:a=2,mean=0,sd=1", "scipy.gamma:a=2,mean=0,sd=1", 0.0, 1.0),
        ("scipy.norm:loc=1,scale=2", "scipy.norm:loc=1,scale=2", 1.0, 4.0),
    ],
)
def test_parse(spec: str, canonical: str, mean: float, var: float) -> None:
    d = parse_distribution(spec)
    assert d.spec == canonical
    assert d.mean == pytest.approx(mean)
    assert d.var == pytest.approx(var)
    assert parse_distribution(d.spec) == d  # canonical specs round-trip


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("normall", "did you mean 'normal'"),
        ("gauss", "unknown distribution 'gauss'"),
        ("normal:sd=0", "sd=0 must be > 0"),
        ("normal:sd=-1", "must be > 0"),
        ("normal:sd=nan", "finite"),
        ("normal:mean=inf", "finite"),
        ("normal:scale=2", "unknown parameter 'scale'"),
        ("normal:mean", "is not key=value"),
        ("normal:mean=abc", "is not a number"),
        ("normal:", "nothing after ':'"),
        ("normal:mean=1,mean=2", "given twice"),
        ("t", "t needs df="),
        ("t:df=0", "df=0 must be > 0"),
        ("t:df=-3", "must be > 0"),
        ("t:df=2,sd=1", "sd= is impossible"),
        ("scipy.gama:a=2", "did you mean 'scipy.gamma'"),
        ("scipy.poisson:mu=2", "continuous"),
        ("scipy.gamma", "needs its shape parameter"),
        ("scipy.gamma:a=-1", "invalid parameters"),
        ("scipy.cauchy:sd=1", "infinite variance"),
        ("", "non-empty"),
    ],
)
def test_bad_specs(spec: str, fragment: str) -> None:
    with pytest.raises(VarcheckError, match=None) as err:
        parse_distribution(spec)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_t_with_infinite_variance_uses_raw_t() -> None:
    d = parse_distribution("t:df=1.5")
    assert math.isinf(d.var) and d.mean == 0.0
    assert math.isnan(parse_distribution("t:df=1").mean)


@pytest.mark.statistical
@pytest.mark.parametrize(
    "spec",
    [
        "normal",
        "uniform:mean=1",
        "rademacher:sd=2",
        "laplace:mean=-1,sd=0.5",
        "t:df=9,sd=3",
        "scipy.gamma:a=4,mean=0,sd=1",
        "scipy.beta:a=2,b=3",
    ],
)
def test_moments_match_simulation(spec: str) -> None:
    """Sample mean, variance and fourth central moment within 5 standard errors."""
    d = parse_distribution(spec)
    x = d.sample(np.random.default_rng(7), (400_000,))
    n = x.size
    c = x - d.mean
    # standard errors from the exact moments: Var(x) = var, Var((x-m)^2) = mu4 - var^2
    assert abs(x.mean() - d.mean) <= 5 * math.sqrt(d.var / n)
    assert abs((c**2).mean() - d.var) <= 5 * math.sqrt((d.mu4 - d.var**2) / n)  # exact for +-sd
    # the fourth moment's own SE needs mu8; use the empirical one (t:df=9 has a finite mu8)
    c4 = c**4
    assert abs(c4.mean() - d.mu4) <= 5 * c4.std() / math.sqrt(n)


# --- float32 normal numbers by the Box-Muller transform ------------------------------------------


@pytest.mark.statistical
def test_box_muller_moments_and_pairs() -> None:
    """Moments of N(0, 1) and independence of the two numbers made from one pair of uniforms.

    Tolerances are 5 standard errors from the exact normal moments: Var z = 1, Var z² = 2,
    Var z⁴ = E z⁸ - 9 = 96; the cosine and sine halves of the array come from the same
    uniforms, so over their n/2 pairs (a, b) the products ab (and a²b²) must average 0 (and 1)
    with standard errors sqrt(1/(n/2)) (and sqrt(8/(n/2))). The bound on |z| only catches
    gross breakage (the largest of 4M normal numbers is about 5.4).
    """
    from varcheck.core.distributions import standard_normal_float32

    n = 1 << 22
    z = standard_normal_float32(np.random.default_rng(11), np.empty(n, np.float32))
    x = z.astype(np.float64)
    se = 5 / math.sqrt(n)
    assert abs(x.mean()) <= se
    assert abs((x**2).mean() - 1) <= se * math.sqrt(2)
    assert abs((x**4).mean() - 3) <= se * math.sqrt(96)
    assert abs((x**3).mean()) <= se * math.sqrt(15)
    a, b = x[: n // 2], x[n // 2 :]
    half = 5 / math.sqrt(n // 2)
    assert abs((a * b).mean()) <= half
    assert abs((a * a * b * b).mean() - 1) <= half * math.sqrt(8)
    assert np.abs(x).max() <= math.sqrt(2 * 53 * math.log(2)) + 1e-3


@pytest.mark.statistical
@pytest.mark.parametrize("seed", [1, 2])
def test_box_muller_distribution(seed: int) -> None:
    """Kolmogorov-Smirnov against N(0, 1), and the tail frequencies beyond 2, 3 and 4 sd.

    The KS test is taken at alpha = 1e-3 with a fixed seed; the tail counts are binomial, so
    each must fall within 5 of its standard deviations sqrt(n p (1 - p)) of n p.
    """
    from scipy import stats

    from varcheck.core.distributions import standard_normal_float32

    n = 1 << 21
    x = standard_normal_float32(np.random.default_rng(seed), np.empty(n, np.float32))
    assert stats.kstest(x.astype(np.float64), "norm").pvalue > 1e-3
    for c in (2.0, 3.0, 4.0):
        p = 2 * stats.norm.sf(c)
        count = int((np.abs(x) > c).sum())
        assert abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p)), c


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5, 9), (2, 1 << 17)])
def test_box_muller_shapes_and_seeds(shape: tuple[int, ...]) -> None:
    """Any shape (odd sizes, several pieces) is filled; the same seed gives the same numbers."""
    from varcheck.core.distributions import standard_normal_float32

    out = np.full(shape, np.nan, dtype=np.float32)
    got = standard_normal_float32(np.random.default_rng(3), out)
    assert got is out and np.isfinite(out).all()
    again = standard_normal_float32(np.random.default_rng(3), np.empty(shape, np.float32))
    np.testing.assert_array_equal(out, again)


def test_box_muller_non_contiguous_and_dtype() -> None:
    from varcheck.core.distributions import standard_normal_float32

    base = np.zeros((6, 8), dtype=np.float32)
    view = base[:, ::2]
    standard_normal_float32(np.random.default_rng(4), view)
    assert np.isfinite(view).all() and (base[:, 1::2] == 0).all()
    with pytest.raises(ValueError, match="float32"):
        standard_normal_float32(np.random.default_rng(4), np.empty(4))


def test_normal_float32_samples_use_box_muller() -> None:
    """Distribution.sample in float32, with or without ``out``, gives the same numbers."""
    from varcheck.core.distributions import standard_normal_float32

    d = parse_distribution("normal:sd=2,mean=1")
    fresh = d.sample(np.random.default_rng(5), (4, 6), dtype=np.float32)
    into = d.sample(
        np.random.default_rng(5), (4, 6), dtype=np.float32, out=np.empty((4, 6), np.float32)
    )
    z = standard_normal_float32(np.random.default_rng(5), np.empty((4, 6), np.float32))
    np.testing.assert_array_equal(fresh, into)
    np.testing.assert_allclose(fresh, 1 + 2 * z, rtol=1e-6)
