"""Exact theory for the dot product s = q·k = sum_i q_i k_i with i.i.d. pairs (q_i, k_i).

For one term X = q_i k_i with q_i, k_i independent,

    E[X] = mu_q mu_k,
    Var X = (s_q^2 + mu_q^2)(s_k^2 + mu_k^2) - mu_q^2 mu_k^2,

and more generally E[X^j] = E[q^j] E[k^j]. For jointly normal (q_i, k_i) with correlation rho,

    Var X = mu_q^2 s_k^2 + mu_k^2 s_q^2 + s_q^2 s_k^2 (1 + rho^2) + 2 rho mu_q mu_k s_q s_k,

and the higher moments follow from Isserlis' theorem (computed below by expanding X^j as a
polynomial in two independent standard normals). The d_k terms are independent, so for the sum

    E[s] = d E[X],  Var s = d Var X,  mu4(s) = d mu4(X) + 3 d (d - 1) (Var X)^2.

The scaled product s / sqrt(d) has variance Var X. A moment that does not exist is ``inf``
(``nan`` for an undefined mean), never a number that looks converged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import VarcheckError
from .distributions import Distribution, parse_distribution

__all__ = ["DotProductTheory", "dot_product_theory", "product_raw_moments", "MAX_KURTOSIS"]

#: Largest kurtosis of q·k for which varcheck gives an interval (normal entries: 3 + 6/d_k).
MAX_KURTOSIS = 1e6


@dataclass(frozen=True)
class DotProductTheory:
    """Exact moments of q·k for d_k i.i.d. pairs of entries.

    Attributes
    ----------
    dk : int
        Length of q and k.
    rho : float
        Correlation of q_i with k_i.
    term_mean, term_var, term_mu4 : float
        Mean, variance and fourth central moment of one product q_i k_i.
    mean, var, mu4 : float
        The same for the sum s = q·k.
    """

    dk: int
    rho: float
    term_mean: float
    term_var: float
    term_mu4: float
    mean: float
    var: float
    mu4: float
    entry_max_moment: float = math.inf

    @property
    def var_finite(self) -> bool:
        """True when Var(q·k) exists (is finite)."""
        return math.isfinite(self.var)

    @property
    def estimable(self) -> bool:
        """True when a variance interval can be trusted.

        E[(q·k)^4] must be finite, and the kurtosis of q·k at most :data:`MAX_KURTOSIS`:
        beyond that the variance estimate converges so slowly (a 1% interval would need
        about 4 · kurtosis / 0.01² products) that any interval a run can afford is unreliable.
        """
        return self.var_finite and math.isfinite(self.mu4) and self.kurtosis <= MAX_KURTOSIS

    @property
    def slow_convergence(self) -> bool:
        """True when E[(q·k)^6] is infinite although the interval is valid.

        The variance estimator then has no finite skewness, so its interval approaches the
        nominal coverage slowly; at coarse precision it may undercover by a few points.
        """
        return self.estimable and self.entry_max_moment < 6

    @property
    def status(self) -> str:
        """``finite``, ``extreme-kurtosis``, ``infinite-fourth-moment`` or
        ``infinite-variance``."""
        if not self.var_finite:
            return "infinite-variance"
        if not math.isfinite(self.mu4):
            return "infinite-fourth-moment"
        if self.kurtosis > MAX_KURTOSIS:
            return "extreme-kurtosis"
        return "finite"

    @property
    def scaled_mean(self) -> float:
        """E[q·k / sqrt(d_k)]."""
        return self.mean / math.sqrt(self.dk)

    @property
    def scaled_var(self) -> float:
        """Var(q·k / sqrt(d_k)) = Var(q·k) / d_k."""
        return self.var / self.dk

    @property
    def kurtosis(self) -> float:
        """Kurtosis of q·k (3 for a normal; 3 + 6/d_k for normal entries)."""
        if not (self.var_finite and math.isfinite(self.mu4)) or self.var == 0:
            return math.inf
        return self.mu4 / self.var / self.var

    @property
    def estimator_relative_variance(self) -> float:
        """Var(s^2-type variance estimator) * n / Var(s)^2 for n independent samples.

        The sample variance of n independent copies of s has variance about
        (mu4 - Var^2) / n, so this is ``kurtosis - 1`` (``inf`` when mu4 is infinite).
        """
        return self.kurtosis - 1.0


def _normal_moment(order: int) -> float:
    # E[Z^m] for a standard normal: 0 for odd m, (m - 1)!! for even m
    if order % 2:
        return 0.0
    return float(math.prod(range(order - 1, 0, -2))) if order else 1.0


def _correlated_normal_raw_moments(q: Distribution, k: Distribution, rho: float) -> list[float]:
    """E[X^j], j = 1..4, for X = q k with (q, k) bivariate normal, by polynomial expansion."""
    # q = a0 + a1 z1, k = b0 + b1 z1 + b2 z2 with z1, z2 independent standard normals
    a0, a1 = q.mean, q.sd
    b0, b1, b2 = k.mean, k.sd * rho, k.sd * math.sqrt(max(0.0, 1.0 - rho * rho))
    poly_q = {(0, 0): a0, (1, 0): a1}
    poly_k = {(0, 0): b0, (1, 0): b1, (0, 1): b2}
    x = _poly_mul(poly_q, poly_k)
    power = {(0, 0): 1.0}
    moments = []
    for _ in range(4):
        power = _poly_mul(power, x)
        moments.append(
            sum(c * _normal_moment(i) * _normal_moment(j) for (i, j), c in power.items())
        )
    return moments


def _standard_moments(dist: Distribution) -> list[float]:
    """E[Z^j], j = 0..4, of the standardised entry Z = (X - mean) / sd."""
    sd = dist.sd
    m3 = dist.mu3 / sd**3 if math.isfinite(dist.mu3) else math.inf
    return [1.0, 0.0, 1.0, m3, dist.kurtosis]


def _expect(poly: dict[tuple[int, int], float], m1: list[float], m2: list[float]) -> float:
    total = 0.0
    for (i, j), c in poly.items():
        if c == 0.0:
            continue
        a, b = m1[i], m2[j]
        if not (math.isfinite(a) and math.isfinite(b)):
            return math.inf  # only even central moments reach here with infinite parts
        total += c * a * b
    return total


def _poly_mul(p: dict[tuple[int, int], float], r: dict[tuple[int, int], float]) -> dict:
    """The product of two polynomials in two variables, as {(power1, power2): coefficient}."""
    out: dict[tuple[int, int], float] = {}
    for (i1, j1), c1 in p.items():
        for (i2, j2), c2 in r.items():
            key = (i1 + i2, j1 + j2)
            out[key] = out.get(key, 0.0) + c1 * c2
    return out


def _term_central_moments(q: Distribution, k: Distribution, rho: float) -> tuple[float, ...]:
    """Mean, variance and fourth central moment of X = q_i k_i.

    X is expanded as a polynomial in two independent standardised variables (the entries'
    own standardised laws, or two standard normals for correlated normal entries) and its
    centred powers are averaged term by term, so no large raw moments cancel: the values stay
    accurate when the means are large compared with the standard deviations.
    """
    if math.isnan(q.mean) or math.isnan(k.mean):
        return math.nan, math.inf, math.inf
    if not (math.isfinite(q.var) and math.isfinite(k.var)):
        return q.mean * k.mean, math.inf, math.inf
    if rho != 0.0:
        normal = [1.0, 0.0, 1.0, 0.0, 3.0, 0.0, 15.0, 0.0, 105.0]  # E[Z^j], j = 0..8
        z1, z2 = normal, normal
        b1, b2 = k.sd * rho, k.sd * math.sqrt(max(0.0, 1.0 - rho * rho))
        poly_k = {(0, 0): k.mean, (1, 0): b1, (0, 1): b2}
    else:
        z1, z2 = _standard_moments(q), _standard_moments(k)
        poly_k = {(0, 0): k.mean, (0, 1): k.sd}
    poly_q = {(0, 0): q.mean, (1, 0): q.sd}
    x = _poly_mul(poly_q, poly_k)
    mean = _expect(x, z1, z2)
    centred = dict(x)
    centred[(0, 0)] = centred.get((0, 0), 0.0) - mean
    square = _poly_mul(centred, centred)
    var = max(_expect(square, z1, z2), 0.0)
    mu4 = _expect(_poly_mul(square, square), z1, z2)
    return mean, var, mu4


def product_raw_moments(q: Distribution, k: Distribution, rho: float = 0.0) -> list[float]:
    """Raw moments E[X^j], j = 1..4, of one product X = q_i k_i.

    ``inf`` marks a moment that does not exist; ``nan`` an undefined mean.
    """
    if rho != 0.0:
        if not (q.is_normal and k.is_normal):
            raise VarcheckError(
                f"rho={rho!r} needs normal q and k entries (got q ~ {q.spec}, k ~ {k.spec})"
            )
        return _correlated_normal_raw_moments(q, k, rho)
    out = []
    for j in (1, 2, 3, 4):
        mq, mk = q.raw_moment(j), k.raw_moment(j)
        if math.isnan(mq) or math.isnan(mk):
            out.append(math.nan if j == 1 else math.inf)
        elif not (math.isfinite(mq) and math.isfinite(mk)):
            out.append(math.inf)
        else:
            out.append(mq * mk)
    return out


def dot_product_theory(
    dk: int,
    q_dist: Distribution | str = "normal",
    k_dist: Distribution | str | None = None,
    rho: float = 0.0,
) -> DotProductTheory:
    """Exact mean, variance and fourth central moment of q·k.

    Parameters
    ----------
    dk : int
        Number of terms (>= 1).
    q_dist, k_dist : Distribution or str
        Entry distributions; ``k_dist`` defaults to ``q_dist``.
    rho : float
        Correlation of q_i with k_i (normal entries only when non-zero).

    Returns
    -------
    DotProductTheory

    Examples
    --------
    >>> th = dot_product_theory(64)
    >>> th.var, th.scaled_var
    (64.0, 1.0)
    >>> dot_product_theory(4, "normal:mean=0.5").var   # 4 * ((1 + .25)^2 - .25^2)
    6.0
    >>> dot_product_theory(10, "t:df=2").status
    'infinite-variance'
    """
    q = parse_distribution(q_dist)
    k = q if k_dist is None else parse_distribution(k_dist)
    if not (isinstance(dk, int) and dk >= 1):
        raise VarcheckError(f"dk must be a whole number >= 1, got {dk!r}")
    if not (-1.0 <= rho <= 1.0) or math.isnan(rho):
        raise VarcheckError(f"rho must be in [-1, 1], got {rho!r}")
    if rho != 0.0 and not (q.is_normal and k.is_normal):
        raise VarcheckError(
            f"rho={rho!r} needs normal q and k entries (got q ~ {q.spec}, k ~ {k.spec})"
        )
    term_mean, term_var, term_mu4 = _term_central_moments(q, k, rho)
    mean = dk * term_mean
    var = dk * term_var
    if math.isfinite(term_mu4):
        mu4 = dk * term_mu4 + 3.0 * dk * (dk - 1) * term_var**2
    else:
        mu4 = math.inf
    return DotProductTheory(
        dk=dk,
        rho=rho,
        term_mean=term_mean,
        term_var=term_var,
        term_mu4=term_mu4,
        mean=mean,
        var=var,
        mu4=mu4,
        entry_max_moment=min(q.max_moment, k.max_moment),
    )
