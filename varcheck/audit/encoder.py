"""Audit of a trained encoder: is 1/√d_k still the temperature that gives unit-variance logits?

For every layer ℓ and head h the audit projects that layer's input hidden states X (post-LayerNorm,
one row per real token) to q = x W_qᵀ + b_q and k = x W_kᵀ + b_k and measures the logits q·k of
every pair of real tokens (i, j) in each sequence. Three predictions sit next to the measurement:

* **paper** — the σ-based relaxed formula (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k, with σ_X the
  standard deviation of the entries of X (pooled over tokens and features);
* **exact** — σ_X⁴ ‖W_q W_kᵀ‖_F², exact for inputs with i.i.d. zero-mean entries;
* **cov** — the variance for two *independent* tokens x, x' drawn from the empirical distribution
  of X (mean μ, covariance Σ), with biases. With u = x W_qᵀ + b_q (mean m_q, covariance
  C_q = W_q Σ W_qᵀ) and v = x' W_kᵀ + b_k (m_k, C_k = W_k Σ W_kᵀ) independent,

      E[(u·v)²] = E[uᵀ E[v vᵀ] u] = tr((C_k + m_k m_kᵀ)(C_q + m_q m_qᵀ))

  so Var(u·v) = tr(C_q C_k) + m_kᵀ C_q m_k + m_qᵀ C_k m_q and E[u·v] = m_q·m_k. No Gaussian or
  isotropy assumption is involved; tr(C_q C_k) = tr(A Σ Aᵀ Σ) with A = W_qᵀ W_k. For the same
  token, E[q·k] = tr(W_q Σ W_kᵀ) + m_q·m_k, which the measured same-token mean matches by
  construction (it is a linear function of the empirical second moments), so it is not reported.

σ_Wq and σ_Wk are the root mean square of the head's weight entries
(:func:`varcheck.core.logit_variance.weight_sigma`, as in ``beta``, ``train`` and ``project``):
with it exact ≤ d_k · paper holds for every head.

The measured variance pools all pairs of real tokens (same-token pairs included) over all
sequences; tokens of one sentence are not independent, which is what the ``cov`` prediction
leaves out. The interval on the scaled variance is a delete-one-sequence jackknife (sequences are
the independent units), so it says how much the figure depends on the particular sentences. It
is given only from :data:`MIN_SEQUENCES` sequences on (docs/audit.md says why); with fewer the
estimate is shown with the mark ``too few sequences`` and no interval.

The work is bounded before it starts (:func:`plan_audit`: memory and time from the token
counts), and on Ctrl-C (``KeyboardInterrupt``) the layers finished so far are returned, marked
``interrupted``.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np

from .._version import __version__
from ..core import logit_variance as lv
from ..core.estimation import ConfidenceInterval, t_quantile
from ..core.messages import shown, size_text
from ..core.options import valid_confidence, valid_count
from ..core.progress import ProgressCallback
from ..core.untested import Untested
from ..errors import VarcheckError
from ..output.display import Displayable
from . import bert
from .intervals import MIN_SEQUENCES
from .results import HeadMetrics
from .tokenizing import CHARS_PER_TOKEN, first_token_texts

if TYPE_CHECKING:
    from .metrics import LayerAccumulator

__all__ = [
    "HeadAudit",
    "LayerSummary",
    "AuditResult",
    "audit_encoder",
    "parse_layers",
    "read_text_file",
    "default_sentences",
    "DEFAULT_TEXT_NAME",
    "MIN_SEQUENCES",
    "MAX_TEXT_BYTES",
    "MAX_SECONDS",
    "TOO_FEW",
    "AuditPlan",
    "plan_audit",
    "fewest_tokens",
    "AuditArgs",
    "audit_args",
    "refuse_beyond",
    "HeadScale",
    "LayeredAudit",
    "jackknife_intervals",
]


#: How the built-in text is named in results.
DEFAULT_TEXT_NAME = "built-in (varcheck/data/default_text.txt)"


#: :attr:`HeadAudit.scale_check` when there are fewer than :data:`MIN_SEQUENCES` sequences.
TOO_FEW = "too few sequences"

#: Largest --text file read.
MAX_TEXT_BYTES = 16 << 20

#: Longest estimated run accepted (seconds, at :data:`_FLOPS_PER_SECOND`).
MAX_SECONDS = 1800.0
#: A deliberately low speed for the estimate: numpy's float32 products on one busy core.
_FLOPS_PER_SECOND = 2e9
#: Memory one batch's attention and feed-forward work may take; the batch is cut to fit it.
_BATCH_BYTES = 256 << 20


class HeadScale:
    """Mixin: what a head's measured logits say about its scale (an encoder's or a decoder's).

    The head's dataclass holds ``dk``, ``measured_var``, ``row_var`` and ``scaled_var_ci``.
    """

    dk: int
    measured_var: float
    row_var: float
    scaled_var_ci: ConfidenceInterval

    @property
    def measured_scaled_var(self) -> float:
        """Variance of the logits as the model uses them, q·k/√d_k (1 if 1/√d_k were right)."""
        return self.measured_var / self.dk

    @property
    def scale_check(self) -> str:
        """Does the interval for ``measured_scaled_var`` hold 1 (1/√d_k right)?

        ``"holds"`` when it does, ``"below"`` or ``"above"`` when it lies wholly on one side of
        1, :data:`TOO_FEW` when there is no interval (fewer than :data:`MIN_SEQUENCES`
        sequences).
        """
        lo, hi = self.scaled_var_ci
        if math.isnan(lo):
            return TOO_FEW
        if lo <= 1.0 <= hi:
            return "holds"
        return "below" if hi < 1.0 else "above"

    @property
    def row_scaled_var(self) -> float:
        """Within-query variance of q·k/√d_k."""
        return self.row_var / self.dk

    @property
    def beta_unit(self) -> float:
        """The β with Var(β q·k) = 1: 1 / sd(q·k)."""
        return lv.beta_for(self.measured_var)

    @property
    def beta_default(self) -> float:
        """1/√d_k."""
        return 1.0 / math.sqrt(self.dk)


class LayeredAudit:
    """Mixin: an audit's layers and intervals (an encoder's or a decoder's result).

    The result's dataclass holds ``dk``, ``layers``, ``rows`` (each with a ``layer``),
    ``sequences`` and ``min_sequences``.
    """

    dk: int
    layers: tuple[int, ...]
    rows: tuple
    sequences: int
    min_sequences: int

    @property
    def beta_default(self) -> float:
        """1/√d_k."""
        return 1.0 / math.sqrt(self.dk)

    @property
    def finished_layers(self) -> tuple[int, ...]:
        """The layers with rows: all of ``layers`` unless ``interrupted``."""
        return tuple(layer for layer in self.layers if any(r.layer == layer for r in self.rows))

    @property
    def has_intervals(self) -> bool:
        """Whether there are enough sequences (:data:`MIN_SEQUENCES`) for intervals."""
        return self.sequences >= self.min_sequences


@dataclass(frozen=True)
class HeadAudit(HeadScale):
    """Weights, predictions and measurements for one attention head.

    Attributes
    ----------
    layer, head : int
        Zero-based indices.
    dk : int
        Head width d_k.
    sigma_x : float
        Standard deviation of the entries of the layer's input (real tokens only).
    sigma_wq, sigma_wk : float
        Root mean square of the entries of this head's W_q, W_k (each d_k × d_x):
        :func:`~varcheck.core.logit_variance.weight_sigma`, as the paper family measures σ_W.
    sigma_bq, sigma_bk : float
        Standard deviations of the entries of the head's query and key biases.
    predicted_var_paper, predicted_var_exact, predicted_var_cov : float
        Predicted Var(q·k) (raw logits): σ-based, weight-exact for i.i.d. zero-mean inputs, and
        exact for independent tokens with the input's measured mean and covariance (module notes).
    predicted_var_centred : float
        The ``cov`` prediction without its mean terms, tr(C_q C_k): what the anisotropy of the
        input alone gives (zero-mean inputs with the measured covariance, no biases).
    predicted_mean_diff : float
        Predicted mean logit for two independent tokens, m_q·m_k (``cov``).
    measured_var : float
        Variance of the raw logits q·k over all pairs of real tokens of every sequence.
    measured_var_diff : float
        The same over pairs of different tokens only.
    mean_same, mean_diff : float
        Mean raw logit over same-token pairs (i = j) and different-token pairs (i ≠ j).
    row_var : float
        Mean over queries of the variance of the raw logits across that query's keys: what the
        softmax feels, since adding a constant to a row does not change it.
    entropy : float
        Mean attention entropy in nats (softmax of q·k/√d_k over the real tokens).
    scaled_var_ci : ConfidenceInterval
        Jackknife interval (sequences left out one at a time) for ``measured_scaled_var``; NaN
        ends with fewer than :data:`MIN_SEQUENCES` sequences.
    """

    layer: int
    head: int
    dk: int
    sigma_x: float
    sigma_wq: float
    sigma_wk: float
    sigma_bq: float
    sigma_bk: float
    predicted_var_paper: float
    predicted_var_exact: float
    predicted_var_cov: float
    predicted_var_centred: float
    predicted_mean_diff: float
    measured_var: float
    measured_var_diff: float
    mean_same: float
    mean_diff: float
    row_var: float
    entropy: float
    scaled_var_ci: ConfidenceInterval


@dataclass(frozen=True)
class LayerSummary:
    """One layer's heads in a few numbers.

    Attributes
    ----------
    layer : int
    sigma_x : float
    scaled_var_median, scaled_var_min, scaled_var_max : float
        Of ``measured_scaled_var`` over the heads.
    ratio_paper, ratio_exact, ratio_centred, ratio_cov : float
        Geometric mean over heads of predicted / measured variance (1 = tracks it on average).
    beta_unit_median : float
    entropy_mean : float
    """

    layer: int
    sigma_x: float
    scaled_var_median: float
    scaled_var_min: float
    scaled_var_max: float
    ratio_paper: float
    ratio_exact: float
    ratio_centred: float
    ratio_cov: float
    beta_unit_median: float
    entropy_mean: float


@dataclass(frozen=True, repr=False)
class AuditResult(LayeredAudit, Untested, Displayable):
    """The result of :func:`audit`.

    Attributes
    ----------
    rows : tuple of HeadAudit
        Ordered by layer, then head.
    model_path : str
        Folder of the checkpoint.
    model_name : str
        Its ``_name_or_path`` (or folder name).
    text : str
        The text file read, or :data:`DEFAULT_TEXT_NAME`.
    sequences, tokens : int
        Sequences (one per non-empty line) and real tokens, ``[CLS]``/``[SEP]`` included.
    max_length : int
        Tokens per sequence after truncation.
    layers : tuple of int
    hidden_size, num_heads, dk : int
    mean_log_tokens : float
        Mean over queries of log(number of keys): the entropy of uniform attention, for scale.
    confidence : float
        Level of the jackknife intervals.
    seconds : float
        Wall time of the forward pass and the measurement.
    truncated : int
        Sequences longer than ``max_length`` tokens, cut to it.
    interrupted : bool
        The run was stopped (Ctrl-C, SIGTERM) before every layer was measured: ``rows`` hold
        the layers finished (:attr:`finished_layers`).
    version : str
    sigma_w_kind : str
        Which σ of the weights ``sigma_wq``, ``sigma_wk`` are: ``"rms"``.
    min_sequences : int
        :data:`MIN_SEQUENCES`, the fewest sequences for an interval.
    scale_rule : str
        The scale the checkpoint declares for q·k (a BERT's is 1/√d_head).
    first_tokens : tuple of str
        The distinct texts of token 0 (the sink's token).
    metrics : tuple of HeadMetrics
        The figures every audit reports (maximum logit, 99.9 % quantile, sink ratio, entropy
        with its interval) at the declared scale, one per row in the order of ``rows``
        (:mod:`varcheck.audit.metrics`).
    """

    rows: tuple[HeadAudit, ...]
    model_path: str
    model_name: str
    text: str
    sequences: int
    tokens: int
    max_length: int
    layers: tuple[int, ...]
    hidden_size: int
    num_heads: int
    dk: int
    mean_log_tokens: float
    confidence: float
    seconds: float
    truncated: int = 0
    interrupted: bool = False
    version: str = __version__
    sigma_w_kind: str = lv.SIGMA_W_KIND
    min_sequences: int = MIN_SEQUENCES
    scale_rule: str = "1/√d_head"
    first_tokens: tuple[str, ...] = ()
    metrics: tuple[HeadMetrics, ...] = ()
    summaries: tuple[LayerSummary, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "summaries", tuple(summarise_layers(self.rows, self.layers)))


def _geo_ratio(pred: Sequence[float], meas: Sequence[float]) -> float:
    pairs = [(p, m) for p, m in zip(pred, meas, strict=True) if p > 0 and m > 0]
    if not pairs:
        return math.nan
    return float(np.exp(np.mean([math.log(p / m) for p, m in pairs])))


class _SummarisedHead(Protocol):
    """What :func:`summarise_layers` reads of a head (an encoder's or a decoder's; read-only)."""

    @property
    def layer(self) -> int: ...

    @property
    def sigma_x(self) -> float: ...

    @property
    def measured_var(self) -> float: ...

    @property
    def predicted_var_paper(self) -> float: ...

    @property
    def predicted_var_exact(self) -> float: ...

    @property
    def predicted_var_centred(self) -> float: ...

    @property
    def predicted_var_cov(self) -> float: ...

    @property
    def beta_unit(self) -> float: ...

    @property
    def entropy(self) -> float: ...

    @property
    def measured_scaled_var(self) -> float: ...


def summarise_layers(rows: Sequence[_SummarisedHead], layers: Sequence[int]) -> list[LayerSummary]:
    """Each layer's heads in a :class:`LayerSummary` (an encoder's or a decoder's heads)."""
    out = []
    for layer in layers:
        rs = [r for r in rows if r.layer == layer]
        if not rs:
            continue
        scaled = [r.measured_scaled_var for r in rs]
        meas = [r.measured_var for r in rs]
        out.append(
            LayerSummary(
                layer=layer,
                sigma_x=rs[0].sigma_x,
                scaled_var_median=float(np.median(scaled)),
                scaled_var_min=min(scaled),
                scaled_var_max=max(scaled),
                ratio_paper=_geo_ratio([r.predicted_var_paper for r in rs], meas),
                ratio_exact=_geo_ratio([r.predicted_var_exact for r in rs], meas),
                ratio_centred=_geo_ratio([r.predicted_var_centred for r in rs], meas),
                ratio_cov=_geo_ratio([r.predicted_var_cov for r in rs], meas),
                beta_unit_median=float(np.median([r.beta_unit for r in rs])),
                entropy_mean=float(np.mean([r.entropy for r in rs])),
            )
        )
    return out


# --- inputs ---------------------------------------------------------------------------------------


def parse_layers(spec: str | int | Sequence[int], num_layers: int) -> tuple[int, ...]:
    """Layer indices from ``"all"``, ``"0,2-4"``, an int or a sequence of ints (sorted, unique).

    Examples
    --------
    >>> parse_layers("0,2-4", 6)
    (0, 2, 3, 4)
    >>> parse_layers("all", 3)
    (0, 1, 2)
    """
    last = num_layers - 1
    indices = "layer index 0" if last == 0 else f"layer indices 0 to {last}"
    accepted = f"accepted: {indices}, comma-separated, with ranges such as 0,2-4, or 'all'"
    given = shown(spec)
    if isinstance(spec, int) and not isinstance(spec, bool):
        items: list[int] = [spec]
    elif isinstance(spec, str):
        text = spec.strip().lower()
        if text == "all":
            return tuple(range(num_layers))
        items = []
        for raw_part in text.split(","):
            items.extend(_layer_part(raw_part.strip(), given, last, accepted))
    else:
        try:
            if isinstance(spec, bool):  # True is an int, but not a layer
                raise TypeError(spec)
            items = [int(i) for i in spec]
        except (TypeError, ValueError, OverflowError):
            raise VarcheckError(f"layers {given} is not a list of integers; {accepted}") from None
    bad = [i for i in items if not 0 <= i <= last]
    if bad or not items:
        what = f"layer {shown(max(bad))} is out of range" if bad else "no layer given"
        raise VarcheckError(f"layers {given}: {what}; {accepted}")
    return tuple(sorted(set(items)))


def _layer_part(part: str, given: str, last: int, accepted: str) -> range:
    """One comma-separated piece of a layer list: ``"3"`` or ``"2-4"``, within ``0..last``."""
    if part.startswith("-") and part[1:].isdigit():
        raise VarcheckError(
            f"layers {given}: layer {shown(part)[1:-1]} is negative (indices start at 0); "
            f"{accepted}"
        )
    bounds = part.split("-")
    try:
        if len(bounds) > 2 or not all(b.isdigit() for b in bounds):
            raise ValueError(part)
        lo, hi = int(bounds[0]), int(bounds[-1])
    except ValueError:
        raise VarcheckError(f"layers {given}: cannot read {shown(part)}; {accepted}") from None
    if lo > hi:
        raise VarcheckError(
            f"layers {given}: range {shown(part)} is empty (its start is above its end); {accepted}"
        )
    if hi > last:
        # checked before the range is built: 0-99999999999999999999 is refused, not expanded
        raise VarcheckError(f"layers {given}: layer {shown(hi)} is out of range; {accepted}")
    return range(lo, hi + 1)


def read_text_file(path: str | os.PathLike[str]) -> list[str]:
    """The non-empty lines of a UTF-8 text file, each one sequence for the audit.

    Only a regular file of at most :data:`MAX_TEXT_BYTES` is read (a FIFO or ``/dev/zero`` is
    refused before reading).
    """
    name = shown(str(path))
    data = bert.read_limited(path, MAX_TEXT_BYTES, "text file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise VarcheckError(f"text file {name} is not UTF-8 text") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise VarcheckError(f"text file {name} has no non-empty line")
    return lines


def default_sentences() -> list[str]:
    """The built-in text: a few dozen ordinary sentences written for varcheck."""
    text = resources.files("varcheck").joinpath("data/default_text.txt").read_text("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


class AuditArgs(NamedTuple):
    """An audit's arguments, checked: the sequences, how their text is named, the sizes."""

    sequences: list[str]
    text_name: str
    max_length: int
    batch_size: int
    confidence: float


def audit_args(
    text_file: str | os.PathLike[str] | None,
    sentences: Sequence[str] | None,
    max_length: int,
    batch_size: int,
    confidence: float,
    *,
    shortest: int,
) -> AuditArgs:
    """Validate an audit's arguments once, before the model is looked for.

    ``shortest`` is the fewest tokens ``max_length`` may keep: 3 for an encoder (``[CLS]`` and
    ``[SEP]`` around one token), 2 for a decoder (a causal pair).
    """
    if text_file is not None and sentences is not None:
        raise VarcheckError("give text_file or sentences, not both")
    max_length = valid_count("max_length", max_length, shortest)
    batch_size = valid_count("batch_size", batch_size, 1)
    confidence = valid_confidence(confidence)
    return AuditArgs(*audit_sequences(text_file, sentences), max_length, batch_size, confidence)


def audit_sequences(
    text_file: str | os.PathLike[str] | None, sentences: Sequence[str] | None
) -> tuple[list[str], str]:
    """The sequences to audit and the name of their text (a file, the sentences given, built-in)."""
    if text_file is not None:
        return read_text_file(text_file), str(text_file)
    if sentences is not None:
        if isinstance(sentences, str):
            raise VarcheckError("sentences must be a sequence of strings, not one string")
        cleaned = [str(s).strip() for s in sentences if str(s).strip()]
        if not cleaned:
            raise VarcheckError("sentences has no non-empty sentence")
        return cleaned, f"{len(cleaned)} sentences given"
    return default_sentences(), DEFAULT_TEXT_NAME


# --- measurement ---------------------------------------------------------------------------------


class _Sums:
    """Per-sequence sums of one layer's logits, per head (shape ``(sequences, heads)``)."""

    def __init__(self, n_seq: int, heads: int) -> None:
        shape = (n_seq, heads)
        self.s1_all = np.zeros(shape)
        self.s2_all = np.zeros(shape)
        self.s1_diag = np.zeros(shape)
        self.s2_diag = np.zeros(shape)
        self.row_var = np.zeros(shape)
        self.entropy = np.zeros(shape)

    def store(self, idx: Sequence[int], parts: tuple[np.ndarray, ...]) -> None:
        """Put one batch's sums (:func:`_measure_batch`) in the rows of its sequences."""
        arrays = (self.s1_all, self.s2_all, self.s1_diag, self.s2_diag, self.row_var, self.entropy)
        for arr, part in zip(arrays, parts, strict=True):
            arr[idx] = part


class _InputMoments:
    """Sum of x and of x xᵀ over real tokens of a layer's input."""

    def __init__(self, d: int) -> None:
        self.n = 0
        self.s1 = np.zeros(d)
        self.s2 = np.zeros((d, d))

    def add(self, x: np.ndarray) -> None:
        self.n += x.shape[0]
        self.s1 += x.sum(axis=0)
        self.s2 += x.T @ x

    def mean_cov(self) -> tuple[np.ndarray, np.ndarray]:
        mu = self.s1 / self.n
        return mu, self.s2 / self.n - np.outer(mu, mu)

    def sigma(self) -> float:
        entries = self.n * self.s1.size
        mean = self.s1.sum() / entries
        return math.sqrt(max(np.trace(self.s2) / entries - mean * mean, 0.0))


def _measure_batch(
    q: np.ndarray,
    k: np.ndarray,
    mask: np.ndarray,
    dk: int,
    metrics: LayerAccumulator,
    idx: Sequence[int],
) -> tuple[np.ndarray, ...]:
    """Sums for one padded batch; q, k ``(batch, heads, tokens, d_k)``, float64. ``metrics``
    takes the batch's logits at the scale 1/√d_k (its sequences are ``idx``)."""
    logits = q @ k.transpose(0, 1, 3, 2)
    pair = (mask[:, :, None] & mask[:, None, :])[:, None]  # (batch, 1, tokens, tokens)
    metrics.add_logits(idx, logits / math.sqrt(dk), pair)
    lz = np.where(pair, logits, 0.0)
    s1_all = lz.sum(axis=(2, 3))
    s2_all = (lz * lz).sum(axis=(2, 3))
    diag = np.diagonal(lz, axis1=2, axis2=3)
    s1_diag = diag.sum(axis=2)
    s2_diag = (diag * diag).sum(axis=2)
    n_keys = mask.sum(axis=1)[:, None, None]  # (batch, 1, 1)
    row_mean = lz.sum(axis=3) / n_keys
    row_sq = (lz * lz).sum(axis=3) / n_keys
    qmask = mask[:, None, :]
    row_var = np.where(qmask, row_sq - row_mean**2, 0.0).sum(axis=2)
    # softmax over real keys only; rows of padding queries stay finite and are dropped below
    keys = mask[:, None, None, :]
    scaled = np.where(keys, logits / math.sqrt(dk), -np.inf)
    scaled = scaled - scaled.max(axis=3, keepdims=True)
    probs = np.exp(scaled)
    norm = probs.sum(axis=3)
    # entropy = log Σ e^s − Σ p s with s shifted so that its maximum is 0
    ps = (probs * np.where(keys, scaled, 0.0)).sum(axis=3) / norm
    ent = np.where(qmask, np.log(norm) - ps, 0.0).sum(axis=2)
    return s1_all, s2_all, s1_diag, s2_diag, row_var, ent


def jackknife_intervals(
    s1: np.ndarray,
    s2: np.ndarray,
    counts: np.ndarray,
    scale: float,
    confidence: float,
    *,
    least: int = MIN_SEQUENCES,
) -> list[ConfidenceInterval]:
    """Delete-one-sequence jackknife t-intervals for a pooled variance, one per column.

    Parameters
    ----------
    s1, s2 : ndarray, shape (sequences, columns)
        Per sequence, the sum and the sum of squares of the values pooled (a head's logits).
    counts : ndarray, shape (sequences,) or (sequences, columns)
        Values per sequence (pairs of tokens).
    scale : float
        Factor applied to the variance (1/d_k for the scaled logits).
    confidence : float
    least : int
        Fewest sequences for an interval (:data:`MIN_SEQUENCES`); with fewer, NaN ends.

    Returns
    -------
    list of ConfidenceInterval
        Pooled variance ± t_{n−1} · jackknife standard error.
    """
    n = s1.shape[0]
    if n < max(least, 2):
        return [ConfidenceInterval(math.nan, math.nan)] * s1.shape[1]
    per_seq = counts[:, None] if counts.ndim == 1 else counts
    c_tot = per_seq.sum(axis=0)
    t1, t2 = s1.sum(axis=0), s2.sum(axis=0)
    c_loo = c_tot - per_seq
    m_loo = (t1 - s1) / c_loo
    v_loo = ((t2 - s2) / c_loo - m_loo**2) * scale
    full = (t2 / c_tot - (t1 / c_tot) ** 2) * scale
    se = np.sqrt((n - 1) / n * ((v_loo - v_loo.mean(axis=0)) ** 2).sum(axis=0))
    crit = t_quantile(confidence, n - 1)
    return [
        ConfidenceInterval(float(f - crit * s), float(f + crit * s))
        for f, s in zip(full, se, strict=True)
    ]


def audit_encoder(
    model: str | os.PathLike[str],
    *,
    text_file: str | os.PathLike[str] | None = None,
    sentences: Sequence[str] | None = None,
    layers: str | int | Sequence[int] = "all",
    max_length: int = 128,
    batch_size: int = 32,
    confidence: float = 0.95,
    progress: ProgressCallback | None = None,
) -> AuditResult:
    """Measure the attention logit scale of every head of a BERT-style encoder checkpoint.

    :func:`varcheck.audit` takes the same arguments and audits a decoder too; see it for the
    parameters. Deterministic: no randomness is involved, every real token pair is used.
    """
    args = audit_args(text_file, sentences, max_length, batch_size, confidence, shortest=3)
    ckpt = bert.load_checkpoint(model)
    cfg = ckpt.config
    chosen = parse_layers(layers, cfg.num_layers)
    limit = min(args.max_length, cfg.max_positions)
    ids, truncated, plan = _encode_planned(ckpt, args, chosen, limit)
    start = time.perf_counter()
    counts = np.array([len(s) for s in ids], dtype=float)
    proj = _projections(ckpt, chosen)
    run = _measure(ckpt, ids, chosen, plan.batch_size, proj, progress, args.confidence)
    return AuditResult(
        rows=tuple(r for layer in run.done for r in _heads(layer, proj, run, counts, args)),
        model_path=str(ckpt.path),
        model_name=cfg.name,
        text=args.text_name,
        sequences=len(ids),
        tokens=int(counts.sum()),
        max_length=limit,
        layers=chosen,
        hidden_size=cfg.hidden_size,
        num_heads=cfg.num_heads,
        dk=cfg.head_dim,
        mean_log_tokens=float((counts * np.log(counts)).sum() / counts.sum()),
        confidence=args.confidence,
        seconds=time.perf_counter() - start,
        truncated=truncated,
        interrupted=run.stopped_by is not None,
        first_tokens=first_token_texts(ids, ckpt.tokenizer.id_to_token),
        metrics=tuple(m for layer in run.done for m in run.metrics[layer]),
    )


def _encode_planned(
    ckpt: bert.BertCheckpoint, args: AuditArgs, chosen: Sequence[int], limit: int
) -> tuple[list[list[int]], int, AuditPlan]:
    """The sequences' ids, how many were cut, and the plan: checked first on the fewest tokens
    the text can give (two a line, then one more a word), before the tokenizer runs at all, then
    on the tokens it gave."""
    plan_audit(ckpt, [2] * len(args.sequences), chosen, args.batch_size, least=True)
    plan_audit(ckpt, fewest_tokens(args.sequences, limit), chosen, args.batch_size, least=True)
    ids, truncated = ckpt.encode_counted(args.sequences, limit)
    return ids, truncated, plan_audit(ckpt, [len(s) for s in ids], chosen, args.batch_size)


class AuditPlan(NamedTuple):
    """What an audit will cost, estimated from the token counts before any forward pass.

    Attributes
    ----------
    batch_size : int
        Sequences per forward pass: the one asked for, cut so that one batch's attention and
        feed-forward arrays stay within 256 MiB.
    memory_bytes : float
        Weights, the hidden states of every token at one layer, one batch's work, the sums.
    seconds : float
        Floating-point work at a deliberately low 2 GFLOP/s.
    """

    batch_size: int
    memory_bytes: float
    seconds: float


#: a run of letters or digits: at least one token of a BERT tokenizer's (a word piece or [UNK])
_WORD = re.compile(r"\w+")


def fewest_tokens(lines: Sequence[str], max_length: int) -> list[int]:
    """The fewest tokens a BERT tokenizer gives each line cut to ``max_length`` (``[CLS]`` and
    ``[SEP]``, and one per run of letters or digits): a bound the plan can check before the
    tokenizer runs (4 million short lines took 3.7 GB inside it and aborted)."""
    chars = CHARS_PER_TOKEN * max_length
    return [min(max_length, 2 + len(_WORD.findall(line, 0, chars))) for line in lines]


def plan_audit(
    ckpt: bert.BertCheckpoint,
    lengths: Sequence[int],
    layers: Sequence[int],
    batch_size: int,
    *,
    least: bool = False,
) -> AuditPlan:
    """Estimate an audit's memory and time from its sequences' token counts; refuse it (one
    line) beyond the limits :data:`varcheck.audit.bert.MAX_MEMORY_BYTES` and
    :data:`MAX_SECONDS`. With ``least``, the counts are the fewest the text can give."""
    cfg = ckpt.config
    d, f, heads = cfg.hidden_size, cfg.intermediate_size, cfg.num_heads
    width = max(lengths)
    # per sequence of the longest width: attention arrays (float64 measurement, ~6 of them, and
    # as many for the metrics), the feed-forward activations (float32, two), q/k/v and their
    # float64 copies
    per_seq = width * (12 * 8 * heads * width + 2 * 4 * f + 8 * 8 * d)
    batch = max(1, min(batch_size, _BATCH_BYTES // per_seq))
    tokens = float(sum(lengths))
    order = sorted(lengths)
    groups = (order[j : j + batch] for j in range(0, len(order), batch))
    padded = sum(len(group) * group[-1] for group in groups)  # each padded to its longest
    weights = float(sum(w.nbytes for w in ckpt.weights.values()))
    # per chosen layer: W_q, b_q, W_k, b_k in float64 and the input's d × d moments; then the
    # covariance and the heads' C_q, C_k (d × d each) while its rows are made
    layer_sums = len(layers) * (8.0 * (3 * d * d + 2 * d) + 6 * 8.0 * len(lengths) * heads)
    # one layer's logits kept for the 99.9 % quantile (float32), and one head's joined copy
    pooled = 4.0 * (heads + 1) * sum(n * n for n in lengths)
    memory = weights + 4.0 * padded * d + batch * per_seq + layer_sums + 3 * 8.0 * d * d + pooled
    depth = max(layers) + 1
    flops = depth * padded * (2 * (4 * d * d + 2 * d * f) + 4 * width * d)
    flops += len(layers) * padded * (4 * d * d + heads * width * 40)
    seconds = flops / _FLOPS_PER_SECOND
    what = (
        f"the audit of {len(lengths):,} sequences ({'at least ' if least else ''}"
        f"{tokens:,.0f} tokens, up to {width} each) through {depth} "
        f"layer{'s' if depth > 1 else ''}"
    )
    refuse_beyond(what, memory, seconds, bert.MAX_MEMORY_BYTES, MAX_SECONDS)
    return AuditPlan(batch, memory, seconds)


def refuse_beyond(
    what: str, memory: float, seconds: float, max_memory: float, max_seconds: float
) -> None:
    """Refuse an audit (one line, with the estimate) whose planned memory or time is too large.

    ``what`` names the work, e.g. "the audit of 12 sequences (…) through 3 layers".
    """
    fix = "accepted: a shorter --text, a smaller --max-length or fewer --layers"
    if memory > max_memory:
        raise VarcheckError(
            f"{what} needs about {size_text(memory)} of memory (limit "
            f"{size_text(max_memory)}); {fix}"
        )
    if seconds > max_seconds:
        raise VarcheckError(
            f"{what} would take about {seconds:,.0f} s (limit {max_seconds:,.0f} s); {fix}"
        )


def _projections(
    ckpt: bert.BertCheckpoint, layers: Sequence[int]
) -> dict[int, tuple[np.ndarray, ...]]:
    """Each layer's W_q, b_q, W_k, b_k (all heads, PyTorch layout), in float64."""
    names = ("query.weight", "query.bias", "key.weight", "key.bias")
    return {
        layer: tuple(
            ckpt.tensor(f"encoder.layer.{layer}.attention.self.{name}").astype(np.float64)
            for name in names
        )
        for layer in layers
    }


class _Run(NamedTuple):
    """What :func:`_measure` has: sums and moments per layer, the layers finished, an interrupt."""

    sums: dict[int, _Sums]
    moments: dict[int, _InputMoments]
    metrics: dict[int, list[HeadMetrics]]
    done: list[int]
    stopped_by: BaseException | None


def _measure(
    ckpt: bert.BertCheckpoint,
    ids: list[list[int]],
    layers: Sequence[int],
    batch_size: int,
    proj: dict[int, tuple[np.ndarray, ...]],
    progress: ProgressCallback | None,
    confidence: float,
) -> _Run:
    """Run the encoder layer by layer over all batches, measuring each chosen layer's input.

    Layer by layer (not batch by batch) so that a layer is finished, with every sequence, before
    the next starts: an interrupt keeps the layers done. The hidden states of all tokens at the
    current layer are kept (float32), one batch at a time replaced by the next layer's.
    """
    from .metrics import LayerAccumulator

    heads, dk = ckpt.config.num_heads, ckpt.config.head_dim
    sums = {layer: _Sums(len(ids), heads) for layer in layers}
    moments = {layer: _InputMoments(ckpt.config.hidden_size) for layer in layers}
    run = _Run(sums, moments, {}, [], None)
    groups = list(bert.batches(ids, batch_size))
    depth = max(layers) + 1
    try:
        with np.errstate(all="ignore"):  # finite weights can still overflow: refused below
            states = [_finite(ckpt, 0, bert.embed(ckpt, batch)) for _, batch in groups]
        for layer in range(depth):
            acc = LayerAccumulator(layer, range(heads), len(ids), scale=dk**-0.5, causal=False)
            for g, (idx, batch) in enumerate(groups):
                if layer in sums:
                    h = states[g].astype(np.float64)
                    moments[layer].add(h[batch.mask])
                    wq, bq, wk, bk = proj[layer]
                    with np.errstate(all="ignore"):
                        q = bert.split_heads(bert.linear(h, wq, bq), heads)
                        k = bert.split_heads(bert.linear(h, wk, bk), heads)
                        parts = _measure_batch(q, k, batch.mask, dk, acc, idx)
                    sums[layer].store(idx, tuple(_finite(ckpt, layer, p) for p in parts))
                if layer + 1 < depth:
                    with np.errstate(all="ignore"):
                        state = bert.block(ckpt, layer, states[g], batch.mask[:, None, None, :])
                    states[g] = _finite(ckpt, layer + 1, state)
                if progress is not None:
                    progress(layer * len(groups) + g, depth * len(groups), 1.0)
            if layer in sums:
                run.metrics[layer] = acc.rows(confidence)
                run.done.append(layer)
    except KeyboardInterrupt as exc:
        return run._replace(stopped_by=exc)
    return run


def _finite(ckpt: bert.BertCheckpoint, layer: int, values: np.ndarray) -> np.ndarray:
    """``values`` (layer ``layer``'s input, or sums of its logits), refused when the weights
    made them overflow (NaN or infinite)."""
    if not np.isfinite(values).all():
        raise VarcheckError(
            f"{ckpt.path}: layer {layer}'s input or logits overflow (NaN or infinite values): "
            "its weights are too large to audit"
        )
    return values


def _heads(
    layer: int,
    projections: dict[int, tuple[np.ndarray, ...]],
    run: _Run,
    counts: np.ndarray,
    args: AuditArgs,
) -> list[HeadAudit]:
    """One layer's heads: weights, predictions from the input's moments, measured logits."""
    wq_all, bq_all, wk_all, bk_all = projections[layer]
    moments, acc, confidence = run.moments[layer], run.sums[layer], args.confidence
    heads = acc.s1_all.shape[1]
    dk = wq_all.shape[0] // heads
    sigma_x = moments.sigma()
    mu, cov = moments.mean_cov()
    n_pairs = counts**2
    cis = jackknife_intervals(acc.s1_all, acc.s2_all, n_pairs, 1.0 / dk, confidence)
    tot_pairs, tot_tokens = n_pairs.sum(), counts.sum()
    off_pairs = tot_pairs - tot_tokens
    # all heads at once: head h's C_q is the h-th diagonal block of W_q Σ W_qᵀ
    cq_all, ck_all = wq_all @ cov @ wq_all.T, wk_all @ cov @ wk_all.T
    mq_all, mk_all = wq_all @ mu + bq_all, wk_all @ mu + bk_all
    rows = []
    for h in range(heads):
        rs = slice(h * dk, (h + 1) * dk)
        wq, bq, wk, bk = wq_all[rs], bq_all[rs], wk_all[rs], bk_all[rs]
        s1, s2 = acc.s1_all[:, h].sum(), acc.s2_all[:, h].sum()
        d1, d2 = acc.s1_diag[:, h].sum(), acc.s2_diag[:, h].sum()
        mean_all = s1 / tot_pairs
        mean_off = (s1 - d1) / off_pairs if off_pairs else math.nan
        var_off = (s2 - d2) / off_pairs - mean_off**2 if off_pairs else math.nan
        mq, mk = mq_all[rs], mk_all[rs]
        cq, ck = cq_all[rs, rs], ck_all[rs, rs]
        sq, sk, var_paper, var_exact = lv.head_prediction(wq.T, wk.T, sigma_x)
        rows.append(
            HeadAudit(
                layer=layer,
                head=h,
                dk=dk,
                sigma_x=sigma_x,
                sigma_wq=sq,
                sigma_wk=sk,
                sigma_bq=float(bq.std()),
                sigma_bk=float(bk.std()),
                predicted_var_paper=var_paper,
                predicted_var_exact=var_exact,
                predicted_var_cov=float(np.sum(cq * ck) + mk @ cq @ mk + mq @ ck @ mq),
                predicted_var_centred=float(np.sum(cq * ck)),
                predicted_mean_diff=float(mq @ mk),
                measured_var=float(s2 / tot_pairs - mean_all**2),
                measured_var_diff=float(var_off),
                mean_same=float(d1 / tot_tokens),
                mean_diff=float(mean_off),
                row_var=float(acc.row_var[:, h].sum() / tot_tokens),
                entropy=float(acc.entropy[:, h].sum() / tot_tokens),
                scaled_var_ci=cis[h],
            )
        )
    return rows
