"""Theory against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from varcheck import dot_product_theory, parse_distribution
from varcheck.core.theory import product_raw_moments


@pytest.mark.parametrize("dist", ["normal", "uniform", "rademacher", "laplace", "t:df=7"])
@pytest.mark.parametrize("dk", [1, 2, 64, 512])
def test_unit_entries_give_var_dk(dist: str, dk: int) -> None:
    th = dot_product_theory(dk, dist)
    assert th.mean == 0
    assert th.var == pytest.approx(dk, rel=1e-12)
    assert th.scaled_var == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize(
    ("q", "k", "term_var"),
    [
        # (s_q^2 + mu_q^2)(s_k^2 + mu_k^2) - mu_q^2 mu_k^2
        ("normal:mean=0.5", "normal:mean=0.5", (1 + 0.25) ** 2 - 0.0625),  # 1.5
        ("normal:sd=2", "uniform:mean=1", (4 + 0) * (1 + 1) - 0),  # 8
        ("rademacher:mean=1,sd=3", "laplace:mean=-2", (9 + 1) * (1 + 4) - 4),  # 46
        ("uniform:sd=0.5", "t:df=5,sd=2", 0.25 * 4),
    ],
)
def test_independent_entries_with_means(q: str, k: str, term_var: float) -> None:
    th = dot_product_theory(10, q, k)
    mq, mk = parse_distribution(q).mean, parse_distribution(k).mean
    assert th.mean == pytest.approx(10 * mq * mk)
    assert th.var == pytest.approx(10 * term_var, rel=1e-12)


@pytest.mark.parametrize("rho", [-0.9, -0.3, 0.0, 0.5, 1.0])
def test_correlated_zero_mean_normal(rho: float) -> None:
    # E[q^2 k^2] = 1 + 2 rho^2 for standard bivariate normal, minus E[qk]^2 = rho^2
    th = dot_product_theory(8, "normal", "normal", rho=rho)
    assert th.mean == pytest.approx(8 * rho)
    assert th.var == pytest.approx(8 * (1 + rho**2), rel=1e-12)


def test_correlated_with_means_matches_formula() -> None:
    mq, sq, mk, sk, rho = 0.5, 2.0, -1.0, 0.5, 0.3
    th = dot_product_theory(3, f"normal:mean={mq},sd={sq}", f"normal:mean={mk},sd={sk}", rho=rho)
    term = (
        mq**2 * sk**2 + mk**2 * sq**2 + sq**2 * sk**2 * (1 + rho**2) + 2 * rho * mq * mk * sq * sk
    )
    assert th.var == pytest.approx(3 * term, rel=1e-12)


def test_correlated_expansion_agrees_with_independent_at_rho_zero() -> None:
    from varcheck.core.theory import _correlated_normal_raw_moments

    q, k = parse_distribution("normal:mean=0.3,sd=1.5"), parse_distribution("normal:mean=-2")
    assert _correlated_normal_raw_moments(q, k, 0.0) == pytest.approx(product_raw_moments(q, k))


@pytest.mark.parametrize("dk", [1, 2, 16, 512])
def test_fourth_moment_normal(dk: int) -> None:
    # one term z1 z2 has E[X^4] = 9; the sum of dk has kurtosis 3 + 6/dk
    th = dot_product_theory(dk)
    assert th.term_mu4 == pytest.approx(9.0)
    assert th.kurtosis == pytest.approx(3 + 6 / dk)


def test_fourth_moment_rademacher_and_uniform() -> None:
    # (+-1)(+-1) = +-1: kurtosis of one term is 1, of the sum 3 - 2/dk
    assert dot_product_theory(4, "rademacher").kurtosis == pytest.approx(3 - 2 / 4)
    # uniform: E[U^4] = 9/5, term E[X^4] = 81/25, sum kurtosis 3 + (81/25 - 3)/dk
    assert dot_product_theory(4, "uniform").kurtosis == pytest.approx(3 + (81 / 25 - 3) / 4)


def test_infinite_moments_are_reported_not_numbers() -> None:
    th = dot_product_theory(16, "t:df=2")
    assert th.status == "infinite-variance" and math.isinf(th.var) and not th.estimable
    th = dot_product_theory(16, "t:df=3")
    assert th.status == "infinite-fourth-moment" and th.var == pytest.approx(16)
    assert math.isinf(th.mu4) and not th.estimable
    th = dot_product_theory(16, "scipy.cauchy")
    assert th.status == "infinite-variance" and math.isnan(th.mean)
    th = dot_product_theory(16, "normal", "t:df=4")
    assert th.status == "infinite-fourth-moment"


def test_scipy_distribution_moments() -> None:
    d = parse_distribution("scipy.gamma:a=2")  # mean 2, var 2, skew 2/sqrt(2), ex. kurt 3
    assert (d.mean, d.var) == pytest.approx((2.0, 2.0))
    assert d.mu4 == pytest.approx((3 + 3) * 4)
    th = dot_product_theory(5, d, "normal")
    assert th.var == pytest.approx(5 * (2 + 4) * 1)


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("q", "k", "rho"),
    [
        ("normal:mean=0.5", "normal:mean=0.5", 0.0),
        ("uniform:mean=1", "laplace:sd=2", 0.0),
        ("normal:mean=1", "normal:sd=0.5", 0.6),
        ("scipy.gamma:a=3", "rademacher", 0.0),
    ],
)
def test_raw_moments_match_simulation(q: str, k: str, rho: float) -> None:
    """E[X^j] against 400k simulated products; tolerance 5 standard errors of each mean."""
    from varcheck.core.blocks import BlockPlan, draw_chunk
    from varcheck.core.estimation import ConfidenceInterval  # noqa: F401 (import check only)

    qd, kd = parse_distribution(q), parse_distribution(k)
    rng = np.random.default_rng(20261122)
    plan = BlockPlan(side=1, paired=rho != 0, blocks_per_chunk=400_000, row_correlation=0.0)
    x, _ = draw_chunk(qd, kd, 1, plan, rng, rho=rho)
    for j, exact in enumerate(product_raw_moments(qd, kd, rho), start=1):
        sample = x**j
        se = sample.std() / math.sqrt(sample.size)
        assert abs(sample.mean() - exact) < 5 * se, (j, sample.mean(), exact, se)
