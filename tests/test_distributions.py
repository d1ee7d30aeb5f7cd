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
