"""Writing a checkpoint audit and a run's trend: table, JSON, CSV, Markdown.

The table keeps, at any width, each head's layer and number, its scaled variance with its
interval and its maximum logit; the sink ratio, entropy, mean per-sequence maximum and 99.9 %
quantile, then their intervals, are left out first on a narrow terminal (a note names them).
β_unit is the multiplier of q·k that would give unit variance (the declared scale over the
root of the scaled variance). Text that comes from the checkpoint (token texts, its name) is
printed as text, never markup.
"""

from __future__ import annotations

import math
from typing import Any

from ..output import formats
from ..output.formats import Column, fmt, records_to_markdown
from .metrics import MIN_SEQUENCES
from .results import CheckpointAudit, HeadMetrics, TrendResult

__all__ = [
    "render_checkpoint",
    "render_trend",
    "checkpoint_records",
    "trend_records",
    "metric_record",
    "metric_columns",
    "metric_cells",
    "metric_notes",
]

NO_INTERVAL = (
    "max logit and q99.9 have no interval: a maximum grows with the pairs looked at, and no "
    "interval for the quantile is calibrated; compare them on the same text"
)


def _span(ci: Any) -> str:
    return "" if math.isnan(ci.low) else f"{fmt(ci.low, 3)}–{fmt(ci.high, 3)}"


def _ends(name: str, ci: Any) -> dict[str, float]:
    return {f"{name}_low": ci.low, f"{name}_high": ci.high}


def metric_record(h: HeadMetrics) -> dict[str, Any]:
    """The figures every audit adds to a head's record: the declared scale, the maximum logit,
    the mean per-sequence maximum, the 99.9 % quantile, the entropy's interval, the sink."""
    return {
        "scale": h.scale,
        "max_logit": h.max_logit,
        "mean_max": h.mean_max,
        **_ends("mean_max", h.mean_max_ci),
        "q999": h.q999,
        **_ends("entropy", h.entropy_ci),
        "sink": h.sink,
        **_ends("sink", h.sink_ci),
    }


def _head_record(h: HeadMetrics) -> dict[str, Any]:
    return {
        "layer": h.layer,
        "head": h.head,
        "scale": h.scale,
        "softcap": h.softcap,
        "window": h.window,
        "scaled_var": h.scaled_var,
        **_ends("scaled_var", h.scaled_var_ci),
        "max_logit": h.max_logit,
        "mean_max": h.mean_max,
        **_ends("mean_max", h.mean_max_ci),
        "q999": h.q999,
        "entropy": h.entropy,
        **_ends("entropy", h.entropy_ci),
        "sink": h.sink,
        **_ends("sink", h.sink_ci),
        "beta_unit": h.beta_unit,
        **_ends("beta_unit", h.beta_unit_ci),
        "pairs": h.pairs,
    }


def checkpoint_records(result: CheckpointAudit) -> list[dict[str, Any]]:
    """One record per audited head."""
    return [_head_record(h) for h in result.heads]


def checkpoint_meta(result: CheckpointAudit) -> dict[str, Any]:
    return {
        **formats.json_header("audit", result),
        "model": result.name,
        "family": result.family,
        "declared_scale": result.scale_rule,
        "sequences": result.sequences,
        "tokens": result.tokens,
        "confidence": result.confidence,
        "first_tokens": " ".join(result.first_tokens),
        "interrupted": result.interrupted,
    }


def checkpoint_dict(result: CheckpointAudit) -> dict[str, Any]:
    return {**checkpoint_meta(result), "heads": checkpoint_records(result), "note": NO_INTERVAL}


def metric_notes(scale_rule: str, first_tokens: tuple[str, ...]) -> list[str]:
    """What the metrics are taken at and on: the declared scale, token 0, what has no interval."""
    return [
        f"declared scale: {scale_rule}; figures are scale·q·k before any soft-cap",
        f"token 0 (the sink's): {', '.join(first_tokens)}",
        NO_INTERVAL,
    ]


def notes(result: CheckpointAudit) -> list[str]:
    """Lines under the table: the declared scale, token 0, what has no interval, what to do."""
    lines = metric_notes(result.scale_rule, result.first_tokens)
    if result.sequences < MIN_SEQUENCES:
        lines.append(
            f"no intervals: {result.sequences} sequences < {MIN_SEQUENCES}; give --text with "
            f"at least {MIN_SEQUENCES} lines"
        )
    if result.interrupted:
        lines.append("partial: interrupted; the layers shown are finished")
    return lines


_COLUMNS = [
    Column("layer", "right", 0),
    Column("head", "right", 0),
    Column("scaled var", "right", 0),
    Column("interval", "right", 0),
    Column("max", "right", 0),
    Column("sink", "right", 7),
    Column("entropy", "right", 6),
    Column("mean max", "right", 5),
    Column("q99.9", "right", 4),
    Column("sink int.", "right", 3),
    Column("entropy int.", "right", 2),
    Column("mean max int.", "right", 1),
    Column("β_unit", "right", 8),
]


def _cells(h: HeadMetrics) -> list[str]:
    return [
        str(h.layer),
        str(h.head),
        fmt(h.scaled_var, 3),
        _span(h.scaled_var_ci),
        fmt(h.max_logit, 3),
        fmt(h.sink, 3),
        fmt(h.entropy, 3),
        fmt(h.mean_max, 3),
        fmt(h.q999, 3),
        _span(h.sink_ci),
        _span(h.entropy_ci),
        _span(h.mean_max_ci),
        fmt(h.beta_unit, 3),
    ]


#: The columns other than the metrics: the head's name, and the scaled variance and β_unit,
#: which the bundled-model audits show in their own tables (with their own interval).
_NOT_METRICS = {"layer", "head", "scaled var", "interval", "β_unit"}


def metric_columns() -> list[Column]:
    """The metrics' columns, priorities as in the checkpoint audit's table."""
    return [c for c in _COLUMNS if c.name not in _NOT_METRICS]


def metric_cells(h: HeadMetrics) -> list[str]:
    """:func:`metric_columns`' cells of a head."""
    keep = [c.name not in _NOT_METRICS for c in _COLUMNS]
    return [cell for cell, kept in zip(_cells(h), keep, strict=True) if kept]


def checkpoint_title(result: CheckpointAudit) -> str:
    partial = " — partial" if result.interrupted else ""
    return (
        f"{result.family} {result.name}: {result.sequences} sequences, {result.tokens} tokens, "
        f"{formats.confidence_label(result.confidence)} intervals{partial}"
    )


def _print_rows(console: Any, columns: list[Column], rows: list[list[str]]) -> None:
    """A table of these columns at the console's width, and what was left out to fit it."""
    table, dropped = formats.fit_rows(console, "", None, columns, rows)
    console.print(table)
    formats.print_dropped(console, dropped)


def render_checkpoint_table(result: CheckpointAudit, console: Any) -> None:
    console.print(checkpoint_title(result), markup=False, highlight=False)
    _print_rows(console, _COLUMNS, [_cells(h) for h in result.heads])
    for line in notes(result):
        console.print(line, markup=False, highlight=False)


def checkpoint_markdown(result: CheckpointAudit) -> str:
    text = records_to_markdown(
        checkpoint_records(result), checkpoint_meta(result), checkpoint_title(result)
    )
    return text + "".join(f"\n> {line}\n" for line in notes(result))


#: Write a checkpoint audit in one of :data:`~varcheck.output.formats.FORMATS`.
render_checkpoint = formats.renderer(
    render_checkpoint_table,
    checkpoint_dict,
    checkpoint_records,
    checkpoint_meta,
    markdown=checkpoint_markdown,
)


# --- the trend ----------------------------------------------------------------------------------


def trend_records(result: TrendResult) -> list[dict[str, Any]]:
    """One record per head: its growth factor, interval and largest logit per checkpoint."""
    names = [a.name for a in result.checkpoints]
    return [
        {"layer": g.layer, "head": g.head, "growth": g.factor, **_ends("growth", g.factor_ci)}
        | {f"max_logit {n}": v for n, v in zip(names, g.max_logits, strict=False)}
        for g in result.growth
    ]


def trend_meta(result: TrendResult) -> dict[str, Any]:
    first = result.checkpoints[0]
    return {
        **formats.json_header("audit", result),
        "checkpoints": " ".join(a.name for a in result.checkpoints),
        "family": first.family,
        "declared_scale": first.scale_rule,
        "sequences": first.sequences,
        "tokens": first.tokens,
        "confidence": first.confidence,
        "interrupted": result.interrupted,
    }


def trend_dict(result: TrendResult) -> dict[str, Any]:
    return {
        **trend_meta(result),
        "layers": [
            {"layer": t.layer, "scaled_var": list(t.scaled_var), "max_logit": list(t.max_logit)}
            for t in result.layers
        ],
        "heads": trend_records(result),
        "fastest": [{"layer": g.layer, "head": g.head, "growth": g.factor} for g in result.fastest],
        "checkpoint_audits": [checkpoint_dict(a) for a in result.checkpoints],
    }


def _ratio(values: tuple[float, ...]) -> str:
    return fmt(values[-1] / values[0], 3) if values and values[0] else ""


def render_trend_table(result: TrendResult, console: Any) -> None:
    first, last = result.checkpoints[0].name, result.checkpoints[-1].name
    console.print(
        f"trend over {len(result.checkpoints)} checkpoints, {first} → {last}"
        + (" — partial" if result.interrupted else ""),
        markup=False,
        highlight=False,
    )
    columns = [
        Column("layer", "right", 0),
        Column("var first", "right", 2),
        Column("var last", "right", 0),
        Column("var ×", "right", 0),
        Column("max first", "right", 1),
        Column("max last", "right", 0),
        Column("max ×", "right", 0),
    ]
    rows = [
        [
            str(t.layer),
            fmt(t.scaled_var[0], 3),
            fmt(t.scaled_var[-1], 3),
            _ratio(t.scaled_var),
            fmt(t.max_logit[0], 3),
            fmt(t.max_logit[-1], 3),
            _ratio(t.max_logit),
        ]
        for t in result.layers
    ]
    _print_rows(console, columns, rows)
    _fastest_table(result, console)


def _fastest_table(result: TrendResult, console: Any) -> None:
    columns = [
        Column("layer", "right", 0),
        Column("head", "right", 0),
        Column("growth/step", "right", 0),
        Column("interval", "right", 0),
        Column("max first", "right", 1),
        Column("max last", "right", 0),
    ]
    rows = [
        [
            str(g.layer),
            str(g.head),
            fmt(g.factor, 4),
            _span(g.factor_ci),
            fmt(g.max_logits[0], 3),
            fmt(g.max_logits[-1], 3),
        ]
        for g in result.fastest
    ]
    console.print("fastest-growing heads (largest |logit| per checkpoint step):", markup=False)
    _print_rows(console, columns, rows)
    if any(not g.factor_ci.low > 1 for g in result.fastest):
        console.print(
            "a head whose interval holds 1 shows no growth distinguishable on this text; more "
            "lines (--text) narrow the intervals",
            markup=False,
        )


def trend_markdown(result: TrendResult) -> str:
    layers = [
        {"layer": t.layer}
        | {f"var {a.name}": v for a, v in zip(result.checkpoints, t.scaled_var, strict=False)}
        | {f"max {a.name}": v for a, v in zip(result.checkpoints, t.max_logit, strict=False)}
        for t in result.layers
    ]
    text = records_to_markdown(layers, trend_meta(result), "Per layer across checkpoints")
    return text + "\n" + records_to_markdown(trend_records(result), {}, "Per head, fastest first")


#: Write a run's trend in one of :data:`~varcheck.output.formats.FORMATS`.
render_trend = formats.renderer(
    render_trend_table, trend_dict, trend_records, trend_meta, markdown=trend_markdown
)
