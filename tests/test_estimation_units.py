"""Unit checks of the log-scale interval's branches, with hand-computed values."""

from __future__ import annotations

import math

import pytest

from varcheck.core.estimation import ConfidenceInterval, log_interval


@pytest.mark.parametrize(
    ("est", "se", "tq"),
    [(0.5, 0.1, 2.0), (0.999, 0.25, 1.96), (1.0, 0.1, 2.0), (1.5, 0.3, 2.5), (512.0, 4.0, 1.97)],
)
def test_log_interval_positive_estimate_uses_log_scale(est: float, se: float, tq: float) -> None:
    """Guards against the log branch being skipped for 0 < V <= 1 (a wrong threshold, `est > 1`):
    every positive finite estimate gets V * exp(+-tq*SE/V), whose endpoints multiply to V**2."""
    low, high = log_interval(est, se, tq)
    r = tq * se / est
    assert low == pytest.approx(est * math.exp(-r), rel=1e-14)
    assert high == pytest.approx(est * math.exp(r), rel=1e-14)
    assert low * high == pytest.approx(est**2, rel=1e-12)
    assert low > 0


@pytest.mark.parametrize(
    ("est", "se", "tq", "expected"),
    [
        # hand values: (V - tq*SE, V + tq*SE); tq != 1 and SE != 1 so that tq/SE != tq*SE
        (0.0, 0.5, 2.0, (-1.0, 1.0)),
        (-1.0, 0.5, 2.0, (-2.0, 0.0)),
        (-0.25, 0.25, 3.0, (-1.0, 0.5)),
        (-4.0, 2.0, 1.5, (-7.0, -1.0)),
    ],
)
def test_log_interval_nonpositive_estimate_is_symmetric(
    est: float, se: float, tq: float, expected: tuple[float, float]
) -> None:
    """Guards against the degenerate V <= 0 case taking the log branch (`>=`/`or` in the test:
    a ZeroDivisionError at V = 0, or a reversed, shifted interval for V < 0) and against a wrong
    symmetric formula (a missing end, a sign flip, tq/SE instead of tq*SE)."""
    ci = log_interval(est, se, tq)
    assert isinstance(ci, ConfidenceInterval)
    assert (ci.low, ci.high) == pytest.approx(expected, rel=1e-15, abs=1e-15)
    assert ci.high - ci.low == pytest.approx(2 * tq * se, rel=1e-15)
    assert (ci.low + ci.high) / 2 == pytest.approx(est, abs=1e-15)


def test_log_interval_infinite_se_is_whole_line() -> None:
    """Guards against an infinite SE being fed to the log branch (`or` in the test): the interval
    must be (-inf, inf), not (0, inf) from exp(-inf)."""
    assert log_interval(2.0, math.inf, 1.96) == (-math.inf, math.inf)


def test_log_interval_nan_se_and_negative_estimate() -> None:
    """Guards against `or` in the branch test: a negative estimate with a finite SE must stay on
    the symmetric branch, and a NaN SE (not finite) must give NaN ends, never a log interval."""
    low, high = log_interval(2.0, math.nan, 1.96)
    assert math.isnan(low) and math.isnan(high)
    assert log_interval(-2.0, 1.0, 2.0) == (-4.0, 0.0)
