"""Estimating a list of settings (d_k, laws, correlation), one row at a time or in shared blocks.

The sweep and the claim tests both come here: each setting gets a :class:`VarianceEstimate`
(or ``None`` when Var(q·k) is infinite), and consecutive zero-mean settings of one law are drawn
together from shared blocks (:mod:`varcheck.core.shared_blocks`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.distributions import Distribution
from ..core.estimation import VarianceEstimate, estimate_variance
from ..core.parallel import Runner, SerialRunner, open_runner, valid_workers
from ..core.progress import ProgressCallback
from ..core.sampler_blocks import estimate_sampler
from ..core.shared_blocks import SHARED_STREAM, can_share, estimate_shared
from ..core.theory import DotProductTheory
from ..core.user_code import UserSampler

__all__ = [
    "SamplerSetting",
    "UNRELIABLE_SAMPLES",
    "estimate_row",
    "estimate_settings",
]

#: Products drawn for a row whose interval cannot be valid (infinite fourth moment).
UNRELIABLE_SAMPLES = 1_000_000


@dataclass(frozen=True)
class SamplerSetting:
    """A setting whose values come from a user's sampler (each call one block) at one d_k."""

    sampler: UserSampler
    dk: int
    stream: tuple[int, ...]


#: One setting: varcheck's own (laws, theory, stream) or a user's sampler.
Setting = tuple[Distribution, Distribution, DotProductTheory, tuple[int, ...]] | SamplerSetting


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
    settings: list[Setting],
    share_keys: list[object] | None,
    precision: float | None,
    samples: int | None,
) -> list[tuple[list[int], bool]]:
    """Split setting indices into consecutive runs: ``(indices, shared)``.

    Shared runs are drawn together in shared blocks; the others hold one setting each.
    """
    groups: list[tuple[list[int], bool]] = []
    last_key: object = None
    for i, setting in enumerate(settings):
        if isinstance(setting, SamplerSetting) or not (
            samples is None and precision is not None and can_share(*setting[:3])
        ):
            groups.append(([i], False))
            last_key = None
            continue
        key = (None if share_keys is None else share_keys[i], setting[0], setting[1])
        if last_key is not None and key == last_key:
            groups[-1][0].append(i)
        else:
            groups.append(([i], True))
        last_key = key
    return groups


def _estimate_alone(
    setting: Setting,
    effort: dict[str, Any],
    progress: Callable[[float], None] | None,
    runner: Runner,
    sampler_runner: Runner,
) -> VarianceEstimate | None:
    """One setting that is not drawn in shared blocks."""
    if isinstance(setting, SamplerSetting):
        return estimate_sampler(
            setting.sampler,
            setting.dk,
            stream=setting.stream,
            progress=progress,
            runner=sampler_runner,
            name=setting.sampler.label,
            **effort,
        )
    q, k, th, stream = setting
    return estimate_row(q, k, th, stream, progress=progress, runner=runner, **effort)


def estimate_settings(
    settings: list[Setting],
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
    """Estimate the settings; on Ctrl-C return those finished, then the setting or shared
    group cut short (stop reason ``interrupted``), and ``True``.

    Consecutive zero-mean settings with the same distributions and ``share_keys`` entry are
    drawn together in shared blocks (:mod:`varcheck.core.shared_blocks`) when sampling to a
    precision. A user's sampler runs on one thread unless ``workers`` is given. The third value
    is the covariance matrix of the variance estimates: squared standard errors on the
    diagonal, the estimated covariance within a shared group, 0 elsewhere.
    """
    n = len(settings)
    effort = {"seed": seed, "confidence": confidence, "precision": precision}
    effort.update(samples=samples, max_seconds=max_seconds)
    estimates: list[VarianceEstimate | None] = []
    cov = np.zeros((n, n))
    try:
        with open_runner(valid_workers(workers), scheduler) as runner:
            alone_runner = runner if workers is not None else SerialRunner()
            for group, shared in _share_groups(settings, share_keys, precision, samples):
                i0 = group[0]
                if not shared:
                    cb = None if progress is None else (lambda f, i=i0: progress(i, n, f))
                    est = _estimate_alone(settings[i0], effort, cb, runner, alone_runner)
                    estimates.append(est)
                    if est is not None:
                        cov[i0, i0] = est.se**2
                    continue
                res = _estimate_group([settings[i] for i in group], i0, n, effort, progress, runner)
                estimates.extend(res.estimates)
                cov[i0 : i0 + len(group), i0 : i0 + len(group)] = res.covariance
    except KeyboardInterrupt as exc:
        # a shared group interrupted mid-run still gives every row an interval
        partial = getattr(exc, "partial", None)
        if partial is not None:
            i0 = len(estimates)
            estimates.extend(partial.estimates)
            cov[i0 : len(estimates), i0 : len(estimates)] = partial.covariance
        return estimates, True, cov
    return estimates, False, cov


def _estimate_group(
    group: list[Setting],
    i0: int,
    n: int,
    effort: dict[str, Any],
    progress: ProgressCallback | None,
    runner: Runner,
) -> Any:
    """Settings ``i0, i0+1, ...`` of one law drawn together in shared blocks."""
    q, k, _, stream = group[0]  # type: ignore[misc]
    size = len(group)

    def cb_group(f: float) -> None:
        done = min(f * size, size - 1e-9)
        progress(i0 + int(done), n, done - int(done))  # type: ignore[misc]

    max_seconds = effort["max_seconds"]
    return estimate_shared(
        q,
        k,
        [s[2] for s in group],  # type: ignore[index]
        seed=effort["seed"],
        stream=(SHARED_STREAM, *stream),
        confidence=effort["confidence"],
        precision=effort["precision"],
        max_seconds=None if max_seconds is None else max_seconds * size,
        progress=None if progress is None else cb_group,
        runner=runner,
    )
