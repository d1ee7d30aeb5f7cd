"""Unit checks of the claim statistic's branches and of the block-side cap, with hand values.

Every expected value below is computed by hand from the documented formulas:
``hall``: g(t) = t + a t^2 + a^2 t^3 / 3 + b with a = skew / (3 sqrt(n)), b = skew / (6 sqrt(n)),
t = (V - claim) / SE; ``log``: (log V - log claim) * V / SE; and the block side is the largest
power of two s <= 1024 with MIN_BLOCKS * s^2 <= cap (MIN_BLOCKS = 200).
"""

from __future__ import annotations

import math

import pytest

from varcheck.core.estimation import MIN_BLOCKS, _side_cap, claim_statistic

# --- zero standard error: the claim is either exactly the estimate or infinitely far ---


@pytest.mark.parametrize("method", ["hall", "log"])
@pytest.mark.parametrize(
    ("var", "claim", "expected"),
    [
        (1.0, 1.0, 0.0),  # exact agreement: statistic 0 (p-value 1)
        (3.0, 2.0, math.inf),  # estimate above the claim
        (1.0, 2.0, -math.inf),  # below: var - claim < 0 although var + claim > 0
        (0.5, 4.0, -math.inf),
    ],
)
def test_zero_se_gives_zero_or_signed_infinity(
    var: float, claim: float, expected: float, method: str
) -> None:
    """Guards against a wrong zero-SE branch: a test on `se == 1` instead of `se == 0`, returning
    1.0 (or an infinity) when the estimate equals the claim, 0 when it does not, an unsigned or
    wrongly signed infinity (sign taken from var + claim), or a malformed copysign call."""
    got = claim_statistic(var, 0.0, claim, skewness=0.7, blocks=50, method=method)
    assert got == expected
    if expected == 0.0:
        assert math.copysign(1.0, got) == 1.0  # +0.0, a plain zero


@pytest.mark.parametrize(
    ("var", "se", "claim", "expected"),
    [
        # se == 1 must not be mistaken for a zero standard error: t = (2 - 1) / 1 = 1, skew 0
        (2.0, 1.0, 1.0, 1.0),
        (1.0, 1.0, 3.0, -2.0),
        (5.0, 2.0, 1.0, 2.0),
    ],
)
def test_hall_without_skew_is_the_plain_t(
    var: float, se: float, claim: float, expected: float
) -> None:
    """Guards against a unit standard error being treated as zero (`se == 1`), which would report
    an infinite statistic (p-value 0) for a claim one SE from the estimate: with skewness 0 Hall's
    transform is the identity, so the statistic is (V - claim) / SE exactly."""
    got = claim_statistic(var, se, claim, skewness=0.0, blocks=30, method="hall")
    assert got == pytest.approx(expected, rel=1e-15, abs=0.0)


def test_hall_with_skew_matches_hand_cubic() -> None:
    """Guards against the Hall branch being bypassed or mis-scaled: skew 3, 9 blocks gives
    a = 3 / (3*3) = 1/3, b = 1/6; t = (1.5 - 1) / 0.25 = 2, so g = 2 + 4/3 + 8/27 + 1/6."""
    got = claim_statistic(1.5, 0.25, 1.0, skewness=3.0, blocks=9, method="hall")
    assert got == pytest.approx(2 + 4 / 3 + 8 / 27 + 1 / 6, rel=1e-14)


# --- log method: non-positive claim or estimate ---


@pytest.mark.parametrize(
    ("var", "claim", "expected"),
    [
        (1.0, 0.0, math.inf),  # claim 0: log undefined, estimate above -> +inf
        (1.0, -2.0, math.inf),  # negative claim
        (0.0, 1.0, -math.inf),  # estimate 0: log undefined, below the claim -> -inf
        (-0.5, 1.0, -math.inf),  # negative estimate; var + claim > 0 but var - claim < 0
        (-3.0, -1.0, -math.inf),  # both non-positive
    ],
)
def test_log_statistic_non_positive_is_signed_infinity(
    var: float, claim: float, expected: float
) -> None:
    """Guards against the log branch's guard (`claim <= 0 or var <= 0`) being weakened (`and`,
    `<`), which would take the log of zero or of a negative number (a ValueError), and against
    the infinity's sign being taken from var + claim or dropped."""
    got = claim_statistic(var, 0.1, claim, skewness=0.0, blocks=20, method="log")
    assert got == expected


@pytest.mark.parametrize(
    ("var", "se", "claim"),
    [
        (1.0, 0.1, 0.5),  # claim in (0, 1]: still on the log scale
        (1.0, 0.1, 1.0),
        (0.5, 0.05, 1.0),  # estimate in (0, 1]
        (0.25, 0.2, 0.75),
        (4.0, 0.5, 2.0),
    ],
)
def test_log_statistic_positive_values_use_log_scale(var: float, se: float, claim: float) -> None:
    """Guards against a wrong threshold on the log guard (`claim <= 1`, `var <= 1`): every positive
    claim and estimate get (log V - log claim) * V / SE, a finite number (hand formula below)."""
    got = claim_statistic(var, se, claim, skewness=0.0, blocks=20, method="log")
    expected = (math.log(var) - math.log(claim)) * var / se
    assert math.isfinite(got)
    assert got == pytest.approx(expected, rel=1e-14, abs=1e-300)


def test_log_statistic_hand_value() -> None:
    """Hand value: V = e, claim = 1, SE = e / 4 gives (1 - 0) * e / (e / 4) = 4."""
    got = claim_statistic(math.e, math.e / 4, 1.0, skewness=0.0, blocks=20, method="log")
    assert got == pytest.approx(4.0, rel=1e-14)


# --- hall method: studentised distances too large for the cubic ---


@pytest.mark.parametrize(
    ("var", "claim", "expected"),
    [(1e300, 0.0, math.inf), (0.0, 1e300, -math.inf), (-1e200, 1e200, -math.inf)],
)
def test_hall_far_claim_is_signed_infinity(var: float, claim: float, expected: float) -> None:
    """Guards against the overflow guard returning nothing usable (copysign with a missing or None
    argument raises TypeError) or the wrong sign: |t| >= 1e200 here, far beyond 1e50."""
    got = claim_statistic(var, 1.0, claim, skewness=0.5, blocks=100, method="hall")
    assert got == expected


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_hall_at_the_overflow_threshold_is_still_finite(sign: float) -> None:
    """Guards against the overflow cut-off moving to `|t| >= 1e50`: at |t| = 1e50 exactly the cubic
    does not overflow (a^2 t^3 / 3 ~ 1e150), so with skewness 0 the statistic is t itself, finite;
    the guard is documented as `|t| > 1e50`."""
    got = claim_statistic(sign * 1e50, 1.0, 0.0, skewness=0.0, blocks=100, method="hall")
    assert got == sign * 1e50


# --- block-side cap ---


@pytest.mark.parametrize(
    ("cap", "expected"),
    [
        (0.0, 1),
        (4 * MIN_BLOCKS - 1, 1),  # side 2 needs 200 * 2^2 = 800 products
        (4 * MIN_BLOCKS, 2),  # exactly enough for side 2: "fit" includes equality
        (16 * MIN_BLOCKS, 4),
        (16 * MIN_BLOCKS - 1, 2),
        (MIN_BLOCKS * 512**2, 512),
        (MIN_BLOCKS * 1024**2, 1024),
        (MIN_BLOCKS * 2048**2, 1024),  # enough for 2048 but the side is capped at 1024
        (1e18, 1024),
        (math.inf, 1024),
    ],
)
def test_side_cap_hand_values(cap: float, expected: int) -> None:
    """Guards against the side cap exceeding 1024 (`side <= 1024`, `side < 1025` give 2048) and
    against an exact fit being rejected (`< products_cap`): hand values of the largest power of
    two s <= 1024 with MIN_BLOCKS * s^2 <= cap."""
    assert MIN_BLOCKS == 200
    assert _side_cap(cap) == expected
