"""The public entry points: :func:`sweep` over d_k values (and, built on it, the claim checks)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from .._version import __version__
from ..core.distributions import Distribution
from ..core.estimation import ConfidenceInterval, VarianceEstimate, estimate_variance
from ..core.options import (
    confidence_from,
    entry_laws,
    resolve_seed,
    sampling_effort,
    valid_rho,
    valid_tolerance,
)
from ..core.parallel import Runner, check_workers, open_runner
from ..core.ranges import resolve_dks
from ..core.shared_blocks import SHARED_STREAM, can_share, estimate_shared
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.verdicts import (
    CONSISTENT,
    INFINITE,
    PASS,
    REJECTED,
    UNRELIABLE,
    Decision,
    GrowthFit,
    decide,
    exit_code,
    fit_growth,
    holm_adjust,
    judge,
)
from ..errors import VarcheckError
from .claims import Claim, claim_context, parse_claim

__all__ = [
    "SweepRow",
    "SweepResult",
    "VerifyResult",
    "ClaimTest",
    "sweep",
    "verify",
    "run_claim_tests",
    "resolve_seed",
    "sampling_effort",
]

ProgressCallback = Callable[[int, int, float], None]

#: Products drawn for a row whose interval cannot be valid (infinite fourth moment).
UNRELIABLE_SAMPLES = 1_000_000


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


def claimed_value(
    claim: Claim,
    theory: DotProductTheory,
    q: Distribution,
    k: Distribution,
    *,
    scaled: bool = False,
) -> float | None:
    """Evaluate a claim for one setting; ``None`` when it has no finite value there."""
    if not theory.var_finite:
        return None
    exact = theory.scaled_var if scaled else theory.var
    value = claim.evaluate(claim_context(theory.dk, theory.rho, exact, q, k))
    if value <= 0:
        raise VarcheckError(
            f"claim {claim.text!r} is {value!r} at d_k={theory.dk}; a variance claim must be > 0"
        )
    return value


def estimate_row(
    q: Distribution,
    k: Distribution,
    theory: DotProductTheory,
    *,
    seed: int,
    stream: tuple[int, ...],
    confidence: float,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    progress: Callable[[float], None] | None = None,
    runner: Runner | None = None,
) -> VarianceEstimate | None:
    """Estimate one setting; ``None`` when Var(q·k) is infinite (nothing to estimate)."""
    if not theory.var_finite:
        return None
    if not theory.estimable and samples is None:
        # no interval can reach a precision when E[(q·k)^4] is infinite: a fixed budget instead
        samples, precision = UNRELIABLE_SAMPLES, None
    return estimate_variance(
        q,
        k,
        theory,
        seed=seed,
        stream=stream,
        confidence=confidence,
        precision=precision,
        samples=samples,
        max_seconds=max_seconds,
        progress=progress,
        runner=runner,
    )


def _share_groups(
    settings: list[tuple[Distribution, Distribution, DotProductTheory, tuple[int, ...]]],
    share_keys: list[object] | None,
    precision: float | None,
    samples: int | None,
) -> list[tuple[list[int], bool]]:
    """Split setting indices into consecutive runs: ``(indices, shared)``.

    Shared runs are drawn together in shared blocks; the others hold one setting each.
    """
    groups: list[tuple[list[int], bool]] = []
    last_key: object = None
    for i, (q, k, th, _) in enumerate(settings):
        if not (samples is None and precision is not None and can_share(q, k, th)):
            groups.append(([i], False))
            last_key = None
            continue
        key = (None if share_keys is None else share_keys[i], q, k)
        if last_key is not None and key == last_key:
            groups[-1][0].append(i)
        else:
            groups.append(([i], True))
        last_key = key
    return groups


def _estimate_all(
    settings: list[tuple[Distribution, Distribution, DotProductTheory, tuple[int, ...]]],
    *,
    seed: int,
    confidence: float,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    progress: ProgressCallback | None,
    workers: int | None,
    scheduler: str | None,
    share_keys: list[object] | None = None,
) -> tuple[list[VarianceEstimate | None], bool, np.ndarray]:
    """Estimate the settings; on Ctrl-C return those finished (a prefix) and ``True``.

    Consecutive zero-mean settings with the same distributions and ``share_keys`` entry are
    drawn together in shared blocks (:mod:`varcheck.core.shared_blocks`) when sampling to a
    precision. The third value is the covariance matrix of the variance estimates: squared standard
    errors on the diagonal, the estimated covariance within a shared group, 0 elsewhere.
    """
    workers = check_workers(workers)
    n = len(settings)
    estimates: list[VarianceEstimate | None] = []
    cov = np.zeros((n, n))
    try:
        with open_runner(workers, scheduler) as runner:
            for group, shared in _share_groups(settings, share_keys, precision, samples):
                i0 = group[0]
                if not shared:
                    q, k, th, stream = settings[i0]
                    cb = None if progress is None else (lambda f, i=i0: progress(i, n, f))
                    est = estimate_row(
                        q,
                        k,
                        th,
                        seed=seed,
                        stream=stream,
                        confidence=confidence,
                        precision=precision,
                        samples=samples,
                        max_seconds=max_seconds,
                        progress=cb,
                        runner=runner,
                    )
                    estimates.append(est)
                    if est is not None:
                        cov[i0, i0] = est.se**2
                    continue
                q, k, _, stream = settings[i0]
                size = len(group)

                def cb_group(f: float, i0: int = i0, size: int = size) -> None:
                    done = min(f * size, size - 1e-9)
                    progress(i0 + int(done), n, done - int(done))  # type: ignore[misc]

                res = estimate_shared(
                    q,
                    k,
                    [settings[i][2] for i in group],
                    seed=seed,
                    stream=(SHARED_STREAM, *stream),
                    confidence=confidence,
                    precision=precision,  # type: ignore[arg-type]
                    max_seconds=None if max_seconds is None else max_seconds * size,
                    progress=None if progress is None else cb_group,
                    runner=runner,
                )
                estimates.extend(res.estimates)
                cov[i0 : i0 + size, i0 : i0 + size] = res.covariance
    except KeyboardInterrupt:
        return estimates, True, cov
    return estimates, False, cov


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
    dist : str or Distribution, optional
        Entry distribution for both q and k (default ``normal``).
    q_dist, k_dist : str or Distribution, optional
        Override ``dist`` for q or k.
    rho : float
        Correlation of q_i with k_i (normal entries).
    claim : str
        ``"theory"`` (the exact formula for these distributions), ``"dk"`` (the textbook
        Var = d_k) or any claim expression (see :func:`varcheck.parse_claim`).
    confidence : float
        Level of each row's interval; verdicts control the family-wise error at
        ``1 - confidence`` over all rows (Holm).
    precision : float
        Target relative half-width of each interval (ignored with ``samples``).
    samples : int, optional
        Fixed number of q·k products per row instead of a target precision.
    max_seconds : float, optional
        Wall-time cap per row; rows drawn from shared blocks (zero-mean entries, sampling to a
        precision, see :mod:`varcheck.core.shared_blocks`) share a cap of ``max_seconds``
        times their number.
    seed : int, optional
        Root seed; drawn and reported when not given.
    progress : callable, optional
        ``progress(row_index, n_rows, fraction_of_row_done)``.
    workers : int, optional
        Threads drawing chunks (default: all cores); results do not depend on it. With more
        than one, set ``OPENBLAS_NUM_THREADS=1`` before numpy is imported (the command line
        does) so that the BLAS's own threads do not compete with the workers.
    scheduler : str, optional
        ``"local"`` or a Dask scheduler address to run chunks on a Dask cluster
        (``varcheck[dask]``); same numbers as a local run.

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
    dks = resolve_dks(dk)
    q, k = entry_laws(dist, q_dist, k_dist)
    rho = valid_rho(rho, q, k)
    claim_obj = parse_claim(claim)
    confidence, precision, samples, max_seconds = sampling_effort(
        confidence, precision, samples, max_seconds
    )
    seed = resolve_seed(seed)

    theories = [dot_product_theory(d, q, k, rho) for d in dks]
    claims = [claimed_value(claim_obj, th, q, k) for th in theories]
    estimates, interrupted, cov = _estimate_all(
        [(q, k, th, (th.dk,)) for th in theories],
        seed=seed,
        confidence=confidence,
        precision=precision,
        samples=samples,
        max_seconds=max_seconds,
        progress=progress,
        workers=workers,
        scheduler=scheduler,
    )
    rows = _judge(theories[: len(estimates)], claims, estimates, confidence)
    fitted = [i for i, r in enumerate(rows) if r.verdict in (CONSISTENT, REJECTED)]
    fit = fit_growth(
        [rows[i].dk for i in fitted],
        [rows[i].estimate.var for i in fitted],  # type: ignore[union-attr]
        [rows[i].estimate.se for i in fitted],  # type: ignore[union-attr]
        confidence=confidence,
        covariance=cov[np.ix_(fitted, fitted)],
    )
    return SweepResult(
        rows=tuple(rows),
        fit=fit,
        q_dist=q,
        k_dist=k,
        rho=rho,
        claim=claim_obj.text,
        confidence=confidence,
        seed=seed,
        precision=precision,
        samples=samples,
        max_seconds=max_seconds,
        interrupted=interrupted,
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
    alpha = 1.0 - confidence
    prepared = []
    for t in tests:
        th = dot_product_theory(t.dk, t.q, t.k, t.rho)
        prepared.append((t, th, claimed_value(t.claim, th, t.q, t.k, scaled=t.scaled)))
    estimates, _, _ = _estimate_all(
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
    p_raw = []
    for (t, th, value), est in zip(prepared, estimates, strict=True):
        ok = est is not None and th.estimable and value is not None
        raw_claim = value * t.dk if (ok and t.scaled) else value
        p_raw.append(est.p_value(raw_claim) if ok else math.nan)  # type: ignore[union-attr]
    p_used = holm_adjust(p_raw) if adjust else p_raw
    results = []
    for (t, th, value), est, p in zip(prepared, estimates, p_used, strict=True):
        factor = 1.0 / t.dk if t.scaled else 1.0
        theory_value = th.var * factor
        if est is None:
            outcome = Decision(INFINITE, "Var(q·k) is infinite: there is nothing to estimate")
            point, interval = math.nan, ConfidenceInterval(math.nan, math.nan)
        else:
            point, interval = est.scaled(factor)
            if not th.estimable:
                outcome = Decision(
                    UNRELIABLE,
                    "E[(q·k)^4] is infinite, so no interval for the variance can be trusted"
                    if th.status == "infinite-fourth-moment"
                    else f"the kurtosis of q·k is {th.kurtosis:.3g}: the variance estimate "
                    "converges too slowly for any affordable interval to be trusted",
                )
            else:
                outcome = decide(
                    point,
                    interval,
                    value,
                    p_value=p,
                    alpha=alpha,
                    tolerance=t.tolerance,
                    samples=est.samples,
                )
        results.append(
            VerifyResult(
                dk=t.dk,
                q_dist=t.q,
                k_dist=t.k,
                rho=t.rho,
                claim=t.claim.text,
                claim_value=value,
                scaled=t.scaled,
                tolerance=t.tolerance,
                theory_value=theory_value,
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
                requested_samples=samples,
            )
        )
    return results


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
        Entry distributions and correlation, as in :func:`sweep`.
    scaled : bool
        Test the variance of q·k / sqrt(d_k) instead of q·k.
    tolerance : float, optional
        Relative tolerance: an equivalence test that passes only when the whole interval lies
        within claim × (1 ± tolerance).
    confidence, alpha : float, optional
        Interval level, or its complement (give one; default 0.95).
    precision, samples, max_seconds
        Sampling effort, as in :func:`sweep`.
    seed : int, optional
        Root seed; drawn and reported when not given.
    progress : callable, optional
        Called with the fraction done.
    workers, scheduler
        Where chunks run, as in :func:`sweep`.

    Returns
    -------
    VerifyResult

    Examples
    --------
    >>> r = verify(64, claim="dk", seed=1)
    >>> r.outcome, r.exit_code
    ('pass', 0)
    >>> verify(64, claim="1", scaled=True, seed=1).outcome
    'pass'
    >>> verify(64, claim="dk", dist="normal:mean=0.5", seed=1).outcome   # Var is 1.5 dk
    'fail'
    >>> verify(64, claim="dk", tolerance=0.02, seed=1).outcome
    'pass'
    """
    dks = resolve_dks(dk)
    if len(dks) != 1:
        raise VarcheckError(f"verify takes one d_k, got {dk!r}; use sweep for several")
    q, k = entry_laws(dist, q_dist, k_dist)
    rho = valid_rho(rho, q, k)
    claim_obj = parse_claim(claim)
    tolerance = valid_tolerance(tolerance)
    confidence = confidence_from(confidence, alpha)
    confidence, precision, samples, max_seconds = sampling_effort(
        confidence, precision, samples, max_seconds
    )
    seed = resolve_seed(seed)
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
    results = run_claim_tests(
        [test],
        seed=seed,
        confidence=confidence,
        precision=precision,
        samples=samples,
        max_seconds=max_seconds,
        progress=None if progress is None else (lambda _i, _n, f: progress(f)),
        adjust=False,
        workers=workers,
        scheduler=scheduler,
    )
    if not results:
        raise KeyboardInterrupt
    return results[0]
