"""Drawing q·k products in independent blocks, and choosing the block shape.

A block is an ``n × d`` matrix Q and a ``d × n`` matrix K of fresh entries; its ``n²`` products
q_a·k_b share rows and columns and are therefore dependent, but different blocks are
independent. Each block is reduced to two numbers, the mean of its products and the mean of
their squares, which are what the estimator needs (see :mod:`varcheck.core.estimation`).

Cost model (per block, in nanoseconds on the reference machine, see docs/performance.md):

    cost(n) = c_rng · 2 n d  +  c_flop · n² d  +  c_out · n²  +  c_block

and the information in a block is that of ``n² / (1 + 2 (n - 1) r)`` independent products,
where r is the correlation between the squares of two products that share a row (or column).
For zero-mean entries r = d s_k⁴ (mu4_q - s_q⁴) / (mu4_s - Var(s)²), e.g. 1 / (d + 3) for
normal entries, so large blocks are nearly free for large d. The block side n minimises
cost(n) (1 + 2 (n - 1) r) / n². The choice affects speed only: the interval is computed from
independent blocks whatever their shape.

Zero-mean entries sampled to a precision use :mod:`varcheck.core.shared_blocks` instead, which
draws every d_k of a sweep from the same blocks; this module serves the rest (non-zero means,
correlated pairs, fixed budgets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .distributions import Distribution
from .theory import DotProductTheory

__all__ = ["BlockPlan", "plan_blocks", "draw_chunk", "MAX_CHUNK_ELEMENTS"]

#: Upper bound on array elements held at once by one chunk (memory guard: 8 bytes each).
MAX_CHUNK_ELEMENTS = 1 << 22

# nanoseconds per random number, by family (measured with bench/cost_model.py)
_C_RNG = {"normal": 11.0, "uniform": 3.0, "rademacher": 3.0, "laplace": 19.0, "t": 37.0}
_C_RNG_SCIPY = 20.0
_C_FLOP = 0.07
_C_OUT = 1.1
_C_BLOCK = 160.0


@dataclass(frozen=True)
class BlockPlan:
    """How products are drawn.

    Attributes
    ----------
    side : int
        Each block is ``side × side`` products from ``side`` rows of Q and ``side`` columns of
        K. ``side == 1`` means independent (q, k) pairs.
    paired : bool
        True when q_i and k_i are drawn jointly (correlated entries), which needs side 1.
    blocks_per_chunk : int
        Blocks drawn with one generator; chunks are the unit of seeding and of parallel work.
    row_correlation : float
        The correlation r of squared products sharing a row used to pick ``side``.
    """

    side: int
    paired: bool
    blocks_per_chunk: int
    row_correlation: float

    @property
    def products_per_block(self) -> int:
        return self.side * self.side

    @property
    def products_per_chunk(self) -> int:
        return self.products_per_block * self.blocks_per_chunk


def _rng_cost(dist: Distribution) -> float:
    return _C_RNG.get(dist.family, _C_RNG_SCIPY)


def _row_correlation(q: Distribution, k: Distribution, theory: DotProductTheory) -> float:
    """Correlation of s_ab^2 and s_ac^2 (shared row), exact for zero-mean entries."""
    if not theory.estimable or theory.var == 0:
        return 1.0
    if q.mean == 0.0 and k.mean == 0.0:
        var_s2 = theory.mu4 - theory.var**2
        if var_s2 <= 0:
            # (q·k)^2 is constant (e.g. Rademacher at d_k = 1): nothing to gain from sharing
            return 1.0
        r_row = theory.dk * k.var**2 * (q.mu4 - q.var**2) / var_s2
        r_col = theory.dk * q.var**2 * (k.mu4 - k.var**2) / var_s2
        return float(min(1.0, max(r_row, r_col, 0.0)))
    # With non-zero means the shared row's sum dominates; stay with small blocks.
    return 0.5


def plan_blocks(
    q: Distribution, k: Distribution, theory: DotProductTheory, *, max_side: int = 1024
) -> BlockPlan:
    """Choose the block side that minimises modelled time per unit of information."""
    d = theory.dk
    paired = theory.rho != 0.0
    r = _row_correlation(q, k, theory)
    c_rng = 0.5 * (_rng_cost(q) + _rng_cost(k))
    best_side, best_cost = 1, math.inf
    side = 1
    while side <= max_side and not paired:
        if 2 * side * d + side * side > MAX_CHUNK_ELEMENTS:
            break
        cost = c_rng * 2 * side * d + _C_FLOP * side * side * d + _C_OUT * side * side + _C_BLOCK
        per_info = cost * (1 + 2 * (side - 1) * r) / (side * side)
        if per_info < best_cost:
            best_side, best_cost = side, per_info
        side *= 2
    per_block = 2 * best_side * d + best_side * best_side
    blocks = max(1, MAX_CHUNK_ELEMENTS // (4 * per_block))
    if best_side == 1:
        # independent pairs: a "block" is one product; keep chunks moderate for interrupts
        blocks = max(1, min(blocks, 1 << 16))
    else:
        blocks = min(blocks, 256)
    return BlockPlan(side=best_side, paired=paired, blocks_per_chunk=int(blocks), row_correlation=r)


def _dot_rows(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", q, k)


def draw_chunk(
    q: Distribution,
    k: Distribution,
    dk: int,
    plan: BlockPlan,
    rng: np.random.Generator,
    *,
    blocks: int | None = None,
    rho: float = 0.0,
    shift: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw one chunk of blocks and return per-block (mean of s, mean of s²).

    Parameters
    ----------
    q, k : Distribution
        Entry distributions.
    dk : int
        Length of each vector.
    plan : BlockPlan
        Block shape.
    rng : numpy.random.Generator
        The chunk's own generator.
    blocks : int, optional
        Number of blocks (default ``plan.blocks_per_chunk``).
    rho : float
        Correlation of q_i with k_i (normal entries; needs ``plan.paired``).
    shift : float
        Subtracted from every product before reducing (e.g. the exact mean): the variance is
        unchanged, and the squares do not swamp it when the mean is large.

    Returns
    -------
    means, mean_squares : ndarray
        One value per block, of the shifted products.
    """
    n_blocks = plan.blocks_per_chunk if blocks is None else blocks
    side = plan.side
    if side == 1:
        total = np.zeros(n_blocks)
        # split d so that one draw never exceeds the memory bound
        step = max(1, MAX_CHUNK_ELEMENTS // (2 * max(n_blocks, 1)))
        for start in range(0, dk, step):
            width = min(step, dk - start)
            if rho != 0.0:
                qmu, qsd = q.standard_normal_parts()
                kmu, ksd = k.standard_normal_parts()
                z1 = rng.standard_normal((n_blocks, width))
                z2 = rng.standard_normal((n_blocks, width))
                z2 *= math.sqrt(1.0 - rho * rho)
                z2 += rho * z1
                qa = z1 * qsd + qmu
                ka = z2 * ksd + kmu
            else:
                qa = q.sample(rng, (n_blocks, width))
                ka = k.sample(rng, (n_blocks, width))
            total += _dot_rows(qa, ka)
        if shift:
            total -= shift
        return total, total * total
    qm = q.sample(rng, (n_blocks, side, dk))
    km = k.sample(rng, (n_blocks, dk, side))
    s = np.matmul(qm, km)
    flat = s.reshape(n_blocks, -1)
    if shift:
        flat -= shift
    return flat.mean(axis=1), np.einsum("ij,ij->i", flat, flat) / flat.shape[1]
