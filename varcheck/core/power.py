"""What a run could have caught: the detectable error of a test, the TOST's power, run sizing.

Every consistency test in varcheck decides from one estimate V, its standard error s, the
skewness γ of its blocks' influence values and the number of blocks B (a Hall-corrected or
log-scale Student t on B − 1 degrees of freedom). From the same numbers this module says

* :func:`detectable_error`: the smallest relative deviation of the truth from the claim that the
  test rejects with a given probability (90%) at its level, in each direction;
* :func:`tost_power`: for a tolerance claim, the probability that a true claim passes;
* :func:`planned_blocks`: how many blocks a run needs for a target deviation and power, from a
  pilot's per-block relative spread.

The derivation, the corrections and the simulations that calibrate them are in docs/power.md.
:func:`detectable_error` is the one function a verdict calls to state what it could have
caught (:func:`detectable_of` for an estimate object), with the run's own figures, at the
per-row level α/m of its Holm family.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Protocol

from .estimation import _hall_inverse, hall_transform, normal_quantile, t_quantile

__all__ = [
    "APPROXIMATE_SKEW",
    "DEFAULT_POWER",
    "LOW_POWER_AT_CLAIM",
    "Detectable",
    "detectable_error",
    "detectable_of",
    "distances",
    "inflation",
    "planned_blocks",
    "target_relative_se",
    "tost_power",
    "weakest",
]

#: the power a stated detectable error refers to
DEFAULT_POWER = 0.9

#: γ/√B above which the skewness correction is first-order only and the figure is flagged
#: approximate (docs/power.md, "Where the figure is approximate")
APPROXIMATE_SKEW = 0.07

#: fewer blocks than this: the run's own SE is too noisy for a calibrated figure
APPROXIMATE_BLOCKS = 30

#: below this TOST power at the claim, a tolerance claim's result carries a caution
LOW_POWER_AT_CLAIM = 0.8


class _Estimate(Protocol):
    # read-only: the estimates are frozen dataclasses
    @property
    def var(self) -> float: ...
    @property
    def se(self) -> float: ...
    @property
    def skewness(self) -> float: ...
    @property
    def blocks(self) -> int: ...
    @property
    def interval_method(self) -> str: ...


@dataclass(frozen=True)
class Detectable:
    """The deviations a test detects with probability ``power``.

    Attributes
    ----------
    above, below : float
        Positive magnitudes: the test rejects with probability ``power`` when the truth is
        claim × (1 + above), or claim × (1 − below). With a tolerance T they are measured from
        the claim too and include T (a fail needs the truth outside the band).
    power : float
        The detection probability the figures refer to.
    alpha : float
        The per-test level used: the family's α over ``family``.
    family : int
        Tests in the Holm family (1 for a single test).
    approximate : bool
        True when the calibration is first-order only: log-scale intervals, skewed influence
        values for the number of blocks, or too few blocks (docs/power.md).
    power_at_claim : float or None
        For a tolerance claim, the probability that a true claim passes (the TOST's power at
        the claim, :func:`tost_power`, at the family's α: the TOST is never adjusted); ``None``
        without a tolerance.
    """

    above: float
    below: float
    power: float
    alpha: float
    family: int
    approximate: bool
    power_at_claim: float | None = None

    @property
    def error(self) -> float:
        """The larger of the two: a deviation this large either way is detected."""
        return max(self.above, self.below)


def _corrected(d: float, blocks: int) -> float:
    # the run's s is an estimate: at the median of its distribution the distance in SEs is
    # larger by about 1 + 1/(3 df) (the median of a chi on df degrees of freedom)
    return d * (1.0 + 1.0 / (3.0 * max(blocks - 1, 1)))


def distances(
    skewness: float, blocks: int, level: float, power: float, method: str = "hall"
) -> tuple[float, float]:
    """How far the claim must sit from the truth, in standard errors, to be rejected.

    Returns ``(up, down)``, down < 0: the two-sided test at ``level`` rejects with probability
    ``power`` when the truth is ``up`` (or ``down``) standard errors above the claim. Includes
    Hall's skewness correction and the studentised statistic's spread under the alternative.
    """
    df = blocks - 1
    tq = t_quantile(1.0 - level, df)
    tp = t_quantile(2.0 * power - 1.0, df)
    if method == "log":
        return _corrected(tq + tp, blocks), -_corrected(tq + tp, blocks)
    c1 = skewness / math.sqrt(blocks)
    c2 = 1.5 * skewness * skewness / (4.0 * blocks)
    out = []
    for sign in (1, -1):
        u = _hall_inverse(sign * tq, skewness, blocks)  # where the test rejects
        v = _hall_inverse(-sign * tp, skewness, blocks)  # the centred part's quantile
        # (D - u)^2 = v^2 (1 - c1 D + c2 D^2), the root beyond u
        qa, qb, qc = 1.0 - v * v * c2, -(2.0 * u - v * v * c1), u * u - v * v
        disc = qb * qb - 4.0 * qa * qc
        if qa <= 0 or disc < 0:
            out.append(sign * math.inf)
            continue
        out.append(_corrected((-qb + sign * math.sqrt(disc)) / (2.0 * qa), blocks))
    return out[0], out[1]


def _to_relative(d: float, r: float, method: str) -> float:
    """Truth/claim − 1 for a claim ``d`` standard errors (``r`` relative) from the truth."""
    if method == "log":
        return math.expm1(d * r)
    return math.inf if d * r >= 1.0 else d * r / (1.0 - d * r)


def detectable_error(
    estimate: float,
    se: float | None = None,
    *,
    half_width: float | None = None,
    confidence: float = 0.95,
    blocks: int | None = None,
    skewness: float = 0.0,
    alpha: float = 0.05,
    power: float = DEFAULT_POWER,
    family: int = 1,
    method: str = "hall",
    tolerance: float | None = None,
) -> Detectable:
    """The smallest deviation from the claim that a run detects with probability ``power``.

    The one function every verdict calls to state what its pass could have caught.

    Parameters
    ----------
    estimate : float
        The run's estimate (a variance, or a probe's scale).
    se : float, optional
        Its standard error. Give ``se`` or ``half_width``.
    half_width : float, optional
        Half the width of a symmetric interval at ``confidence`` (its SE is read back from the
        Student t quantile on ``blocks - 1`` df, or the normal one without ``blocks``).
    confidence : float
        The level of ``half_width``'s interval.
    blocks : int, optional
        Independent blocks behind the SE; ``None`` for a normal approximation (no skewness
        correction, no degrees of freedom).
    skewness : float
        Skewness of the blocks' influence values (0 where unknown).
    alpha : float
        The family's level.
    power : float
        The detection probability asked for.
    family : int
        Tests in the Holm family: each is sized at α/family, a lower bound on its power whatever
        the other rows do.
    method : str
        ``hall`` or ``log`` (the interval's scale).
    tolerance : float, optional
        For a tolerance claim: the deviation at which the run *fails* with probability
        ``power`` (beyond the band).

    Returns
    -------
    Detectable
        Infinite figures when no deviation is detected so reliably (too few blocks).
    """
    big = 10**9 if blocks is None else blocks
    if se is None:
        if half_width is None:
            raise ValueError("give se or half_width")
        tq = t_quantile(confidence, big - 1) if blocks else normal_quantile(confidence)
        se = half_width / tq
    level = alpha / family
    skew = skewness if blocks is not None and math.isfinite(skewness) else 0.0
    up, down = distances(skew, big, level, power, method)
    r = se / estimate if estimate > 0 else math.inf
    t = tolerance or 0.0
    above = (1.0 + t) * (1.0 + _to_relative(up, r, method)) - 1.0
    below = 1.0 - (1.0 - t) * (1.0 + _to_relative(down, r, method))
    approximate = method == "log" or (
        blocks is not None
        and (abs(skew) / math.sqrt(blocks) > APPROXIMATE_SKEW or blocks < APPROXIMATE_BLOCKS)
    )
    return Detectable(above, below, power, level, family, approximate)


def detectable_of(
    est: _Estimate,
    *,
    alpha: float,
    power: float = DEFAULT_POWER,
    family: int = 1,
    tolerance: float | None = None,
) -> Detectable:
    """:func:`detectable_error` from an estimate object (``VarianceEstimate`` or alike), with
    the TOST's power at the claim (:func:`tost_power`) for a tolerance claim."""
    det = detectable_error(
        est.var,
        est.se,
        blocks=est.blocks,
        skewness=est.skewness,
        alpha=alpha,
        power=power,
        family=family,
        method=est.interval_method,
        tolerance=tolerance,
    )
    if tolerance is None:
        return det
    at_claim = tost_power(
        est.var,
        est.se,
        tolerance=tolerance,
        blocks=est.blocks,
        skewness=est.skewness if math.isfinite(est.skewness) else 0.0,
        alpha=alpha,
        method=est.interval_method,
    )
    return replace(det, power_at_claim=at_claim)


def weakest(found: Iterable[Detectable | None]) -> Detectable | None:
    """The figure of a row of several tests (a probe's heads): the largest error, with the
    lowest power at the claim (an upper bound on the chance that every test passes a true
    claim); ``None`` when no test is valid. A deviation every test shares is then caught by
    each with at least the stated power, so the row fails with at least that power."""
    valid = [d for d in found if d is not None]
    if not valid:
        return None
    worst = max(valid, key=lambda d: d.error)
    powers = [d.power_at_claim for d in valid if d.power_at_claim is not None]
    return replace(worst, power_at_claim=min(powers)) if powers else worst


def tost_power(
    estimate: float,
    se: float,
    *,
    tolerance: float,
    blocks: int,
    skewness: float = 0.0,
    alpha: float = 0.05,
    method: str = "hall",
) -> float:
    """The probability that a true claim passes the tolerance test (TOST) at this SE.

    A pass needs the whole ``1 - 2 alpha`` interval inside claim × [1 − T, 1 + T]; in the normal
    approximation this is 2Φ(T/r − z_{1−α}) − 1 with r = se/estimate, below 0.8 when
    T < 2.93 r. The Hall form adds the skewness and the statistic's spread under the truth.
    """
    from scipy import stats

    if not (estimate > 0 and se > 0):
        return 1.0 if se == 0 and estimate > 0 else 0.0
    r, df = se / estimate, blocks - 1
    t2 = t_quantile(1.0 - 2.0 * alpha, df)
    cdf = stats.t(df).cdf
    if method == "log":
        return max(
            float(cdf(math.log1p(tolerance) / r - t2) - cdf(math.log1p(-tolerance) / r + t2)), 0.0
        )
    c1, d = skewness / math.sqrt(blocks), tolerance / r
    u_lo, u_hi = _hall_inverse(t2, skewness, blocks), _hall_inverse(-t2, skewness, blocks)
    s_lo, s_hi = math.sqrt(max(1.0 - d * c1, 0.25)), math.sqrt(max(1.0 + d * c1, 0.25))
    p_lo = 1.0 - cdf(hall_transform((u_lo - d) / s_lo, skewness, blocks))
    p_hi = 1.0 - cdf(hall_transform((u_hi + d) / s_hi, skewness, blocks))
    return max(float(p_lo - p_hi), 0.0)


def target_relative_se(
    detect: float,
    *,
    blocks: int,
    skewness: float = 0.0,
    level: float = 0.05,
    power: float = DEFAULT_POWER,
    tolerance: float | None = None,
) -> float:
    """The largest relative SE at which a run of ``blocks`` blocks meets its target.

    Without a tolerance: ``detect`` is caught with probability ``power`` both ways. With one:
    a true claim passes with probability ``power`` (``detect`` is not used).
    """
    if tolerance is not None:
        # one-sided z at 1 - level, two-sided z at ``power``: the TOST's two one-sided tests
        return tolerance / (normal_quantile(1.0 - 2.0 * level) + normal_quantile(power))
    up, down = distances(skewness, blocks, level, power)
    return min(detect / (up * (1.0 + detect)), detect / (-down * (1.0 - detect)))


@lru_cache(maxsize=64)
def inflation(pilot_df: int, level: float = 0.05, power: float = DEFAULT_POWER) -> float:
    """The factor on a pilot's planned size that makes the power right on average over pilots.

    A pilot's squared spread is the truth's times χ²_ν/ν (ν = ``pilot_df``); sized from it
    as if exact, a run falls short as often as it overshoots, and power is concave there.
    """
    import numpy as np
    from scipy import stats

    zq, zp = normal_quantile(1.0 - level), normal_quantile(2.0 * power - 1.0)
    w = stats.chi2(pilot_df).ppf(np.linspace(0.0005, 0.9995, 1000)) / pilot_df
    lo, hi = 1.0, 4.0
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        mean_power = float(np.mean(stats.norm.cdf(np.sqrt(w * mid) * (zq + zp) - zq)))
        lo, hi = (mid, hi) if mean_power < power else (lo, mid)
    return hi


def planned_blocks(
    spread: float,
    *,
    detect: float,
    skewness: float,
    pilot_blocks: int,
    alpha: float = 0.05,
    power: float = DEFAULT_POWER,
    family: int = 1,
    tolerance: float | None = None,
) -> tuple[int, float]:
    """Blocks a run needs, from a pilot's per-block relative spread κ = se·√B/V.

    Returns ``(blocks, inflation)``: B = f · (κ / r*)², r* from :func:`target_relative_se` at
    α/family, iterated since r* depends on B, and f from :func:`inflation` for the pilot's
    ``pilot_blocks - 1`` degrees of freedom.
    """
    level = alpha / family
    factor = inflation(max(pilot_blocks - 1, 2), level, power)
    # start from the normal approximation; where the skewness term has no solution at a size
    # (too few blocks for the asked power), grow the size
    start = target_relative_se(detect, blocks=10**9, level=level, power=power, tolerance=tolerance)
    blocks = max(int(math.ceil(factor * (spread / start) ** 2)), 3) if start > 0 else 30
    for _ in range(8):
        r = target_relative_se(
            detect, blocks=blocks, skewness=skewness, level=level, power=power, tolerance=tolerance
        )
        blocks = max(int(math.ceil(factor * (spread / r) ** 2)), 3) if r > 0 else 4 * blocks
    return blocks, factor
