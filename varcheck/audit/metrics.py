"""The per-head figures training engineers watch, accumulated batch by batch, with intervals.

For each layer a :class:`LayerAccumulator` takes every batch's :class:`~.hf_forward.LayerQK`
and keeps, per sequence and head, what each figure needs: the count, sum and sum of squares of
the visible scaled logits (the scaled variance), the sequence's largest logit, the sums of row
entropies and of weights on token 0 with their counts, and the visible logits themselves for
the 99.9 % quantile. Sequences are the independent units: a mean over sequences gets a
Student-t interval with Hall's skewness correction (:func:`mean_intervals`), a pooled mean over
queries (entropy, sink) is a ratio of per-sequence sums and gets the same on its influence
values (:func:`ratio_intervals`), the pooled variance gets
:func:`varcheck.audit.intervals.sequence_interval`. With fewer than :data:`MIN_SEQUENCES`
sequences no interval is given (NaN ends).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..core.estimation import ConfidenceInterval, hall_interval, t_quantile
from .bert import masked_softmax
from .families import ModelSpec
from .hf_forward import LayerQK
from .intervals import MIN_SEQUENCES, sequence_interval
from .results import HeadMetrics

__all__ = ["MIN_SEQUENCES", "LayerAccumulator", "mean_intervals", "ratio_intervals"]

_NONE = ConfidenceInterval(math.nan, math.nan)


def _hall(est: float, z: np.ndarray, confidence: float) -> ConfidenceInterval:
    """Hall's interval for a mean of ``z`` (influence values) around ``est``."""
    n = z.size
    sd = float(z.std(ddof=1))
    if not sd > 0:
        return ConfidenceInterval(est, est)
    skew = float(np.mean((z - z.mean()) ** 3) / sd**3)
    return hall_interval(est, sd / math.sqrt(n), skew, n, t_quantile(confidence, n - 1))


def _clip(ci: ConfidenceInterval, low: float, high: float) -> ConfidenceInterval:
    return ConfidenceInterval(min(max(ci.low, low), high), max(min(ci.high, high), low))


def mean_intervals(
    x: np.ndarray, confidence: float, *, least: int = MIN_SEQUENCES
) -> tuple[np.ndarray, list[ConfidenceInterval]]:
    """Mean of each column of ``x`` ``(sequences, k)`` and its interval over sequences."""
    mean = x.mean(axis=0)
    if x.shape[0] < max(least, 2):
        return mean, [_NONE] * x.shape[1]
    return mean, [_hall(float(m), x[:, c], confidence) for c, m in enumerate(mean)]


def ratio_intervals(
    a: np.ndarray,
    c: np.ndarray,
    confidence: float,
    bounds: tuple[float, float] = (-math.inf, math.inf),
    *,
    least: int = MIN_SEQUENCES,
) -> tuple[np.ndarray, list[ConfidenceInterval]]:
    """Σ a / Σ c per column and its interval, sequences (rows) as units; sequences with c = 0
    take no part. ``bounds`` clip the interval to the figure's range.

    The influence value of sequence s is (a_s − R c_s) / c̄: the ratio's linearisation.
    """
    total = c.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = a.sum(axis=0) / total
    out = []
    for col in range(a.shape[1]):
        used = c[:, col] > 0
        n = int(used.sum())
        if n < max(least, 2) or not math.isfinite(ratio[col]):
            out.append(_NONE)
            continue
        z = (a[used, col] - ratio[col] * c[used, col]) / (total[col] / n)
        out.append(_clip(_hall(float(ratio[col]), z, confidence), *bounds))
    return ratio, out


def _entropy_rows(probs: np.ndarray) -> np.ndarray:
    """−Σ_j p log p of every row, ``(batch, heads, tokens)``."""
    safe = np.where(probs > 0, probs, 1.0)
    return -(probs * np.log(safe)).sum(axis=-1)


class LayerAccumulator:
    """Per-sequence sums of one layer's figures over batches.

    Every audit feeds one: the checkpoint audit its :class:`~.hf_forward.LayerQK` (:meth:`add`),
    the bundled encoder and decoder audits their own logits (:meth:`add_logits`).

    Parameters
    ----------
    layer : int
    heads : sequence of int
        Query heads audited.
    sequences : int
        Sequences in the text (batches give their indices).
    scale : float
        The declared scale of q·k (the logits given are already multiplied by it).
    causal : bool
        A decoder: query 0 (one key) takes no part in the entropy and the sink.
    softcap, window : float or int, optional
        Reported with each head (the figures are before the cap, over the window's pairs).
    """

    def __init__(
        self,
        layer: int,
        heads: Sequence[int],
        sequences: int,
        *,
        scale: float,
        causal: bool,
        softcap: float | None = None,
        window: int | None = None,
    ) -> None:
        self.layer, self.heads = layer, list(heads)
        self.scale, self.causal, self.softcap, self.window = scale, causal, softcap, window
        shape = (sequences, len(self.heads))
        self.count = np.zeros(shape)
        self.s1, self.s2 = np.zeros(shape), np.zeros(shape)
        self.seq_max, self.seq_abs_max = np.full(shape, -np.inf), np.zeros(shape)
        self.ent, self.ent_n = np.zeros(shape), np.zeros(shape)
        self.sink, self.sink_n = np.zeros(shape), np.zeros(shape)
        self.pooled: list[np.ndarray] = []

    @classmethod
    def of_spec(
        cls, spec: ModelSpec, layer: int, heads: Sequence[int], sequences: int
    ) -> LayerAccumulator:
        """The accumulator of a checkpoint's layer, its scale, cap and window from ``spec``."""
        return cls(
            layer,
            heads,
            sequences,
            scale=spec.scales[layer],
            causal=spec.causal,
            softcap=spec.softcap,
            window=spec.windows[layer],
        )

    def add(self, idx: Sequence[int], att: LayerQK) -> None:
        """One batch of a checkpoint's forward pass; row r of the batch is sequence ``idx[r]``."""
        self.add_arrays(idx, att.logits[:, self.heads], att.probs[:, self.heads], att.visible)

    def add_logits(self, idx: Sequence[int], logits: np.ndarray, visible: np.ndarray) -> None:
        """One batch of scaled logits ``(batch, heads, n, n)`` of every head, uncapped; the
        attention weights are their softmax over the ``visible`` pairs ``(batch, 1, n, n)``
        (queries without a visible key keep a row of their own, and are not counted)."""
        chosen = logits[:, self.heads]
        keys = visible | ~visible.any(axis=-1, keepdims=True)
        self.add_arrays(idx, chosen, masked_softmax(chosen, keys), visible)

    def add_arrays(
        self, idx: Sequence[int], logits: np.ndarray, probs: np.ndarray, vis: np.ndarray
    ) -> None:
        """The audited heads' scaled logits and weights ``(batch, heads, n, n)`` and the
        visible pairs ``(batch, 1, n, n)``."""
        logits = logits.astype(np.float64)
        self.count[idx] = vis.sum(axis=(2, 3))
        shown = np.where(vis, logits, 0.0)
        self.s1[idx] = shown.sum(axis=(2, 3))
        self.s2[idx] = (shown * shown).sum(axis=(2, 3))
        self.seq_max[idx] = np.where(vis, logits, -np.inf).max(axis=(2, 3))
        self.seq_abs_max[idx] = np.abs(shown).max(axis=(2, 3))
        self.pooled.append(logits.transpose(1, 0, 2, 3)[:, vis[:, 0]].astype(np.float32))
        real = np.any(vis[:, 0], axis=-1)  # (batch, n): real queries
        counted = real.copy()
        if self.causal:
            counted[:, 0] = False  # query 0 has one key: entropy 0, all weight on token 0
        ent = np.where(counted[:, None], _entropy_rows(probs), 0.0)
        self.ent[idx], self.ent_n[idx] = ent.sum(axis=2), counted.sum(axis=1)[:, None]
        sees = counted & vis[:, 0, :, 0]
        self.sink[idx] = np.where(sees[:, None], probs[..., 0], 0.0).sum(axis=2)
        self.sink_n[idx] = sees.sum(axis=1)[:, None]

    def _quantiles(self) -> np.ndarray:
        """The 99.9 % quantile of each head's pooled logits, one head's copy at a time (the
        batches' logits are one layer's largest array: no second copy of them all)."""
        out = np.full(len(self.heads), np.nan)
        for c in range(len(self.heads)):
            one = np.concatenate([part[c] for part in self.pooled])
            if one.size:
                out[c] = np.quantile(one, 0.999, overwrite_input=True)
        return out

    def rows(self, confidence: float) -> list[HeadMetrics]:
        """The layer's :class:`HeadMetrics`, one per audited head."""
        var, var_ci = sequence_interval(self.count, self.s1, self.s2, confidence)
        mean_max, max_ci = mean_intervals(self.seq_max, confidence)
        longest = max(1.0, float(self.ent_n.max(initial=0)))
        entropy, ent_ci = ratio_intervals(
            self.ent, self.ent_n, confidence, (0.0, math.log(longest + 1))
        )
        sink, sink_ci = ratio_intervals(self.sink, self.sink_n, confidence, (0.0, 1.0))
        q999 = self._quantiles()
        return [
            HeadMetrics(
                layer=self.layer,
                head=head,
                scale=self.scale,
                softcap=self.softcap,
                window=self.window,
                scaled_var=float(var[c]),
                scaled_var_ci=var_ci[c],
                max_logit=float(self.seq_max[:, c].max()),
                mean_max=float(mean_max[c]),
                mean_max_ci=max_ci[c],
                q999=float(q999[c]),
                entropy=float(entropy[c]),
                entropy_ci=ent_ci[c],
                sink=float(sink[c]),
                sink_ci=sink_ci[c],
                pairs=int(self.count[:, c].sum()),
            )
            for c, head in enumerate(self.heads)
        ]
