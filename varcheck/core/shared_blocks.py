"""One set of random numbers for every d_k of a sweep, and products that are never formed.

A *shared block* is N rows of Q and N rows of K, each ``W = max(d_k)`` wide, with i.i.d.
zero-mean entries. For a given d_k the columns split into ``g = W // d_k`` disjoint groups of
d_k columns; within group j the N² products ``q_a[j] · k_b[j]`` are exactly the products of a
d_k-dimensional block (see :mod:`varcheck.core.blocks`), and different groups use different entries,
so they are independent. One block therefore serves every d_k of a sweep at once, where drawing
each d_k separately costs the random numbers again for every row. Different blocks are still
independent, which is all the interval needs (see :mod:`varcheck.core.estimation`); the rows of a
sweep become dependent on one another, which Holm's procedure allows, and the growth-law fit
uses the rows' covariance, estimated from the same blocks (:func:`estimate_shared`).

When q and k have the same law, a block is instead one *pool* of P rows, and every pair of
distinct rows gives a product: P(P - 1)/2 products from P·W random numbers, where Q and K of
N = P/2 rows each give N² = P²/4. The two vectors of a pair are independent draws of that law,
so each product is a draw of q·k; pairs that share a row are dependent, as rows and columns of
Q Kᵀ are, and the interval still rests on independent blocks only. For d_k much larger than
N, a pooled block halves the variance of a block mean for the same random numbers. (The small
d_k read off Gram matrices pair the pool's first half with its second half instead, which needs
no diagonal terms; they have precision to spare.)

The estimator needs, per group, only the sum of the products and the sum of their squares:

    Σ_ab s_ab = (Σ_a q_a) · (Σ_b k_b),     Σ_ab s_ab² = <G_Q, G_K>,     G_Q = Σ_a q_a q_aᵀ,

a Frobenius product of the two d_k × d_k Gram matrices; for a pool with Gram matrix G,
Σ_{a<b} s_ab = (|Σ_a x_a|² - Σ_a |x_a|²) / 2 and Σ_{a<b} s_ab² = (|G|²_F - Σ_a |x_a|⁴) / 2.
Forming the Gram matrices costs ``2 N d_k²`` per group instead of ``2 N² d_k`` for the products
themselves, so when N > d_k the N² products are never formed and a block's cost grows like N,
not N². The block's information grows like N too, so for these d_k a block can be as large as
memory allows; what limits N is the rule that every interval rests on at least ``MIN_BLOCKS``
independent blocks. For d_k >= N the products S_j of the smallest such d_k are formed, group by
group, and a larger d_k made of m of those groups needs only Σ |Σ_j S_j|², a sum of m × m
diagonal blocks of the matrix <S_i, S_j>: one more small matrix product, not m additions.

Cost model (nanoseconds per block; constants fitted by ``bench/cost_model.py``, run by
``make bench``): ``c_rng · 2 N W`` for the random numbers (``c_rng · P W`` for a pool) plus
``c_flop`` times the flops of either one full W × W Gram matrix per side, which every d_k then
reads its diagonal blocks from, or the per-d_k work of :func:`_level_sums` (see
:func:`_flops`); plus a fixed cost per block and per d_k. The information about row d_k in a
block follows from the exact variance of the mean of N² squared products that share rows and
columns,

    Var = [ζ₂ + (N - 1) (ζ_q + ζ_k)] / (g N²),

with ζ₂ = Var(s²) and ζ_q = Var(E[s² | q]) = d_k σ_k⁴ (μ₄(q) - σ_q⁴) (ζ_k likewise); for a pool
it is the variance of a U-statistic of order two, 2 [2 (P - 2) ζ_q + ζ₂] / (g P (P - 1)). The plan
takes the N that minimises the predicted time to reach the target on the slowest row. The Gram
levels usually get many more groups than their precision needs, so the plan may give them only
the first W/2, W/4, ... columns, as long as each still needs at most the first round divided by
the margin every row gets (and keeps enough products per block, see ``_GRAM_MIN_PRODUCTS``).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .blocks import _rng_cost as _rng_cost_of_family
from .distributions import Distribution
from .estimation import (
    MIN_BLOCKS,
    BlockAccumulator,
    PartialInterrupt,
    StopRule,
    VarianceEstimate,
    draw_rounds,
    interval_method,
    minimum_products,
    normal_quantile,
    summarise,
)
from .parallel import Runner, SerialRunner, ordered_map
from .theory import DotProductTheory
from .workspace import Workspace as _Workspace

__all__ = [
    "SharedPlan",
    "SharedEstimates",
    "can_share",
    "plan_shared",
    "draw_shared_chunk",
    "estimate_shared",
    "MAX_SHARED_WIDTH",
    "FLOAT32_MIN_PRECISION",
    "SHARED_STREAM",
]

#: Widest shared block: a full Gram matrix is W² numbers (8 MB at 1024) per side and worker.
MAX_SHARED_WIDTH = 1024
#: Leading spawn key of shared streams; above any d_k or claim index, so never a per-row key.
SHARED_STREAM = 1 << 40
#: Finest precision at which entries and Gram matrices are float32: their rounding, ~1e-7
#: relative and summed in float64, stays over 100 times below the interval (tests/test_shared.py).
FLOAT32_MIN_PRECISION = 1e-4
# Cost constants of shared blocks in float32 (ns per normal number, drawn by Box-Muller; per
# flop; per block; per d_k per block), fitted by bench/cost_model.py to draw_shared_chunk wall
# times; other families' random numbers are priced by blocks.py. Three fits on the 2-core
# development machine gave 4.1-7.7, 0.0087-0.011, 0 and 1300-2100 (the first two trade off
# against each other); c_block is set above 0 because a fit with a term per chunk found about
# 90 us per chunk, which a chunk spreads over its 25-64 blocks. The default sweep gets the same
# plans at 1%, 0.3% and 0.1% anywhere in those ranges.
_C_RNG_NORMAL32 = 5.0
_C_FLOP32 = 0.010
_C_BLOCK = 2_000.0
_C_LEVEL = 1_500.0
_FLOAT32_FLOP_RATIO = 0.45  # float32 / float64 time, measured on 286 x 512 Gram matrices
_MAX_BLOCK_ELEMENTS = 1 << 20  # numbers per side in one chunk (8 MB)
#: The first round is the predicted need times this. Rounds stop once every row's width is
#: reached; when that is a near thing, stopping selects runs whose widths came out small and
#: the rows undercover (92.7-93.5% for d_k = 2 when about half the runs took a second round,
#: 94.0-94.7% with this margin). A margin of about three standard errors of the width (~5% at
#: 200 blocks) makes second rounds rare.
_FIRST_ROUND = 1.3
_TARGET_CHUNK_NS = 3e7  # about 30 ms of work per chunk: parallel grain and Ctrl-C latency
_MIN_CHUNKS = 8  # chunks in the first round at least, so that every worker has some


@dataclass(frozen=True)
class SharedPlan:
    """Shape of the shared blocks.

    Attributes
    ----------
    dks : tuple of int
        The d_k served, in row order.
    width : int
        W, the number of columns drawn (the largest d_k).
    rows : int
        N, rows of Q and of K per block.
    full_gram : bool
        Whether each block forms one W × W Gram matrix per side (else per-d_k sums).
    blocks_per_chunk : int
        Blocks drawn with one generator (the unit of seeding and of parallel work).
    dtype : str
        ``float32`` or ``float64``: precision of the entries and of the Gram matrices or
        products (sums over them are always float64; see :data:`FLOAT32_MIN_PRECISION`).
    blocks_needed : int
        Blocks of the first round: what the slowest row is predicted to need, times a margin,
        and at least ``MIN_BLOCKS``.
    pooled : bool
        One pool of ``rows`` vectors per block, every pair of distinct rows a product (q and k
        of the same law), instead of ``rows`` rows of Q and ``rows`` rows of K.
    gram_width : int, optional
        Columns that the Gram-matrix levels (d_k < rows, without ``full_gram``) use; ``None``
        for all W. Those d_k get many groups per block, often far more than their precision
        needs, so the plan may give them only the first W/2, W/4, ... columns.
    """

    dks: tuple[int, ...]
    width: int
    rows: int
    full_gram: bool
    blocks_per_chunk: int
    dtype: str = "float64"
    blocks_needed: int = MIN_BLOCKS
    pooled: bool = False
    gram_width: int | None = None

    def columns(self, dk: int) -> int:
        """Columns whose groups serve d_k (all W, or ``gram_width`` for a Gram level)."""
        if self.gram_width is not None and not self.full_gram and dk < self.rows:
            return self.gram_width
        return self.width

    def groups(self, dk: int) -> int:
        """Independent groups of products that one block gives d_k."""
        return self.columns(dk) // dk

    def layout(self, dk: int) -> str:
        """How a block's rows pair up for d_k: ``cross`` (each row of Q with each row of K),
        ``pool`` (every two distinct rows of a pool) or ``halves`` (a pool's first half with
        its second half, for the Gram-matrix levels, d_k < rows, unless ``full_gram``)."""
        if not self.pooled:
            return "cross"
        return "pool" if self.full_gram or dk >= self.rows else "halves"

    def pairs(self, dk: int) -> int:
        """Products per group for d_k."""
        return _pair_count(self.rows, self.layout(dk))

    def products_per_block(self, dk: int) -> int:
        return self.groups(dk) * self.pairs(dk)


def _pair_count(rows: int, layout: str) -> int:
    if layout == "cross":
        return rows * rows
    if layout == "pool":
        return rows * (rows - 1) // 2
    return (rows // 2) * (rows - rows // 2)


@dataclass(frozen=True)
class SharedEstimates:
    """Estimates for several d_k from the same blocks, with their covariance.

    Attributes
    ----------
    estimates : tuple of VarianceEstimate
        One per d_k, in the order asked.
    covariance : ndarray
        Estimated covariance of the variance estimates (delta method over the shared blocks);
        its diagonal is the squared standard errors.
    plan : SharedPlan
        The block shape used.
    """

    estimates: tuple[VarianceEstimate, ...]
    covariance: np.ndarray
    plan: SharedPlan


def can_share(q: Distribution, k: Distribution, theory: DotProductTheory) -> bool:
    """Whether a setting can be drawn in shared blocks.

    Needs zero-mean entries (the Gram sums would cancel catastrophically around a large mean),
    independent q and k (rho = 0), a width that fits in memory, and a finite fourth moment of
    q·k (the plan and the interval need it; other settings use a fixed budget per row).
    """
    return (
        q.mean == 0.0
        and k.mean == 0.0
        and theory.rho == 0.0
        and theory.dk <= MAX_SHARED_WIDTH
        and theory.estimable
        and theory.var > 0
    )


def _block_variance(
    q: Distribution, k: Distribution, th: DotProductTheory, rows: int, layout: str = "cross"
) -> float:
    """Exact variance of one group's mean of squared products (zero-mean entries)."""
    return _variance_of(_zetas(q, k, th), rows, layout)


def _zetas(q: Distribution, k: Distribution, th: DotProductTheory) -> tuple[float, float, float]:
    """(Var(s²), Var(E[s² | q]), Var(E[s² | k])) for zero-mean entries."""
    zeta2 = th.mu4 - th.var**2
    zeta_q = th.dk * k.var**2 * (q.mu4 - q.var**2)
    zeta_k = th.dk * q.var**2 * (k.mu4 - k.var**2)
    return zeta2, zeta_q, zeta_k


def _variance_of(zetas: tuple[float, float, float], rows: int, layout: str) -> float:
    zeta2, zeta_q, zeta_k = zetas
    if layout == "pool":  # a U-statistic of order two; q and k of one law, zeta_q == zeta_k
        return max(2.0 * (2.0 * (rows - 2) * zeta_q + zeta2), 0.0) / (rows * (rows - 1))
    nq, nk = (rows, rows) if layout == "cross" else (rows // 2, rows - rows // 2)
    return max(zeta2 + (nk - 1) * zeta_q + (nq - 1) * zeta_k, 0.0) / (nq * nk)


def _flops(
    rows: int, width: int, dks: Sequence[int], pooled: bool = False, gram_width: int | None = None
) -> tuple[float, float]:
    """Flops per block (2 per multiply-add): with one full W × W Gram matrix, and per d_k.

    Per d_k computed afresh: Gram matrices of both sides (or both halves of a pool) over
    ``gram_width`` columns, or the products plus their own Gram matrix over the groups
    (:func:`_level_sums`); a d_k read off another costs a masked sum over the source's Gram
    matrices, or next to nothing. A pool's full Gram matrix cancels its diagonal, |x_a|⁴ ~ d_k²
    per row, against the pairs' s² ~ d_k: rounding grows like d_k / N, so it is offered (finite
    cost) only while W / N <= 8.
    """
    sides = 1 if pooled else 2
    full = sides * 2.0 * rows * width * width if not pooled or 8 * rows >= width else math.inf
    gw = width if gram_width is None else gram_width
    source = _level_sources(dks, rows, width, gw)
    per_level = 0.0
    for d in set(dks):
        g = width // d
        if source[d] != d:
            per_level += 2.0 * gw * source[d] if d < rows else 0.0
        elif d < rows:
            per_level += 4.0 * rows * gw * d / (2 if pooled else 1)
        else:
            per_level += 2.0 * rows * rows * width + 2.0 * g * g * rows * rows
    return full, per_level


#: A Gram level keeps at least this many groups, and products, per block when the plan narrows
#: its columns: Rademacher d_k = 2 with one group of 3 x 4 products per block covered 93.3% over
#: 2000 seeds (5% precision), against 94.8% with two groups and 95.4% with all 32.
_GRAM_MIN_GROUPS = 4
_GRAM_MIN_PRODUCTS = 256


def _gram_width(
    width: int, rows: int, pooled: bool, needs: dict[int, float], blocks: int
) -> int | None:
    """Fewest columns (W, W/2, W/4, ...) that still give every Gram level the first round.

    ``needs`` maps each Gram level d_k to the blocks it would need with all W columns; with
    c columns it gets c // d_k groups instead of W // d_k, and must still need no more than
    ``blocks / _FIRST_ROUND``, the margin every row gets, and keep ``_GRAM_MIN_GROUPS`` groups
    and ``_GRAM_MIN_PRODUCTS`` products per block.
    """
    if not needs:
        return None
    pairs = _pair_count(rows, "halves" if pooled else "cross")
    best = width
    c = width // 2
    while c * 2 == best and all(
        c // d >= _GRAM_MIN_GROUPS
        and (c // d) * pairs >= _GRAM_MIN_PRODUCTS
        and need * (width // d) / (c // d) * _FIRST_ROUND <= blocks
        for d, need in needs.items()
    ):
        best = c
        c //= 2
    return None if best == width else best


def _rng_cost(dist: Distribution, single: bool) -> float:
    return _C_RNG_NORMAL32 if single and dist.is_normal else _rng_cost_of_family(dist)


def plan_shared(
    q: Distribution,
    k: Distribution,
    theories: Sequence[DotProductTheory],
    *,
    precision: float,
    confidence: float,
    max_seconds: float | None = None,
) -> SharedPlan:
    """Choose the block shape that reaches ``precision`` on every row soonest (cost model).

    That is N (rows per block), one full Gram matrix or per-d_k sums, and the columns of the
    Gram levels; the time is the predicted cost per block times the first round. Under a time
    cap, only blocks of which ``MIN_BLOCKS`` fit in half the cap (the model's cost) are taken
    (the smallest when none does): an interval needs that many blocks, and a run the cap stops
    earlier has none.
    """
    dks = tuple(th.dk for th in theories)
    width = max(dks)
    single = precision >= FLOAT32_MIN_PRECISION
    c_flop = _C_FLOP32 / (1.0 if single else _FLOAT32_FLOP_RATIO)
    z = normal_quantile(confidence)
    pooled = q == k
    sides = 1 if pooled else 2
    c_rng = 0.5 * (_rng_cost(q, single) + _rng_cost(k, single))
    fixed = _C_BLOCK + _C_LEVEL * len(dks)
    # blocks needed = a group's variance times this, per d_k
    scale = {th.dk: 1.0 / (width // th.dk) / (th.var * precision / z) ** 2 for th in theories}
    zetas = {th.dk: _zetas(q, k, th) for th in theories}
    best: tuple[float, int, bool, float, int, int | None] | None = None
    floor_from = None
    rows = 2
    while rows * width <= _MAX_BLOCK_ELEMENTS:
        full_flops, _ = _flops(rows, width, dks, pooled)
        floored = True
        for full in (True, False) if math.isfinite(full_flops) else (False,):
            shape = SharedPlan(dks, width, rows, full, 1, pooled=pooled)
            needs = {d: _variance_of(zetas[d], rows, shape.layout(d)) * scale[d] for d in dks}
            first = max(MIN_BLOCKS, math.ceil(_FIRST_ROUND * max(needs.values())))
            floored = floored and first == MIN_BLOCKS
            gram_width = None
            flops = full_flops
            if not full:
                gram_needs = {d: v for d, v in needs.items() if d < rows}
                gram_width = _gram_width(width, rows, pooled, gram_needs, first)
                flops = _flops(rows, width, dks, pooled, gram_width)[1]
            per_block = c_rng * sides * rows * width + c_flop * flops + fixed
            total = per_block * first
            if best is not None and _over_cap(per_block, max_seconds):
                continue
            if best is None or total < best[0]:
                best = (total, rows, full, per_block, first, gram_width)
        # once MIN_BLOCKS binds, more rows only add random numbers: look a little further
        # (the flops can still drop as levels move to Gram matrices), then stop
        floor_from = rows if floored and floor_from is None else floor_from
        if floor_from is not None and rows >= 2 * floor_from:
            break
        # steps of about 1/8: the best N is often where MIN_BLOCKS starts to bind
        rows += max(1, rows // 8)
    assert best is not None  # width <= MAX_SHARED_WIDTH, so rows = 2 always fits
    _, rows, full, per_block, first_round, gram_width = best
    per_chunk = min(
        64,
        max(1, int(_TARGET_CHUNK_NS // per_block)),
        _MAX_BLOCK_ELEMENTS // (rows * width),
        -(-first_round // _MIN_CHUNKS),
    )
    return SharedPlan(
        dks=dks,
        width=width,
        rows=rows,
        full_gram=full,
        blocks_per_chunk=max(1, per_chunk),
        dtype="float32" if single else "float64",
        blocks_needed=first_round,
        pooled=pooled,
        gram_width=gram_width,
    )


def _over_cap(per_block_ns: float, max_seconds: float | None) -> bool:
    """Whether ``MIN_BLOCKS`` blocks of this modelled cost overrun half of ``max_seconds`` (the
    other half for the model's error and a slower machine)."""
    return max_seconds is not None and per_block_ns * MIN_BLOCKS > 0.5e9 * max_seconds


def _diagonal_block_sum(h: np.ndarray, groups: int, dk: int) -> float:
    """Sum of the ``groups`` diagonal dk × dk blocks of the square matrix h."""
    used = groups * dk
    return float(np.einsum("aiaj->", h[:used, :used].reshape(groups, dk, groups, dk)))


def _level_sources(
    dks: Sequence[int], rows: int, width: int, gram_width: int | None = None
) -> dict[int, int]:
    """For each d_k, the level whose sums it is read from (itself when computed afresh).

    Gram levels (d_k < rows) read their d_k × d_k diagonal blocks off the Gram matrices of a
    larger level D that d_k divides and that covers the same columns; direct levels
    (d_k >= rows) are read off the products of a smaller level d that divides d_k, since a dot
    product over d_k columns is the sum of those over its d_k / d sub-groups.
    """
    source: dict[int, int] = {}
    top = None
    gw = width if gram_width is None else gram_width
    for d in sorted({d for d in dks if d < rows}, reverse=True):
        if top is not None and top % d == 0 and (gw // top) * top == (gw // d) * d:
            source[d] = top
        else:
            source[d] = top = d
    low = None
    for d in sorted({d for d in dks if d >= rows}):
        if low is not None and d % low == 0:
            source[d] = source[low]
        else:
            source[d] = d
        low = d
    return source


def _groups(m: np.ndarray, groups: int, dk: int) -> np.ndarray:
    """(block, group, row, column of the group) view of the first groups * dk columns."""
    nb, rows, _ = m.shape
    return m[:, :, : groups * dk].reshape(nb, rows, groups, dk).transpose(0, 2, 1, 3)


def _group_sums(x: np.ndarray, groups: int, size: int, out: np.ndarray) -> np.ndarray:
    """Sums over the last axis in ``groups`` consecutive runs of ``size`` (the rest dropped)."""
    if size > 16:
        return x[..., : groups * size].reshape(*x.shape[:-1], groups, size).sum(axis=-1, out=out)
    # a reduction over a short last axis is slow in numpy; strided additions are not
    end = groups * size
    if size == 1:
        out[...] = x[..., :end]
        return out
    np.add(x[..., 0:end:size], x[..., 1:end:size], out=out)
    for i in range(2, size):
        out += x[..., i:end:size]
    return out


def _self_terms(x2: np.ndarray, dks: Sequence[int], ws: _Workspace) -> dict[int, np.ndarray]:
    """Per block and d_k, Σ over rows a and groups of |x_a in the group|⁴: a pool's diagonal.

    ``x2`` holds the squared entries; a d_k's squared norms are added up from those of a
    smaller d_k that divides it, in the sampling precision (at most a few hundred terms), and
    their squares are summed in float64.
    """
    width = x2.shape[-1]
    norms: dict[int, np.ndarray] = {}
    terms: dict[int, np.ndarray] = {}
    prev = None
    for d in sorted(set(dks)):
        g = width // d
        out = ws.get(f"norms{d}", (*x2.shape[:-1], g), x2.dtype)
        if prev is not None and d % prev == 0:
            n = _group_sums(norms[prev], g, d // prev, out)
        else:
            n = _group_sums(x2, g, d, out)
        norms[d] = n
        # squared in float64: converted once into a reused array (einsum's own casting, in
        # small buffers, took longer than the sums)
        flat = ws.get("self-terms", (n.shape[0], n[0].size), np.dtype(np.float64))
        flat[...] = n.reshape(n.shape[0], -1)
        terms[d] = np.einsum("zi,zi->z", flat, flat)
        prev = d
    return terms


def _block_diagonal_sums(h: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Sums of the size × size diagonal blocks of each ``h[..., :, :]``, one column per size.

    One matrix product with 0/1 masks instead of one reduction per size: ``h`` is (..., T, T)
    and every size divides T. Returns shape (h.shape[0], len(sizes)), summed over the middle
    axes as well.
    """
    t = h.shape[-1]
    masks = _block_masks(t, tuple(sizes))
    return (h.reshape(-1, t * t) @ masks).reshape(h.shape[0], -1, len(sizes)).sum(axis=1)


@functools.lru_cache(maxsize=32)
def _block_masks(t: int, sizes: tuple[int, ...]) -> np.ndarray:
    idx = np.arange(t)
    masks = np.stack([(idx[:, None] // d == idx[None, :] // d).ravel() for d in sizes], axis=1)
    masks = masks.astype(np.float64)
    masks.flags.writeable = False
    return masks


def _level_sums(
    qm: np.ndarray,
    km: np.ndarray | None,
    dks: Sequence[int],
    ws: _Workspace | None = None,
    gram_width: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per block and d_k, Σ over groups and pairs of s and of s², each (blocks, len(dks)).

    Gram levels (d_k < rows): one fresh level's Gram matrices, from which it and the smaller
    d_k that :func:`_level_sources` assigns to it read their diagonal blocks. Product levels
    (d_k >= rows): one fresh level's products S_j (group j), and for a d_k made of m of its
    groups, Σ |Σ_j S_j|² is a sum of m × m diagonal blocks of the products' own Gram matrix
    <S_i, S_j>, so no larger products are formed. With ``km=None``, ``qm`` is a pool: the Gram
    levels pair its first half with its second half, the product levels every two distinct
    rows (the diagonal of the products is zeroed, and each pair counted once). Gram levels use
    the first ``gram_width`` columns only (default: all).
    """
    ws = _Workspace() if ws is None else ws
    nb, rows, width = qm.shape
    gw = width if gram_width is None else gram_width
    pooled = km is None
    f64 = np.dtype(np.float64)
    source = _level_sources(dks, rows, width, gram_width)
    s1: dict[int, np.ndarray] = {}
    s2: dict[int, np.ndarray] = {}
    gram_levels = sorted({d for d in dks if d < rows}, reverse=True)
    if gram_levels:
        qa, ka = (qm[:, : rows // 2], qm[:, rows // 2 :]) if pooled else (qm, km)
        qa, ka = qa[:, :, :gw], ka[:, :, :gw]  # type: ignore[index]
        col = qa.sum(axis=1, dtype=np.float64) * ka.sum(axis=1, dtype=np.float64)
        for top in [d for d in gram_levels if source[d] == d]:
            g = gw // top
            shape = (nb, g, top, top)
            qg, kg = _groups(qa, g, top), _groups(ka, g, top)
            gq = np.matmul(qg.transpose(0, 1, 3, 2), qg, out=ws.get("gq", shape, qm.dtype))
            gk = np.matmul(kg.transpose(0, 1, 3, 2), kg, out=ws.get("gk", shape, qm.dtype))
            h = np.multiply(gq, gk, out=ws.get("h", shape, f64), dtype=f64)
            levels = [d for d in gram_levels if source[d] == top]
            for d, v in zip(levels, _block_diagonal_sums(h, levels).T, strict=True):
                s2[d] = v
                s1[d] = col[:, : (gw // d) * d].sum(axis=1)
    direct = sorted({d for d in dks if d >= rows})
    for base in [d for d in direct if source[d] == d]:
        g = width // base
        other = qm if km is None else km
        s = np.matmul(
            _groups(qm, g, base),
            _groups(other, g, base).transpose(0, 1, 3, 2),
            out=ws.get("products", (nb, g, rows, rows), qm.dtype),
        )
        if pooled:  # a row with itself is not a pair
            s.reshape(nb, g, rows * rows)[:, :, :: rows + 1] = 0.0
        flat = ws.get("products64", (nb, g, rows * rows), f64)
        flat[...] = s.reshape(nb, g, rows * rows)
        gram = np.matmul(flat, flat.transpose(0, 2, 1))  # <S_i, S_j>, (nb, g, g)
        totals = flat.sum(axis=2)
        # each pair appears twice in a pool's symmetric products
        scale = 0.5 if pooled else 1.0
        for d in [d for d in direct if source[d] == base]:
            m, gd = d // base, width // d
            s2[d] = scale * _block_diagonal_sums(gram[:, None, : gd * m, : gd * m], [m])[:, 0]
            s1[d] = scale * totals[:, : gd * m].sum(axis=1)
    return (
        np.stack([s1[d] for d in dks], axis=1),
        np.stack([s2[d] for d in dks], axis=1),
    )


def draw_shared_chunk(
    q: Distribution,
    k: Distribution,
    plan: SharedPlan,
    rng: np.random.Generator,
    blocks: int,
    workspace: _Workspace | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``blocks`` shared blocks; per block and d_k, the mean of s and the mean of s².

    Returns
    -------
    means, mean_squares : ndarray, shape (blocks, len(plan.dks))
    """
    ws = _Workspace() if workspace is None else workspace
    n, w = plan.rows, plan.width
    dt = np.dtype(plan.dtype)
    qm = q.sample(rng, (blocks, n, w), dtype=dt, out=ws.get("q", (blocks, n, w), dt))
    km = None
    if not plan.pooled:
        km = k.sample(rng, (blocks, n, w), dtype=dt, out=ws.get("k", (blocks, n, w), dt))
    counts = np.array([plan.products_per_block(dk) for dk in plan.dks], dtype=float)
    if not plan.full_gram:
        sums, squares = _level_sums(qm, km, plan.dks, ws, plan.gram_width)
        return sums / counts, squares / counts
    if km is None:
        x2 = np.square(qm, out=ws.get("x2", (blocks, n, w), dt))
        col = qm.sum(axis=1, dtype=np.float64)
        col = (col * col - x2.sum(axis=1, dtype=np.float64)) / 2.0  # Σ_{a<b} q_a q_b
        diagonal = _self_terms(x2, plan.dks, ws)
    else:
        col = qm.sum(axis=1, dtype=np.float64) * km.sum(axis=1, dtype=np.float64)
    means = np.stack([col[:, : (w // dk) * dk].sum(axis=1) for dk in plan.dks], axis=1)
    squares = np.empty((blocks, len(plan.dks)))
    for b in range(blocks):
        # the Gram matrices in the sampling precision, their product summed in float64
        g = qm[b].T @ qm[b]
        if km is None:  # squared in float64 into a reused array
            h = np.square(g, dtype=np.float64, out=ws.get("h", (w, w), np.dtype(np.float64)))
        else:
            h = g.astype(np.float64)
            h *= km[b].T @ km[b]
        for j, dk in enumerate(plan.dks):
            squares[b, j] = _diagonal_block_sum(h, w // dk, dk)
            if km is None:
                squares[b, j] = (squares[b, j] - diagonal[dk][b]) / 2.0
    return means / counts, squares / counts


def run_shared_chunk(
    q: Distribution,
    k: Distribution,
    plan: SharedPlan,
    seed: int,
    stream: tuple[int, ...],
    chunk: int,
    blocks: int,
    workspace: _Workspace | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw chunk number ``chunk`` with its own generator (a picklable task).

    The bit generator is SFC64, numpy's fastest: normal random numbers are most of a shared
    block's cost, and they came 10-30% faster than with PCG64 on the benchmark machine.
    """
    ss = np.random.SeedSequence(seed, spawn_key=(*stream, chunk))
    return draw_shared_chunk(
        q, k, plan, np.random.Generator(np.random.SFC64(ss)), blocks, workspace
    )


class _JointMoments:
    """Streaming mean and co-moment matrix of per-block vectors (Chan et al.'s merge)."""

    def __init__(self, dim: int) -> None:
        self.n = 0
        self.mu = np.zeros(dim)
        self.m2 = np.zeros((dim, dim))

    def add(self, x: np.ndarray) -> None:
        nb = x.shape[0]
        mu_b = x.mean(axis=0)
        d = x - mu_b
        n = self.n + nb
        delta = mu_b - self.mu
        self.m2 = self.m2 + d.T @ d + self.n * nb / n * np.outer(delta, delta)
        self.mu = self.mu + delta * nb / n
        self.n = n


def _covariance(joint: _JointMoments, levels: int) -> np.ndarray:
    """Covariance of the rows' variance estimates from their blocks' influence values."""
    n = joint.n
    mean_m = joint.mu[:levels]
    # psi_j = a_j - 2 mean(m_j) m_j, a linear map of the block vector (m, a)
    w = np.zeros((levels, 2 * levels))
    w[np.arange(levels), np.arange(levels)] = -2.0 * mean_m
    w[np.arange(levels), levels + np.arange(levels)] = 1.0
    return w @ joint.m2 @ w.T / (n - 1) / n


def estimate_shared(
    q: Distribution,
    k: Distribution,
    theories: Sequence[DotProductTheory],
    *,
    seed: int,
    stream: tuple[int, ...],
    confidence: float,
    precision: float,
    max_seconds: float | None = None,
    progress: Callable[[float], None] | None = None,
    runner: Runner | None = None,
    plan: SharedPlan | None = None,
) -> SharedEstimates:
    """Estimate Var(q·k) for several d_k from the same shared blocks.

    Parameters
    ----------
    q, k : Distribution
        Zero-mean entry distributions (see :func:`can_share`).
    theories : sequence of DotProductTheory
        One per d_k (distinct d_k, rho = 0).
    seed, stream : int, tuple of int
        Chunk ``i`` uses ``SeedSequence(seed, spawn_key=(*stream, i))``.
    confidence, precision : float
        Interval level and target relative half-width; blocks are added until every row
        reaches it (rows that get there first keep improving).
    max_seconds : float, optional
        Wall-time cap for all rows together.
    progress : callable, optional
        Called with the fraction done after each chunk.
    runner : Runner, optional
        Where chunks run; the result does not depend on it.
    plan : SharedPlan, optional
        Block shape (default: :func:`plan_shared`); its ``dks`` must match ``theories``.

    Returns
    -------
    SharedEstimates

    Examples
    --------
    >>> from varcheck.core.distributions import parse_distribution
    >>> from varcheck.core.theory import dot_product_theory
    >>> z = parse_distribution("normal")
    >>> res = estimate_shared(z, z, [dot_product_theory(d, z, z) for d in (4, 64)],
    ...                       seed=1, stream=(SHARED_STREAM,), confidence=0.95, precision=0.02)
    >>> [round(e.var / d, 2) for e, d in zip(res.estimates, (4, 64))]
    [1.0, 1.0]
    """
    if plan is None:
        plan = plan_shared(
            q, k, theories, precision=precision, confidence=confidence, max_seconds=max_seconds
        )
    elif plan.dks != tuple(th.dk for th in theories):
        raise ValueError(f"plan is for d_k {plan.dks}, not {[th.dk for th in theories]}")
    methods = [interval_method(th) for th in theories]
    merged = _Levels(len(plan.dks))
    runner = SerialRunner() if runner is None else runner
    task = (q, k, plan, seed, stream)
    workspace = _Workspace()

    def draw(tasks: Iterator[tuple[int, int]]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return ordered_map(runner, run_shared_chunk, ((*task, c, b, workspace) for c, b in tasks))

    def widest() -> float:
        pairs = zip(merged.accs, methods, strict=True)
        return max(c.relative_width(confidence, m) for c, m in pairs)

    # the predicted number of blocks (sized from the theory under test) is only a first round:
    # if the truth is noisier, later rounds are sized from the measured standard errors
    rule = _stop_rule(q, k, theories, plan, precision, max_seconds)
    # merged once per round, not per chunk: the accumulators' fixed cost is most of a small
    # chunk's; the merge order (and so the result) is still the chunks' order
    summary = functools.partial(_summaries, plan, merged, methods, confidence, precision)
    args = (rule, plan.blocks_per_chunk, draw, merged.absorb, widest)
    with _partial_on_interrupt(merged, summary):
        rounds = draw_rounds(*args, per_round=True, progress=progress)
    return summary(rounds.stop_reason)


@contextlib.contextmanager
def _partial_on_interrupt(
    merged: _Levels, summary: Callable[[str], SharedEstimates]
) -> Iterator[None]:
    """On Ctrl-C or SIGTERM, every row's interval from the blocks drawn so far (rows share them)."""
    try:
        yield
    except KeyboardInterrupt:
        if min(acc.n for acc in merged.accs) < 2:
            raise
        raise PartialInterrupt(summary("interrupted")) from None


def _stop_rule(
    q: Distribution,
    k: Distribution,
    theories: Sequence[DotProductTheory],
    plan: SharedPlan,
    precision: float,
    max_seconds: float | None,
) -> StopRule:
    """The target, first round and time cap, and the budget rule: every row rests on at least
    the products its laws need for a valid interval."""
    least = max(minimum_products(q, k, th) / plan.products_per_block(th.dk) for th in theories)
    return StopRule(
        precision=precision,
        first_round=plan.blocks_needed,
        max_seconds=max_seconds,
        min_blocks=int(math.ceil(least)) if math.isfinite(least) else 0,
    )


def _summaries(
    plan: SharedPlan,
    merged: _Levels,
    methods: list[str],
    confidence: float,
    precision: float,
    stop_reason: str,
) -> SharedEstimates:
    """Each d_k's estimate and the covariance of the variance estimates across d_k."""
    estimates = [
        summarise(
            acc,
            confidence=confidence,
            method=method,
            products_per_block=plan.products_per_block(dk),
            block_side=plan.rows,
            stop_reason=stop_reason,
            groups=plan.groups(dk),
            target=precision,
        )
        for dk, acc, method in zip(plan.dks, merged.accs, methods, strict=True)
    ]
    cov = _covariance(merged.joint, len(plan.dks))
    # the diagonal as the rows' own standard errors (which add a second-order term)
    cov[np.diag_indices(len(plan.dks))] = [e.se**2 for e in estimates]
    return SharedEstimates(estimates=tuple(estimates), covariance=cov, plan=plan)


class _Levels:
    """One accumulator per d_k and their joint moments, merged a round of chunks at a time."""

    def __init__(self, levels: int) -> None:
        self.accs = [BlockAccumulator() for _ in range(levels)]
        self.joint = _JointMoments(2 * levels)

    def absorb(self, results: list[tuple[np.ndarray, np.ndarray]]) -> None:
        m = np.concatenate([r[0] for r in results])
        a = np.concatenate([r[1] for r in results])
        for j, acc in enumerate(self.accs):
            acc.add(m[:, j], a[:, j])
        self.joint.add(np.concatenate([m, a], axis=1))
