"""Claim tests: one claim at one d_k (:func:`verify`), or a family of them, Holm-controlled."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..core.distributions import Distribution
from ..core.estimation import MIN_BLOCKS, ConfidenceInterval, VarianceEstimate, budget_shortfall
from ..core.options import (
    confidence_from,
    entry_laws,
    resolve_seed,
    sampling_effort,
    user_sampler,
    valid_rho,
    valid_tolerance,
)
from ..core.power import Detectable, detectable_of
from ..core.probe.target import KernelTarget
from ..core.progress import ProgressCallback
from ..core.ranges import resolve_dks
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.user_code import UserSampler
from ..core.verdicts import (
    FAIL,
    INCONCLUSIVE,
    INFINITE,
    PASS,
    UNRELIABLE,
    ClaimPValues,
    Decision,
    adjusted_p_values,
    claim_p_values,
    decide,
    exit_code,
)
from ..errors import VarcheckError
from ..output.display import Displayable
from .claims import Claim, claimed_value, parse_claim, sampler_claim, sampler_claimed_value
from .settings import SamplerSetting, estimate_settings

__all__ = [
    "VerifyResult",
    "ClaimTest",
    "verify",
    "run_claim_tests",
    "claim_source",
    "sampler_tails_caution",
    "SAMPLER_TAILS_CAUTION",
    "claim_decision",
]


#: At or below this precision a sampler's heavy-tailed values were measured to cover; coarser, or
#: with a fixed budget, they did not (docs/own-code.md, "Values with heavy tails").
SAMPLER_TAILS_PRECISION = 0.01
#: Why a sampler's result at a fixed budget or a coarse precision carries a caution: there is no
#: budget rule for a user's values, whose tails varcheck does not know.
SAMPLER_TAILS_CAUTION = (
    "a sampler has no budget rule for heavy-tailed values: with a fixed budget or a precision "
    "coarser than 0.01, skewed values (lognormal) covered 87–94% and symmetric heavy-tailed "
    "ones 92–94% (t with 5 df; products of two Laplace entries, 93.3% at 200 and at 1,000 "
    "calls) instead of 95%, missing mostly low; at the default --precision 0.01 the cases "
    "measured covered 95% (docs/own-code.md, 'Values with heavy tails')."
)


def sampler_tails_caution(
    sampler: Any, precision: float | None, *, time_limited: bool = False
) -> str | None:
    """:data:`SAMPLER_TAILS_CAUTION` for a user's sampler run with a fixed budget, a precision
    coarser than :data:`SAMPLER_TAILS_PRECISION`, or stopped by its time cap before reaching
    its precision, else ``None`` (varcheck's own laws have the budget rule; a kernel's scale, a
    probe claim, is not a variance of its values)."""
    if sampler is None or isinstance(sampler, KernelTarget):
        return None
    if precision is not None and precision <= SAMPLER_TAILS_PRECISION and not time_limited:
        return None
    return SAMPLER_TAILS_CAUTION


# --- single claims ---------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class VerifyResult(Displayable):
    """The result of :func:`verify`: one claim about Var(q·k) (or its scaled version) at one d_k.

    Attributes
    ----------
    dk : int
    q_dist, k_dist : Distribution or None
        The entry laws (``None`` with a user's sampler).
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
        The exact value varcheck computes for the same quantity (``nan`` with a sampler).
    estimate : float
        Estimate of the quantity (``nan`` when it is infinite).
    confidence_interval : ConfidenceInterval
    p_value : float
        The two-sided p-value of the claimed value, with or without a tolerance (Holm-adjusted
        inside ``varcheck check`` for a claim without a tolerance); ``nan`` without a valid
        interval.
    outcome : str
        ``pass``, ``fail``, ``inconclusive``, ``unreliable`` or ``infinite``.
    reason : str
        Why, in one sentence.
    more_samples : int or None
        For ``inconclusive``: roughly how many more products (or values) would settle it.
    samples : int
        Products used (values, with a sampler).
    confidence : float
    seed : int
    sampler : UserSampler, KernelTarget or None
        The user's sampler whose values were tested, with its bound arguments (a probe
        claim's row: its kernel, see ``kernel``).
    equivalence_interval : ConfidenceInterval or None
        With a tolerance, the ``1 - 2 alpha`` interval that must lie within the band for a pass
        (``confidence_interval`` stays the ``1 - alpha`` one); ``None`` otherwise.
    min_samples : int or None
        When fewer products were drawn than a valid interval needs, the products it needs
        (:func:`~varcheck.core.estimation.minimum_products`); the outcome is then
        ``unreliable``.
    p_equivalence : float or None
        With a tolerance, the p-value of the two one-sided tests (TOST) that the quantity lies
        inside claim × [1 − tolerance, 1 + tolerance]: a pass needs it below alpha (never
        adjusted); ``None`` without a tolerance.
    p_outside : float or None
        With a tolerance, the two-sided p-value of the band's edge nearest the estimate when the
        estimate lies outside the band (1 inside it): a fail needs it below alpha, the whole
        ``1 - alpha`` interval outside the band (Holm-adjusted inside ``varcheck check``);
        ``None`` without a tolerance.
    interrupted : bool
        True when Ctrl-C or SIGTERM stopped the run before its target: the estimate, interval
        and outcome are from the blocks drawn by then (no interval, outcome ``unreliable``,
        with fewer than ``MIN_BLOCKS``), and the exit code is 130 (143 after SIGTERM).
    detectable : Detectable or None
        What the test could have caught (:func:`~varcheck.core.power.detectable_of`): the
        relative deviations from the claim it detects with 90% power at its share of the
        family's level (α/m over the m tests of a Holm family; m = 1 for ``assert``), and for
        a tolerance claim the probability that a true claim passes; ``None`` without a valid
        test.
    """

    dk: int
    q_dist: Distribution | None
    k_dist: Distribution | None
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
    sampler: UserSampler | KernelTarget | None = None
    equivalence_interval: ConfidenceInterval | None = None
    min_samples: int | None = None
    p_equivalence: float | None = None
    p_outside: float | None = None
    interrupted: bool = False
    detectable: Detectable | None = None
    version: str = __version__

    @property
    def passed(self) -> bool:
        return self.outcome == PASS

    @property
    def p_values(self) -> ClaimPValues:
        """The test's p-values together (:class:`~varcheck.core.verdicts.ClaimPValues`)."""
        return ClaimPValues(self.p_value, self.p_equivalence, self.p_outside)

    @property
    def caution(self) -> str | None:
        """A warning that holds whatever the outcome (:func:`sampler_tails_caution`), or
        ``None``."""
        capped = self.raw is not None and self.raw.stop_reason == "max-seconds"
        return sampler_tails_caution(self.sampler, self.precision, time_limited=capped)

    @property
    def law(self) -> str | None:
        """For a sampler's fail or inconclusive: the simple law its ratio Var/claim reads as
        (:func:`~varcheck.core.probe.laws.variance_ratio_law`), else ``None``."""
        if self.sampler is None or self.kernel is not None or not self.claim_value:
            return None
        if self.outcome not in (FAIL, INCONCLUSIVE) or self.claim_value <= 0:
            return None
        from ..core.probe.laws import variance_ratio_law

        c = self.claim_value
        lo, hi = self.confidence_interval
        return variance_ratio_law(self.estimate / c, lo / c, hi / c, self.dk)

    @property
    def kernel(self) -> KernelTarget | None:
        """The kernel of a probe claim's row (held in ``sampler``: the quantity is then its
        effective scale, ``samples`` its calls), else ``None``."""
        return self.sampler if isinstance(self.sampler, KernelTarget) else None

    @property
    def exit_code(self) -> int:
        """0 pass, 1 fail, 3 inconclusive, 4 no valid test (infinite moments); interrupted: 130
        (Ctrl-C) or 143 (SIGTERM)."""
        return exit_code([self.outcome], interrupted=self.interrupted)


@dataclass(frozen=True)
class ClaimTest:
    """What one claim test needs, before sampling (see :func:`run_claim_tests`).

    With a ``sampler``, ``q`` and ``k`` are ``None`` and the claim is in ``dk`` only.
    """

    dk: int
    q: Distribution | None
    k: Distribution | None
    rho: float
    claim: Claim
    scaled: bool
    tolerance: float | None
    stream: tuple[int, ...]
    sampler: UserSampler | None = None

    def setting(self, theory: DotProductTheory | None) -> Any:
        """What :func:`~varcheck.checks.settings.estimate_settings` estimates for this test."""
        if self.sampler is not None:
            return SamplerSetting(self.sampler, self.dk, self.stream)
        return (self.q, self.k, theory, self.stream)

    def prepare(self) -> tuple[DotProductTheory | None, float | None]:
        """The exact theory (``None`` with a sampler) and the claimed value."""
        if self.sampler is not None:
            return None, sampler_claimed_value(self.claim, self.dk)
        th = dot_product_theory(self.dk, self.q, self.k, self.rho)  # type: ignore[arg-type]
        return th, claimed_value(self.claim, th, self.q, self.k, scaled=self.scaled)  # type: ignore[arg-type]


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
    keep_partial: bool = False,
) -> list[VerifyResult]:
    """Run claim tests as one family: Holm over their p-values when ``adjust``.

    On Ctrl-C or SIGTERM (``KeyboardInterrupt``) the tests finished so far are judged and
    returned: the list is then shorter than ``tests``. With ``keep_partial``, the test under
    way is judged too, on the blocks it had drawn (marked ``interrupted``), when it has any.
    """
    prepared = [(t, *t.prepare()) for t in tests]
    estimates, interrupted, _ = estimate_settings(
        [t.setting(th) for t, th, _ in prepared],
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
    # after Ctrl-C, judge what finished: the caller sees fewer results than tests (a shared
    # group's rows, all cut short together, are a sweep's partial rows, not finished tests)
    if interrupted:
        finished = list(itertools.takewhile(_finished, estimates))
        estimates = estimates[: len(finished) + 1] if keep_partial else finished
    prepared = prepared[: len(estimates)]
    p_used = _claim_p_values(prepared, estimates, adjust)
    effort: dict[str, Any] = {"confidence": confidence, "seed": seed, "precision": precision}
    family = sum(not math.isnan(p.p_fail) for p in p_used) if adjust else 1
    results = [
        with_detectable(
            _verify_result(t, th, value, est, p, requested_samples=samples, **effort), family
        )
        for (t, th, value), est, p in zip(prepared, estimates, p_used, strict=True)
    ]
    if interrupted and keep_partial and results:  # the last test is the one cut short
        results[-1] = dataclasses.replace(results[-1], interrupted=True)
    return results


def with_detectable(result: VerifyResult, family: int) -> VerifyResult:
    """``result`` with what its test could have caught as one of ``family`` tests (Holm), or
    with none where it has no valid test (no interval, no p-value)."""
    est = result.raw
    valid = not math.isnan(result.p_values.p_fail) and result.outcome not in (UNRELIABLE, INFINITE)
    if est is None or not valid or not est.var > 0:
        return dataclasses.replace(result, detectable=None)
    det = detectable_of(
        est, alpha=1.0 - result.confidence, family=max(family, 1), tolerance=result.tolerance
    )
    return dataclasses.replace(result, detectable=det)


def _finished(est: VarianceEstimate | None) -> bool:
    return est is None or est.stop_reason != "interrupted"


def _shortfall(
    t: ClaimTest, th: DotProductTheory | None, est: VarianceEstimate | None
) -> int | None:
    """The products a valid interval needs when the test drew fewer (the budget rule)."""
    if th is None or est is None:
        return None
    return budget_shortfall(t.q, t.k, th, est.samples)  # type: ignore[arg-type]


def _claim_p_values(
    prepared: list[tuple[ClaimTest, DotProductTheory | None, float | None]],
    estimates: list[VarianceEstimate | None],
    adjust: bool,
) -> list[ClaimPValues]:
    """Each test's p-values (:func:`~varcheck.core.verdicts.claim_p_values`), ``nan`` without a
    valid interval.

    With ``adjust``, Holm over the p-values a fail rests on (the two-sided one; ``p_outside``
    with a tolerance): the family-wise rate of false fails stays below alpha. The TOST p-values
    are not adjusted: each tolerance claim passes wrongly (its variance off by more than the
    tolerance) at most alpha of the time, as with ``varcheck assert``, and "more samples" stays
    what that test needs.
    """
    out = []
    for (t, th, value), est in zip(prepared, estimates, strict=True):
        ok = est is not None and (th is None or th.estimable) and value is not None
        ok = ok and _shortfall(t, th, est) is None and not est.cut_short  # type: ignore[union-attr]
        if not ok:
            none = None if t.tolerance is None else math.nan
            out.append(ClaimPValues(math.nan, none, none))
            continue
        raw_claim = value * t.dk if t.scaled else value  # type: ignore[operator]
        out.append(claim_p_values(est, est.var, raw_claim, t.tolerance))  # type: ignore[arg-type, union-attr]
    return adjusted_p_values(out) if adjust else out


_NO_INTERVAL = ConfidenceInterval(math.nan, math.nan)


def _decision(
    t: ClaimTest,
    th: DotProductTheory | None,
    value: float | None,
    est: VarianceEstimate | None,
    p: ClaimPValues,
    alpha: float,
) -> tuple[float, ConfidenceInterval, ConfidenceInterval | None, Decision]:
    """The point estimate, intervals (``1 - alpha``; ``1 - 2 alpha`` with a tolerance) and
    decision of one claim test, on the claim's scale; no interval where none is valid."""
    if est is None:
        nothing = Decision(INFINITE, "Var(q·k) is infinite: there is nothing to estimate")
        return math.nan, _NO_INTERVAL, None, nothing
    factor = 1.0 / t.dk if t.scaled else 1.0
    point, interval = est.scaled(factor)
    why = _unreliable(th, est, _shortfall(t, th, est))
    if why is not None:
        return point, _NO_INTERVAL, None, Decision(UNRELIABLE, why)
    inner = None
    if t.tolerance is not None:
        lo, hi = est.interval_at(max(1.0 - 2.0 * alpha, 0.0))
        inner = ConfidenceInterval(lo * factor, hi * factor)
    decision = claim_decision(
        point, interval, inner, value, p, alpha=alpha, tolerance=t.tolerance, samples=est.samples
    )
    return point, interval, inner, decision


def claim_decision(
    point: float,
    interval: ConfidenceInterval,
    inner: ConfidenceInterval | None,
    value: float | None,
    p: ClaimPValues,
    *,
    alpha: float,
    tolerance: float | None,
    samples: int,
) -> Decision:
    """The decision of one claim test with a valid interval, on the claim's scale: ``p`` is its
    p-values (the one a fail rests on Holm-adjusted inside ``varcheck check``), ``inner`` the
    ``1 - 2 alpha`` interval of an equivalence test (``None`` without a tolerance). The one
    place :func:`verify` and ``varcheck check`` call :func:`~varcheck.core.verdicts.decide`."""
    return decide(
        point,
        interval if inner is None else inner,
        value,  # type: ignore[arg-type]
        p_value=p.p_value,
        alpha=alpha,
        tolerance=tolerance,
        samples=samples,
        p_equivalence=p.p_equivalence,
        p_outside=p.p_outside,
        fail_interval=interval,
    )


def _unreliable(th: DotProductTheory | None, est: VarianceEstimate, need: int | None) -> str | None:
    """Why no interval is valid for this estimate (``None`` when one is)."""
    if est.cut_short:
        blocks = "calls of the sampler" if th is None else "independent blocks"
        how = "interrupted" if est.stop_reason == "interrupted" else "stopped at --max-seconds"
        return (
            f"{how} after {est.blocks:,} {blocks}: an interval needs at least "
            f"{MIN_BLOCKS}, so the estimate from them has none"
        )
    if th is None:
        return None
    if th.status == "infinite-fourth-moment":
        return "E[(q·k)^4] is infinite, so no interval for the variance can be trusted"
    if not th.estimable:
        return (
            f"the kurtosis of q·k is {th.kurtosis:.3g}: the variance estimate "
            "converges too slowly for any affordable interval to be trusted"
        )
    if need is not None:
        tails = ", and an entry's sixth moment is infinite" if th.slow_convergence else ""
        return (
            f"{est.samples:,} products are too few for a valid interval here (the kurtosis of "
            f"q·k is {th.kurtosis:.3g}{tails}): it needs at least {need:,} (--samples {need})"
        )
    return None


def _verify_result(
    t: ClaimTest,
    th: DotProductTheory | None,
    value: float | None,
    est: VarianceEstimate | None,
    p: ClaimPValues,
    *,
    confidence: float,
    seed: int,
    precision: float | None,
    requested_samples: int | None,
) -> VerifyResult:
    factor = 1.0 / t.dk if t.scaled else 1.0
    point, interval, inner, outcome = _decision(t, th, value, est, p, 1.0 - confidence)
    return VerifyResult(
        dk=t.dk,
        q_dist=t.q,
        k_dist=t.k,
        rho=t.rho,
        claim=t.claim.text,
        claim_value=value,
        scaled=t.scaled,
        tolerance=t.tolerance,
        theory_value=math.nan if th is None else th.var * factor,
        estimate=point,
        confidence_interval=interval,
        p_value=p.p_value,
        outcome=outcome.outcome,
        reason=outcome.reason,
        more_samples=outcome.more_samples,
        samples=0 if est is None else est.samples,
        confidence=confidence,
        seed=seed,
        raw=est,
        precision=precision,
        requested_samples=requested_samples,
        sampler=t.sampler,
        equivalence_interval=inner,
        min_samples=_shortfall(t, th, est),
        p_equivalence=p.p_equivalence,
        p_outside=p.p_outside,
    )


def verify(
    dk: int,
    *,
    claim: str | float | None = None,
    sampler: Callable[..., Any] | str | UserSampler | None = None,
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
        Length of q and k (passed to the sampler).
    claim : str or float
        A number or an expression in ``dk``, ``rho``, ``theory`` and the entry moments (see
        :func:`varcheck.parse_claim`); default ``theory``. With a sampler: required, in ``dk``.
    sampler : callable or str, optional
        The user's code under test: ``fn(rng, dk)`` returning the values of one independent run
        (any shape), or ``"module:function"``; see docs/own-code.md.
    dist, q_dist, k_dist, rho, precision, samples, max_seconds, workers, scheduler
        As in :func:`~varcheck.checks.sweep.sweep`.
    scaled : bool
        Test the variance of q·k / sqrt(d_k) (of the values / sqrt(d_k)) instead.
    tolerance : float, optional
        Relative tolerance T: pass when the whole ``1 - 2 alpha`` interval (90%) lies inside
        claim × [1 − T, 1 + T] (``p_equivalence``); fail when the whole ``1 - alpha`` interval
        (95%) lies outside it (``p_outside``); otherwise inconclusive.
    confidence, alpha : float, optional
        Interval level, or its complement (give one; default 0.95).
    seed : int, optional
        Root seed; drawn and reported when not given.
    progress : callable, optional
        Called with the fraction done.

    Returns
    -------
    VerifyResult
        On Ctrl-C or SIGTERM, the estimate from the blocks drawn so far (``interrupted``).

    Examples
    --------
    >>> verify(64, claim="dk", seed=1).outcome
    'pass'
    >>> verify(64, claim="dk", dist="normal:mean=0.5", seed=1).outcome   # Var is 1.5 dk
    'fail'
    >>> def logits(rng, dk):
    ...     return rng.standard_normal((32, dk)) @ rng.standard_normal((dk, 32)) / dk**0.5
    >>> verify(64, claim=1, sampler=logits, tolerance=0.05, seed=1).outcome
    'pass'
    """
    source, laws = (sampler, scheduler), (dist, q_dist, k_dist, rho)
    effort = (confidence, precision, samples, max_seconds)
    test, cleaned = _verify_iv(dk, claim, source, laws, scaled, tolerance, alpha, effort)
    results = run_claim_tests(
        [test],
        **cleaned,
        seed=resolve_seed(seed),
        progress=None if progress is None else (lambda _i, _n, f: progress(f)),
        adjust=False,
        workers=workers,
        scheduler=scheduler,
        keep_partial=True,
    )
    if not results:  # interrupted before two blocks: nothing to report
        raise KeyboardInterrupt
    return results[0]


def claim_source(
    source: tuple[Any, str | None], laws: tuple[Any, Any, Any, float], claim: str | float | None
) -> tuple[Distribution | None, Distribution | None, float, Claim, UserSampler | None]:
    """The values' source and the claim, checked: ``(q, k, rho, claim, sampler)``.

    ``source`` is ``(sampler, scheduler)`` and ``laws`` ``(dist, q_dist, k_dist, rho)``. With a
    sampler, the laws are ``None``, rho is 0 and the claim is one in ``dk`` (required); else the
    claim defaults to ``theory``.
    """
    user = user_sampler(source[0], laws, source[1])
    if user is not None:
        return None, None, 0.0, sampler_claim(claim, user.target), user
    q, k = entry_laws(*laws[:3])
    rho = valid_rho(laws[3], q, k)
    return q, k, rho, parse_claim("theory" if claim is None else claim), None


def _verify_iv(
    dk: int,
    claim: str | float | None,
    source: tuple[Any, str | None],
    setting: tuple[Any, Any, Any, float],
    scaled: bool,
    tolerance: float | None,
    alpha: float | None,
    effort: tuple[float | None, float | None, int | None, float | None],
) -> tuple[ClaimTest, dict[str, Any]]:
    """Validate :func:`verify`'s arguments once, in the order the checks have always run.

    ``source`` is ``(sampler, scheduler)``, ``setting`` is ``(dist, q_dist, k_dist, rho)``,
    ``effort`` is ``(confidence, precision, samples, max_seconds)``; returns the test and the
    cleaned effort.
    """
    dks = resolve_dks(dk)
    if len(dks) != 1:
        raise VarcheckError(f"verify takes one d_k, got {dk!r}; use sweep for several")
    q, k, rho, claim_obj, user = claim_source(source, setting, claim)
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
        sampler=user,
    )
    return test, cleaned
