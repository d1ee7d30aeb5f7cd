"""Exact (deterministic) checks of ``product_raw_moments`` and its correlated-normal expansion.

Reference values are independent of varcheck's Isserlis polynomial expansion: closed forms for
the product of two correlated standard normals (from the moment generating function
M(t) = (1 - 2 rho t - (1 - rho^2) t^2)^(-1/2)), exact Gauss-Hermite quadrature over a
Cholesky factor of the covariance, and raw moments of independent entries written out by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from varcheck.core.distributions import parse_distribution
from varcheck.core.theory import product_raw_moments
from varcheck.errors import VarcheckError


def _standard_product_moments(rho: float) -> list[float]:
    # E[(z1 z2)^j] for standard normals with correlation rho, from the series of the MGF;
    # at rho = +-1 these become E[z^(2j)] = 1, 3, 15, 105 (with sign (+-1)^j).
    return [
        rho,
        1.0 + 2.0 * rho**2,
        9.0 * rho + 6.0 * rho**3,
        9.0 + 72.0 * rho**2 + 24.0 * rho**4,
    ]


def _quadrature_moments(mq: float, sq: float, mk: float, sk: float, rho: float) -> list[float]:
    # Probabilists' Gauss-Hermite with 12 nodes is exact for polynomials of degree <= 23 in
    # each variable; (q k)^4 has degree 8, so these are exact up to rounding.
    nodes, weights = np.polynomial.hermite_e.hermegauss(12)
    weights = weights / weights.sum()
    chol = np.linalg.cholesky(np.array([[sq * sq, rho * sq * sk], [rho * sq * sk, sk * sk]]))
    z1, z2 = np.meshgrid(nodes, nodes, indexing="ij")
    w = np.outer(weights, weights)
    q = mq + chol[0, 0] * z1
    k = mk + chol[1, 0] * z1 + chol[1, 1] * z2
    x = q * k
    return [float(np.sum(w * x**j)) for j in (1, 2, 3, 4)]


@pytest.mark.parametrize("rho", [-1.0, -0.6, 0.3, 0.5, 1.0])
def test_correlated_standard_normals_closed_form(rho: float) -> None:
    """Guards against a wrong Isserlis expansion: E[Z^0] != 1, a wrong (m-1)!! (step 3 gives
    5*2 for E[Z^6]), a wrong k = rho z1 + sqrt(1 - rho^2) z2 split (divided, max(1, .),
    1 + rho^2), a coefficient filed under the wrong monomial, exponents subtracted or
    coefficients subtracted in the polynomial product, or rho lost on the way in."""
    n = parse_distribution("normal")
    got = product_raw_moments(n, n, rho)
    assert got == pytest.approx(_standard_product_moments(rho), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("rho", [-0.7, 0.25, 0.9])
def test_correlated_normals_scale_with_sds(rho: float) -> None:
    """Guards against the sds of q or k being dropped or misplaced: for zero means,
    E[(q k)^j] = (s_q s_k)^j E[(z1 z2)^j]."""
    q, k = parse_distribution("normal:sd=2"), parse_distribution("normal:sd=0.5")
    scale = 2.0 * 0.5
    expected = [scale**j * m for j, m in enumerate(_standard_product_moments(rho), start=1)]
    assert product_raw_moments(q, k, rho) == pytest.approx(expected, rel=1e-12)
    q3 = parse_distribution("normal:sd=3")
    expected = [3.0**j * m for j, m in enumerate(_standard_product_moments(rho), start=1)]
    assert product_raw_moments(q3, parse_distribution("normal"), rho) == pytest.approx(
        expected, rel=1e-12
    )


@pytest.mark.parametrize(
    ("mq", "sq", "mk", "sk", "rho"),
    [(0.5, 2.0, -1.0, 0.5, 0.3), (1.0, 1.0, 2.0, 1.5, -0.8), (-0.3, 0.7, 0.4, 1.2, 0.95)],
)
def test_correlated_normals_with_means_match_quadrature(
    mq: float, sq: float, mk: float, sk: float, rho: float
) -> None:
    """Guards against errors in the mean terms of the expansion (wrong key, wrong sign, wrong
    argument order) which zero-mean cases cannot see; reference: exact Gauss-Hermite."""
    q = parse_distribution(f"normal:mean={mq},sd={sq}")
    k = parse_distribution(f"normal:mean={mk},sd={sk}")
    expected = _quadrature_moments(mq, sq, mk, sk, rho)
    assert product_raw_moments(q, k, rho) == pytest.approx(expected, rel=1e-10, abs=1e-12)


def test_correlated_normals_are_not_treated_as_independent() -> None:
    """Guards against the rho branch being skipped (rho compared with 1 or the test negated):
    with rho = 0.5, E[qk] = 0.5, whereas independent entries would give 0."""
    n = parse_distribution("normal")
    assert product_raw_moments(n, n, 0.5)[0] == pytest.approx(0.5, rel=1e-12)


def test_independent_non_normal_entries_use_entry_moments() -> None:
    """Guards against rho = 0 being sent down the correlated-normal path (which rejects
    non-normal entries): E[X^j] = E[q^j] E[k^j], written out by hand.

    uniform:mean=1 has raw moments 1, 2, 4, 8.8 (9/5 + 6 + 1); laplace:mean=0.5 has
    0.5, 1.25, 1.625 (3 * 0.5 + 0.125), 7.5625 (6 + 6 * 0.25 + 0.0625)."""
    q, k = parse_distribution("uniform:mean=1"), parse_distribution("laplace:mean=0.5")
    expected = [0.5, 2.5, 6.5, 8.8 * 7.5625]
    assert product_raw_moments(q, k) == pytest.approx(expected, rel=1e-12)
    assert product_raw_moments(q, k, 0.0) == pytest.approx(expected, rel=1e-12)


def test_independent_normals_at_rho_zero() -> None:
    """Guards against a wrong branch at rho = 0 for normal entries: with means 1 and -1 the
    raw moments are (1, 2, 4, 10) * (-1, 2, -4, 10)."""
    q, k = parse_distribution("normal:mean=1"), parse_distribution("normal:mean=-1")
    assert product_raw_moments(q, k, 0.0) == pytest.approx([-1.0, 4.0, -16.0, 100.0])


@pytest.mark.parametrize(
    ("q", "k"), [("normal", "uniform"), ("uniform", "normal"), ("laplace", "t:df=5")]
)
def test_rho_with_non_normal_entries_is_rejected(q: str, k: str) -> None:
    """Guards against the normality check accepting one normal entry (and/or confusion) or
    being inverted: rho != 0 needs both entries normal."""
    with pytest.raises(VarcheckError, match=r"rho=0\.4 needs normal q and k entries"):
        product_raw_moments(parse_distribution(q), parse_distribution(k), 0.4)


@pytest.mark.parametrize(("q", "k"), [("t:df=1", "normal"), ("normal:mean=2", "scipy.cauchy")])
def test_undefined_mean_is_nan_and_higher_moments_inf(q: str, k: str) -> None:
    """Guards against an undefined mean (Cauchy-like entry on either side) being reported as a
    number, as inf or as None, and against E[X^j], j >= 2, being reported as nan instead of
    inf (the moment does not exist)."""
    out = product_raw_moments(parse_distribution(q), parse_distribution(k))
    assert len(out) == 4
    assert isinstance(out[0], float) and math.isnan(out[0])
    assert out[1:] == [math.inf, math.inf, math.inf]


def test_infinite_entry_moment_gives_inf_not_product() -> None:
    """Guards against an infinite moment of one entry being multiplied by the other's finite
    moment (inf * -4 = -inf, inf * 0 = nan) or returned as None: t:df=3 has E[T^3] = inf,
    E[T^4] undefined, so E[X^3] and E[X^4] are inf, while E[X], E[X^2] are finite."""
    t3 = parse_distribution("t:df=3")
    out = product_raw_moments(t3, parse_distribution("normal:mean=-1"))
    assert out[:2] == pytest.approx([0.0, 2.0])
    assert out[2:] == [math.inf, math.inf]
    out = product_raw_moments(parse_distribution("normal"), t3)
    assert out[:2] == pytest.approx([0.0, 1.0])
    assert out[2:] == [math.inf, math.inf]


@pytest.mark.parametrize("spec", ["t:df=3", "t:df=2"])
def test_entry_raw_fourth_moment_is_inf_when_it_does_not_exist(spec: str) -> None:
    """Guards against E[T^4] = +inf (t with df <= 4) being reported as nan by the raw moment
    that product_raw_moments builds on; its docstring promises ``inf``. product_raw_moments
    itself masks this (nan for j >= 2 becomes inf), so theory's results are unaffected."""
    assert parse_distribution(spec).raw_moment(4) == math.inf
