"""Rendering an audit: rich tables, JSON, CSV and Markdown. Pure functions of an AuditResult."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from ..output import formats
from ..output.formats import confidence_label, fmt, plain_table, records_to_markdown

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from .heads import AuditResult, HeadAudit, LayerSummary

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
]

#: The table's colour for a head's scaled variance, by :attr:`HeadAudit.scale_check`; a head
#: without an interval (``"none"``) is not coloured.
SCALE_STYLE = {"holds": "green", "below": "yellow", "above": "bold red"}


def audit_meta(result: AuditResult) -> dict[str, Any]:
    return {
        "command": "audit",
        "version": result.version,
        "model": result.model_path,
        "model_name": result.model_name,
        "text": result.text,
        "sequences": result.sequences,
        "tokens": result.tokens,
        "max_length": result.max_length,
        "truncated": result.truncated,
        "layers": list(result.layers),
        "hidden_size": result.hidden_size,
        "num_heads": result.num_heads,
        "dk": result.dk,
        "beta_default": result.beta_default,
        "mean_log_tokens": result.mean_log_tokens,
        "confidence": result.confidence,
        "seconds": round(result.seconds, 3),
    }


def audit_records(result: AuditResult) -> list[dict[str, Any]]:
    """One flat record per head (the JSON ``rows`` and the CSV lines)."""
    return [_record(row) for row in result.rows]


def _record(row: HeadAudit) -> dict[str, Any]:
    lo, hi = row.scaled_var_ci
    return {
        "layer": row.layer,
        "head": row.head,
        "dk": row.dk,
        "sigma_x": row.sigma_x,
        "sigma_wq": row.sigma_wq,
        "sigma_wk": row.sigma_wk,
        "sigma_bq": row.sigma_bq,
        "sigma_bk": row.sigma_bk,
        "predicted_var_paper": row.predicted_var_paper,
        "predicted_var_exact": row.predicted_var_exact,
        "predicted_var_cov": row.predicted_var_cov,
        "predicted_var_centred": row.predicted_var_centred,
        "measured_var": row.measured_var,
        "measured_scaled_var": row.measured_scaled_var,
        "scaled_var_ci_low": lo,
        "scaled_var_ci_high": hi,
        "measured_var_diff": row.measured_var_diff,
        "row_scaled_var": row.row_scaled_var,
        "mean_same": row.mean_same,
        "mean_diff": row.mean_diff,
        "predicted_mean_diff": row.predicted_mean_diff,
        "entropy": row.entropy,
        "beta_unit": row.beta_unit,
        "beta_default": row.beta_default,
    }


def summary_records(result: AuditResult) -> list[dict[str, Any]]:
    """One record per layer (every field of :class:`LayerSummary`, in its order)."""
    return [dataclasses.asdict(s) for s in result.summaries]


def audit_dict(result: AuditResult) -> dict[str, Any]:
    return {
        **audit_meta(result),
        "rows": audit_records(result),
        "layer_summary": summary_records(result),
    }


def audit_title(result: AuditResult) -> str:
    seqs = "sequence" if result.sequences == 1 else "sequences"
    cut = f", {result.truncated} cut to {result.max_length} tokens" if result.truncated else ""
    return (
        f"Attention logit scale of {result.model_name}: {result.num_heads} heads of d_k = "
        f"{result.dk}, {result.sequences} {seqs} ({result.tokens} tokens{cut})"
    )


#: Under the per-layer table: what each prediction assumes.
LEGEND = (
    "paper: (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k · exact: σ_X⁴‖W_q W_kᵀ‖_F² (i.i.d. zero-mean "
    "inputs) · centred: tr(C_q C_k), zero-mean inputs with the measured covariance · cov: "
    "independent tokens with the input's measured mean and covariance, biases included"
)


def _cells(*values: float) -> list[str]:
    """The audit's numbers in a table: three significant digits."""
    return [fmt(v, 3) for v in values]


def _span(low: float, high: float) -> str:
    # bare "lo–hi": output.formats.interval would add brackets the audit's tables never had
    return f"{fmt(low, 3)}–{fmt(high, 3)}"


def _scaled_cell(row: HeadAudit) -> str:
    text = fmt(row.measured_scaled_var, 3)
    style = SCALE_STYLE.get(row.scale_check)
    return f"[{style}]{text}[/]" if style else text


def _interval(row: HeadAudit) -> str:
    lo, hi = row.scaled_var_ci
    return "" if math.isnan(lo) else _span(lo, hi)


def layer_cells(summary: LayerSummary) -> list[str]:
    """One row of the per-layer table, as the terminal and docs/audit.md show it."""
    return [
        str(summary.layer),
        *_cells(summary.sigma_x, summary.scaled_var_median),
        _span(summary.scaled_var_min, summary.scaled_var_max),
        *_cells(summary.ratio_paper, summary.ratio_exact, summary.ratio_centred, summary.ratio_cov),
        *_cells(summary.beta_unit_median, summary.entropy_mean),
    ]


def _table(title: str, caption: str, columns: list[str]) -> Table:
    return plain_table(title, caption, [(name, "right") for name in columns])


def _scale_table(result: AuditResult) -> Table:
    """Per head: the three predictions, the measured variance, the scaled one and β_unit."""
    conf = confidence_label(result.confidence)
    table = _table(
        audit_title(result),
        f"paper, exact, cov: predicted Var(q·k) · measured: Var(q·k) over all token pairs · "
        f"scaled: Var(q·k/√d_k), 1 if 1/√d_k is right, with a {conf} jackknife interval over "
        f"sequences (green: holds 1, red: above, yellow: below) · β_unit = 1/sd(q·k), vs "
        f"1/√d_k = {fmt(result.beta_default)} · varcheck {result.version}",
        ["layer", "head", "paper", "exact", "cov", "measured", "scaled", f"{conf} CI", "β_unit"],
    )
    for row in result.rows:
        table.add_row(
            str(row.layer),
            str(row.head),
            *_cells(row.predicted_var_paper, row.predicted_var_exact, row.predicted_var_cov),
            fmt(row.measured_var, 3),
            _scaled_cell(row),
            _interval(row),
            fmt(row.beta_unit, 3),
        )
    return table


def _weights_table(result: AuditResult) -> Table:
    """Per head: weight and bias spreads, mean logits, attention entropy."""
    table = _table(
        "Weights, mean logits and attention entropy",
        "σ: sd of the entries of the head's W_q, W_k (d_k × d_x) and biases · same, diff: mean "
        "q·k for i = j and for i ≠ j · entropy of softmax(q·k/√d_k) in nats (uniform "
        f"attention: {fmt(result.mean_log_tokens, 3)})",
        ["layer", "head", "σ_Wq", "σ_Wk", "σ_bq", "σ_bk", "same", "diff", "entropy"],
    )
    for row in result.rows:
        table.add_row(
            str(row.layer),
            str(row.head),
            *_cells(row.sigma_wq, row.sigma_wk, row.sigma_bq, row.sigma_bk),
            *_cells(row.mean_same, row.mean_diff, row.entropy),
        )
    return table


def _layer_table(result: AuditResult) -> Table:
    """Per layer: the spread of the scaled variance and how well each prediction tracks it."""
    table = _table(
        "Per layer",
        "σ_X: sd of the entries of the layer's input (post-LayerNorm hidden states) · scaled: "
        "median and range over heads · paper, exact, centred, cov: predicted / measured Var, "
        "geometric mean over heads (1: the prediction tracks the measurement) · β_unit, "
        "entropy: median and mean over heads",
        "layer σ_X scaled min–max paper exact centred cov β_unit entropy".split(),
    )
    for summary in result.summaries:
        table.add_row(*layer_cells(summary))
    return table


def render_audit_table(result: AuditResult, console: Console) -> None:
    """Two per-head tables (logit scale; weights and attention), a per-layer summary, a legend.

    Each table stays within 80 columns, so nothing is cut on a terminal or in a pipe.
    """
    for table in (_scale_table(result), _weights_table(result), _layer_table(result)):
        console.print(table)
    console.print(LEGEND)


def audit_markdown(result: AuditResult) -> str:
    """The per-head records as a Markdown table, then the per-layer summary as another."""
    text = records_to_markdown(audit_records(result), audit_meta(result), audit_title(result))
    return text + "\n" + records_to_markdown(summary_records(result), {}, "Per layer")


def render_audit(result: AuditResult, fmt_name: str, console: Console) -> None:
    """Write an audit in one of :data:`~varcheck.output.formats.FORMATS` to ``console``."""
    formats.write(
        fmt_name,
        console,
        result,
        table=render_audit_table,
        data=audit_dict,
        records=audit_records,
        meta=audit_meta,
        markdown=audit_markdown,
    )
