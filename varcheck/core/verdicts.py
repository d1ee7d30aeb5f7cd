"""Verdicts: tests of claims against estimates, family-wise error control, the growth-law fit."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any, Protocol

from .estimation import ConfidenceInterval
from .interrupts import EXIT_INTERRUPTED, interrupted_exit, note_signal

__all__ = [
    "PASS",
    "FAIL",
    "INCONCLUSIVE",
    "OUTCOME_EXIT",
    "OUTCOME_RANK",
    "EXIT_INTERRUPTED",
    "exit_code",
    "note_signal",
    "outcome_of",
    "INTERRUPTED",
    "verdict_of",
    "judge",
    "marginal_only",
    "Decision",
    "decide",
    "ClaimPValues",
    "claim_p_values",
    "adjusted_p_values",
    "tolerance_band",
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

PASS = "pass"
FAIL = "fail"
INCONCLUSIVE = "inconclusive"
#: exit status of each outcome; the worst (highest rank) wins for a set of claims
OUTCOME_EXIT = {PASS: 0, INCONCLUSIVE: 3, UNRELIABLE: 4, INFINITE: 4, FAIL: 1}
OUTCOME_RANK = {PASS: 0, INCONCLUSIVE: 1, UNRELIABLE: 2, INFINITE: 2, FAIL: 3}
#: the outcome of a run stopped by Ctrl-C or SIGTERM, whatever it found
INTERRUPTED = "interrupted"

# A row's verdict ranks and exits like the claim outcome it amounts to: consistent as pass,
# rejected as fail. One ladder serves every command.
_EXIT = {**OUTCOME_EXIT, CONSISTENT: OUTCOME_EXIT[PASS], REJECTED: OUTCOME_EXIT[FAIL]}
_RANK = {**OUTCOME_RANK, CONSISTENT: OUTCOME_RANK[PASS], REJECTED: OUTCOME_RANK[FAIL]}


def exit_code(verdicts: Iterable[str], *, interrupted: bool = False) -> int:
    """The exit status of a run from its verdicts or outcomes: the worst one decides.

    0 when all are consistent or pass (or there are none), 1 when one is rejected or fails,
    3 when the worst is inconclusive, 4 when one has no valid test (unreliable, infinite) and
    none is rejected; when the run was interrupted, whatever it found, 128 + the signal's
    number (:func:`note_signal`): 130 for Ctrl-C, 143 for SIGTERM.

    Examples
    --------
    >>> exit_code(["consistent", "unreliable", "rejected"]), exit_code(["pass", "inconclusive"])
    (1, 3)
    """
    if interrupted:
        return interrupted_exit()
    worst = max(verdicts, key=_RANK.__getitem__, default=PASS)
    return _EXIT[worst]


def outcome_of(verdicts: Iterable[str], *, interrupted: bool = False, best: str = PASS) -> str:
    """A run's outcome in a word, the one its :func:`exit_code` follows: the worst verdict
    (``unreliable`` and ``infinite`` rank alike: the first of them wins), ``best`` when there
    are none, or ``interrupted``.

    Examples
    --------
    >>> outcome_of(["consistent", "unreliable", "rejected"], best=CONSISTENT)
    'rejected'
    >>> outcome_of(["pass", "pass"]), outcome_of([], best=CONSISTENT, interrupted=True)
    ('pass', 'interrupted')
    """
    if interrupted:
        return INTERRUPTED
    return max(verdicts, key=_RANK.__getitem__, default=best)


def verdict_of(p_adjusted: float, alpha: float, *, finite: bool = True, valid: bool = True) -> str:
    """A row's verdict: infinite, unreliable (no valid interval), or the test at ``alpha``."""
    if not finite:
        return INFINITE
    if not valid:
        return UNRELIABLE
    return REJECTED if p_adjusted < alpha else CONSISTENT


def marginal_only(verdict: str, p_value: float, alpha: float) -> bool:
    """True for a row whose own interval excludes its claim (raw p < alpha) although the
    family's Holm adjustment keeps it consistent: over many rows such exclusions happen by
    chance more often than alpha, so the row is marked, not rejected."""
    return verdict == CONSISTENT and p_value < alpha


def judge(
    p_values: Sequence[float],
    *,
    alpha: float,
    finite: Sequence[bool],
    valid: Sequence[bool],
) -> tuple[list[float], list[str]]:
    """Holm-adjust a family of rows' p-values and give each row its verdict.

    Rows without a test carry a NaN p-value (left out of the adjustment); ``finite`` and
    ``valid`` say why: no estimate exists, or no valid interval.
    """
    adjusted = holm_adjust(p_values)
    verdicts = [
        verdict_of(p, alpha, finite=f, valid=v)
        for p, f, v in zip(adjusted, finite, valid, strict=True)
    ]
    return adjusted, verdicts


@dataclass(frozen=True)
class Decision:
    """The outcome of one claim test.

    Attributes
    ----------
    outcome : str
        ``pass``, ``fail`` or ``inconclusive``.
    reason : str
        One sentence saying why.
    more_samples : int or None
        For ``inconclusive``: roughly how many more products would settle it.
    """

    outcome: str
    reason: str
    more_samples: int | None = None


def tolerance_band(claim: float, tolerance: float) -> tuple[float, float]:
    """The band claim × [1 − tolerance, 1 + tolerance], low end first."""
    ends = (claim * (1 - tolerance), claim * (1 + tolerance))
    return min(ends), max(ends)


class _IntervalTest(Protocol):
    def p_value(self, claim: float) -> float: ...
    def equivalence_p_value(self, low: float, high: float) -> float: ...


@dataclass(frozen=True)
class ClaimPValues:
    """The p-values of one claim test, each with one meaning wherever varcheck reports it.

    Attributes
    ----------
    p_value : float
        Two-sided, of the claimed value itself (with or without a tolerance).
    p_equivalence : float or None
        With a tolerance: the two one-sided tests' (TOST) p-value that the quantity lies inside
        the band claim × [1 − T, 1 + T]; below alpha exactly when the whole ``1 − 2 alpha``
        interval lies inside it (a pass). ``None`` without a tolerance.
    p_outside : float or None
        With a tolerance: the two-sided p-value of the band's edge nearest the estimate when the
        estimate lies outside the band, 1 when it lies inside; below alpha exactly when the
        whole ``1 − alpha`` interval lies outside the band (a fail). ``None`` without one.
    """

    p_value: float
    p_equivalence: float | None = None
    p_outside: float | None = None

    @property
    def p_fail(self) -> float:
        """The p-value a fail rests on (the one a family Holm-adjusts): ``p_outside`` with a
        tolerance, else ``p_value``."""
        return self.p_value if self.p_outside is None else self.p_outside

    def with_p_fail(self, p: float) -> ClaimPValues:
        """The same p-values with ``p`` (say, Holm-adjusted) as the one a fail rests on."""
        if self.p_outside is None:
            return replace(self, p_value=p)
        return replace(self, p_outside=p)


def claim_p_values(
    test: _IntervalTest, estimate: float, claim: float, tolerance: float | None
) -> ClaimPValues:
    """The :class:`ClaimPValues` of ``claim`` (``tolerance``: relative, or ``None``) from an
    interval test (:class:`~varcheck.core.estimation.IntervalTest`) and its point estimate, all
    on one scale."""
    p = test.p_value(claim)
    if tolerance is None:
        return ClaimPValues(p)
    low, high = tolerance_band(claim, tolerance)
    if low <= estimate <= high:
        outside = 1.0
    else:
        outside = test.p_value(high if estimate > high else low)
    return ClaimPValues(p, test.equivalence_p_value(low, high), outside)


def adjusted_p_values(family: Sequence[ClaimPValues]) -> list[ClaimPValues]:
    """A family of claim tests' p-values with the one each can fail on (``p_fail``)
    Holm-adjusted over the family; ``p_equivalence`` (a pass) and, with a tolerance,
    ``p_value`` stay their own."""
    adjusted = holm_adjust([p.p_fail for p in family])
    return [p.with_p_fail(a) for p, a in zip(family, adjusted, strict=True)]


def decide(
    estimate: float,
    interval: ConfidenceInterval,
    claim: float,
    *,
    p_value: float,
    alpha: float,
    tolerance: float | None,
    samples: int,
    p_equivalence: float | None = None,
    p_outside: float | None = None,
    fail_interval: ConfidenceInterval | None = None,
) -> Decision:
    """Judge a claim from an interval and its (possibly multiplicity-adjusted) p-values.

    Without ``tolerance`` it is a consistency test: fail when ``p_value < alpha`` (the interval
    excludes the claim), else pass. With ``tolerance`` T the claim is the band
    B = claim × [1 − T, 1 + T] (``p_value`` plays no part): pass when ``p_equivalence < alpha``
    (two one-sided tests: the whole ``1 - 2 alpha`` interval, ``interval``, lies inside B;
    without ``p_equivalence``, when ``interval`` does); fail when ``p_outside < alpha`` (the
    whole ``1 - alpha`` interval, ``fail_interval``, default ``interval``, lies outside B;
    without ``p_outside``, when it does); otherwise inconclusive, with about how many further
    products would settle it, the width shrinking as 1/sqrt(products): with the estimate inside
    B, until ``interval`` fits in B; outside it, until ``fail_interval`` clears B's nearest edge.
    A variance inside B fails at most alpha of the time (alpha / 2 when the interval is
    narrow next to the band); one on B's edge passes at most alpha of the time. A NaN estimate,
    interval end or p-value decides nothing: ``unreliable`` (a NaN compares false with alpha,
    which would read as a pass).
    """
    lo, hi = interval
    given = (estimate, lo, hi, p_value, p_equivalence, p_outside)
    if any(x is not None and math.isnan(x) for x in given) or not math.isfinite(estimate):
        return Decision(UNRELIABLE, "the estimate, its interval or a p-value is not a number")
    if tolerance is None:
        if p_value < alpha:
            return Decision(FAIL, "the interval excludes the claimed value")
        return Decision(PASS, "the interval contains the claimed value")
    band_lo, band_hi = tolerance_band(claim, tolerance)
    f_lo, f_hi = interval if fail_interval is None else fail_interval
    within, beyond = f"the claim ± {tolerance:.3g}", ""
    if p_equivalence is None:
        inside, whole = band_lo <= lo and hi <= band_hi, "the whole interval"
    else:
        inside, whole = p_equivalence < alpha, f"the whole {100 * (1 - 2 * alpha):.3g}% interval"
    if inside:
        return Decision(PASS, f"{whole} lies within {within}")
    if p_outside is None:
        outside, beyond = f_lo > band_hi or f_hi < band_lo, "the whole interval"
    else:
        outside, beyond = p_outside < alpha, f"the whole {100 * (1 - alpha):.3g}% interval"
    if outside:
        return Decision(FAIL, f"{beyond} lies outside {within}")
    if band_lo <= estimate <= band_hi:
        room = min(band_hi - estimate, estimate - band_lo)
        return Decision(
            INCONCLUSIVE,
            f"the estimate lies within {within} but the interval is wider than the band allows",
            _more(samples, (hi - lo) / 2.0, room),
        )
    gap = estimate - band_hi if estimate > band_hi else band_lo - estimate
    return Decision(
        INCONCLUSIVE,
        f"the estimate lies outside {within} but the interval still reaches into it: "
        "if the estimate holds, more data will fail it",
        _more(samples, (f_hi - f_lo) / 2.0, gap),
    )


def _more(samples: int, half_width: float, distance: float) -> int | None:
    """Further products for an interval of ``half_width`` (at ``samples``) to shrink to
    ``distance``, the width going as 1/sqrt(products); ``None`` for no distance."""
    if not distance > 0:
        return None
    return int(math.ceil(samples * max((half_width / distance) ** 2 - 1.0, 0.0)))


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
        Normal-theory interval for the slope, from the rows' covariance matrix.
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
    covariance: Any = None,
) -> GrowthFit | None:
    """Fit log Var = c + slope · log d_k by weighted least squares.

    Each row's log-variance has delta-method variance (se / var)², which sets its weight.
    With ``covariance`` (the estimates' covariance matrix, e.g. for rows drawn from shared
    blocks) the slope's standard error uses the off-diagonal terms as well, so dependent rows
    are not counted as independent evidence.

    Returns ``None`` with fewer than two distinct d_k or non-positive estimates.
    """
    import numpy as np

    keep = [
        i
        for i, (v, s) in enumerate(zip(variances, ses, strict=True))
        if v > 0 and s > 0 and math.isfinite(v) and math.isfinite(s)
    ]
    if len({dks[i] for i in keep}) < 2:
        return None
    x = np.log(np.array([dks[i] for i in keep], dtype=float))
    v = np.array([variances[i] for i in keep])
    if covariance is None:
        cov = np.diag(np.array([ses[i] for i in keep]) ** 2)
    else:
        cov = np.asarray(covariance, dtype=float)[np.ix_(keep, keep)]
    v_log = cov / np.outer(v, v)
    # weights from the rows' own variances; the slope's variance from the whole covariance
    # ("sandwich"): weighting by an estimated full covariance (GLS) is too optimistic
    weight = 1.0 / np.diag(v_log)
    design = np.column_stack([np.ones_like(x), x])
    bread = np.linalg.inv(design.T @ (design * weight[:, None]))
    slope_row = (bread @ (design * weight[:, None]).T)[1]
    slope = float(slope_row @ np.log(v))
    se = math.sqrt(max(float(slope_row @ v_log @ slope_row), 0.0))
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    ci = ConfidenceInterval(slope - z * se, slope + z * se)
    verdict = CONSISTENT if ci.low <= expected <= ci.high else REJECTED
    return GrowthFit(
        slope=slope, confidence_interval=ci, expected=expected, verdict=verdict, rows=len(keep)
    )
