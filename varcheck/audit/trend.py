"""A run's checkpoints on the same text and positions: how each head's logits grow.

:func:`audit_run` opens every checkpoint before any work (same family and shape, the same token
ids from each tokenizer), checks the total time, audits each one on those ids and pairs them by
sequence: for each head and sequence, the least-squares slope of log max |scaled logit| against
the checkpoint's index is that sequence's growth rate; their mean over sequences, exponentiated,
is the head's growth factor per checkpoint step, with an interval over sequences
(:func:`varcheck.audit.metrics.mean_intervals`). A pure rescaling of a head's W_q by f per step
gives every sequence the slope log f, so the factor is recovered exactly; the interval says how
much the growth varies from one text to another. Per layer the trend shows the heads' mean
scaled variance and largest logit at each checkpoint.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from ..core.estimation import ConfidenceInterval
from ..core.messages import cut
from ..core.options import valid_confidence
from ..errors import VarcheckError
from .checkpoint import HFCheckpoint
from .encoder import MAX_SECONDS, default_sentences, read_text_file
from .gguf_checkpoint import GGUFCheckpoint
from .hf_audit import audit_hf, encode, open_model, plan, select
from .metrics import mean_intervals
from .results import CheckpointAudit, HeadGrowth, LayerTrend, TrendResult

__all__ = ["FASTEST", "audit_run", "trend"]

#: heads named as fastest-growing
FASTEST = 5


def _same_shape(ckpts: Sequence[HFCheckpoint | GGUFCheckpoint]) -> None:
    first = ckpts[0].spec
    for ckpt in ckpts[1:]:
        s = ckpt.spec
        if (s.family, s.layers, s.heads, s.head_dim) != (
            first.family,
            first.layers,
            first.heads,
            first.head_dim,
        ):
            raise VarcheckError(
                f"{cut(str(ckpt.path))}: {s.family}, {s.layers} layers × {s.heads} heads of "
                f"{s.head_dim}; the first checkpoint is {first.family}, {first.layers} × "
                f"{first.heads} of {first.head_dim}; accepted: checkpoints of one run"
            )


def _common_ids(
    ckpts: Sequence[HFCheckpoint | GGUFCheckpoint], lines: Sequence[str], max_length: int
) -> list:
    ids = encode(ckpts[0], lines, max_length)
    for ckpt in ckpts[1:]:
        if ckpt.tokenizer is not None and encode(ckpt, lines, max_length) != ids:
            raise VarcheckError(
                f"{cut(str(ckpt.path))}: its tokenizer gives other ids than the first "
                "checkpoint's; accepted: checkpoints sharing one tokenizer"
            )
    return ids


def audit_run(
    paths: Sequence[str | os.PathLike[str]],
    *,
    text_file: str | os.PathLike[str] | None = None,
    sentences: Sequence[str] | None = None,
    layers: str | Sequence[int] | None = None,
    heads: str | Sequence[int] | None = None,
    max_length: int = 128,
    confidence: float = 0.95,
    max_seconds: float = MAX_SECONDS,
) -> TrendResult:
    """Audit a run's checkpoints (in training order) and the trend of their logits."""
    confidence = valid_confidence(confidence)
    if len(paths) < 2:
        raise VarcheckError(f"{len(paths)} checkpoint given; accepted: two or more for a trend")
    ckpts = [open_model(p) for p in paths]
    _same_shape(ckpts)
    if sentences is None:
        sentences = read_text_file(text_file) if text_file is not None else default_sentences()
    ids = _common_ids(ckpts, sentences, max_length)
    chosen = select(ckpts[0].spec.layers, layers, "--layers")
    seconds = sum(plan(c, ids, chosen).seconds for c in ckpts)
    if seconds > max_seconds:
        raise VarcheckError(
            f"auditing {len(ckpts)} checkpoints would take about {seconds:.3g} s, above "
            f"--max-seconds {max_seconds:g}; raise it, or audit fewer layers or shorter text"
        )
    audits = []
    for ckpt in ckpts:
        one = audit_hf(
            ckpt,
            ids=ids,
            layers=chosen,
            heads=heads,
            confidence=confidence,
            max_seconds=max_seconds,
        )
        audits.append(one)
        if one.interrupted:
            break
    return trend(audits, confidence)


def trend(audits: Sequence[CheckpointAudit], confidence: float) -> TrendResult:
    """The trend across checkpoint audits made on the same ids (heads common to all)."""
    count = min(len(a.heads) for a in audits)
    complete = [a for a in audits if len(a.heads) >= count]
    keys = [(h.layer, h.head) for h in complete[0].heads[:count]]
    growth = [_growth(complete, i, key, confidence) for i, key in enumerate(keys)]
    growth.sort(key=lambda g: -g.factor if math.isfinite(g.factor) else math.inf)
    fastest = sorted(growth, key=lambda g: (not g.factor_ci.low > 1, -g.factor))[:FASTEST]
    layers = sorted({layer for layer, _ in keys})
    return TrendResult(
        checkpoints=tuple(audits),
        layers=tuple(_layer_trend(complete, layer, count) for layer in layers),
        growth=tuple(growth),
        fastest=tuple(fastest),
    )


def _growth(
    audits: Sequence[CheckpointAudit], index: int, key: tuple[int, int], confidence: float
) -> HeadGrowth:
    """Per sequence, the slope of log max |logit| over checkpoints; their mean, exponentiated."""
    maxima = np.stack([a.sequence_max[index] for a in audits])  # (checkpoints, sequences)
    logs = np.log(np.maximum(maxima, np.finfo(np.float64).tiny))
    t = np.arange(len(audits), dtype=float)
    if len(audits) < 2:
        slope_mean, ci = math.nan, ConfidenceInterval(math.nan, math.nan)
    else:
        centred = t - t.mean()
        slopes = centred @ (logs - logs.mean(axis=0)) / (centred @ centred)
        means, cis = mean_intervals(slopes[:, None], confidence)
        slope_mean, ci = float(means[0]), cis[0]
    return HeadGrowth(
        layer=key[0],
        head=key[1],
        factor=math.exp(slope_mean),
        factor_ci=ConfidenceInterval(math.exp(ci.low), math.exp(ci.high)),
        max_logits=tuple(a.heads[index].max_logit for a in audits),
    )


def _layer_trend(audits: Sequence[CheckpointAudit], layer: int, count: int) -> LayerTrend:
    rows = [[h for h in a.heads[:count] if h.layer == layer] for a in audits]
    return LayerTrend(
        layer=layer,
        scaled_var=tuple(float(np.mean([h.scaled_var for h in r])) for r in rows),
        max_logit=tuple(max(h.max_logit for h in r) for r in rows),
    )
