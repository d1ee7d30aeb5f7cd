"""Why the scale matters: what the softmax does to logits q·k with and without 1/√d_k.

For one query q and L keys k_1..k_L with i.i.d. entries, the logits s_j = q·k_j have variance
d_k Var(qk) (see :mod:`varcheck.core.theory`). Without scaling their spread grows like √d_k, and the
softmax p = softmax(s) collapses onto the largest logit: the entropy H(p) = -sum p_j log p_j falls
towards 0 (from log L for uniform weights), the largest weight rises towards 1, and the Jacobian
of the softmax, J = diag(p) - p pᵀ, through which every gradient flows back to the logits, shrinks
towards 0. With s / √d_k the logits keep unit variance and all three stay in a narrow band.

Nothing here has a simple closed form, so every number is a Monte-Carlo mean with its standard
error. Queries come in independent blocks that share their L keys (cheap: L + n vectors per n
queries); standard errors are computed between blocks, so the sharing inside a block is
accounted for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._version import __version__
from ..core.distributions import Distribution, parse_distribution
from ..core.messages import shown, size_text
from ..core.options import entry_laws, resolve_seed, valid_count
from ..core.ranges import resolve_dks
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.untested import Untested
from ..errors import VarcheckError
from ..output.display import Displayable
from .limits import approx, overflowing_laws, refuse

__all__ = [
    "SoftmaxStats",
    "SoftmaxRow",
    "SoftmaxResult",
    "softmax_study",
    "softmax_metrics",
    "MAX_KEYS",
]

MAX_KEYS = 100_000
#: Queries per block (they share the block's keys).
BLOCK_QUERIES = 32
_MIN_BLOCKS = 30
_CHUNK_ELEMENTS = 1 << 22
#: Cost units (about a nanosecond each) of drawing one entry, and of the softmax metrics per
#: logit (exp, log and a few passes, for the raw and the scaled logits).
_DRAW_COST = 15
_LOGIT_COST = 60
#: Largest study accepted (about a couple of minutes) ...
MAX_COST = 1.5e11
#: ... and largest block held in memory at once (float64 values, 400 MB).
MAX_BLOCK_ELEMENTS = 50_000_000


@dataclass(frozen=True)
class SoftmaxStats:
    """Means over queries, each with its Monte-Carlo standard error.

    Attributes
    ----------
    entropy, entropy_se : float
        Mean attention entropy (nats) and its standard error.
    entropy_fraction, entropy_fraction_se : float
        The same divided by log L (1 for uniform weights, 0 for one-hot).
    max_weight, max_weight_se : float
        Mean largest attention weight (1/L uniform, 1 one-hot).
    jacobian_norm, jacobian_norm_se : float
        Mean Frobenius norm of the softmax Jacobian diag(p) - p pᵀ (0 when saturated).
    """

    entropy: float
    entropy_se: float
    entropy_fraction: float
    entropy_fraction_se: float
    max_weight: float
    max_weight_se: float
    jacobian_norm: float
    jacobian_norm_se: float


@dataclass(frozen=True)
class SoftmaxRow:
    """One d_k.

    Attributes
    ----------
    dk : int
    logit_sd_raw, logit_sd_scaled : float
        Exact standard deviation of q·k and of q·k / √d_k (``inf`` if it does not exist).
    raw, scaled : SoftmaxStats
        Softmax of q·k and of q·k / √d_k (the same draws).
    blocks : int
        Independent blocks of 32 queries behind the means (the study's ``blocks``, or fewer
        for the row an interruption cut short).
    """

    dk: int
    logit_sd_raw: float
    logit_sd_scaled: float
    raw: SoftmaxStats
    scaled: SoftmaxStats
    blocks: int = 0

    @property
    def queries(self) -> int:
        """Queries behind this row's means (fewer than the study's when it was interrupted)."""
        return self.blocks * BLOCK_QUERIES


@dataclass(frozen=True, repr=False)
class SoftmaxResult(Untested, Displayable):
    """The result of :func:`softmax_study`.

    Attributes
    ----------
    rows : tuple of SoftmaxRow
    keys : int
        L, keys per query.
    queries : int
        Queries simulated per d_k.
    blocks : int
        Independent blocks behind each standard error.
    q_dist, k_dist : Distribution
    seed : int
    version : str
    interrupted : bool
        Ctrl-C (or SIGTERM) stopped the study: the rows are the d_k values finished by then,
        the last one possibly with fewer blocks (see :attr:`SoftmaxRow.blocks`).
    """

    rows: tuple[SoftmaxRow, ...]
    keys: int
    queries: int
    blocks: int
    q_dist: Distribution
    k_dist: Distribution
    seed: int
    version: str = __version__
    interrupted: bool = False


def softmax_metrics(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entropy, largest weight and Jacobian Frobenius norm of softmax over the last axis.

    Computed from log-probabilities so that nearly one-hot rows lose no precision: ``1 - p`` is
    ``-expm1(log p)``, and the sum of the other weights' squares is taken without the largest one.

    Examples
    --------
    >>> h, m, j = softmax_metrics(np.zeros((1, 4)))
    >>> round(float(h[0]), 6), float(m[0]), round(float(j[0]), 6)   # log 4; 1/4; sqrt(3)/4
    (1.386294, 0.25, 0.433013)
    """
    top = logits.max(axis=-1, keepdims=True)
    shifted = logits - top
    lse = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    logp = shifted - lse
    p = np.exp(logp)
    entropy = -(p * logp).sum(axis=-1)
    idx = p.argmax(axis=-1)
    p_max = np.take_along_axis(p, idx[..., None], axis=-1)[..., 0]
    p2 = p * p
    s2 = p2.sum(axis=-1)
    rest = p2.copy()
    np.put_along_axis(rest, idx[..., None], 0.0, axis=-1)
    s2_other = rest.sum(axis=-1)
    # ||J||^2 = sum_i p_i^2 (1 - p_i)^2 + sum_i p_i^2 sum_{j != i} p_j^2
    one_minus = -np.expm1(logp)
    diag = (p2 * one_minus * one_minus).sum(axis=-1)
    off = (rest * (s2[..., None] - rest)).sum(axis=-1) + p_max * p_max * s2_other
    jac = np.sqrt(np.maximum(diag + off, 0.0))
    return entropy, p_max, jac


def _stats(per_block: np.ndarray, log_l: float) -> SoftmaxStats:
    """Per-block means (blocks × 3) to means with between-block standard errors."""
    b = per_block.shape[0]
    mean = per_block.mean(axis=0)
    se = per_block.std(axis=0, ddof=1) / math.sqrt(b)
    return SoftmaxStats(
        entropy=float(mean[0]),
        entropy_se=float(se[0]),
        entropy_fraction=float(mean[0] / log_l),
        entropy_fraction_se=float(se[0] / log_l),
        max_weight=float(mean[1]),
        max_weight_se=float(se[1]),
        jacobian_norm=float(mean[2]),
        jacobian_norm_se=float(se[2]),
    )


def _simulate_dk(
    q: Distribution,
    k: Distribution,
    dk: int,
    keys: int,
    blocks: int,
    seed: int,
    stream: tuple[int, ...],
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Per-block means of the raw and scaled metrics; on Ctrl-C those of the chunks that
    finished, and True."""
    per_block = (BLOCK_QUERIES + keys) * dk + 2 * BLOCK_QUERIES * keys
    chunk = max(1, _CHUNK_ELEMENTS // per_block)
    raw = np.empty((blocks, 3))
    scaled = np.empty((blocks, 3))
    inv = 1.0 / math.sqrt(dk)
    done = 0
    try:
        for i, start in enumerate(range(0, blocks, chunk)):
            nb = min(chunk, blocks - start)
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(*stream, i)))
            with np.errstate(all="ignore"):  # draws beyond the float range are refused below
                qm = q.sample(rng, (nb, BLOCK_QUERIES, dk))
                km = k.sample(rng, (nb, dk, keys))
                logits = np.matmul(qm, km)
                for out, lg in ((raw, logits), (scaled, logits * inv)):
                    h, m, j = softmax_metrics(lg)
                    out[start : start + nb, 0] = h.mean(axis=1)
                    out[start : start + nb, 1] = m.mean(axis=1)
                    out[start : start + nb, 2] = j.mean(axis=1)
            if not np.isfinite(raw[start : start + nb]).all():
                raise overflowing_laws(q.spec, k.spec)
            done = start + nb
    except KeyboardInterrupt:
        return raw[:done], scaled[:done], True
    return raw, scaled, False


def _row(
    d: int, th: DotProductTheory, raw: np.ndarray, scaled: np.ndarray, log_l: float
) -> SoftmaxRow:
    """One d_k's row from its blocks' raw and scaled metrics."""
    return SoftmaxRow(
        dk=d,
        logit_sd_raw=math.sqrt(th.var),
        logit_sd_scaled=math.sqrt(th.scaled_var),
        raw=_stats(raw, log_l),
        scaled=_stats(scaled, log_l),
        blocks=raw.shape[0],
    )


def _block_elements(dk: int, keys: int) -> int:
    return (BLOCK_QUERIES + keys) * dk + 4 * BLOCK_QUERIES * keys


def study_cost(dks: Sequence[int], keys: int, blocks: int) -> float:
    """Cost units of a study: drawing q and K, the products, and the softmax metrics."""
    per_dk = [
        (BLOCK_QUERIES + keys) * d * _DRAW_COST
        + BLOCK_QUERIES * keys * d
        + BLOCK_QUERIES * keys * _LOGIT_COST
        for d in dks
    ]
    return approx(blocks) * float(sum(per_dk))


def _valid_size(dks: Sequence[int], keys: int, queries: int) -> None:
    worst = max(dks)
    if _block_elements(worst, keys) > MAX_BLOCK_ELEMENTS:
        raise VarcheckError(
            f"keys={keys} with d_k={worst}: one block of {BLOCK_QUERIES} queries and its keys "
            f"needs {size_text(_block_elements(worst, keys) * 8)}, above the "
            f"{size_text(MAX_BLOCK_ELEMENTS * 8)} limit; accepted: keys × d_k up to about "
            f"{MAX_BLOCK_ELEMENTS:,}"
        )
    blocks = -(-queries // BLOCK_QUERIES)
    cost = study_cost(dks, keys, blocks)
    if cost > MAX_COST:
        raise refuse(
            f"queries={shown(queries)} with keys={keys} over d_k {dks[0]}..{worst}",
            None,
            units=cost,
            max_units=MAX_COST,
            accepted="fewer queries, keys or d_k values",
        )


def _valid_queries(queries: int) -> int:
    least = BLOCK_QUERIES * _MIN_BLOCKS
    try:
        return valid_count("queries", queries, least)
    except VarcheckError:
        # the same rule; the message also says where the least number comes from
        raise VarcheckError(
            f"queries must be a whole number >= {least} ({_MIN_BLOCKS} blocks of "
            f"{BLOCK_QUERIES}), got {shown(queries)}"
        ) from None


def softmax_study(
    dk: int | str | Sequence[int] = "2..512",
    *,
    keys: int = 64,
    queries: int = 4096,
    dist: Distribution | str = "normal",
    q_dist: Distribution | str | None = None,
    k_dist: Distribution | str | None = None,
    seed: int | None = None,
) -> SoftmaxResult:
    """Entropy, largest weight and Jacobian size of softmax(q·K), raw and scaled, per d_k.

    Parameters
    ----------
    dk : int, str or sequence of int
        Values of d_k (``"2..512"`` doubles, see :func:`varcheck.parse_dk`).
    keys : int
        L, keys each query attends over (>= 2).
    queries : int
        Queries per d_k, drawn in blocks of 32 that share their keys.
    dist, q_dist, k_dist : str or Distribution
        Entry distributions (``q_dist``/``k_dist`` override ``dist``).
    seed : int, optional
        Root seed (drawn and reported when omitted).

    Returns
    -------
    SoftmaxResult

    Examples
    --------
    >>> res = softmax_study([4, 256], seed=1)
    >>> [round(r.raw.max_weight, 1) for r in res.rows]
    [0.3, 0.9]
    >>> [round(r.scaled.max_weight, 2) for r in res.rows]
    [0.11, 0.11]
    """
    dks = resolve_dks(dk)
    keys = valid_count("keys", keys, 2, MAX_KEYS)
    queries = _valid_queries(queries)
    _valid_size(dks, keys, queries)
    # dist is parsed first: None is refused, not read as normal
    q, k = entry_laws(parse_distribution(dist), q_dist, k_dist)
    seed = resolve_seed(seed)
    blocks = -(-queries // BLOCK_QUERIES)
    log_l = math.log(keys)
    rows: list[SoftmaxRow] = []
    interrupted = False
    try:
        for d in dks:
            th = dot_product_theory(d, q, k)
            raw, scaled, interrupted = _simulate_dk(q, k, d, keys, blocks, seed, (d,))
            if raw.shape[0] >= 2:  # an interrupted row keeps the blocks it finished
                rows.append(_row(d, th, raw, scaled, log_l))
            if interrupted:
                break
    except KeyboardInterrupt:  # between two rows: the finished ones are kept
        interrupted = True
    return SoftmaxResult(
        rows=tuple(rows),
        keys=keys,
        queries=blocks * BLOCK_QUERIES,
        blocks=blocks,
        q_dist=q,
        k_dist=k,
        seed=seed,
        interrupted=interrupted,
    )
