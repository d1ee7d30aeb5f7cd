"""BlockAccumulator's estimates at the smallest block counts, against values worked by hand.

Each test names the bug it guards against. The numbers are small enough to check on paper:
for blocks (m_b, a_b) the estimate is mean(a) - mean(m)^2 + var(m)/n, the influence values are
psi_b = a_b - 2 mean(m) m_b, and the skewness is their third central moment (divided by n) over
their variance (ddof 1) to the power 3/2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from varcheck.core.estimation import BlockAccumulator, ConfidenceInterval, relative_half_width


def _acc(m: list[float], a: list[float]) -> BlockAccumulator:
    acc = BlockAccumulator()
    acc.add(np.array(m, dtype=float), np.array(a, dtype=float))
    return acc


def test_empty_accumulator_holds_zero_moments() -> None:
    """Guards against an uninitialised co-moment matrix (None): an empty accumulator reports
    zero mean and zero centred sum, and no variance estimate (NaN) yet."""
    acc = BlockAccumulator()
    assert (acc.n, acc.mean_m, acc.mean_a, acc.c_mm) == (0, 0.0, 0.0, 0.0)
    est, se, mean = acc.variance_and_se()
    assert math.isnan(est) and math.isnan(se) and mean == 0.0


def test_two_blocks_give_an_estimate() -> None:
    """Guards against asking for more than two blocks (`n <= 2`, `n < 3`): two blocks are the
    fewest with a variance, and they give it. By hand, m = (1, 3), a = (2, 10): mean(m) = 2,
    var(m) = 2, so V = 6 - 4 + 2/2 = 3; psi = a - 4m = (-2, -2) has no spread, so the standard
    error is the second-order term alone, sqrt(2 var(m)^2 / (n - 1) / n) = 2."""
    est, se, mean = _acc([1.0, 3.0], [2.0, 10.0]).variance_and_se()
    assert (est, se, mean) == (3.0, 2.0, 2.0)


def test_one_block_gives_no_estimate() -> None:
    est, se, mean = _acc([1.5], [4.0]).variance_and_se()
    assert math.isnan(est) and math.isnan(se) and mean == 1.5


def test_skewness_of_three_blocks() -> None:
    """Guards against asking for more than three blocks for a skewness (`<= 3`, `< 4`). By hand,
    m = 0 and a = (0, 0, 3): psi = a, mean 1, deviations (-1, -1, 2), variance 6/2 = 3, third
    moment (-1 - 1 + 8)/3 = 2, skewness 2 / 3^1.5."""
    assert _acc([0.0, 0.0, 0.0], [0.0, 0.0, 3.0]).skewness() == pytest.approx(2 / 3**1.5, rel=1e-14)


def test_skewness_of_two_blocks_is_zero() -> None:
    """Guards against a non-zero default when the skewness cannot be estimated (two blocks):
    Hall's correction must then vanish."""
    assert _acc([0.0, 1.0], [0.0, 5.0]).skewness() == 0.0


def test_skewness_of_constant_influence_is_zero() -> None:
    """Guards against dividing by a zero spread (`sd > 0` dropped or `>=`) or a non-zero value
    for it: blocks whose influence values are all equal have skewness 0, not an error or 1."""
    assert _acc([0.0] * 4, [1.0] * 4).skewness() == 0.0


@pytest.mark.parametrize("est", [0.0, -1.0, -1e-12])
def test_relative_half_width_of_a_non_positive_estimate_is_infinite(est: float) -> None:
    """Guards against `and` for `or` or `< 0` for `<= 0`: an estimate of 0 or below has no
    relative width (a ZeroDivisionError at 0, a negative width below), even with a finite
    interval."""
    assert relative_half_width(est, ConfidenceInterval(-1.0, 1.0)) == math.inf


def test_relative_half_width_hand_value() -> None:
    assert relative_half_width(4.0, ConfidenceInterval(3.0, 5.2)) == pytest.approx(0.275)
