"""Verdicts: tests of claims against estimates, family-wise error control, the growth-law fit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from .estimation import ConfidenceInterval

__all__ = [
    "CONSISTENT",
    "REJECTED",
    "UNRELIABLE",
    "INFINITE",
    "holm_adjust",
    "GrowthFit",
    "fit_growth",
]

CONSISTENT = "consistent"
REJECTED = "rejected"
#: the variance exists but the estimator's own variance does not: no valid interval
UNRELIABLE = "unreliable"
#: Var(q·k) is infinite: there is nothing to estimate
INFINITE = "infinite"


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (``nan`` entries are left out and stay ``nan``).

    Rejecting every hypothesis whose adjusted p-value is below alpha controls the
    family-wise error rate at alpha under any dependence between the tests.

    Examples
    --------
    >>> holm_adjust([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    m = len(idx)
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda j: p_values[j])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


@dataclass(frozen=True)
class GrowthFit:
    """Weighted least-squares fit of log Var against log d_k.

    Attributes
    ----------
    slope : float
        Estimated exponent (theory: exactly 1 when the d_k terms are independent with finite
        variance).
    confidence_interval : ConfidenceInterval
        Normal-theory interval for the slope (the rows are independent estimates).
    expected : float
        The exponent theory predicts.
    verdict : str
        ``consistent`` when the interval contains ``expected``, else ``rejected``.
    rows : int
        Number of rows used.
    """

    slope: float
    confidence_interval: ConfidenceInterval
    expected: float
    verdict: str
    rows: int


def fit_growth(
    dks: Sequence[int],
    variances: Sequence[float],
    ses: Sequence[float],
    *,
    confidence: float,
    expected: float = 1.0,
) -> GrowthFit | None:
    """Fit log Var = c + slope · log d_k, weighting each row by its delta-method variance.

    Returns ``None`` with fewer than two distinct d_k or non-positive estimates.
    """
    pts = [
        (math.log(d), math.log(v), (s / v) ** 2)
        for d, v, s in zip(dks, variances, ses, strict=True)
        if v > 0 and s > 0 and math.isfinite(v) and math.isfinite(s)
    ]
    if len({x for x, _, _ in pts}) < 2:
        return None
    w = [1.0 / var for _, _, var in pts]
    sw = sum(w)
    xbar = sum(wi * x for wi, (x, _, _) in zip(w, pts, strict=True)) / sw
    ybar = sum(wi * y for wi, (_, y, _) in zip(w, pts, strict=True)) / sw
    sxx = sum(wi * (x - xbar) ** 2 for wi, (x, _, _) in zip(w, pts, strict=True))
    sxy = sum(wi * (x - xbar) * (y - ybar) for wi, (x, y, _) in zip(w, pts, strict=True))
    slope = sxy / sxx
    se = math.sqrt(1.0 / sxx)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    ci = ConfidenceInterval(slope - z * se, slope + z * se)
    verdict = CONSISTENT if ci.low <= expected <= ci.high else REJECTED
    return GrowthFit(
        slope=slope, confidence_interval=ci, expected=expected, verdict=verdict, rows=len(pts)
    )
