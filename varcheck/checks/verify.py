"""Claim tests: one claim at one d_k (:func:`verify`), or a family of them, Holm-controlled."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..core.distributions import Distribution
from ..core.estimation import ConfidenceInterval, VarianceEstimate
from ..core.options import (
    confidence_from,
    entry_laws,
    resolve_seed,
    sampling_effort,
    valid_rho,
    valid_tolerance,
)
from ..core.ranges import resolve_dks
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.verdicts import (
    INFINITE,
    PASS,
    UNRELIABLE,
    Decision,
    decide,
    exit_code,
    holm_adjust,
)
from ..errors import VarcheckError
from .claims import Claim, claimed_value, parse_claim
from .settings import ProgressCallback, estimate_settings

__all__ = ["VerifyResult", "ClaimTest", "verify", "run_claim_tests"]


# --- single claims ---------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyResult:
    """The result of :func:`verify`: one claim about Var(q·k) (or its scaled version) at one d_k.

    Attributes
    ----------
    dk : int
    q_dist, k_dist : Distribution
    rho : float
    claim : str
        The claim expression.
    claim_value : float or None
        Its value for this setting (``None`` when Var(q·k) is infinite).
    scaled : bool
        True when the claim is about Var(q·k / sqrt(d_k)).
    tolerance : float or None
        Relative tolerance of an equivalence test; ``None`` for a consistency test.
    theory_value : float
        The exact value varcheck computes for the same quantity.
    estimate : float
        Estimate of the quantity (``nan`` when it is infinite).
    confidence_interval : ConfidenceInterval
    p_value : float
        Two-sided p-value of the claim (adjusted for multiplicity inside ``varcheck check``).
    outcome : str
        ``pass``, ``fail``, ``inconclusive``, ``unreliable`` or ``infinite``.
    reason : str
        Why, in one sentence.
    more_samples : int or None
        For ``inconclusive``: roughly how many more products would settle it.
    samples : int
        Products used.
    confidence : float
    seed : int
    """

    dk: int
    q_dist: Distribution
    k_dist: Distribution
    rho: float
    claim: str
    claim_value: float | None
    scaled: bool
    tolerance: float | None
    theory_value: float
    estimate: float
    confidence_interval: ConfidenceInterval
    p_value: float
    outcome: str
    reason: str
    more_samples: int | None
    samples: int
    confidence: float
    seed: int
    raw: VarianceEstimate | None = None
    precision: float | None = None
    requested_samples: int | None = None
    version: str = __version__

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    @property
    def exit_code(self) -> int:
        """0 pass, 1 fail, 3 inconclusive, 4 no valid test (infinite moments)."""
        return exit_code([self.outcome])


@dataclass(frozen=True)
class ClaimTest:
    """What one claim test needs, before sampling (see :func:`run_claim_tests`)."""

    dk: int
    q: Distribution
    k: Distribution
    rho: float
    claim: Claim
    scaled: bool
    tolerance: float | None
    stream: tuple[int, ...]


def run_claim_tests(
    tests: list[ClaimTest],
    *,
    seed: int,
    confidence: float,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    progress: ProgressCallback | None = None,
    adjust: bool = True,
    workers: int | None = None,
    scheduler: str | None = None,
) -> list[VerifyResult]:
    """Run claim tests as one family: Holm over their p-values when ``adjust``.

    On Ctrl-C (``KeyboardInterrupt``) the tests finished so far are judged and returned: the
    list is then shorter than ``tests``.
    """
    prepared = []
    for t in tests:
        th = dot_product_theory(t.dk, t.q, t.k, t.rho)
        prepared.append((t, th, claimed_value(t.claim, th, t.q, t.k, scaled=t.scaled)))
    estimates, _, _ = estimate_settings(
        [(t.q, t.k, th, t.stream) for t, th, _ in prepared],
        share_keys=[t.stream[:-1] for t, _, _ in prepared],
        seed=seed,
        confidence=confidence,
        precision=precision,
        samples=samples,
        max_seconds=max_seconds,
        progress=progress,
        workers=workers,
        scheduler=scheduler,
    )
    # after Ctrl-C, judge what finished: the caller sees fewer results than tests
    prepared = prepared[: len(estimates)]
    p_used = _claim_p_values(prepared, estimates, adjust)
    effort = {"confidence": confidence, "seed": seed, "precision": precision}
    return [
        _verify_result(t, th, value, est, p, requested_samples=samples, **effort)
        for (t, th, value), est, p in zip(prepared, estimates, p_used, strict=True)
    ]


def _claim_p_values(
    prepared: list[tuple[ClaimTest, DotProductTheory, float | None]],
    estimates: list[VarianceEstimate | None],
    adjust: bool,
) -> list[float]:
    """Each test's p-value (NaN without a valid interval), Holm-adjusted when ``adjust``."""
    p_raw = []
    for (t, th, value), est in zip(prepared, estimates, strict=True):
        ok = est is not None and th.estimable and value is not None
        raw_claim = value * t.dk if (ok and t.scaled) else value
        p_raw.append(est.p_value(raw_claim) if ok else math.nan)  # type: ignore[union-attr]
    return holm_adjust(p_raw) if adjust else p_raw


def _decision(
    th: DotProductTheory,
    value: float | None,
    est: VarianceEstimate | None,
    p: float,
    alpha: float,
    tolerance: float | None,
    factor: float,
) -> tuple[float, ConfidenceInterval, Decision]:
    """The point estimate, interval and decision of one claim test (on the claim's scale)."""
    if est is None:
        nothing = Decision(INFINITE, "Var(q·k) is infinite: there is nothing to estimate")
        return math.nan, ConfidenceInterval(math.nan, math.nan), nothing
    point, interval = est.scaled(factor)
    if not th.estimable:
        why = (
            "E[(q·k)^4] is infinite, so no interval for the variance can be trusted"
            if th.status == "infinite-fourth-moment"
            else f"the kurtosis of q·k is {th.kurtosis:.3g}: the variance estimate "
            "converges too slowly for any affordable interval to be trusted"
        )
        return point, interval, Decision(UNRELIABLE, why)
    decision = decide(
        point, interval, value, p_value=p, alpha=alpha, tolerance=tolerance, samples=est.samples
    )
    return point, interval, decision


def _verify_result(
    t: ClaimTest,
    th: DotProductTheory,
    value: float | None,
    est: VarianceEstimate | None,
    p: float,
    *,
    confidence: float,
    seed: int,
    precision: float | None,
    requested_samples: int | None,
) -> VerifyResult:
    factor = 1.0 / t.dk if t.scaled else 1.0
    point, interval, outcome = _decision(th, value, est, p, 1.0 - confidence, t.tolerance, factor)
    return VerifyResult(
        dk=t.dk,
        q_dist=t.q,
        k_dist=t.k,
        rho=t.rho,
        claim=t.claim.text,
        claim_value=value,
        scaled=t.scaled,
        tolerance=t.tolerance,
        theory_value=th.var * factor,
        estimate=point,
        confidence_interval=interval,
        p_value=p,
        outcome=outcome.outcome,
        reason=outcome.reason,
        more_samples=outcome.more_samples,
        samples=0 if est is None else est.samples,
        confidence=confidence,
        seed=seed,
        raw=est,
        precision=precision,
        requested_samples=requested_samples,
    )


def verify(
    dk: int,
    *,
    claim: str | float = "theory",
    dist: str | Distribution | None = None,
    q_dist: str | Distribution | None = None,
    k_dist: str | Distribution | None = None,
    rho: float = 0.0,
    scaled: bool = False,
    tolerance: float | None = None,
    confidence: float | None = None,
    alpha: float | None = None,
    precision: float | None = 0.01,
    samples: int | None = None,
    max_seconds: float | None = None,
    seed: int | None = None,
    progress: Callable[[float], None] | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
) -> VerifyResult:
    """Test one claim about Var(q·k) (or Var(q·k/√d_k) with ``scaled``) at one d_k.

    Parameters
    ----------
    dk : int
        Length of q and k.
    claim : str or float
        A number or an expression in ``dk``, ``rho``, ``theory`` and the entry moments (see
        :func:`varcheck.parse_claim`).
    dist, q_dist, k_dist, rho
        Entry distributions and correlation, as in :func:`~varcheck.checks.sweep.sweep`.
    scaled : bool
        Test the variance of q·k / sqrt(d_k) instead of q·k.
    tolerance : float, optional
        Relative tolerance: an equivalence test that passes only when the whole interval lies
        within claim × (1 ± tolerance).
    confidence, alpha : float, optional
        Interval level, or its complement (give one; default 0.95).
    precision, samples, max_seconds, workers, scheduler
        Sampling effort and where chunks run, as in :func:`~varcheck.checks.sweep.sweep`.
    seed : int, optional
        Root seed; drawn and reported when not given.
    progress : callable, optional
        Called with the fraction done.

    Returns
    -------
    VerifyResult

    Examples
    --------
    >>> r = verify(64, claim="dk", seed=1)
    >>> r.outcome, r.exit_code
    ('pass', 0)
    >>> verify(64, claim="dk", dist="normal:mean=0.5", seed=1).outcome   # Var is 1.5 dk
    'fail'
    >>> verify(64, claim="dk", tolerance=0.02, seed=1).outcome
    'pass'
    """
    test, effort = _verify_iv(
        dk,
        claim,
        (dist, q_dist, k_dist, rho),
        scaled,
        tolerance,
        alpha,
        (confidence, precision, samples, max_seconds),
    )
    results = run_claim_tests(
        [test],
        **effort,
        seed=resolve_seed(seed),
        progress=None if progress is None else (lambda _i, _n, f: progress(f)),
        adjust=False,
        workers=workers,
        scheduler=scheduler,
    )
    if not results:
        raise KeyboardInterrupt
    return results[0]


def _verify_iv(
    dk: int,
    claim: str | float,
    setting: tuple[Any, Any, Any, float],
    scaled: bool,
    tolerance: float | None,
    alpha: float | None,
    effort: tuple[float | None, float | None, int | None, float | None],
) -> tuple[ClaimTest, dict[str, Any]]:
    """Validate :func:`verify`'s arguments once, in the order the checks have always run.

    ``setting`` is ``(dist, q_dist, k_dist, rho)``, ``effort`` is ``(confidence, precision,
    samples, max_seconds)``; returns the test and the cleaned effort.
    """
    dks = resolve_dks(dk)
    if len(dks) != 1:
        raise VarcheckError(f"verify takes one d_k, got {dk!r}; use sweep for several")
    q, k = entry_laws(*setting[:3])
    rho = valid_rho(setting[3], q, k)
    claim_obj = parse_claim(claim)
    tolerance = valid_tolerance(tolerance)
    confidence = confidence_from(effort[0], alpha)
    names = ("confidence", "precision", "samples", "max_seconds")
    cleaned = dict(zip(names, sampling_effort(confidence, *effort[1:]), strict=True))
    test = ClaimTest(
        dk=dks[0],
        q=q,
        k=k,
        rho=rho,
        claim=claim_obj,
        scaled=bool(scaled),
        tolerance=tolerance,
        stream=(dks[0],),
    )
    return test, cleaned
