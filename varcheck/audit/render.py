"""Rendering an audit: rich tables, JSON, CSV and Markdown. Pure functions of an AuditResult, or
of a decoder's DecoderAuditResult (its own records and tables, the shared per-layer summary)."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from ..output import formats
from ..output import text as shown_text
from ..output.formats import Column as Col
from ..output.formats import confidence_label, fmt, records_to_markdown

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console
    from rich.table import Table

    from .decoder import DecoderAuditResult, DecoderHeadAudit
    from .encoder import AuditResult, HeadAudit, LayerSummary

    AnyResult = AuditResult | DecoderAuditResult
    AnyHead = HeadAudit | DecoderHeadAudit

__all__ = [
    "audit_meta",
    "audit_records",
    "summary_records",
    "audit_dict",
    "audit_title",
    "audit_markdown",
    "layer_cells",
    "render_audit_table",
    "render_audit",
    "SCALE_STYLE",
    "LEGEND",
    "decoder_meta",
    "decoder_records",
    "decoder_dict",
    "decoder_title",
    "decoder_markdown",
    "distance_profile",
    "kv_note",
    "render_decoder_table",
    "render_decoder",
    "DECODER_LEGEND",
]

#: The table's colour for a head's scaled variance, by :attr:`HeadAudit.scale_check`; a head
#: without an interval (``"none"``) is not coloured.
SCALE_STYLE = {"holds": "green", "below": "yellow", "above": "bold red"}


def audit_meta(result: AnyResult) -> dict[str, Any]:
    return {
        **formats.json_header("audit", result),
        "model": result.model_path,
        "model_name": result.model_name,
        "text": result.text,
        "sequences": result.sequences,
        "tokens": result.tokens,
        "max_length": result.max_length,
        "truncated": result.truncated,
        "layers": list(result.layers),
        "layers_finished": list(result.finished_layers),
        "interrupted": result.interrupted,
        "hidden_size": result.hidden_size,
        "num_heads": result.num_heads,
        "dk": result.dk,
        "beta_default": result.beta_default,
        "mean_log_tokens": result.mean_log_tokens,
        "confidence": result.confidence,
        "min_sequences": result.min_sequences,
        "sigma_w_kind": result.sigma_w_kind,
        "declared_scale": result.scale_rule,
        "first_tokens": " ".join(result.first_tokens),
        "seconds": round(result.seconds, 3),
    }


def audit_records(result: AuditResult) -> list[dict[str, Any]]:
    """One flat record per head (the JSON ``rows`` and the CSV lines)."""
    fields = (*_ENCODER_FIELDS, *_PREDICTED, "predicted_var_centred")
    return _records(result, fields)


def _records(result: AnyResult, fields: Sequence[str]) -> list[dict[str, Any]]:
    """Each row's record, with its head's metrics (:func:`~.hf_render.metric_record`)."""
    from .hf_render import metric_record

    metrics = {(m.layer, m.head): m for m in result.metrics}
    out = []
    for row in result.rows:
        m = metrics.get((row.layer, row.head))
        out.append(_record(row, fields) | (metric_record(m) if m is not None else {}))
    return out


#: A head's record, around its interval: what identifies it, its weights and predictions (the
#: encoder's and the decoder's own), then what was measured (both the same).
_ENCODER_FIELDS = ("layer", "head", "dk", "sigma_x", "sigma_wq", "sigma_wk", "sigma_bq", "sigma_bk")
_DECODER_FIELDS = ("layer", "head", "kv_head", "dk", "sigma_x", "sigma_wq", "sigma_wk")
_PREDICTED = ("predicted_var_paper", "predicted_var_exact", "predicted_var_cov")
_MEASURED = (
    "scale_check",
    "measured_var_diff",
    "row_scaled_var",
    "mean_same",
    "mean_diff",
    "predicted_mean_diff",
    "entropy",
    "beta_unit",
    "beta_default",
)


def _record(row: AnyHead, fields: Sequence[str]) -> dict[str, Any]:
    """One head as a flat record: ``fields``, its measured variance and interval, the rest."""
    lo, hi = row.scaled_var_ci
    return {
        **{name: getattr(row, name) for name in fields},
        "measured_var": row.measured_var,
        "measured_scaled_var": row.measured_scaled_var,
        "scaled_var_ci_low": lo,
        "scaled_var_ci_high": hi,
        **{name: getattr(row, name) for name in _MEASURED},
    }


def summary_records(result: AnyResult) -> list[dict[str, Any]]:
    """One record per layer (every field of :class:`LayerSummary`, in its order)."""
    return [dataclasses.asdict(s) for s in result.summaries]


def audit_dict(result: AuditResult) -> dict[str, Any]:
    """The JSON: the run's metadata, the per-layer summary first, then one record per head."""
    return {
        **audit_meta(result),
        "layer_summary": summary_records(result),
        "rows": audit_records(result),
    }


def _text_read(result: AnyResult) -> str:
    """``"42 sequences (653 tokens, 1 cut to 128 tokens)"``: what the audit read."""
    seqs = "sequence" if result.sequences == 1 else "sequences"
    cut = f", {result.truncated} cut to {result.max_length} tokens" if result.truncated else ""
    return f"{result.sequences} {seqs} ({result.tokens} tokens{cut})"


def audit_title(result: AnyResult) -> str:
    return (
        f"Attention logit scale of {result.model_name}: {result.num_heads} heads of d_k = "
        f"{result.dk}, {_text_read(result)}"
    )


def partial_note(result: AnyResult) -> str:
    """The line that says an interrupted audit is partial ('' when it is complete)."""
    if not result.interrupted:
        return ""
    done = ", ".join(map(str, result.finished_layers)) or "none"
    return (
        f"partial: interrupted; layers finished: {done} (of "
        f"{', '.join(map(str, result.layers))}); every row shown is complete"
    )


def too_few_note(result: AnyResult) -> str:
    """Why no interval is shown ('' when there are enough sequences)."""
    if result.has_intervals:
        return ""
    return (
        f"too few sequences: {result.sequences} given; an interval needs at least "
        f"{result.min_sequences} independent sequences (lines), see docs/audit.md, so only the "
        "estimates are shown"
    )


#: Under the per-head tables: what each prediction assumes.
LEGEND = (
    "paper: (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k with σ_W the RMS of the entries · exact: "
    "σ_X⁴‖W_q W_kᵀ‖_F² (i.i.d. zero-mean inputs) · centred: tr(C_q C_k), zero-mean inputs with "
    "the measured covariance · cov: independent tokens with the input's measured mean and "
    "covariance, biases included"
)

#: How tables name the σ of the weights (``sigma_w_kind`` in JSON).
_KIND = {"rms": "RMS"}


def _cells(*values: float) -> list[str]:
    """The audit's numbers in a table: three significant digits."""
    return [fmt(v, 3) for v in values]


def _span(low: float, high: float) -> str:
    # bare "lo–hi": output.formats.interval would add brackets the audit's tables never had
    return f"{fmt(low, 3)}–{fmt(high, 3)}"


def _head_table(
    result: AnyResult, console: Console, caption: str, columns: list[Column], cells: Any
) -> tuple[Table, list[str]]:
    """A per-head table: each head's layer and head number, then ``cells(head)``."""
    rows = [[str(row.layer), str(row.head), *cells(row)] for row in result.rows]
    return _fit(console, "", caption, [("layer", 0), ("head", 0), *columns], rows)


def _scale_cells(row: AnyHead) -> list[str]:
    """A head's measured variance, scaled variance, its interval, check and β_unit."""
    return [
        fmt(row.measured_var, 3),
        _scaled_cell(row),
        _interval(row),
        _check(row),
        fmt(row.beta_unit, 3),
    ]


def _scale_columns(conf: str, measured: int, beta_unit: int) -> list[Column]:
    """The columns of :func:`_scale_cells`, with the priorities of the two that may go."""
    return [
        ("measured", measured),
        ("scaled", 0),
        (f"{conf} CI", 0),
        ("check", 0),
        ("β_unit", beta_unit),
    ]


def _check_legend(result: AnyResult, console: Console) -> str:
    """The end of a per-head scale table's caption: the check's words, β_unit, the version."""
    colours = " (green: holds 1, red: above, yellow: below)" if _colour_words(console) else ""
    return (
        f"check: the interval holds 1, or lies above or below it{colours} · β_unit = "
        f"1/sd(q·k), vs 1/√d_k = {fmt(result.beta_default)} · varcheck {result.version}"
    )


def _scaled_cell(row: AnyHead) -> str:
    text = fmt(row.measured_scaled_var, 3)
    style = SCALE_STYLE.get(row.scale_check)
    return f"[{style}]{text}[/]" if style else text


def _interval(row: AnyHead) -> str:
    lo, hi = row.scaled_var_ci
    return "too few sequences" if math.isnan(lo) else _span(lo, hi)


def _check(row: AnyHead) -> str:
    check = row.scale_check
    return f"[{SCALE_STYLE[check]}]{check}[/]" if check in SCALE_STYLE else "—"


def layer_cells(summary: LayerSummary) -> list[str]:
    """One row of the per-layer table, as the terminal and docs/audit.md show it."""
    return [
        str(summary.layer),
        *_cells(summary.sigma_x, summary.scaled_var_median),
        _span(summary.scaled_var_min, summary.scaled_var_max),
        *_cells(summary.ratio_paper, summary.ratio_exact, summary.ratio_centred, summary.ratio_cov),
        *_cells(summary.beta_unit_median, summary.entropy_mean),
    ]


#: A column: its header and its priority (0: never dropped; otherwise lower goes first).
Column = tuple[str, int]


def _fit(
    console: Console,
    title: str,
    caption: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
) -> tuple[Table, list[str]]:
    """A right-aligned table within the console's width, and the headers dropped to fit it
    (:func:`~varcheck.output.formats.fit_rows`: no id, estimate, interval or verdict is cut)."""
    return formats.fit_rows(console, title, caption, [Col(n, "right", p) for n, p in columns], rows)


def _colour_words(console: Console) -> bool:
    """Whether the table is shown in colour (a terminal without NO_COLOR)."""
    return console.color_system is not None and not console.no_color


#: The per-layer summary's columns (the encoder's and the decoder's).
_LAYER_COLUMNS: list[Column] = [
    ("layer", 0),
    ("σ_X", 1),
    ("scaled", 0),
    ("min–max", 0),
    ("paper", 5),
    ("exact", 4),
    ("centred", 3),
    ("cov", 7),
    ("β_unit", 6),
    ("entropy", 2),
]


def _titled(title: str, result: AnyResult) -> str:
    """A first title, saying when the run is partial."""
    return title + (" — partial" if result.interrupted else "")


def _summary_table(
    result: AnyResult, console: Console, title: str, caption: str
) -> tuple[Table, list[str]]:
    rows = [layer_cells(summary) for summary in result.summaries]
    # the title names the model as its file does: text, never markup
    title = shown_text.markup(_titled(title, result))
    return _fit(console, title, caption, _LAYER_COLUMNS, rows)


def _layer_table(result: AnyResult, console: Console) -> tuple[Table, list[str]]:
    """Per layer: the spread of the scaled variance and how well each prediction tracks it."""
    caption = (
        "Per layer · σ_X: sd of the entries of the layer's input (post-LayerNorm hidden states) "
        "· scaled: Var(q·k/√d_k), 1 if 1/√d_k is right: median and range over heads · paper, "
        "exact, centred, cov: predicted / measured Var, geometric mean over heads (1: the "
        "prediction tracks the measurement) · β_unit, entropy: median and mean over heads"
    )
    return _summary_table(result, console, audit_title(result), caption)


def _scale_row(row: AnyHead) -> list[str]:
    return [
        *_cells(row.predicted_var_paper, row.predicted_var_exact, row.predicted_var_cov),
        *_scale_cells(row),
    ]


def _scale_table(result: AuditResult, console: Console) -> tuple[Table, list[str]]:
    """Per head: the three predictions, the measured variance, the scaled one and β_unit."""
    conf = confidence_label(result.confidence)
    columns = [("paper", 1), ("exact", 2), ("cov", 4), *_scale_columns(conf, 3, 5)]
    caption = (
        "Per head · paper, exact, cov: predicted Var(q·k) · measured: Var(q·k) over all token "
        f"pairs · scaled: Var(q·k/√d_k), 1 if 1/√d_k is right, with a {conf} jackknife interval "
        f"over sequences · {_check_legend(result, console)}"
    )
    return _head_table(result, console, caption, columns, _scale_row)


def _weights_row(row: HeadAudit) -> list[str]:
    return [
        *_cells(row.sigma_wq, row.sigma_wk, row.sigma_bq, row.sigma_bk),
        *_cells(row.mean_same, row.mean_diff, row.entropy),
    ]


def _weights_table(result: AuditResult, console: Console) -> tuple[Table, list[str]]:
    """Per head: weight and bias spreads, mean logits, attention entropy."""
    kind = _KIND[result.sigma_w_kind]
    columns: list[Column] = [
        (f"σ_Wq ({kind})", 7),
        (f"σ_Wk ({kind})", 6),
        ("σ_bq", 2),
        ("σ_bk", 1),
        ("same", 4),
        ("diff", 3),
        ("entropy", 5),
    ]
    caption = (
        f"Weights, mean logits and attention entropy · σ_W: {kind} of the entries of the "
        "head's W_q, W_k (d_k × d_x) · σ_b: sd of the entries of its biases · same, diff: "
        "mean q·k for i = j and for i ≠ j · entropy of softmax(q·k/√d_k) in nats (uniform "
        f"attention: {fmt(result.mean_log_tokens, 3)})"
    )
    return _head_table(result, console, caption, columns, _weights_row)


def _metrics_table(result: AnyResult, console: Console) -> tuple[Table, list[str]]:
    """Per head: what the model's logits and attention do on the text (the metrics every audit
    reports, :mod:`varcheck.audit.metrics`), with the checkpoint audit's columns."""
    from .hf_render import metric_cells, metric_columns

    causal = " (a decoder's from query 1 on: query 0 has one key)" if _causal(result) else ""
    caption = (
        "Per head · at the declared scale · max: the largest logit over every pair · sink: mean "
        f"weight on token 0 · entropy: mean over queries{causal}, nats · mean max: mean over "
        "sequences of each one's largest logit · q99.9: the 99.9 % quantile of the logits · "
        f"int.: {confidence_label(result.confidence)} intervals over sequences"
    )
    columns = [("layer", 0), ("head", 0), *((c.name, c.priority) for c in metric_columns())]
    cells = [[str(m.layer), str(m.head), *metric_cells(m)] for m in result.metrics]
    # intervals are blank below MIN_SEQUENCES sequences (a note says why): no empty columns
    used = [i for i in range(len(columns)) if any(row[i] for row in cells)] if cells else []
    picked = [[row[i] for i in used] for row in cells]
    return _fit(console, "", caption, [columns[i] for i in used], picked)


def _causal(result: AnyResult) -> bool:
    return hasattr(result, "kv_groups")


def metric_lines(result: AnyResult) -> list[str]:
    """Under the tables: the declared scale, token 0, what has no interval."""
    from .hf_render import metric_notes

    return metric_notes(result.scale_rule, result.first_tokens)


def render_audit_table(result: AuditResult, console: Console) -> None:
    """The per-layer summary first, then three per-head tables (logit scale; weights; the
    metrics every audit reports), a legend.

    Every table fits the console's width: lower-priority columns are dropped (and named in a
    note) before any layer or head id, estimate, interval or verdict word would be cut.
    """
    builds = (_layer_table, _scale_table, _weights_table, _metrics_table)
    _print_tables(result, console, builds, [LEGEND, *metric_lines(result)])


def _print_tables(result: Any, console: Console, builds: Sequence[Any], legend: list[str]) -> None:
    """The partial and too-few notes, each table built (with what it left out), the legend
    lines, the notes again (a long output's last lines are the ones read)."""
    notes = [line for line in (partial_note(result), too_few_note(result)) if line]
    for line in notes:
        console.print(line, markup=False)
    for build in builds:
        table, dropped = build(result, console)
        console.print(table)
        formats.print_dropped(console, dropped)
    for line in legend + notes:
        console.print(line, markup=False)


def audit_markdown(result: AuditResult) -> str:
    """The per-layer summary as a Markdown table, then the per-head records as another."""
    meta = audit_meta(result)
    notes = "".join(
        f"\n> {line}\n" for line in (partial_note(result), too_few_note(result)) if line
    )
    title = f"Per layer · {_titled(audit_title(result), result)}"
    text = records_to_markdown(summary_records(result), meta, title)
    text += notes + "\n" + records_to_markdown(audit_records(result), {}, "Per head")
    return text + "".join(f"\n> {line}\n" for line in metric_lines(result))


#: Write an audit in one of :data:`~varcheck.output.formats.FORMATS` to ``console``.
render_audit = formats.renderer(
    render_audit_table, audit_dict, audit_records, audit_meta, markdown=audit_markdown
)


# --- decoders (varcheck.audit.decoder) ---------------------------------------------------------


def decoder_meta(result: DecoderAuditResult) -> dict[str, Any]:
    """The BERT audit's metadata, plus what a decoder adds: architecture, key/value heads and
    which query heads share each, RoPE base, the weights' quantisation types."""
    meta = audit_meta(result)
    position = list(meta).index("dk")
    items = list(meta.items())
    extra = {
        "architecture": result.architecture,
        "num_kv_heads": result.num_kv_heads,
        "kv_groups": [
            {"kv_head": g, "query_heads": list(heads)} for g, heads in enumerate(result.kv_groups)
        ],
        "rope_base": result.rope_base,
        "weight_types": dict(result.weight_types),
    }
    return dict(items[: position + 1] + list(extra.items()) + items[position + 1 :])


def decoder_records(result: DecoderAuditResult) -> list[dict[str, Any]]:
    """One flat record per query head (the JSON ``rows`` and the CSV lines)."""
    fields = (*_DECODER_FIELDS, *_PREDICTED, "predicted_var_centred", "predicted_var_rope")
    return _records(result, fields)


def distance_profile(result: DecoderAuditResult) -> dict[str, Any]:
    """The logit scale by distance i − j: bands, per layer (median over heads), per head."""
    first = result.layer_distance[0] if result.layer_distance else ()
    layers = [
        {
            "layer": layer,
            "scaled_var_median": [b.scaled_var for b in bands],
            "predicted_scaled_var_median": [b.predicted_scaled_var for b in bands],
        }
        for layer, bands in zip(result.finished_layers, result.layer_distance, strict=True)
    ]
    heads = [
        {
            "layer": row.layer,
            "head": row.head,
            "scaled_var": [b.scaled_var for b in row.distance],
            "scaled_var_ci_low": [b.scaled_var_ci.low for b in row.distance],
            "scaled_var_ci_high": [b.scaled_var_ci.high for b in row.distance],
            "predicted_scaled_var": [b.predicted_scaled_var for b in row.distance],
            "mean": [b.mean for b in row.distance],
        }
        for row in result.rows
    ]
    return {
        "bands": [[b.low, b.high] for b in first],
        "pairs": [b.pairs for b in first],
        "layers": layers,
        "heads": heads,
    }


def decoder_dict(result: DecoderAuditResult) -> dict[str, Any]:
    """The JSON: metadata, per-layer summary, one record per query head, the distance profile."""
    return {
        **decoder_meta(result),
        "layer_summary": summary_records(result),
        "rows": decoder_records(result),
        "distance_profile": distance_profile(result),
    }


def decoder_title(result: DecoderAuditResult) -> str:
    return (
        f"Attention logit scale of {result.model_name}: {result.num_heads} query heads sharing "
        f"{result.num_kv_heads} key/value heads, d_k = {result.dk}, {_text_read(result)}, "
        "causal pairs"
    )


def kv_note(result: DecoderAuditResult) -> str:
    """Which query heads read each key/value head, in one line."""
    groups = " · ".join(
        f"kv {g}: heads {', '.join(map(str, heads))}" for g, heads in enumerate(result.kv_groups)
    )
    types = ", ".join(f"{n} {kind}" for kind, n in result.weight_types)
    return (
        f"shared key/value heads: {groups} · RoPE base {fmt(result.rope_base)} · W_q, W_k "
        f"tensors: {types}"
    )


#: Under a decoder's per-head tables: the predictions, with RoPE's.
DECODER_LEGEND = (
    "paper: (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k with σ_W the RMS of the entries · exact: "
    "σ_X⁴‖W_q W_kᵀ‖_F² (i.i.d. zero-mean inputs, no rotation) · centred: tr(C_q C_k) of the "
    "pre-RoPE projections · cov: independent tokens, pre-RoPE projections with their measured "
    "mean and covariance · rope: the same, rotated by RoPE at the distances of the measured pairs"
)


def _decoder_scale_row(row: DecoderHeadAudit) -> list[str]:
    return [
        str(row.kv_head),
        *_cells(
            row.predicted_var_paper,
            row.predicted_var_exact,
            row.predicted_var_cov,
            row.predicted_var_rope,
        ),
        *_scale_cells(row),
    ]


def _decoder_scale_table(result: DecoderAuditResult, console: Console) -> tuple[Table, list[str]]:
    conf = confidence_label(result.confidence)
    columns = [("kv", 6), ("paper", 2), ("exact", 1), ("cov", 3), ("rope", 5)]
    columns += _scale_columns(conf, 4, 7)
    caption = (
        "Per query head · kv: the key/value head it reads · paper, exact, cov, rope: predicted "
        "Var(q·k) · measured: Var(q·k) over causal pairs (j ≤ i) · scaled: Var(q·k/√d_k), 1 if "
        f"1/√d_k is right, with a {conf} interval over sequences · {_check_legend(result, console)}"
    )
    return _head_table(result, console, caption, columns, _decoder_scale_row)


def _decoder_weights_row(row: DecoderHeadAudit) -> list[str]:
    return _cells(row.sigma_wq, row.sigma_wk, row.mean_same, row.mean_diff, row.entropy)


def _decoder_weights_table(result: DecoderAuditResult, console: Console) -> tuple[Table, list[str]]:
    kind = _KIND[result.sigma_w_kind]
    columns: list[Column] = [
        (f"σ_Wq ({kind})", 4),
        (f"σ_Wk ({kind})", 3),
        ("same", 2),
        ("diff", 1),
        ("entropy", 5),
    ]
    caption = (
        f"Weights, mean logits and attention entropy · σ_W: {kind} of the entries of the head's "
        "W_q and of its key/value head's W_k (d_k × d_x) · same, diff: mean q·k for i = j and "
        "for j < i · entropy of the causal softmax(q·k/√d_k) in nats (uniform causal "
        f"attention: {fmt(result.mean_log_tokens, 3)})"
    )
    return _head_table(result, console, caption, columns, _decoder_weights_row)


def _band_name(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}–{high}"


def _distance_table(result: DecoderAuditResult, console: Console) -> tuple[Table, list[str]]:
    """Per layer: the median scaled variance over heads in each band of distance, measured and
    as RoPE alone predicts it (a second row)."""
    bands = result.layer_distance[0] if result.layer_distance else ()
    columns: list[Column] = [("layer", 0), ("", 0)] + [
        (_band_name(b.low, b.high), 0 if i < 3 else len(bands) - i) for i, b in enumerate(bands)
    ]
    pairs = ", ".join(str(b.pairs) for b in bands)
    caption = (
        "By distance i − j · median over the layer's heads of Var(q·k/√d_k) over the causal "
        "pairs at that distance (meas.), and the rope prediction for independent tokens at "
        f"those distances (rope) · pairs per band: {pairs}"
    )
    rows = []
    for layer, profile in zip(result.finished_layers, result.layer_distance, strict=True):
        rows.append([str(layer), "meas.", *(fmt(b.scaled_var, 3) for b in profile)])
        rows.append(["", "rope", *(fmt(b.predicted_scaled_var, 3) for b in profile)])
    return _fit(console, "", caption, columns, rows)


def _decoder_layer_table(result: DecoderAuditResult, console: Console) -> tuple[Table, list[str]]:
    """The per-layer summary, as the encoder's, with the decoder's title and input."""
    caption = (
        "Per layer · σ_X: sd of the entries of the attention's input (RMSNorm output times its "
        "gain) · scaled: Var(q·k/√d_k) over causal pairs, 1 if 1/√d_k is right: median and "
        "range over heads · paper, exact, centred, cov: predicted / measured Var, geometric "
        "mean over heads · β_unit, entropy: median and mean over heads"
    )
    return _summary_table(result, console, decoder_title(result), caption)


def render_decoder_table(result: DecoderAuditResult, console: Console) -> None:
    """The per-layer summary, two per-head tables, the distance profile, the KV groups."""
    builds = (
        _decoder_layer_table,
        _decoder_scale_table,
        _decoder_weights_table,
        _metrics_table,
        _distance_table,
    )
    _print_tables(result, console, builds, [kv_note(result), DECODER_LEGEND, *metric_lines(result)])


def decoder_markdown(result: DecoderAuditResult) -> str:
    """Per-layer summary, per-head records and the per-layer distance profile, as Markdown."""
    meta = {
        k: v
        for k, v in decoder_meta(result).items()
        if not isinstance(v, (list, dict)) or k == "layers"
    }
    notes = "".join(
        f"\n> {line}\n"
        for line in (partial_note(result), too_few_note(result), kv_note(result))
        if line
    )
    title = f"Per layer · {_titled(decoder_title(result), result)}"
    text = records_to_markdown(summary_records(result), meta, title)
    text += notes + "\n" + records_to_markdown(decoder_records(result), {}, "Per query head")
    bands = result.layer_distance[0] if result.layer_distance else ()
    profile = [
        {"layer": layer} | {f"d={_band_name(b.low, b.high)}": b.scaled_var for b in layer_bands}
        for layer, layer_bands in zip(result.finished_layers, result.layer_distance, strict=True)
    ]
    caption = (
        "Median Var(q·k/√d_k) by distance i − j (pairs: "
        + ", ".join(str(b.pairs) for b in bands)
        + ")"
    )
    text += "\n" + records_to_markdown(profile, {}, caption)
    return text + "".join(f"\n> {line}\n" for line in metric_lines(result))


#: Write a decoder audit in one of :data:`~varcheck.output.formats.FORMATS`.
render_decoder = formats.renderer(
    render_decoder_table, decoder_dict, decoder_records, decoder_meta, markdown=decoder_markdown
)
