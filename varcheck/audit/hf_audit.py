"""Auditing a Hugging Face checkpoint: tokenise, plan, walk the layers, collect the figures.

:func:`audit_hf` tokenises the text with the checkpoint's own tokenizer (what it puts at
position 0 is where a sink forms), checks the memory and time the work will take before any
weight is read (:func:`plan`), then reads one layer at a time, runs it on every batch, and keeps
per-sequence sums (:class:`~.metrics.LayerAccumulator`). Ctrl-C or SIGTERM (as
``KeyboardInterrupt``) returns the layers finished, marked interrupted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..core.messages import cut, duration_text, size_text
from ..core.options import valid_confidence
from ..errors import VarcheckError
from . import hf_forward
from .bert import MAX_MEMORY_BYTES, batches
from .checkpoint import HFCheckpoint, open_checkpoint
from .encoder import MAX_SECONDS, default_sentences, parse_layers, read_text_file
from .gguf_checkpoint import GGUFCheckpoint, open_gguf_checkpoint
from .metrics import LayerAccumulator
from .results import CheckpointAudit, HeadMetrics
from .tokenizing import cut_lines, encode_in_chunks, first_token_texts, native_errors

__all__ = ["AuditPlan", "family_of", "open_model", "encode", "plan", "audit_hf", "select"]

#: floating-point operations per second assumed by the time plan (numpy on one core)
_FLOPS_PER_SECOND = 2e9
_BATCH = 8


class AuditPlan(NamedTuple):
    """What an audit will take, known before any weight is read."""

    memory_bytes: int
    seconds: float


def family_of(path: str | os.PathLike[str]) -> str | None:
    """The ``model_type`` of a directory's config.json (``"bert"`` when absent, as the encoder
    audit reads it); None for anything else (a file, a bundled model's name)."""
    config = os.path.join(path, "config.json")
    if not os.path.isdir(path) or not os.path.isfile(config):
        return None
    from .checkpoint import MAX_CONFIG_BYTES, read_json

    try:
        kind = read_json(Path(config), "the config", MAX_CONFIG_BYTES).get("model_type", "bert")
    except VarcheckError:
        return None  # the encoder audit reads it again and says what is wrong in its terms
    return kind if isinstance(kind, str) else repr(kind)


def open_model(path: str | os.PathLike[str]) -> HFCheckpoint | GGUFCheckpoint:
    """A model directory, or a GGUF file (its first four bytes are ``GGUF``)."""
    if os.path.isfile(path):
        with open(path, "rb") as handle:
            magic = handle.read(4)
        if magic == b"GGUF":
            return open_gguf_checkpoint(path)
    return open_checkpoint(path)


def encode(
    ckpt: HFCheckpoint | GGUFCheckpoint, lines: Sequence[str], max_length: int
) -> list[list[int]]:
    """Token ids of each non-empty line, cut to ``max_length`` tokens, by the checkpoint's own
    tokenizer (its template decides token 0)."""
    if ckpt.tokenizer is None:
        raise VarcheckError(
            f"{cut(str(ckpt.path))}: no tokenizer.json; accepted: a directory "
            "holding the model's tokenizer.json"
        )
    limit = min(max_length, ckpt.spec.max_positions)
    where = str(ckpt.path / "tokenizer.json")
    with native_errors(where, "set the tokenizer's truncation"):
        ckpt.tokenizer.enable_truncation(limit)
    kept, _ = cut_lines([line for line in lines if line.strip()], limit)
    ids = encode_in_chunks(
        lambda chunk: [e.ids for e in ckpt.tokenizer.encode_batch(chunk)], kept, where
    )
    ids = [s for s in ids if s]
    rows = ckpt.embedding_rows()
    if any(max(s) >= rows for s in ids):
        raise VarcheckError(f"{where}: the tokenizer gives ids beyond the {rows} embedding rows")
    return ids


def select(count: int, chosen: str | Sequence[int] | None, what: str) -> list[int]:
    """Indices 0..count−1 (``None`` or ``"all"``), or the chosen ones (``"0,2-4"`` or a list)
    checked against that range; ``what`` is ``--layers`` or ``--heads``."""
    if chosen is None:
        return list(range(count))
    try:
        return list(parse_layers(chosen, count))
    except VarcheckError as exc:
        if what == "--heads":
            raise VarcheckError(str(exc).replace("layer", "head")) from None
        raise


def plan(
    ckpt: HFCheckpoint | GGUFCheckpoint, ids: Sequence[Sequence[int]], layers: Sequence[int]
) -> AuditPlan:
    """Memory and time of the audit, from the header and the token counts."""
    spec = ckpt.spec
    tokens = sum(len(s) for s in ids)
    widths = [len(b.ids[0]) for _, b in batches(ids, _BATCH)]
    squares = sum(_BATCH * n * n for n in widths)
    distinct = len({i for s in ids for i in s})
    embedding = min(distinct, ckpt.embedding_rows()) * spec.hidden * 4  # rows in use only
    states = 2 * sum(_BATCH * n for n in widths) * spec.hidden * 4
    attention = 8 * _BATCH * spec.heads * max(widths, default=1) ** 2 * 4
    # the layer's visible logits (float32), kept for the quantile, and one head's joined copy
    pooled = squares * (spec.heads + 1) * 4
    memory = ckpt.layer_bytes() + embedding + states + attention + pooled
    per_layer = ckpt.layer_bytes() / 4
    flops = (max(layers) + 1) * (2 * tokens * per_layer + 4 * squares * spec.heads * spec.head_dim)
    return AuditPlan(int(memory), flops / _FLOPS_PER_SECOND)


def _check_plan(ckpt: HFCheckpoint | GGUFCheckpoint, p: AuditPlan, max_seconds: float) -> None:
    if p.memory_bytes > MAX_MEMORY_BYTES:
        raise VarcheckError(
            f"{cut(str(ckpt.path))}: the audit needs about {size_text(p.memory_bytes)} "
            f"(limit {size_text(MAX_MEMORY_BYTES)}); audit fewer layers or shorter text"
        )
    if p.seconds > max_seconds:
        raise VarcheckError(
            f"{cut(str(ckpt.path))}: the audit would take about {duration_text(p.seconds)}, above "
            f"--max-seconds {max_seconds:g}; raise it, or audit fewer layers or shorter text"
        )


def audit_hf(
    model: str | os.PathLike[str] | HFCheckpoint | GGUFCheckpoint,
    *,
    text_file: str | os.PathLike[str] | None = None,
    sentences: Sequence[str] | None = None,
    ids: Sequence[Sequence[int]] | None = None,
    layers: str | Sequence[int] | None = None,
    heads: str | Sequence[int] | None = None,
    max_length: int = 128,
    confidence: float = 0.95,
    max_seconds: float = MAX_SECONDS,
) -> CheckpointAudit:
    """Audit a Hugging Face checkpoint directory head by head.

    Parameters
    ----------
    model : path, HFCheckpoint or GGUFCheckpoint
    text_file, sentences : optional
        The text, one sequence a line (default: the built-in text).
    ids : optional
        Token ids to use instead of tokenising (the trend passes the same ids to every
        checkpoint of a run).
    layers, heads : optional
        Subsets to audit (all by default).
    max_length : int
        Tokens per sequence at most.
    confidence : float
    max_seconds : float
        Refuse work the plan puts above this.
    """
    confidence = valid_confidence(confidence)
    ckpt = open_model(model) if isinstance(model, str | os.PathLike) else model
    spec = ckpt.spec
    chosen_layers = select(spec.layers, layers, "--layers")
    chosen_heads = select(spec.heads, heads, "--heads")
    if ids is None:
        lines = (
            sentences
            if sentences is not None
            else (read_text_file(text_file) if text_file is not None else default_sentences())
        )
        ids = encode(ckpt, lines, max_length)
    if not ids:
        raise VarcheckError("the text gives no tokens; accepted: a text with at least one line")
    _check_plan(ckpt, plan(ckpt, ids, chosen_layers), max_seconds)
    rows, sequence_max, interrupted = _walk(ckpt, ids, chosen_layers, chosen_heads, confidence)
    return CheckpointAudit(
        name=ckpt.name,
        family=spec.family,
        scale_rule=spec.scale_rule,
        heads=tuple(rows),
        sequences=len(ids),
        tokens=sum(len(s) for s in ids),
        confidence=confidence,
        first_tokens=_first_tokens(ckpt, ids),
        interrupted=interrupted,
        sequence_max=np.array(sequence_max).reshape(len(rows), len(ids)),
    )


def _walk(
    ckpt: HFCheckpoint | GGUFCheckpoint,
    ids: Sequence[Sequence[int]],
    layers: Sequence[int],
    heads: Sequence[int],
    confidence: float,
) -> tuple[list[HeadMetrics], list[np.ndarray], bool]:
    """Layer by layer over every batch; the rows and per-sequence maxima of finished layers."""
    groups = list(batches(ids, _BATCH))
    pad = ckpt.spec.pad_token_id
    inputs = [(idx, np.where(b.mask, b.ids, pad), b.mask) for idx, b in groups]
    rows: list[HeadMetrics] = []
    maxima: list[np.ndarray] = []
    try:
        states = [hf_forward.embed(ckpt, x, m) for _, x, m in inputs]
        for layer in range(max(layers) + 1):
            weights = hf_forward.layer_weights(ckpt, layer)
            acc = (
                LayerAccumulator.of_spec(ckpt.spec, layer, heads, len(ids))
                if layer in layers
                else None
            )
            for b, (idx, _, mask) in enumerate(inputs):
                att, states[b] = hf_forward.block(ckpt.spec, weights, layer, states[b], mask)
                if acc is not None:
                    acc.add(idx, att)
            del weights  # before the next layer's are read: one layer's tensors at a time
            if acc is not None:
                rows += acc.rows(confidence)
                maxima += list(acc.seq_abs_max.T)
    except KeyboardInterrupt:
        return rows, maxima, True
    return rows, maxima, False


def _first_tokens(
    ckpt: HFCheckpoint | GGUFCheckpoint, ids: Sequence[Sequence[int]]
) -> tuple[str, ...]:
    """The distinct texts of token 0 (at most five), for the sink column's note."""
    return first_token_texts(ids, None if ckpt.tokenizer is None else ckpt.tokenizer.id_to_token)


def expected_pairs(ids: Sequence[Sequence[int]], causal: bool) -> int:
    """Pairs of a layer without window: n(n+1)/2 per sequence (causal) or n²."""
    return sum(len(s) * (len(s) + 1) // 2 if causal else len(s) ** 2 for s in ids)
