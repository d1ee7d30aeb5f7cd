"""The sweep: Var(q·k) against a claim for several d_k, Holm-controlled, with the growth law."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._version import __version__
from ..core.distributions import Distribution
from ..core.estimation import ConfidenceInterval, VarianceEstimate
from ..core.options import entry_laws, resolve_seed, sampling_effort, valid_rho
from ..core.ranges import resolve_dks
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.verdicts import (
    CONSISTENT,
    REJECTED,
    GrowthFit,
    exit_code,
    fit_growth,
    judge,
    marginal_only,
)
from .claims import Claim, claimed_value, parse_claim
from .settings import ProgressCallback, estimate_settings

__all__ = ["SweepRow", "SweepResult", "sweep"]


@dataclass(frozen=True)
class SweepRow:
    """One d_k of a sweep.

    Attributes
    ----------
    dk : int
    theory : DotProductTheory
        Exact moments of q·k for this d_k.
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
        ``consistent``, ``rejected``, ``unreliable`` (E[(q·k)^4] is infinite: the interval is not
        valid) or ``infinite`` (Var(q·k) is infinite).
    """

    dk: int
    theory: DotProductTheory
    claim_value: float | None
    estimate: VarianceEstimate | None
    p_value: float
    p_adjusted: float
    verdict: str

    @property
    def caution(self) -> str | None:
        """A warning that holds even when the verdict stands, or ``None``."""
        if self.theory.slow_convergence:
            return "heavy tails: E[(q·k)^6] is infinite, coverage approaches nominal slowly"
        if self.estimate is not None and self.estimate.stop_reason == "max-seconds":
            return "stopped at --max-seconds before the target precision"
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


@dataclass(frozen=True)
class SweepResult:
    """The result of :func:`sweep`.

    Attributes
    ----------
    rows : tuple of SweepRow
    fit : GrowthFit or None
        Slope of log Var against log d_k (``None`` with fewer than two usable rows).
    q_dist, k_dist : Distribution
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
        True when the run was stopped early (Ctrl-C); ``rows`` holds the rows finished.
    version : str
        The varcheck version that produced the result.
    """

    rows: tuple[SweepRow, ...]
    fit: GrowthFit | None
    q_dist: Distribution
    k_dist: Distribution
    rho: float
    claim: str
    confidence: float
    seed: int
    precision: float | None
    samples: int | None
    max_seconds: float | None
    interrupted: bool = False
    version: str = __version__

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def exit_code(self) -> int:
        """0 all consistent, 1 a row rejected, 4 a row without a valid test, 130 interrupted."""
        return exit_code((r.verdict for r in self.rows), interrupted=self.interrupted)


def sweep(
    dk: int | str | Iterable[int] = "2..512",
    *,
    dist: str | Distribution | None = None,
    q_dist: str | Distribution | None = None,
    k_dist: str | Distribution | None = None,
    rho: float = 0.0,
    claim: str = "theory",
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
    claim : str
        ``"theory"`` (the exact formula for these laws), ``"dk"`` (the textbook Var = d_k) or
        any claim expression (see :func:`varcheck.parse_claim`).
    confidence : float
        Level of each row's interval; verdicts control the family-wise error at
        ``1 - confidence`` over all rows (Holm).
    precision : float
        Target relative half-width of each interval (ignored with ``samples``).
    samples : int, optional
        Fixed number of q·k products per row instead of a target precision.
    max_seconds : float, optional
        Wall-time cap per row (rows drawn from shared blocks share ``max_seconds`` times their
        number, see :mod:`varcheck.core.shared_blocks`).
    seed : int, optional
        Root seed; drawn and reported when not given.
    progress : callable, optional
        ``progress(row_index, n_rows, fraction_of_row_done)``.
    workers, scheduler : optional
        Where chunks run, as in :func:`varcheck.core.parallel.open_runner`; results do not
        depend on them.

    Returns
    -------
    SweepResult

    Examples
    --------
    >>> res = sweep("2..8", seed=1, precision=0.05)
    >>> [r.dk for r in res.rows], [r.verdict for r in res.rows]
    ([2, 4, 8], ['consistent', 'consistent', 'consistent'])
    >>> res.exit_code
    0
    """
    dks, claim_obj, fields = _sweep_iv(
        dk, dist, q_dist, k_dist, rho, claim, confidence, precision, samples, max_seconds, seed
    )
    q, k = fields["q_dist"], fields["k_dist"]
    theories = [dot_product_theory(d, q, k, fields["rho"]) for d in dks]
    claims = [claimed_value(claim_obj, th, q, k) for th in theories]
    estimates, interrupted, cov = estimate_settings(
        [(q, k, th, (th.dk,)) for th in theories],
        **{n: fields[n] for n in ("seed", "confidence", "precision", "samples", "max_seconds")},
        progress=progress,
        workers=workers,
        scheduler=scheduler,
    )
    rows = _judge(theories[: len(estimates)], claims, estimates, fields["confidence"])
    fit = _growth_fit(rows, cov, fields["confidence"])
    return SweepResult(rows=tuple(rows), fit=fit, interrupted=interrupted, **fields)


def _sweep_iv(
    dk: int | str | Iterable[int],
    dist: str | Distribution | None,
    q_dist: str | Distribution | None,
    k_dist: str | Distribution | None,
    rho: float,
    claim: str,
    confidence: float,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    seed: int | None,
) -> tuple[list[int], Claim, dict[str, Any]]:
    """Validate :func:`sweep`'s arguments once: the d_k, the claim, and the result's fields."""
    dks = resolve_dks(dk)
    q, k = entry_laws(dist, q_dist, k_dist)
    rho = valid_rho(rho, q, k)
    claim_obj = parse_claim(claim)
    confidence, precision, samples, max_seconds = sampling_effort(
        confidence, precision, samples, max_seconds
    )
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
    }
    return dks, claim_obj, fields


def _growth_fit(rows: list[SweepRow], cov: np.ndarray, confidence: float) -> GrowthFit | None:
    """The growth law over the rows that have a valid test."""
    fitted = [i for i, r in enumerate(rows) if r.verdict in (CONSISTENT, REJECTED)]
    return fit_growth(
        [rows[i].dk for i in fitted],
        [rows[i].estimate.var for i in fitted],  # type: ignore[union-attr]
        [rows[i].estimate.se for i in fitted],  # type: ignore[union-attr]
        confidence=confidence,
        covariance=cov[np.ix_(fitted, fitted)],
    )


def _judge(
    theories: list[DotProductTheory],
    claims: list[float | None],
    estimates: list[VarianceEstimate | None],
    confidence: float,
) -> list[SweepRow]:
    p_values = []
    for th, c, est in zip(theories, claims, estimates, strict=False):
        ok = est is not None and th.estimable and c is not None
        p_values.append(est.p_value(c) if ok else math.nan)  # type: ignore[union-attr, arg-type]
    adjusted, verdicts = judge(
        p_values,
        alpha=1.0 - confidence,
        finite=[est is not None for est in estimates],
        valid=[th.estimable for th in theories],
    )
    rows = []
    for th, c, est, p, padj, verdict in zip(
        theories, claims, estimates, p_values, adjusted, verdicts, strict=False
    ):
        rows.append(
            SweepRow(
                dk=th.dk,
                theory=th,
                claim_value=c,
                estimate=est,
                p_value=p,
                p_adjusted=padj,
                verdict=verdict,
            )
        )
    return rows
