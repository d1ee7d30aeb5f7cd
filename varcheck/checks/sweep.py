"""The sweep: Var(q·k) against a claim for several d_k, Holm-controlled, with the growth law."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._version import __version__
from ..core.distributions import Distribution
from ..core.estimation import MIN_BLOCKS, ConfidenceInterval, VarianceEstimate, budget_shortfall
from ..core.options import feasible_effort, resolve_seed, sampling_effort
from ..core.power import Detectable, detectable_of
from ..core.probe.laws import growth_law
from ..core.progress import ProgressCallback
from ..core.ranges import resolve_dks
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.user_code import UserSampler
from ..core.verdicts import (
    CONSISTENT,
    REJECTED,
    GrowthFit,
    exit_code,
    fit_growth,
    judge,
    marginal_only,
    outcome_of,
)
from ..output.display import Displayable
from .claims import Claim, claimed_value, sampler_claimed_value
from .settings import SamplerSetting, estimate_settings
from .verify import claim_source, sampler_tails_caution

__all__ = ["SweepRow", "SweepResult", "sweep"]


@dataclass(frozen=True)
class SweepRow:
    """One d_k of a sweep.

    Attributes
    ----------
    dk : int
    theory : DotProductTheory or None
        Exact moments of q·k for this d_k (``None`` with a user's sampler).
    claim_value : float or None
        The claimed Var(q·k) (``None`` when the claim cannot be evaluated, e.g. ``theory`` with
        an infinite variance).
    estimate : VarianceEstimate or None
        ``None`` when Var(q·k) is infinite (nothing to estimate).
    p_value : float
        Two-sided p-value of the claim (``nan`` without a valid interval).
    p_adjusted : float
        Holm-adjusted p-value over the sweep's rows.
    verdict : str
        ``consistent``, ``rejected``, ``unreliable`` (E[(q·k)^4] is infinite, or the row drew
        fewer products than a valid interval needs, or fewer than ``MIN_BLOCKS`` blocks before
        Ctrl-C: no interval is valid) or ``infinite`` (Var(q·k) is infinite).
    min_samples : int or None
        When the row drew fewer products than a valid interval needs (a fixed budget, or a run
        stopped at its time cap), the products it needs
        (:func:`~varcheck.core.estimation.minimum_products`); ``None`` otherwise.
    tails_caution : str or None
        For a user's sampler at a fixed budget or a coarse precision, why its interval may
        undercover (:func:`~varcheck.checks.verify.sampler_tails_caution`); part of ``caution``.
    detectable : Detectable or None
        What the row could have caught (:func:`~varcheck.core.power.detectable_of`): the
        relative deviations from the claim it detects with 90% power at α/m, m the rows with a
        valid test (Holm rejects a row whenever its raw p-value is below α/m); ``None`` without
        a valid test.
    """

    dk: int
    theory: DotProductTheory | None
    claim_value: float | None
    estimate: VarianceEstimate | None
    p_value: float
    p_adjusted: float
    verdict: str
    min_samples: int | None = None
    tails_caution: str | None = None
    detectable: Detectable | None = None

    @property
    def caution(self) -> str | None:
        """A warning that holds even when the verdict stands, or ``None`` (two: joined)."""
        notes = [c for c in (self._run_caution(), self.tails_caution) if c]
        return "; ".join(notes) or None

    def _run_caution(self) -> str | None:
        if self.theory is not None and self.theory.slow_convergence:
            return (
                "heavy tails: E[(q·k)^6] is infinite, coverage approaches nominal slowly "
                "(up to about 1.5 points short at coarse precision)"
            )
        if self.estimate is not None and self.estimate.stop_reason == "max-seconds":
            return "stopped at --max-seconds before the target precision" + (
                f" (fewer than {MIN_BLOCKS} blocks: no valid interval)"
                if self.estimate.cut_short
                else ""
            )
        if self.estimate is not None and self.estimate.stop_reason == "interrupted":
            return "interrupted: from the blocks drawn before the signal" + (
                f" (fewer than {MIN_BLOCKS}: no valid interval)" if self.estimate.cut_short else ""
            )
        return None

    def marginal_only(self, alpha: float) -> bool:
        """True when the row's own interval excludes the claim (p < alpha) but Holm, over all
        rows, does not reject it."""
        return marginal_only(self.verdict, self.p_value, alpha)

    @property
    def scaled_var(self) -> float:
        """Estimate of Var(q·k / sqrt(d_k))."""
        return math.nan if self.estimate is None else self.estimate.var / self.dk

    @property
    def scaled_confidence_interval(self) -> ConfidenceInterval:
        if self.estimate is None:
            return ConfidenceInterval(math.nan, math.nan)
        return self.estimate.scaled(1.0 / self.dk)[1]


@dataclass(frozen=True, repr=False)
class SweepResult(Displayable):
    """The result of :func:`sweep`.

    Attributes
    ----------
    rows : tuple of SweepRow
    fit : GrowthFit or None
        Slope of log Var against log d_k (``None`` with fewer than two usable rows); with a
        sampler, against the claim's own slope, naming the simple law of Var/claim.
    q_dist, k_dist : Distribution or None
        The entry laws (``None`` with a sampler).
    rho : float
    claim : str
        ``theory``, ``dk`` or the claim expression.
    confidence : float
    seed : int
        The seed used (drawn and reported when none was given).
    precision : float or None
    samples : int or None
    max_seconds : float or None
    interrupted : bool
        True when the run was stopped early (Ctrl-C or SIGTERM); ``rows`` holds the rows
        finished, then those cut short (stop reason ``interrupted``) with the blocks they had.
    sampler : UserSampler or None
        The user's sampler whose values were tested, with its bound arguments.
    version : str
        The varcheck version that produced the result.
    """

    rows: tuple[SweepRow, ...]
    fit: GrowthFit | None
    q_dist: Distribution | None
    k_dist: Distribution | None
    rho: float
    claim: str
    confidence: float
    seed: int
    precision: float | None
    samples: int | None
    max_seconds: float | None
    interrupted: bool = False
    sampler: UserSampler | None = None
    version: str = __version__

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def fit_law(self) -> str | None:
        """With a sampler: the simple law of Var/claim that the fit reads as
        (:func:`~varcheck.core.probe.laws.growth_law`); ``None`` otherwise."""
        if self.sampler is None or self.fit is None:
            return None
        return growth_law(self.fit.slope, *self.fit.confidence_interval, self.fit.expected)

    @property
    def exit_code(self) -> int:
        """0 all consistent, 1 a row rejected, 4 a row without a valid test; 130 (Ctrl-C) or 143
        (SIGTERM) interrupted."""
        return exit_code((r.verdict for r in self.rows), interrupted=self.interrupted)

    @property
    def outcome(self) -> str:
        """The worst row's verdict (``rejected`` over no valid test over ``consistent``), or
        ``interrupted``: what the exit code says, in a word."""
        verdicts = (r.verdict for r in self.rows)
        return outcome_of(verdicts, interrupted=self.interrupted, best=CONSISTENT)


def sweep(
    dk: int | str | Iterable[int] = "2..512",
    *,
    dist: str | Distribution | None = None,
    q_dist: str | Distribution | None = None,
    k_dist: str | Distribution | None = None,
    rho: float = 0.0,
    claim: str | float | None = None,
    sampler: Callable[..., Any] | str | UserSampler | None = None,
    confidence: float = 0.95,
    precision: float | None = 0.01,
    samples: int | None = None,
    max_seconds: float | None = None,
    seed: int | None = None,
    progress: ProgressCallback | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
) -> SweepResult:
    """Check Var(q·k) against a claim for several d_k, with family-wise error control.

    Parameters
    ----------
    dk : int, str or iterable of int
        Values of d_k, or a spec such as ``"2..512"`` (see :func:`varcheck.parse_dk`).
    dist, q_dist, k_dist : str or Distribution, optional
        Entry law of q and k (default ``normal``); ``q_dist``/``k_dist`` override it for one.
    rho : float
        Correlation of q_i with k_i (normal entries).
    claim : str or float, optional
        ``"theory"`` (the default: the exact formula for these laws), ``"dk"`` (the textbook
        Var = d_k) or any claim expression (see :func:`varcheck.parse_claim`). With a sampler:
        required, a number or an expression in ``dk``.
    sampler : callable or str, optional
        The user's code instead of varcheck's q and k, as in :func:`~varcheck.verify`; not
        with ``dist``, ``rho`` or ``scheduler``.
    confidence : float
        Level of each row's interval; verdicts control the family-wise error at
        ``1 - confidence`` over all rows (Holm).
    precision, samples : optional
        Target relative half-width of each interval, or a fixed number of q·k products (of
        values, in whole calls of at least 200, with a sampler) per row instead.
    max_seconds : float, optional
        Wall-time cap per row (rows drawn from shared blocks share ``max_seconds`` times their
        number, see :mod:`varcheck.core.shared_blocks`).
    seed : int, optional
        Root seed; drawn and reported when not given.
    progress : callable, optional
        ``progress(row_index, n_rows, fraction_of_row_done)``.
    workers, scheduler : optional
        Where chunks run, as in :func:`varcheck.core.parallel.open_runner`; results do not
        depend on them. A sampler runs on one thread unless ``workers`` is given.

    Returns
    -------
    SweepResult

    Examples
    --------
    >>> res = sweep("2..8", seed=1, precision=0.05)
    >>> [r.dk for r in res.rows], [r.verdict for r in res.rows], res.exit_code
    ([2, 4, 8], ['consistent', 'consistent', 'consistent'], 0)
    """
    laws, effort = (dist, q_dist, k_dist, rho), (confidence, precision, samples, max_seconds)
    dks, claim_obj, fields = _sweep_iv(dk, laws, claim, (sampler, scheduler), effort, seed)
    theories, claims, settings = _settings(dks, claim_obj, fields)
    estimates, interrupted, cov = estimate_settings(
        settings,
        **{n: fields[n] for n in ("seed", "confidence", "precision", "samples", "max_seconds")},
        progress=progress,
        workers=workers,
        scheduler=scheduler,
    )
    qk_laws = (fields["q_dist"], fields["k_dist"])
    rows = [
        replace(r, tails_caution=_tails(fields, r))
        for r in _judge(dks, theories, claims, estimates, fields["confidence"], qk_laws)
    ]
    fit = _growth_fit(rows, cov, fields["confidence"], claims if fields["sampler"] else None)
    return SweepResult(rows=tuple(rows), fit=fit, interrupted=interrupted, **fields)


def _tails(fields: dict[str, Any], row: SweepRow) -> str | None:
    """A sampler row's heavy-tail caution: a fixed budget, a coarse precision, or a time cap
    that stopped the row before its precision."""
    capped = row.estimate is not None and row.estimate.stop_reason == "max-seconds"
    return sampler_tails_caution(fields["sampler"], fields["precision"], time_limited=capped)


def _sweep_iv(
    dk: int | str | Iterable[int],
    laws: tuple[Any, Any, Any, float],
    claim: str | float | None,
    source: tuple[Any, str | None],
    effort: tuple[float, float | None, int | None, float | None],
    seed: int | None,
) -> tuple[list[int], Claim, dict[str, Any]]:
    """Validate :func:`sweep`'s arguments once: the d_k, the claim, and the result's fields.

    ``laws`` is ``(dist, q_dist, k_dist, rho)``, ``source`` ``(sampler, scheduler)`` and
    ``effort`` ``(confidence, precision, samples, max_seconds)``.
    """
    dks = resolve_dks(dk)
    q, k, rho, claim_obj, user = claim_source(source, laws, claim)
    confidence, precision, samples, max_seconds = sampling_effort(*effort, feasible=False)
    feasible_effort(confidence, precision, samples, max_seconds, dks=tuple(dks))  # every row
    fields = {
        "q_dist": q,
        "k_dist": k,
        "rho": rho,
        "claim": claim_obj.text,
        "confidence": confidence,
        "precision": precision,
        "samples": samples,
        "max_seconds": max_seconds,
        "seed": resolve_seed(seed),
        "sampler": user,
    }
    return dks, claim_obj, fields


def _settings(
    dks: list[int], claim: Claim, fields: dict[str, Any]
) -> tuple[list[DotProductTheory | None], list[float | None], list[Any]]:
    """Each d_k's exact theory (``None`` with a sampler), claimed value and setting."""
    user = fields["sampler"]
    if user is not None:
        claims: list[float | None] = [sampler_claimed_value(claim, d) for d in dks]
        return [None] * len(dks), claims, [SamplerSetting(user, d, (d,)) for d in dks]
    q, k = fields["q_dist"], fields["k_dist"]
    theories = [dot_product_theory(d, q, k, fields["rho"]) for d in dks]
    claims = [claimed_value(claim, th, q, k) for th in theories]
    return theories, claims, [(q, k, th, (th.dk,)) for th in theories]  # type: ignore[return-value]


def _growth_fit(
    rows: list[SweepRow], cov: np.ndarray, confidence: float, claims: list[Any] | None
) -> GrowthFit | None:
    """The growth law over the rows that have a valid test.

    With a sampler's ``claims`` (rows from separate runs: ``cov`` is diagonal), the expected
    exponent is the claim's own, its weighted slope over the same rows.
    """
    fitted = [i for i, r in enumerate(rows) if r.verdict in (CONSISTENT, REJECTED)]
    dks = [rows[i].dk for i in fitted]
    est = [rows[i].estimate for i in fitted]
    expected = 1.0
    if claims is not None:
        # the claim's log-slope with the rows' weights (relative SEs): a constant claim gives 0
        relative = [e.se / e.var if e.var > 0 else math.inf for e in est]  # type: ignore[union-attr]
        values = [claims[i] for i in fitted]
        ses = [c * r for c, r in zip(values, relative, strict=True)]
        slope = fit_growth(dks, values, ses, confidence=confidence)
        if slope is None:
            return None
        expected = slope.slope
    return fit_growth(
        dks,
        [e.var for e in est],  # type: ignore[union-attr]
        [e.se for e in est],  # type: ignore[union-attr]
        confidence=confidence,
        expected=expected,
        covariance=cov[np.ix_(fitted, fitted)],
    )


def _judge(
    dks: list[int],
    theories: list[DotProductTheory | None],
    claims: list[float | None],
    estimates: list[VarianceEstimate | None],
    confidence: float,
    laws: tuple[Distribution | None, Distribution | None],
) -> list[SweepRow]:
    """The rows finished (a prefix after Ctrl-C), Holm-judged together."""
    n = len(estimates)
    short = [
        None if th is None or est is None else budget_shortfall(*laws, th, est.samples)  # type: ignore[arg-type]
        for th, est in zip(theories, estimates, strict=False)
    ]
    valid = [
        (th is None or (th.estimable and s is None)) and not (est is not None and est.cut_short)
        for th, s, est in zip(theories[:n], short, estimates, strict=False)
    ]
    p_values = []
    for ok_law, c, est in zip(valid, claims, estimates, strict=False):
        ok = est is not None and ok_law and c is not None
        p_values.append(est.p_value(c) if ok else math.nan)  # type: ignore[union-attr, arg-type]
    adjusted, verdicts = judge(
        p_values,
        alpha=1.0 - confidence,
        finite=[est is not None for est in estimates],
        valid=valid,
    )
    family = max(sum(not math.isnan(p) for p in p_values), 1)
    caught = [
        None
        if est is None or math.isnan(p) or not est.var > 0
        else detectable_of(est, alpha=1.0 - confidence, family=family)
        for p, est in zip(p_values, estimates, strict=True)
    ]
    return [
        SweepRow(
            dk=dk,
            theory=th,
            claim_value=c,
            estimate=est,
            p_value=p,
            p_adjusted=padj,
            verdict=verdict,
            min_samples=need,
            detectable=det,
        )
        for dk, th, c, est, p, padj, verdict, need, det in zip(
            dks,
            theories,
            claims,
            estimates,
            p_values,
            adjusted,
            verdicts,
            short,
            caught,
            strict=False,
        )
    ]
