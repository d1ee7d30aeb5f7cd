"""Estimating Var(q·k) with an interval built on independent blocks.

Each block b yields m_b (mean of its products) and a_b (mean of their squares). Blocks are
i.i.d., so with B blocks

    V = mean(a) - [mean(m)^2 - var(m) / B]

is unbiased for Var(q·k): ``mean(m)^2 - var(m)/B`` is the U-statistic estimate of E[s]^2, which
does not assume the mean is known. Its standard error comes from the blocks' influence values
a_b - 2 mean(m) m_b (delta method). The interval is built on the log scale,
V · exp(± t · SE / V) with Student's t on B - 1 degrees of freedom: a variance estimate is
right-skewed, and the log scale keeps the two tails' miss rates closer to equal (measured in
tests/test_calibration.py). No independence *within* a block is assumed: products that share
a row of Q or a column of K are dependent, and treating them as independent gives intervals
that are too narrow on large matrices.

The number of blocks is adaptive: a pilot of at least ``MIN_BLOCKS`` blocks, then rounds sized
from the measured standard error until the relative half-width reaches ``precision``, a fixed
number of products is reached (``samples``), or ``max_seconds`` runs out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .distributions import Distribution
from .parallel import Runner, SerialRunner, ordered_map
from .sampling import BlockPlan, draw_chunk, plan_blocks
from .theory import DotProductTheory

__all__ = [
    "ConfidenceInterval",
    "log_interval",
    "VarianceEstimate",
    "BlockAccumulator",
    "estimate_variance",
    "t_quantile",
    "t_two_sided_p",
    "MIN_BLOCKS",
]

#: Fewest independent blocks behind any interval.
MIN_BLOCKS = 64
_ROUND_GROWTH_CAP = 16.0
_OVERSHOOT = 1.1


class ConfidenceInterval(NamedTuple):
    """A two-sided interval ``(low, high)``."""

    low: float
    high: float


def t_quantile(confidence: float, df: float) -> float:
    """Two-sided Student t critical value for ``confidence`` with ``df`` degrees of freedom."""
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.5 + confidence / 2.0))


def t_two_sided_p(t_stat: float, df: float) -> float:
    """Two-sided p-value of a t statistic."""
    from scipy.special import stdtr

    if math.isnan(t_stat):
        return math.nan
    return float(2.0 * stdtr(df, -abs(t_stat)))


class BlockAccumulator:
    """Streaming means and co-moments of per-block (m, a) pairs (Chan et al. merge)."""

    __slots__ = ("n", "mean_m", "mean_a", "c_mm", "c_aa", "c_ma")

    def __init__(self) -> None:
        self.n = 0
        self.mean_m = 0.0
        self.mean_a = 0.0
        self.c_mm = 0.0
        self.c_aa = 0.0
        self.c_ma = 0.0

    def add(self, m: np.ndarray, a: np.ndarray) -> None:
        """Merge a batch of per-block values, in order."""
        nb = int(m.shape[0])
        if nb == 0:
            return
        bm, ba = float(m.mean()), float(a.mean())
        dm, da = m - bm, a - ba
        c_mm, c_aa, c_ma = float(dm @ dm), float(da @ da), float(dm @ da)
        n = self.n + nb
        delta_m, delta_a = bm - self.mean_m, ba - self.mean_a
        w = self.n * nb / n
        self.c_mm += c_mm + delta_m * delta_m * w
        self.c_aa += c_aa + delta_a * delta_a * w
        self.c_ma += c_ma + delta_m * delta_a * w
        self.mean_m += delta_m * nb / n
        self.mean_a += delta_a * nb / n
        self.n = n

    def variance_and_se(self) -> tuple[float, float, float]:
        """(unbiased variance estimate, its standard error, mean estimate)."""
        n = self.n
        if n < 2:
            return math.nan, math.nan, self.mean_m
        var_m = self.c_mm / (n - 1)
        var_a = self.c_aa / (n - 1)
        cov_ma = self.c_ma / (n - 1)
        est = self.mean_a - self.mean_m**2 + var_m / n
        mu = self.mean_m
        infl_var = var_a - 4.0 * mu * cov_ma + 4.0 * mu * mu * var_m
        # second-order term of the U-statistic for E[s]^2 (exact for one product per block):
        # keeps the error honest when the first-order influence vanishes (mean 0, constant s^2)
        se = math.sqrt((max(infl_var, 0.0) + 2.0 * var_m * var_m / (n - 1)) / n)
        return est, se, mu


@dataclass(frozen=True)
class VarianceEstimate:
    """A Monte-Carlo estimate of Var(q·k) with its interval.

    Attributes
    ----------
    var : float
        Unbiased estimate of Var(q·k).
    confidence_interval : ConfidenceInterval
        Two-sided interval at ``confidence``.
    se : float
        Standard error of ``var``.
    mean : float
        Estimate of E[q·k].
    samples : int
        Number of q·k products used.
    blocks : int
        Number of independent blocks (the interval has ``blocks - 1`` degrees of freedom).
    block_side : int
        Each block holds ``block_side ** 2`` products.
    confidence : float
        Confidence level of the interval.
    precision : float
        Relative half-width reached: half the interval's width over ``var``.
    stop_reason : str
        ``precision`` (target reached), ``samples`` (fixed budget used) or ``max-seconds``.
    """

    var: float
    confidence_interval: ConfidenceInterval
    se: float
    mean: float
    samples: int
    blocks: int
    block_side: int
    confidence: float
    precision: float
    stop_reason: str

    @property
    def df(self) -> int:
        return self.blocks - 1

    def t_statistic(self, claim: float) -> float:
        """(log V - log claim) / (SE / V): the statistic the log-scale interval inverts."""
        if claim <= 0 or self.var <= 0:
            return math.copysign(math.inf, self.var - claim)
        if self.se == 0:
            return 0.0 if self.var == claim else math.copysign(math.inf, self.var - claim)
        return (math.log(self.var) - math.log(claim)) * self.var / self.se

    def p_value(self, claim: float) -> float:
        """Two-sided p-value of the claim Var(q·k) = ``claim``."""
        return t_two_sided_p(self.t_statistic(claim), self.df)

    def scaled(self, factor: float) -> tuple[float, ConfidenceInterval]:
        """Estimate and interval of Var(c · q·k) for ``factor`` = c²."""
        lo, hi = self.confidence_interval
        return self.var * factor, ConfidenceInterval(lo * factor, hi * factor)


def log_interval(est: float, se: float, tq: float) -> ConfidenceInterval:
    """V · exp(± tq · SE / V); a symmetric interval when V <= 0 (degenerate, tiny samples)."""
    if est > 0 and math.isfinite(se):
        r = tq * se / est
        return ConfidenceInterval(est * math.exp(-r), est * math.exp(r))
    return ConfidenceInterval(est - tq * se, est + tq * se)


def _relative_half_width(est: float, interval: ConfidenceInterval) -> float:
    """Half the interval's width over the estimate (what ``precision`` targets)."""
    if est <= 0 or not math.isfinite(interval.high - interval.low):
        return math.inf
    return (interval.high - interval.low) / (2.0 * est)


def run_chunk(
    q: Distribution,
    k: Distribution,
    dk: int,
    plan: BlockPlan,
    seed: int,
    stream: tuple[int, ...],
    chunk: int,
    blocks: int,
    rho: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw chunk number ``chunk`` of a stream with its own generator (a picklable task)."""
    return draw_chunk(q, k, dk, plan, _chunk_rng(seed, stream, chunk), blocks=blocks, rho=rho)


def _chunk_rng(seed: int, stream: tuple[int, ...], chunk: int) -> np.random.Generator:
    ss = np.random.SeedSequence(seed, spawn_key=(*stream, chunk))
    return np.random.default_rng(ss)


def _side_cap(products_cap: float) -> int:
    """Largest power-of-two block side for which ``MIN_BLOCKS`` blocks fit in ``products_cap``."""
    side = 1
    while side < 1024 and MIN_BLOCKS * (2 * side) ** 2 <= products_cap:
        side *= 2
    return side


def estimate_variance(
    q: Distribution,
    k: Distribution,
    theory: DotProductTheory,
    *,
    seed: int,
    stream: tuple[int, ...] = (),
    confidence: float = 0.95,
    precision: float | None = 0.01,
    samples: int | None = None,
    max_seconds: float | None = None,
    progress: Callable[[float], None] | None = None,
    plan: BlockPlan | None = None,
    runner: Runner | None = None,
) -> VarianceEstimate:
    """Estimate Var(q·k) for the given entry distributions with an interval over blocks.

    Parameters
    ----------
    q, k : Distribution
        Entry distributions.
    theory : DotProductTheory
        Theory for the same setting (gives d_k, rho and the planning moments).
    seed : int
        Root seed; chunk ``i`` of stream ``stream`` uses ``SeedSequence(seed,
        spawn_key=(*stream, i))``, so results do not depend on how work is split.
    confidence : float
        Interval level in (0, 1).
    precision : float or None
        Target relative half-width; ignored when ``samples`` is given.
    samples : int or None
        Fixed number of products (rounded up to whole blocks and reported exactly).
    max_seconds : float or None
        Wall-time cap; the estimate then reports the precision it reached.
    progress : callable, optional
        Called with the estimated fraction done after each chunk.
    plan : BlockPlan, optional
        Block shape (default: chosen by :func:`varcheck.sampling.plan_blocks`).
    runner : Runner, optional
        Where chunks run (see :mod:`varcheck.parallel`; default: this thread). The result is
        the same for any runner.

    Returns
    -------
    VarianceEstimate
    """
    dk, rho = theory.dk, theory.rho
    if samples is not None:
        cap: float = samples
    elif theory.estimable and theory.var > 0:
        # predicted independent products needed at the target; a pilot beyond that is waste
        cap = 4.0 * max(theory.estimator_relative_variance, 0.5) / precision**2
    else:
        cap = math.inf
    if plan is None:
        plan = plan_blocks(q, k, theory, max_side=_side_cap(cap))
    if samples is not None:
        target_blocks = max(
            MIN_BLOCKS if samples >= MIN_BLOCKS else 2, -(-samples // plan.products_per_block)
        )
    else:
        target_blocks = MIN_BLOCKS
    acc = BlockAccumulator()
    runner = SerialRunner() if runner is None else runner
    start = time.perf_counter()
    next_chunk = 0
    stop_reason = "precision"
    while True:
        wanted = target_blocks - acc.n
        n_chunks = -(-wanted // plan.blocks_per_chunk)
        # a generator: a run of 10^10 products never holds its task list in memory
        chunk_args = (
            (
                q,
                k,
                dk,
                plan,
                seed,
                stream,
                next_chunk + i,
                min(plan.blocks_per_chunk, wanted - i * plan.blocks_per_chunk),
                rho,
            )
            for i in range(n_chunks)
        )
        next_chunk += n_chunks
        results = ordered_map(runner, run_chunk, chunk_args)
        for m, a in results:
            acc.add(m, a)
            if progress is not None:
                progress(min(1.0, acc.n / target_blocks))
            if max_seconds is not None and time.perf_counter() - start > max_seconds and acc.n >= 2:
                stop_reason = "max-seconds"
                results.close()
                break
        if stop_reason == "max-seconds" or samples is not None:
            if samples is not None and stop_reason != "max-seconds":
                stop_reason = "samples"
            break
        est, se, _ = acc.variance_and_se()
        rel = _relative_half_width(est, log_interval(est, se, t_quantile(confidence, acc.n - 1)))
        if rel <= precision:
            break
        grow = (rel / precision) ** 2 * _OVERSHOOT if math.isfinite(rel) else _ROUND_GROWTH_CAP
        target_blocks = int(math.ceil(acc.n * min(grow, _ROUND_GROWTH_CAP)))
    est, se, mean = acc.variance_and_se()
    interval = log_interval(est, se, t_quantile(confidence, acc.n - 1))
    return VarianceEstimate(
        var=est,
        confidence_interval=interval,
        se=se,
        mean=mean,
        samples=acc.n * plan.products_per_block,
        blocks=acc.n,
        block_side=plan.side,
        confidence=confidence,
        precision=_relative_half_width(est, interval),
        stop_reason=stop_reason,
    )
