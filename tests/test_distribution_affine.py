"""Moments of a law rescaled by ``mean=`` and ``sd=`` against the closed forms of the family."""

from __future__ import annotations

import math

import pytest

from varcheck import parse_distribution


@pytest.mark.parametrize(
    ("spec", "a", "sd", "mean"),
    [
        ("scipy.gamma:a=2,sd=2", 2.0, 2.0, 2.0),  # sd= alone keeps the raw law's mean * factor
        ("scipy.gamma:a=4,mean=1,sd=0.5", 4.0, 0.5, 1.0),
        ("scipy.gamma:a=0.5,mean=-3,sd=3", 0.5, 3.0, -3.0),
    ],
)
def test_rescaled_gamma_has_the_scaled_third_and_fourth_moments(spec, a, sd, mean) -> None:
    """Guards against the affine map scaling mu3 or mu4 by the wrong power of sd (``/ sd**3``,
    ``sd * 3``, ``sd**4`` for ``sd**3``): for gamma(a), skewness 2/sqrt(a) and kurtosis
    3 + 6/a, so mu3 = 2/sqrt(a) sd^3 and mu4 = (3 + 6/a) sd^4 exactly."""
    d = parse_distribution(spec)
    assert d.mean == pytest.approx(mean, rel=1e-12, abs=1e-12)
    assert d.var == pytest.approx(sd**2, rel=1e-12)
    assert d.mu3 == pytest.approx(2 / math.sqrt(a) * sd**3, rel=1e-9)
    assert d.mu4 == pytest.approx((3 + 6 / a) * sd**4, rel=1e-9)


@pytest.mark.parametrize("sd", [0.5, 3.0])
def test_rescaled_laplace_keeps_its_kurtosis(sd: float) -> None:
    """Guards against a fourth moment not scaled by sd^4: Laplace has kurtosis 6, mu3 = 0."""
    d = parse_distribution(f"laplace:sd={sd}")
    assert d.mu3 == 0.0
    assert d.mu4 == pytest.approx(6 * sd**4, rel=1e-12)


@pytest.mark.parametrize("spec", ["normal:sd=-1", "laplace:sd=0", "uniform:mean=nan"])
def test_bad_mean_or_sd_names_the_spec(spec: str) -> None:
    """Guards against the mean=/sd= check of a named family losing the spec it refers to."""
    from varcheck import VarcheckError

    with pytest.raises(VarcheckError, match=f"distribution {spec!r}"):
        parse_distribution(spec)
