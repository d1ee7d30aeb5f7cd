"""Deterministic checks of the per-term moments and argument checks of ``varcheck.core.theory``.

Reference values are independent of varcheck's polynomial expansion: raw moments of a
gamma(a) entry written out by hand (E[q^j] = a (a+1) ... (a+j-1)), raw moments of a normal
entry (mu, mu^2 + s^2, mu^3 + 3 mu s^2, mu^4 + 6 mu^2 s^2 + 3 s^4), and exact Gauss-Hermite
quadrature for correlated normal entries.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from varcheck.core.theory import dot_product_theory
from varcheck.errors import VarcheckError


def _normal_raw(mu: float, s: float) -> list[float]:
    return [mu, mu**2 + s**2, mu**3 + 3 * mu * s**2, mu**4 + 6 * mu**2 * s**2 + 3 * s**4]


def _central(raw: list[float]) -> tuple[float, float, float]:
    m1, m2, m3, m4 = raw
    var = m2 - m1**2
    mu4 = m4 - 4 * m1 * m3 + 6 * m1**2 * m2 - 3 * m1**4
    return m1, var, mu4


@pytest.mark.parametrize("a", [2.0, 0.5])
@pytest.mark.parametrize(("mu", "s"), [(0.0, 1.0), (1.0, 0.7)])
def test_skewed_entry_term_mu4_matches_hand_gamma_moments(a: float, mu: float, s: float) -> None:
    """Guards the skewness term m3 = mu3 / sd^3 of a standardised entry (wrong power or a
    product instead of a quotient changes the fourth moment of q_i k_i for a skewed q)."""
    gamma_raw = [a, a * (a + 1), a * (a + 1) * (a + 2), a * (a + 1) * (a + 2) * (a + 3)]
    raw = [g * n for g, n in zip(gamma_raw, _normal_raw(mu, s), strict=True)]
    mean, var, mu4 = _central(raw)
    th = dot_product_theory(3, f"scipy.gamma:a={a:g}", f"normal:mean={mu:g},sd={s:g}")
    assert th.term_mean == pytest.approx(mean, rel=1e-12, abs=1e-12)
    assert th.term_var == pytest.approx(var, rel=1e-12)
    assert th.term_mu4 == pytest.approx(mu4, rel=1e-10)
    assert th.mu4 == pytest.approx(3 * mu4 + 3.0 * 3 * 2 * var**2, rel=1e-10)


def test_infinite_entry_kurtosis_gives_infinite_term_mu4_not_nan() -> None:
    """Guards the test that any infinite standardised moment makes the expectation infinite:
    t(4) has infinite kurtosis, and with a non-zero k mean the expansion has terms
    E[Z1^4] E[Z2] = inf * 0, which must not turn the fourth moment into nan."""
    th = dot_product_theory(5, "t:df=4", "normal:mean=1")
    assert th.term_mean == 0.0
    assert th.term_var == pytest.approx(2.0, rel=1e-12)  # (1)(1 + 1) - 0
    assert th.term_mu4 == math.inf
    assert th.status == "infinite-fourth-moment"


@pytest.mark.parametrize(("qd", "kd"), [("t:df=2", "normal"), ("normal:mean=2", "t:df=2")])
def test_one_infinite_variance_entry_keeps_the_mean(qd: str, kd: str) -> None:
    """Guards the infinite-variance short cut: one entry with infinite variance is enough, and
    the mean E[q] E[k] (= 0 here) must still be reported rather than nan from inf * 0."""
    th = dot_product_theory(7, qd, kd)
    assert th.term_mean == 0.0
    assert th.mean == 0.0
    assert th.term_var == math.inf and th.term_mu4 == math.inf
    assert th.status == "infinite-variance"


def _quadrature_central(mq: float, sq: float, mk: float, sk: float, rho: float):
    # Probabilists' Gauss-Hermite with 12 nodes is exact for degree <= 23 per variable; the
    # centred fourth power of q k has degree 8, so this is exact up to rounding.
    nodes, weights = np.polynomial.hermite_e.hermegauss(12)
    weights = weights / weights.sum()
    z1, z2 = np.meshgrid(nodes, nodes, indexing="ij")
    w = np.outer(weights, weights)
    q = mq + sq * z1
    k = mk + sk * (rho * z1 + math.sqrt(1 - rho * rho) * z2)
    x = q * k
    mean = float((w * x).sum())
    var = float((w * (x - mean) ** 2).sum())
    mu4 = float((w * (x - mean) ** 4).sum())
    return mean, var, mu4


@pytest.mark.parametrize(
    ("mq", "sq", "mk", "sk", "rho"),
    [(0.7, 1.3, -0.3, 0.8, 0.5), (1.0, 1.0, 1.0, 1.0, -0.9), (0.0, 1.0, 0.0, 1.0, 1.0)],
)
def test_correlated_normal_term_moments_match_quadrature(mq, sq, mk, sk, rho) -> None:
    """Guards the normal moments E[Z^j], j = 5..8 (0, 15, 0, 105) used for correlated entries:
    a wrong entry changes the fourth central moment of q_i k_i."""
    mean, var, mu4 = _quadrature_central(mq, sq, mk, sk, rho)
    th = dot_product_theory(
        2, f"normal:mean={mq:g},sd={sq:g}", f"normal:mean={mk:g},sd={sk:g}", rho=rho
    )
    assert th.term_mean == pytest.approx(mean, rel=1e-12, abs=1e-12)
    assert th.term_var == pytest.approx(var, rel=1e-10)
    assert th.term_mu4 == pytest.approx(mu4, rel=1e-10)


@pytest.mark.parametrize("dk", [0, -3, 2.0])
def test_dk_must_be_a_positive_whole_number(dk) -> None:
    """Guards the dk check: both conditions (an int, and >= 1) are required."""
    with pytest.raises(VarcheckError, match="dk must be"):
        dot_product_theory(dk)


@pytest.mark.parametrize("rho", [1.5, -1.5, 2.0, -2.0, 1.0000001, -1.0000001, math.nan])
def test_rho_outside_unit_interval_is_rejected(rho: float) -> None:
    """Guards the rho range check [-1, 1] at both ends (not a wider range, not 'and')."""
    with pytest.raises(VarcheckError, match="rho must be"):
        dot_product_theory(4, rho=rho)


@pytest.mark.parametrize("rho", [-1.0, 1.0])
def test_rho_at_the_ends_is_accepted(rho: float) -> None:
    """Guards the closed ends of the rho range: rho = +-1 is allowed; for standard normal
    entries Var(q_i k_i) = 1 + rho^2 = 2."""
    th = dot_product_theory(4, rho=rho)
    assert th.term_mean == pytest.approx(rho)
    assert th.term_var == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize(("qd", "kd"), [("normal", "uniform"), ("laplace", "normal")])
def test_nonzero_rho_needs_both_entries_normal(qd: str, kd: str) -> None:
    """Guards the correlated-entries check: rho != 0 needs q AND k normal, one is not enough."""
    with pytest.raises(VarcheckError, match="needs normal q and k"):
        dot_product_theory(4, qd, kd, rho=0.5)
