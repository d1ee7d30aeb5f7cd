"""The growth-law fit (log Var against log d_k) against closed-form weighted least squares.

Every expected value here is computed by hand formulas (weighted means, the two-point slope,
``scipy.stats.norm.ppf``), never by calling ``fit_growth`` for the reference.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import norm

from varcheck.checks.claims import parse_claim
from varcheck.core.verdicts import CONSISTENT, REJECTED, fit_growth
from varcheck.errors import VarcheckError


def _wls(
    dks: list[float], variances: list[float], ses: list[float], confidence: float
) -> tuple[float, float, float]:
    """Closed-form WLS of log v on log d_k with weights (v / se)²: (slope, low, high)."""
    x = [math.log(d) for d in dks]
    y = [math.log(v) for v in variances]
    w = [(v / s) ** 2 for v, s in zip(variances, ses, strict=True)]
    sw = sum(w)
    xbar = sum(wi * xi for wi, xi in zip(w, x, strict=True)) / sw
    ybar = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / sw
    sxx = sum(wi * (xi - xbar) ** 2 for wi, xi in zip(w, x, strict=True))
    sxy = sum(wi * (xi - xbar) * (yi - ybar) for wi, xi, yi in zip(w, x, y, strict=True))
    slope = sxy / sxx
    # independent rows: the sandwich reduces to the WLS variance 1 / Σ w (x − x̄)²
    half = norm.ppf(0.5 + confidence / 2) / math.sqrt(sxx)
    return slope, slope - half, slope + half


# rows off a straight line with unequal relative standard errors, so that any change in the
# weights moves the slope; variances below 1 on purpose (they are valid estimates)
UNEQUAL = (
    [2, 4, 8, 16],
    [0.25, 0.7, 0.9, 3.1],
    [0.01, 0.2, 0.05, 0.9],
)


@pytest.mark.parametrize("confidence", [0.9, 0.95])
@pytest.mark.parametrize(
    ("dks", "variances", "ses"),
    [UNEQUAL, ([1, 3, 9], [1.5, 2.0, 14.0], [0.3, 0.02, 4.0])],
)
def test_slope_and_interval_equal_closed_form_wls(
    dks: list[int], variances: list[float], ses: list[float], confidence: float
) -> None:
    """Guards the weights (se², not 2·se or se³) and the interval's centre and half-width."""
    fit = fit_growth(dks, variances, ses, confidence=confidence)
    slope, low, high = _wls(dks, variances, ses, confidence)
    assert fit is not None
    assert fit.rows == len(dks)
    assert fit.slope == pytest.approx(slope, rel=1e-10)
    assert fit.confidence_interval.low == pytest.approx(low, rel=1e-10)
    assert fit.confidence_interval.high == pytest.approx(high, rel=1e-10)


@pytest.mark.parametrize(
    ("bad_var", "bad_se"),
    [
        (-1.0, 0.1),  # negative estimate with a finite se
        (0.0, 0.1),  # zero estimate: log 0
        (1.0, 0.0),  # zero se: infinite weight
        (-1.0, 0.0),
        (math.inf, 0.1),
        (1.0, math.inf),
        (math.nan, 0.1),
        (1.0, math.nan),
    ],
)
def test_rows_outside_the_domain_are_dropped(bad_var: float, bad_se: float) -> None:
    """Guards the row filter (v > 0, se > 0, both finite; no `or`, no `>=`, no `> 1`)."""
    dks, variances, ses = UNEQUAL
    fit = fit_growth([*dks, 32], [*variances, bad_var], [*ses, bad_se], confidence=0.95)
    slope, low, high = _wls(dks, variances, ses, 0.95)
    assert fit is not None
    assert fit.rows == len(dks)
    assert fit.slope == pytest.approx(slope, rel=1e-10)
    assert fit.confidence_interval.low == pytest.approx(low, rel=1e-10)
    assert fit.confidence_interval.high == pytest.approx(high, rel=1e-10)


def test_variances_below_one_are_kept() -> None:
    """Guards against a filter `v > 1`: estimates in (0, 1] are valid rows."""
    # exact power law v = d_k / 64 with all variances below 1: slope 1 exactly
    dks = [2, 4, 8, 16]
    fit = fit_growth(dks, [d / 64 for d in dks], [d / 6400 for d in dks], confidence=0.95)
    assert fit is not None
    assert fit.rows == 4
    assert fit.slope == pytest.approx(1.0, rel=1e-12)


def test_mismatched_lengths_raise() -> None:
    """Guards the strict zip: a missing standard error must not silently drop a row."""
    with pytest.raises(ValueError):
        fit_growth([2, 4, 8], [2.0, 4.0, 8.0], [0.1, 0.1], confidence=0.95)


@pytest.mark.parametrize("exact", [False, True], ids=["float", "fraction"])
def test_covariance_is_taken_for_the_kept_rows_only(exact: bool) -> None:
    """Guards the covariance sub-matrix (rows and columns of the kept rows, as floats).

    With two kept rows the slope is the two-point slope whatever the weights, and its variance
    is (V11 + V22 − 2 V12) / Δx² with V = cov / (v vᵀ) (delta method for log v).
    """
    a, b, c = 0.04, 0.64, 0.08  # var(v1), var(v2), cov(v1, v2)
    entries = [[a, c, 0.5], [c, b, 0.5], [0.5, 0.5, 0.5]]
    if exact:  # exact rationals are an array-like of numbers as well
        entries = [[Fraction(str(e)) for e in row] for row in entries]
    # third row has a negative estimate: dropped, with its row and column of the covariance
    fit = fit_growth(
        [2, 8, 4],
        [2.0, 16.0, -1.0],
        [math.sqrt(a), math.sqrt(b), 0.5],
        confidence=0.95,
        covariance=entries,
    )
    dx = math.log(8) - math.log(2)
    slope = math.log(16 / 2) / dx  # 1.5
    se = math.sqrt(a / 4 + b / 256 - 2 * c / 32) / dx
    z = norm.ppf(0.975)
    assert fit is not None
    assert fit.rows == 2
    assert fit.slope == pytest.approx(slope, rel=1e-12)
    assert fit.confidence_interval.low == pytest.approx(slope - z * se, rel=1e-12)
    assert fit.confidence_interval.high == pytest.approx(slope + z * se, rel=1e-12)
    assert fit.verdict == REJECTED  # 1.5 ± 0.072 excludes the expected 1


def test_dks_beyond_int64_are_fitted() -> None:
    """Guards the conversion of d_k to float: Python ints beyond int64 are valid sizes."""
    dks = [2**62, 2**64]  # the second does not fit an int64
    fit = fit_growth(dks, [1.0, 8.0], [0.01, 0.08], confidence=0.95)
    assert fit is not None
    # two points: slope ln 8 / ln 4 = 1.5 exactly (the design is ill-conditioned at this scale)
    assert fit.slope == pytest.approx(1.5, rel=1e-9)


def test_very_precise_rows_do_not_overflow_the_weights() -> None:
    """Guards the weight 1 / (se/v)²: a needless constant factor overflows at extreme precision.

    Weights (v/se)² = 6e307 each: their sum 1.2e308 is finite, twice it is not.
    """
    se = 1 / math.sqrt(6e307)
    fit = fit_growth([1, 2], [1.0, 2.0], [se, 2 * se], confidence=0.95)
    assert fit is not None
    assert fit.slope == pytest.approx(1.0, rel=1e-12)
    assert math.isfinite(fit.confidence_interval.low)
    assert fit.verdict == CONSISTENT


@pytest.mark.parametrize("end", ["low", "high"])
def test_interval_is_closed(end: str) -> None:
    """Guards `low <= expected <= high`: an expected value on either end is consistent.

    The interval does not depend on ``expected``, so its ends are read from one fit and the
    verdict checked at each end and one ulp outside it.
    """
    dks, variances, ses = UNEQUAL
    ci = fit_growth(dks, variances, ses, confidence=0.95).confidence_interval  # type: ignore[union-attr]
    edge = getattr(ci, end)
    outside = np.nextafter(edge, -math.inf if end == "low" else math.inf)
    at = fit_growth(dks, variances, ses, confidence=0.95, expected=edge)
    out = fit_growth(dks, variances, ses, confidence=0.95, expected=float(outside))
    assert at is not None and out is not None
    assert at.confidence_interval == ci
    assert at.verdict == CONSISTENT
    assert out.verdict == REJECTED


@pytest.mark.parametrize(
    ("claim", "inner"),
    [("sqrt(foo)", "unknown name 'foo'"), ("max(dk, 'x')", "'x' is not a number")],
)
def test_error_inside_a_function_argument_quotes_the_claim(claim: str, inner: str) -> None:
    """Guards the claim text passed down into a call's arguments (the message quotes it)."""
    with pytest.raises(VarcheckError) as info:
        parse_claim(claim)
    message = str(info.value)
    assert f"claim {claim!r}" in message
    assert inner in message
