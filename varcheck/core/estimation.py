"""Estimating Var(q·k) with an interval built on independent blocks.

Each block b yields m_b (mean of its products) and a_b (mean of their squares). Blocks are
i.i.d., so with B blocks

    V = mean(a) - [mean(m)^2 - var(m) / B]

is unbiased for Var(q·k): ``mean(m)^2 - var(m)/B`` is the U-statistic estimate of E[s]^2, which
does not assume the mean is known. Its standard error comes from the blocks' influence values
a_b - 2 mean(m) m_b (delta method). A variance estimate is right-skewed, and a symmetric
interval misses on the low side too often at coarse precision, so the interval inverts Hall's
(1992) skewness-corrected studentised statistic, using the influence values' sample skewness
and Student's t on B - 1 degrees of freedom. When E[(q·k)^6] is infinite that skewness cannot be
estimated, and the interval is V · exp(± t · SE / V) on the log scale instead. Both are checked
in tests/test_calibration.py. No independence *within* a block is assumed: products that share
a row of Q or a column of K are dependent, and treating them as independent gives intervals
that are too narrow on large matrices.

The number of blocks is adaptive: a pilot of at least ``MIN_BLOCKS`` blocks, then rounds sized
from the measured standard error until the relative half-width reaches ``precision``, a fixed
number of products is reached (``samples``), or ``max_seconds`` runs out.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple, TypeVar

import numpy as np

from .blocks import BlockPlan, draw_chunk, plan_blocks
from .distributions import Distribution, DrawDeadline, draw_deadline
from .parallel import Runner, SerialRunner, ordered_map
from .theory import DotProductTheory

T = TypeVar("T")

__all__ = [
    "ConfidenceInterval",
    "IntervalTest",
    "Rounds",
    "StopRule",
    "draw_rounds",
    "summarise",
    "interval_method",
    "block_interval",
    "claim_statistic",
    "hall_interval",
    "hall_transform",
    "log_interval",
    "VarianceEstimate",
    "BlockAccumulator",
    "estimate_variance",
    "t_quantile",
    "t_two_sided_p",
    "t_upper_p",
    "MIN_BLOCKS",
    "PartialEstimates",
    "PartialInterrupt",
    "estimate_blocks",
    "minimum_products",
    "budget_shortfall",
]

#: Fewest independent blocks behind any interval. With fewer, the standard error is itself
#: noisy, and stopping when it happens to come out small undercovers (64 blocks gave 92-96%
#: coverage at d_k = 512, 1% precision, over 2 x 300 runs; 200 gave 94-96%).
MIN_BLOCKS = 200

#: Products per unit of excess kurtosis (kurtosis of q·k minus 1) behind a valid interval, for
#: entries as light-tailed as the normal: the estimator's relative standard error is about
#: sqrt((kurtosis - 1) / products), and below 250 products per unit the interval undercovers
#: (normal entries at d_k = 2 and 1000 products: 94.0% over 4000 seeds). See
#: :func:`minimum_products` and docs/calibration.md.
PRODUCTS_PER_KURTOSIS = 250.0
#: Heavier-tailed entries need more: the factor grows as (entry kurtosis / 3)^1.5 (Laplace
#: entries at d_k = 1 and 10^4 products covered 93.8%, at 3·10^4 94.6%) ...
ENTRY_KURTOSIS_POWER = 1.5
#: ... and entries with an infinite sixth moment (log-scale interval) need 30 times more again:
#: t with 5 degrees of freedom at d_k = 2 covered 92.0% at 10^4 products and 93.2% at 5.3·10^5
#: (1000 seeds each); its coverage recovers as slowly as n^-0.2.
SLOW_TAIL_FACTOR = 30.0
#: With a fixed budget and non-zero-mean entries, blocks are small enough for this many times
#: MIN_BLOCKS of them (see :func:`_default_plan`).
NONZERO_MEAN_BLOCK_FACTOR = 10.0
_ROUND_GROWTH_CAP = 16.0
_OVERSHOOT = 1.1


class ConfidenceInterval(NamedTuple):
    """A two-sided interval ``(low, high)``."""

    low: float
    high: float


#: From this many degrees of freedom on, Student's t is computed here instead of by
#: scipy.special (whose import costs ~0.3 s of a ~0.6 s sweep): every interval rests on at
#: least MIN_BLOCKS blocks, so only small fixed budgets need scipy.
T_LARGE_DF = 100


def _hill_deviate(t: float, df: float) -> float:
    """Normal deviate z with P(|T_df| > t) = P(|Z| > z), by Hill's (1970) transformation.

    Against scipy.special.stdtr for df >= 100 its two-sided p-values agree to 1e-7 relative for
    p > 1e-30 (tests/test_estimation.py).
    """
    a = df - 0.5
    b = 48.0 * a * a
    y = a * math.log1p(t * t / df)
    return (
        ((((-0.4 * y - 3.3) * y - 24.0) * y - 85.5) / (0.8 * y * y + 100.0 + b) + y + 3.0) / b + 1.0
    ) * math.sqrt(y)


@functools.lru_cache(maxsize=256)
def t_quantile(confidence: float, df: float) -> float:
    """Two-sided Student t critical value for ``confidence`` with ``df`` degrees of freedom."""
    if df >= T_LARGE_DF:
        target = 1.0 - confidence
        lo, hi = 0.0, 64.0
        while t_two_sided_p(hi, df) > target and hi < 1e300:
            lo, hi = hi, 2.0 * hi
        for _ in range(80):  # bisection on the two-sided p-value: 2^-80 of the bracket
            mid = 0.5 * (lo + hi)
            if t_two_sided_p(mid, df) > target:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.5 + confidence / 2.0))


@functools.lru_cache(maxsize=64)
def normal_quantile(confidence: float) -> float:
    """Two-sided standard normal critical value for ``confidence`` (1.96 at 0.95).

    The one normal quantile of the package: every z of an interval, a budget or a band is
    this function's value.

    Examples
    --------
    >>> round(normal_quantile(0.95), 6)
    1.959964
    """
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def t_two_sided_p(t_stat: float, df: float) -> float:
    """Two-sided p-value of a t statistic."""
    if math.isnan(t_stat):
        return math.nan
    if df >= T_LARGE_DF:
        if math.isinf(t_stat):
            return 0.0
        return math.erfc(_hill_deviate(abs(t_stat), df) / math.sqrt(2.0))
    from scipy.special import stdtr

    return float(2.0 * stdtr(df, -abs(t_stat)))


def t_upper_p(t_stat: float, df: float) -> float:
    """One-sided p-value P(T >= t) of a t statistic (``nan`` stays ``nan``)."""
    two = t_two_sided_p(t_stat, df)
    return two / 2.0 if t_stat >= 0 else 1.0 - two / 2.0


class BlockAccumulator:
    """Streaming mean, co-moments and third co-moments of per-block (m, a) pairs.

    Batches merge with the pairwise formulas of Chan et al. (second order) and Pébay (third
    order), in the order they are added, so the result does not depend on how work was split.
    """

    __slots__ = ("n", "mu", "m2", "m3")

    def __init__(self) -> None:
        self.n = 0
        self.mu = np.zeros(2)  # (mean of m, mean of a)
        self.m2 = np.zeros((2, 2))  # sums of centred products
        self.m3 = np.zeros((2, 2, 2))

    def add(self, m: np.ndarray, a: np.ndarray) -> None:
        """Merge a batch of per-block values, in order."""
        nb = int(m.shape[0])
        if nb == 0:
            return
        x = np.stack([m, a], axis=1)
        mu_b = x.mean(axis=0)
        d = x - mu_b
        m2_b = d.T @ d
        m3_b = np.einsum("ni,nj,nk->ijk", d, d, d)
        n_a, n = self.n, self.n + nb
        delta = mu_b - self.mu
        if n_a:
            outer3 = np.einsum("i,j,k->ijk", delta, delta, delta)
            self.m3 = (
                self.m3
                + m3_b
                + n_a * nb * (n_a - nb) / n**2 * outer3
                + (n_a * _sym(delta, m2_b) - nb * _sym(delta, self.m2)) / n
            )
            self.m2 = self.m2 + m2_b + n_a * nb / n * np.outer(delta, delta)
        else:
            self.m2, self.m3 = m2_b, m3_b
        self.mu = self.mu + delta * nb / n
        self.n = n

    @property
    def mean_m(self) -> float:
        return float(self.mu[0])

    @property
    def mean_a(self) -> float:
        return float(self.mu[1])

    @property
    def c_mm(self) -> float:
        return float(self.m2[0, 0])

    def _influence(self) -> tuple[float, float, float]:
        """Variance (ddof 1), third central moment and mean of psi_b = a_b - 2 mean(m) m_b."""
        n, mu = self.n, self.mean_m
        w = np.array([-2.0 * mu, 1.0])  # psi = w . (m, a)
        var = float(w @ self.m2 @ w) / (n - 1)
        third = float(np.einsum("ijk,i,j,k->", self.m3, w, w, w)) / n
        return var, third, mu

    def variance_and_se(self) -> tuple[float, float, float]:
        """(unbiased variance estimate, its standard error, mean estimate)."""
        n = self.n
        if n < 2:
            return math.nan, math.nan, self.mean_m
        var_m = self.c_mm / (n - 1)
        est = self.mean_a - self.mean_m**2 + var_m / n
        infl_var, _, mu = self._influence()
        # second-order term of the U-statistic for E[s]^2 (exact for one product per block):
        # keeps the error honest when the first-order influence vanishes (mean 0, constant s^2)
        se = math.sqrt((max(infl_var, 0.0) + 2.0 * var_m * var_m / (n - 1)) / n)
        return est, se, mu

    def relative_width(self, confidence: float, method: str = "hall") -> float:
        """The relative half-width of this estimate's interval (what ``precision`` targets):
        the variance, its interval (:func:`block_interval`) and :func:`relative_half_width`."""
        est, se, _ = self.variance_and_se()
        return relative_half_width(est, block_interval(self, est, se, confidence, method))

    def skewness(self) -> float:
        """Skewness of the blocks' influence values (0 when it cannot be estimated)."""
        if self.n < 3:
            return 0.0
        var, third, _ = self._influence()
        sd = math.sqrt(max(var, 0.0))
        return third / sd**3 if sd > 0 else 0.0


def _sym(delta: np.ndarray, m2: np.ndarray) -> np.ndarray:
    """delta_i M_jk + delta_j M_ik + delta_k M_ij."""
    return (
        np.einsum("i,jk->ijk", delta, m2)
        + np.einsum("j,ik->ijk", delta, m2)
        + np.einsum("k,ij->ijk", delta, m2)
    )


class IntervalTest:
    """The test a block interval inverts, for results with ``var``, ``se``, ``skewness``,
    ``blocks`` and ``interval_method`` (a variance estimate here, a projection's in the paper
    family): the claim is outside the interval exactly when its p-value is below 1 - confidence.
    """

    __slots__ = ()

    def t_statistic(self, claim: float) -> float:
        """The studentised distance of the claim that the interval inverts."""
        return claim_statistic(
            self.var,  # type: ignore[attr-defined]
            self.se,  # type: ignore[attr-defined]
            claim,
            skewness=self.skewness,  # type: ignore[attr-defined]
            blocks=self.blocks,  # type: ignore[attr-defined]
            method=self.interval_method,  # type: ignore[attr-defined]
        )

    def p_value(self, claim: float) -> float:
        """Two-sided p-value of the claim Var(q·k) = ``claim`` (Student t, blocks - 1 df)."""
        return t_two_sided_p(self.t_statistic(claim), self.blocks - 1)  # type: ignore[attr-defined]

    def equivalence_p_value(self, low: float, high: float) -> float:
        """p-value of two one-sided tests (TOST) that the variance lies in (``low``, ``high``).

        The larger of the one-sided p-values of Var <= low and of Var >= high: below alpha
        exactly when the ``1 - 2 alpha`` interval (:meth:`interval_at`) lies inside the band,
        so that a variance on the band's edge passes at most alpha of the time.
        """
        df = self.blocks - 1  # type: ignore[attr-defined]
        above_low = t_upper_p(self.t_statistic(low), df)
        below_high = t_upper_p(-self.t_statistic(high), df)
        return max(above_low, below_high)

    def interval_at(self, confidence: float) -> ConfidenceInterval:
        """The same interval at another two-sided ``confidence`` (0 gives the estimate)."""
        tq = t_quantile(confidence, self.blocks - 1) if confidence > 0 else 0.0  # type: ignore[attr-defined]
        var, se = self.var, self.se  # type: ignore[attr-defined]
        if self.interval_method == "log":  # type: ignore[attr-defined]
            return log_interval(var, se, tq)
        return hall_interval(var, se, self.skewness, self.blocks, tq)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class VarianceEstimate(IntervalTest):
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
        Rows per block: each block holds ``groups`` independent groups of ``block_side ** 2``
        products (rows of Q against rows of K) or, in a pool of one law
        (:mod:`varcheck.core.shared_blocks`), of the products of its distinct pairs of rows (of its
        first half against its second half, for the small d_k read off Gram matrices).
    confidence : float
        Confidence level of the interval.
    precision : float
        Relative half-width reached: half the interval's width over ``var``.
    stop_reason : str
        ``precision`` (target reached), ``samples`` (fixed budget used) or ``max-seconds``.
    skewness : float
        Sample skewness of the blocks' influence values (Hall's correction uses it).
    interval_method : str
        ``hall`` (skewness-corrected t) or ``log`` (log scale, when E[(q·k)^6] is infinite).
    groups : int
        Independent groups per block (more than 1 when the rows of a sweep share blocks, see
        :mod:`varcheck.core.shared_blocks`).
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
    skewness: float = 0.0
    interval_method: str = "hall"
    groups: int = 1

    @property
    def df(self) -> int:
        return self.blocks - 1

    @property
    def cut_short(self) -> bool:
        """Interrupted, or stopped by its time cap, before ``MIN_BLOCKS`` blocks: the estimate
        stands, its interval is not valid (a fixed budget the user chose is not cut short)."""
        return self.stop_reason in ("interrupted", "max-seconds") and self.blocks < MIN_BLOCKS

    def scaled(self, factor: float) -> tuple[float, ConfidenceInterval]:
        """Estimate and interval of Var(c · q·k) for ``factor`` = c²."""
        lo, hi = self.confidence_interval
        return self.var * factor, ConfidenceInterval(lo * factor, hi * factor)


def claim_statistic(
    var: float, se: float, claim: float, *, skewness: float, blocks: int, method: str
) -> float:
    """Studentised distance of ``claim`` from the estimate, on the interval's own scale.

    ``hall``: Hall's transform of (V - claim) / SE; ``log``: (log V - log claim) / (SE / V).
    Compared with Student's t on ``blocks - 1`` degrees of freedom it gives the p-value whose
    acceptance region is exactly the interval.
    """
    if se == 0:
        return 0.0 if var == claim else math.copysign(math.inf, var - claim)
    if method == "log":
        if claim <= 0 or var <= 0:
            return math.copysign(math.inf, var - claim)
        return (math.log(var) - math.log(claim)) * var / se
    t = (var - claim) / se
    if abs(t) > 1e50:  # far outside any interval; the cubic would overflow
        return math.copysign(math.inf, t)
    return hall_transform(t, skewness, blocks)


def block_interval(
    acc: BlockAccumulator, est: float, se: float, confidence: float, method: str
) -> ConfidenceInterval:
    """The interval for an accumulator's variance estimate (``hall`` or ``log`` method)."""
    tq = t_quantile(confidence, acc.n - 1)
    if method == "log":
        return log_interval(est, se, tq)
    return hall_interval(est, se, acc.skewness(), acc.n, tq)


def log_interval(est: float, se: float, tq: float) -> ConfidenceInterval:
    """V · exp(± tq · SE / V); a symmetric interval when V <= 0 (degenerate, tiny samples)."""
    if est > 0 and math.isfinite(se):
        r = tq * se / est
        return ConfidenceInterval(est * math.exp(-r), est * math.exp(r))
    return ConfidenceInterval(est - tq * se, est + tq * se)


def _hall_coefficients(skew: float, n: int) -> tuple[float, float]:
    root_n = math.sqrt(n)
    return skew / (3.0 * root_n), skew / (6.0 * root_n)


def hall_transform(t: float, skew: float, n: int) -> float:
    """Hall's (1992) monotone transformation of a studentised mean of skewed data.

    g(t) = t + a t^2 + a^2 t^3 / 3 + b with a = skew / (3 sqrt(n)), b = skew / (6 sqrt(n)); g(T)
    is closer to Student's t than T itself, removing the first-order coverage error that
    skewness causes.
    """
    a, b = _hall_coefficients(skew, n)
    return t + a * t * t + a * a * t**3 / 3.0 + b


def _hall_inverse(y: float, skew: float, n: int) -> float:
    # g(t) - b = ((1 + a t)^3 - 1) / (3a), so t = ((1 + 3a (y - b))^(1/3) - 1) / a
    a, b = _hall_coefficients(skew, n)
    if abs(a) < 1e-300:
        return y - b
    x = 3.0 * a * (y - b)
    if x > -1.0:
        return math.expm1(math.log1p(x) / 3.0) / a  # no cancellation when a is tiny
    return (float(np.cbrt(1.0 + x)) - 1.0) / a


def hall_interval(est: float, se: float, skew: float, n: int, tq: float) -> ConfidenceInterval:
    """Interval for the mean of n skewed influence values: est - se * g^-1(±tq)."""
    if not (math.isfinite(se) and math.isfinite(skew)):
        return ConfidenceInterval(est - tq * se, est + tq * se)
    return ConfidenceInterval(
        est - se * float(_hall_inverse(tq, skew, n)), est - se * float(_hall_inverse(-tq, skew, n))
    )


def relative_half_width(est: float, interval: ConfidenceInterval) -> float:
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
    shift: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw chunk number ``chunk`` of a stream with its own generator (a picklable task)."""
    return draw_chunk(
        q, k, dk, plan, _chunk_rng(seed, stream, chunk), blocks=blocks, rho=rho, shift=shift
    )


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
        Block shape (default: chosen by :func:`varcheck.core.blocks.plan_blocks`).
    runner : Runner, optional
        Where chunks run (see :mod:`varcheck.core.parallel`; default: this thread). The result is
        the same for any runner.

    Returns
    -------
    VarianceEstimate
        On Ctrl-C or SIGTERM, :class:`PartialInterrupt` carries the estimate of the blocks drawn.
    """
    plan = plan or _default_plan(q, k, theory, samples, precision)
    method = interval_method(theory)
    # products are centred on the exact mean before squaring: the variance estimate is
    # unchanged (it does not assume the mean) but no longer cancels when |mean| >> sd
    shift = theory.mean if math.isfinite(theory.mean) else 0.0
    acc = BlockAccumulator()
    runner = SerialRunner() if runner is None else runner
    task = (q, k, theory.dk, plan, seed, stream)

    def draw(tasks: Iterator[tuple[int, int]]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        # run_chunk is looked up when called, so tests can watch which chunks are drawn
        return ordered_map(runner, run_chunk, ((*task, c, b, theory.rho, shift) for c, b in tasks))

    def widest() -> float:
        return acc.relative_width(confidence, method)

    fixed = None if samples is None else "samples"
    first = _first_round(samples, plan)
    least = 0 if fixed else minimum_products(q, k, theory) / plan.products_per_block
    least = int(math.ceil(least)) if math.isfinite(least) else 0
    rule = StopRule(None if fixed else precision, first, fixed, max_seconds, min_blocks=least)
    summary = functools.partial(
        summarise,
        acc,
        confidence=confidence,
        method=method,
        products_per_block=plan.products_per_block,
        block_side=plan.side,
        shift=shift,
    )
    return estimate_blocks(acc, rule, plan.blocks_per_chunk, draw, widest, summary, progress)


def estimate_blocks(
    acc: BlockAccumulator,
    rule: StopRule,
    blocks_per_chunk: int,
    draw: Callable[[Iterator[tuple[int, int]]], Iterator[tuple[np.ndarray, np.ndarray]]],
    widest: Callable[[], float],
    summary: Callable[..., VarianceEstimate],
    progress: Callable[[float], None] | None = None,
) -> VarianceEstimate:
    """Draw the rounds of one estimate into ``acc``, then ``summary(stop_reason=...)`` of them.

    The loop of :func:`estimate_variance` and of a user's sampler
    (:func:`varcheck.core.sampler_blocks.estimate_sampler`). On Ctrl-C or SIGTERM it raises
    :class:`PartialInterrupt` with the estimate from the blocks drawn so far (stop reason
    ``interrupted``), as a group of one (:class:`PartialEstimates`); with fewer than two blocks
    there is no estimate, and the interrupt goes on as it came.
    """
    try:
        rounds = draw_rounds(
            rule, blocks_per_chunk, draw, lambda rs: acc.add(*rs[0]), widest, progress=progress
        )
    except KeyboardInterrupt:
        if acc.n < 2:
            raise
        est = summary(stop_reason="interrupted")
        raise PartialInterrupt(PartialEstimates((est,), np.array([[est.se**2]]))) from None
    return summary(stop_reason=rounds.stop_reason)


def minimum_products(q: Distribution, k: Distribution, theory: DotProductTheory) -> float:
    """The fewest products behind a valid interval for Var(q·k): the one budget rule.

    ``PRODUCTS_PER_KURTOSIS · (kurtosis of q·k - 1)``, times ``(κ / 3)^1.5`` for the larger
    entry kurtosis κ (1 for normal entries, the only ones that may be correlated; heavier entry
    tails give a more skewed variance estimate at the same kurtosis of q·k), times
    ``SLOW_TAIL_FACTOR`` when E[(q·k)^6] is infinite; ``inf`` when no interval is valid at all (see
    :attr:`~varcheck.core.theory.DotProductTheory.estimable`). The factors were chosen from the
    coverage measured at fixed budgets (docs/calibration.md); a budget below this gives an
    estimate without a verdict, and an adaptive run draws at least this many.

    Examples
    --------
    >>> from varcheck.core.distributions import parse_distribution
    >>> from varcheck.core.theory import dot_product_theory
    >>> z, t5 = parse_distribution("normal"), parse_distribution("t:df=5")
    >>> minimum_products(z, z, dot_product_theory(2, z, z))            # 250 · (6 - 1)
    1250
    >>> minimum_products(t5, t5, dot_product_theory(2, t5, t5))   # 250 · (9/3)^1.5 · 30 · 41
    1597817
    """
    if not theory.estimable:
        return math.inf
    kappa = max(q.kurtosis, k.kurtosis)  # correlated entries are normal: 3
    per_unit = PRODUCTS_PER_KURTOSIS * (kappa / 3.0) ** ENTRY_KURTOSIS_POWER
    if theory.slow_convergence:
        per_unit *= SLOW_TAIL_FACTOR
    return math.ceil(per_unit * (theory.kurtosis - 1.0))


def budget_shortfall(
    q: Distribution, k: Distribution, theory: DotProductTheory, samples: int
) -> int | None:
    """The products a valid interval needs when ``samples`` are fewer (else ``None``).

    ``None`` too when no budget would do (E[(q·k)^4] infinite: the theory says so already).
    """
    need = minimum_products(q, k, theory)
    if math.isfinite(need) and samples < need:
        return int(need)
    return None


def interval_method(theory: DotProductTheory) -> str:
    """``log`` when E[(q·k)^6] is infinite, else ``hall``.

    Hall's skewness correction needs a finite third moment of (q·k)^2; without it the sample
    skewness is noise and the log scale is the safer correction.
    """
    return "log" if theory.slow_convergence else "hall"


def _default_plan(
    q: Distribution,
    k: Distribution,
    theory: DotProductTheory,
    samples: int | None,
    precision: float | None,
) -> BlockPlan:
    if samples is not None:
        # entries with a non-zero mean: products sharing a row are strongly dependent, and
        # 4 x 4 blocks (625 of them for 10^4 products) undercovered (Weibull, d_k = 16: 93.8%
        # over 4000 seeds; 2 x 2 blocks 94.8%): ten times MIN_BLOCKS blocks at least
        shared_mean = q.mean != 0.0 or k.mean != 0.0
        cap: float = samples / NONZERO_MEAN_BLOCK_FACTOR if shared_mean else samples
    elif theory.estimable:
        # predicted independent products needed at the target; a pilot beyond that is waste
        cap = 4.0 * max(theory.estimator_relative_variance, 0.5) / precision**2  # type: ignore[operator]
    else:
        cap = math.inf
    return plan_blocks(q, k, theory, max_side=_side_cap(cap))


def _first_round(samples: int | None, plan: BlockPlan) -> int:
    """Blocks of the first round: a pilot of MIN_BLOCKS, or the whole of a fixed budget."""
    if samples is None:
        return MIN_BLOCKS
    floor = MIN_BLOCKS if samples >= MIN_BLOCKS else 2
    return max(floor, -(-samples // plan.products_per_block))


@dataclass(frozen=True)
class StopRule:
    """When a run of independent blocks ends: the one adaptive stopping rule of varcheck.

    Attributes
    ----------
    precision : float or None
        Target relative half-width (None with a fixed budget).
    first_round : int
        Blocks of the first round (all of them with a fixed budget).
    fixed : str or None
        With a fixed budget, the stop reason it reports (``samples``, ``blocks``): one round.
    max_seconds : float or None
        Wall-time cap; the run stops after the chunk that passes it (once 2 blocks exist).
    max_blocks : int or None
        A cap on the blocks of an adaptive run (it then stops with reason ``precision``).
    min_blocks : int
        The fewest blocks an adaptive run stops at, whatever its precision (the budget rule,
        :func:`minimum_products`).
    """

    precision: float | None
    first_round: int
    fixed: str | None = None
    max_seconds: float | None = None
    max_blocks: int | None = None
    min_blocks: int = 0


class Rounds(NamedTuple):
    """What :func:`draw_rounds` did: the blocks drawn and merged, and why it stopped."""

    blocks: int
    stop_reason: str


def _tasks(first: int, wanted: int, per_chunk: int) -> Iterator[tuple[int, int]]:
    # arguments bound at the call: a round's chunk numbers never depend on later rounds
    return (
        (first + i, min(per_chunk, wanted - i * per_chunk)) for i in range(-(-wanted // per_chunk))
    )


def draw_rounds(
    rule: StopRule,
    blocks_per_chunk: int,
    draw: Callable[[Iterator[tuple[int, int]]], Iterator[T]],
    absorb: Callable[[list[T]], None],
    widest: Callable[[], float],
    *,
    per_round: bool = False,
    progress: Callable[[float], None] | None = None,
) -> Rounds:
    """Draw rounds of independent blocks until ``rule`` says stop.

    Parameters
    ----------
    rule : StopRule
        Target, first round, fixed budget and caps.
    blocks_per_chunk : int
        Blocks per chunk: the unit of seeding and of parallel work.
    draw : callable
        Maps ``(chunk number, blocks)`` tasks to their results, in order; the iterator it
        returns is closed early when the time cap stops the run. A chunk stopped by
        :class:`DrawDeadline` or an interrupt may put the result of its finished blocks in the
        exception's ``finished_blocks``: they are absorbed too.
    absorb : callable
        Merges a list of results into the caller's accumulators: after each chunk, or once per
        round with ``per_round``.
    widest : callable
        The largest relative half-width over the caller's accumulators, after a round.
    per_round : bool
        Merge once per round (the accumulators' fixed cost is most of a small chunk's).
    progress : callable, optional
        Called with the fraction of the current round's target drawn, after each chunk.

    Returns
    -------
    Rounds
        Chunk numbers never repeat across rounds, so the blocks are independent; each round
        is sized from the measured width, ``(width / precision)^2`` times the blocks so far
        with a 10% margin, at most 16 times.
    """
    # a slow law's draw (in pieces) stops at the cap even in the middle of a chunk
    with draw_deadline(rule.max_seconds):
        return _draw_until_stop(rule, blocks_per_chunk, draw, absorb, widest, per_round, progress)


def _draw_until_stop(
    rule: StopRule,
    blocks_per_chunk: int,
    draw: Callable[[Iterator[tuple[int, int]]], Iterator[T]],
    absorb: Callable[[list[T]], None],
    widest: Callable[[], float],
    per_round: bool,
    progress: Callable[[float], None] | None,
) -> Rounds:
    """The rounds of :func:`draw_rounds`; chunks drawn before an interrupt are absorbed."""
    start = time.perf_counter()
    target, drawn, next_chunk = rule.first_round, 0, 0
    stop = rule.fixed or "precision"
    while True:
        wanted = target - drawn
        results = draw(_tasks(next_chunk, wanted, blocks_per_chunk))
        next_chunk += -(-wanted // blocks_per_chunk)
        held: list[T] = []
        try:
            for i, result in enumerate(results):
                drawn += min(blocks_per_chunk, wanted - i * blocks_per_chunk)
                held.append(result)
                if not per_round:  # emptied first: a signal inside absorb must not count it twice
                    batch, held = held, []
                    absorb(batch)
                if progress is not None:
                    progress(min(1.0, drawn / target))
                late = (
                    rule.max_seconds is not None and time.perf_counter() - start > rule.max_seconds
                )
                if late and drawn >= 2:
                    stop = "max-seconds"
                    results.close()  # type: ignore[attr-defined]
                    break
        except DrawDeadline as exc:  # a chunk passed the cap in the middle of its draw
            stop = "max-seconds"
            _keep_finished(exc, held)
            results.close()  # type: ignore[attr-defined]
        except KeyboardInterrupt as exc:
            _keep_finished(exc, held)
            if held:  # the chunks drawn before Ctrl-C or SIGTERM count
                absorb(held)
            raise
        if held:
            absorb(held)
        if stop != "precision" or (rule.max_blocks is not None and drawn >= rule.max_blocks):
            return Rounds(drawn, stop)
        worst = widest()
        assert rule.precision is not None  # None only with a fixed budget, which stopped above
        reached = worst <= rule.precision
        if reached and drawn >= rule.min_blocks:
            return Rounds(drawn, stop)
        grow = (worst / rule.precision) ** 2 * _OVERSHOOT if math.isfinite(worst) else math.inf
        target = 0 if reached else int(math.ceil(drawn * min(grow, _ROUND_GROWTH_CAP)))
        target = max(target, rule.min_blocks)
        if rule.max_blocks is not None:
            target = min(target, rule.max_blocks)


def _keep_finished(exc: BaseException, held: list[T]) -> None:
    """Add to ``held`` the blocks that a chunk stopped by ``exc`` had finished, when it kept
    them in ``exc.finished_blocks``, a result of the chunk's kind (a user's code: one call per
    block, and calls can be slow, so a cut chunk's finished calls are worth keeping)."""
    finished = getattr(exc, "finished_blocks", None)
    if finished is not None:
        held.append(finished)


class PartialEstimates(NamedTuple):
    """What an interrupted run's blocks give: one estimate per row, and their covariance."""

    estimates: tuple[VarianceEstimate, ...]
    covariance: np.ndarray


class PartialInterrupt(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a run, with what the blocks drawn so far give (``partial``).

    ``partial`` has ``estimates`` (stop reason ``interrupted``) and their ``covariance``: a
    :class:`PartialEstimates` for one estimate, a
    :class:`~varcheck.core.shared_blocks.SharedEstimates` for rows drawn together.
    """

    def __init__(self, partial: object) -> None:
        super().__init__()
        self.partial = partial


def summarise(
    acc: BlockAccumulator,
    *,
    confidence: float,
    method: str,
    products_per_block: int,
    block_side: int,
    stop_reason: str,
    shift: float = 0.0,
    groups: int = 1,
    target: float | None = None,
) -> VarianceEstimate:
    """The estimate, interval and bookkeeping of an accumulator (products centred by ``shift``).

    With ``target``, an estimate that reached that precision reports ``precision`` as its stop
    reason whatever ended the run (rows drawn together reach it at different times).
    """
    est, se, mean = acc.variance_and_se()
    interval = block_interval(acc, est, se, confidence, method)
    rel = relative_half_width(est, interval)
    if target is not None and rel <= target:
        stop_reason = "precision"
    return VarianceEstimate(
        var=est,
        confidence_interval=interval,
        se=se,
        mean=mean + shift,
        samples=acc.n * products_per_block,
        blocks=acc.n,
        block_side=block_side,
        confidence=confidence,
        precision=rel,
        stop_reason=stop_reason,
        skewness=acc.skewness(),
        interval_method=method,
        groups=groups,
    )
