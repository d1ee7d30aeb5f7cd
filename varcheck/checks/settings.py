"""Estimating a list of settings (d_k, laws, correlation), one row at a time or in shared blocks.

The sweep and the claim tests both come here: each setting gets a :class:`VarianceEstimate`
(or ``None`` when Var(q·k) is infinite), and consecutive zero-mean settings of one law are drawn
together from shared blocks (:mod:`varcheck.core.shared_blocks`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.distributions import Distribution
from ..core.estimation import VarianceEstimate, estimate_variance
from ..core.parallel import Runner, open_runner, valid_workers
from ..core.shared_blocks import SHARED_STREAM, can_share, estimate_shared
from ..core.theory import DotProductTheory

__all__ = ["ProgressCallback", "UNRELIABLE_SAMPLES", "estimate_row", "estimate_settings"]

ProgressCallback = Callable[[int, int, float], None]

#: Products drawn for a row whose interval cannot be valid (infinite fourth moment).
UNRELIABLE_SAMPLES = 1_000_000


def estimate_row(
    q: Distribution,
    k: Distribution,
    theory: DotProductTheory,
    stream: tuple[int, ...],
    *,
    seed: int,
    confidence: float,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    progress: Callable[[float], None] | None = None,
    runner: Runner | None = None,
) -> VarianceEstimate | None:
    """Estimate one setting ``(q, k, theory, stream)``; ``None`` when Var(q·k) is infinite."""
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


def estimate_settings(
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
    workers = valid_workers(workers)
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
                        stream,
                        seed=seed,
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
