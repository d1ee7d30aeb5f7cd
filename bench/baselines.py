"""The two baselines varcheck is compared with, run to the same relative interval half-width.

(a) ``pair_loop``: independent (q, k) pairs drawn in vectorised batches, one dot product each,
    and the textbook large-sample interval for a variance, s² ± z·sqrt((m4 − s⁴)/n).
(b) ``big_product``: the "one big product" experiment (A of 1111 × d_k times B of d_k × 1111,
    then ``np.var`` of the 1111² entries), repeated; each replicate gives one variance value and
    the interval is Student's t over the independent replicates. (The entries of one product
    share rows and columns, so a single product alone has no valid interval.)

Both stop as soon as the relative half-width reaches ``precision``. When that would take longer
than ``time_cap`` seconds, they stop early and extrapolate: the half-width shrinks as
1/sqrt(samples), so the samples still needed follow from the measured spread, and the time from
the measured rate. Such rows are flagged ``extrapolated``.

All entries are standard normal, as in the varcheck rows they are compared with.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import ndtri, stdtrit

#: Rows of A (and columns of B) in the big-product baseline, after the seed experiment.
BIG_SIDE = 1111
#: Fewest replicates behind a big-product t-interval (a t-interval on 2 or 3 values is legal
#: but its width estimate is too noisy to stop on).
MIN_REPLICATES = 10
#: Elements per drawn matrix in one batch of the pair loop (8 MB of float64).
PAIR_BATCH_ELEMENTS = 1 << 20
PAIR_PILOT = 10_000


@dataclass(frozen=True)
class BaselineResult:
    """Time and work of one baseline for one d_k (``seconds`` is extrapolated if flagged)."""

    method: str
    dk: int
    precision_target: float
    seconds: float
    samples: float  # products (a) or replicates (b) needed for the target
    random_numbers: float
    flops: float  # 2 per multiply-add
    estimate: float
    precision_reached: float
    extrapolated: bool
    measured_seconds: float

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def pair_loop(
    dk: int,
    precision: float,
    *,
    seed: int,
    confidence: float = 0.95,
    time_cap: float = math.inf,
) -> BaselineResult:
    """Baseline (a): batches of independent pairs, textbook interval, stop at ``precision``."""
    rng = np.random.default_rng(seed)
    z = float(ndtri(0.5 + confidence / 2))
    batch_max = max(1024, PAIR_BATCH_ELEMENTS // dk)
    n = 0
    shift = 0.0
    s1 = s2 = s3 = s4 = 0.0
    batch = min(PAIR_PILOT, batch_max)
    start = time.perf_counter()
    while True:
        q = rng.standard_normal((batch, dk))
        k = rng.standard_normal((batch, dk))
        s = np.einsum("ij,ij->i", q, k)
        if n == 0:
            shift = float(s.mean())  # shifting keeps the power sums well conditioned
        x = s - shift
        x2 = x * x
        s1 += float(x.sum())
        s2 += float(x2.sum())
        s3 += float(x2 @ x)
        s4 += float(x2 @ x2)
        n += batch
        m = s1 / n
        var_pop = s2 / n - m * m
        m4 = s4 / n - 4 * m * s3 / n + 6 * m * m * s2 / n - 3 * m**4
        var = var_pop * n / (n - 1)
        half = z * math.sqrt(max(m4 - var * var, 0.0) / n)
        rel = half / var
        elapsed = time.perf_counter() - start
        needed = n * (rel / precision) ** 2
        if rel <= precision or elapsed > time_cap:
            break
        batch = int(min(batch_max, max(1024, 1.1 * (needed - n))))
    extrapolated = rel > precision
    n_final = needed if extrapolated else n
    seconds = elapsed * n_final / n if extrapolated else elapsed
    return BaselineResult(
        method="pairs",
        dk=dk,
        precision_target=precision,
        seconds=seconds,
        samples=n_final,
        random_numbers=2.0 * dk * n_final,
        flops=2.0 * dk * n_final,
        estimate=var,
        precision_reached=rel,
        extrapolated=extrapolated,
        measured_seconds=elapsed,
    )


def big_product(
    dk: int,
    precision: float,
    *,
    seed: int,
    confidence: float = 0.95,
    time_cap: float = math.inf,
    side: int = BIG_SIDE,
) -> BaselineResult:
    """Baseline (b): replicates of np.var(A @ B), t-interval over replicates."""
    rng = np.random.default_rng(seed)
    values: list[float] = []
    start = time.perf_counter()
    while True:
        a = rng.standard_normal((side, dk))
        b = rng.standard_normal((dk, side))
        values.append(float(np.var(a @ b)))
        r = len(values)
        elapsed = time.perf_counter() - start
        if r < MIN_REPLICATES:
            continue
        mean = statistics_mean(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (r - 1))
        half = float(stdtrit(r - 1, 0.5 + confidence / 2)) * sd / math.sqrt(r)
        rel = half / mean
        if rel <= precision or elapsed > time_cap:
            break
    extrapolated = rel > precision
    # the t quantile barely changes past a few dozen replicates; scale by 1/sqrt(R)
    reps = r * (rel / precision) ** 2 if extrapolated else float(r)
    seconds = elapsed * reps / r if extrapolated else elapsed
    return BaselineResult(
        method="big-product",
        dk=dk,
        precision_target=precision,
        seconds=seconds,
        samples=reps,
        random_numbers=reps * 2.0 * side * dk,
        flops=reps * 2.0 * side * side * dk,
        estimate=mean,
        precision_reached=rel,
        extrapolated=extrapolated,
        measured_seconds=elapsed,
    )


def statistics_mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)
