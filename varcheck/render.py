"""Rendering results: rich tables, JSON, CSV and Markdown. Pure functions of a result."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from .api import SweepResult, SweepRow

__all__ = [
    "fmt",
    "json_clean",
    "to_json",
    "records_to_csv",
    "records_to_markdown",
    "sweep_records",
    "sweep_meta",
    "sweep_to_json",
    "render_sweep",
    "render_sweep_table",
    "FORMATS",
]

FORMATS = ("table", "json", "csv", "markdown")

VERDICT_STYLE = {
    "consistent": "green",
    "rejected": "bold red",
    "unreliable": "bold yellow",
    "infinite": "bold magenta",
    "pass": "green",
    "fail": "bold red",
    "inconclusive": "yellow",
}


def fmt(x: float | None, digits: int = 4) -> str:
    """A number to ``digits`` significant digits; ``∞`` and ``—`` for infinite and missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if isinstance(x, int):
        return str(x)
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e6:
        decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
        return f"{x:.{decimals}f}"
    return f"{x:.{digits - 1}e}"


def fmt_p(p: float) -> str:
    if math.isnan(p):
        return "—"
    if p < 1e-4:
        return "<1e-4"
    return f"{p:.4f}"


def json_clean(obj: Any) -> Any:
    """Replace non-finite floats by ``None`` (JSON has no inf/nan), recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: json_clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_clean(v) for v in obj]
    return obj


def to_json(obj: Any) -> str:
    """Deterministic JSON: floats are written with repr (they round-trip exactly)."""
    return json.dumps(json_clean(obj), indent=2, allow_nan=False) + "\n"


def records_to_csv(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    """CSV with one leading ``#`` comment line carrying the run's metadata (seed, version...)."""
    buf = io.StringIO()
    buf.write("# " + " ".join(f"{k}={_meta_value(v)}" for k, v in meta.items()) + "\n")
    if records:
        writer = csv.DictWriter(buf, fieldnames=list(records[0]), lineterminator="\n")
        writer.writeheader()
        for rec in records:
            writer.writerow({k: _csv_value(v) for k, v in rec.items()})
    return buf.getvalue()


def _meta_value(v: Any) -> str:
    return "null" if v is None else str(v).replace(" ", "_")


def _csv_value(v: Any) -> Any:
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    return "" if v is None else v


def records_to_markdown(
    records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], title: str
) -> str:
    lines = [f"**{title}** — " + ", ".join(f"{k}: `{_meta_value(v)}`" for k, v in meta.items()), ""]
    if records:
        keys = list(records[0])
        lines.append("| " + " | ".join(keys) + " |")
        lines.append("|" + "|".join("---:" if _numeric(records, k) else "---" for k in keys) + "|")
        for rec in records:
            lines.append("| " + " | ".join(_md_value(rec[k]) for k in keys) + " |")
    return "\n".join(lines) + "\n"


def _numeric(records: Sequence[Mapping[str, Any]], key: str) -> bool:
    return all(isinstance(r[key], int | float) or r[key] is None for r in records)


def _md_value(v: Any) -> str:
    if isinstance(v, float):
        return fmt(v, 6)
    return "—" if v is None else str(v)


# --- sweep -------------------------------------------------------------------------------------


def sweep_meta(result: SweepResult) -> dict[str, Any]:
    return {
        "command": "sweep",
        "version": result.version,
        "seed": result.seed,
        "confidence": result.confidence,
        "q_dist": result.q_dist.spec,
        "k_dist": result.k_dist.spec,
        "rho": result.rho,
        "claim": result.claim,
        "precision": result.precision,
        "samples": result.samples,
        "max_seconds": result.max_seconds,
        "interrupted": result.interrupted,
    }


def sweep_records(result: SweepResult) -> list[dict[str, Any]]:
    recs = []
    for row in result.rows:
        est = row.estimate
        lo, hi = est.confidence_interval if est else (math.nan, math.nan)
        slo, shi = row.scaled_confidence_interval
        recs.append(
            {
                "dk": row.dk,
                "theory_var": row.theory.var,
                "theory_status": row.theory.status,
                "claim_value": row.claim_value,
                "var": est.var if est else None,
                "ci_low": lo,
                "ci_high": hi,
                "ratio": est.var / row.theory.var if est and row.theory.var else None,
                "scaled_var": row.scaled_var,
                "scaled_ci_low": slo,
                "scaled_ci_high": shi,
                "mean": est.mean if est else None,
                "p_value": row.p_value,
                "p_adjusted": row.p_adjusted,
                "verdict": row.verdict,
                "samples": est.samples if est else 0,
                "blocks": est.blocks if est else 0,
                "block_side": est.block_side if est else None,
                "precision_reached": est.precision if est else None,
                "stop_reason": est.stop_reason if est else None,
                "caution": row.caution,
            }
        )
    return recs


def _fit_record(result: SweepResult) -> dict[str, Any] | None:
    fit = result.fit
    if fit is None:
        return None
    return {
        "slope": fit.slope,
        "ci_low": fit.confidence_interval.low,
        "ci_high": fit.confidence_interval.high,
        "expected": fit.expected,
        "verdict": fit.verdict,
        "rows": fit.rows,
    }


def sweep_to_json(result: SweepResult) -> str:
    return to_json(
        {**sweep_meta(result), "rows": sweep_records(result), "fit": _fit_record(result)}
    )


def _interval(lo: float, hi: float) -> str:
    if math.isnan(lo):
        return ""
    return f"[{fmt(lo)}, {fmt(hi)}]"


def _marginal_only(row: SweepRow, confidence: float) -> bool:
    """The row's marginal interval excludes the claim but Holm does not reject it."""
    return row.verdict == "consistent" and row.p_value < 1.0 - confidence


def _row_cells(row: SweepRow, confidence: float) -> list[str]:
    est = row.estimate
    style = VERDICT_STYLE.get(row.verdict, "")
    verdict = f"[{style}]{row.verdict}[/]" if style else row.verdict
    if est is None:
        return [
            str(row.dk),
            fmt(row.theory.var),
            "no estimate: Var is infinite",
            "",
            "",
            "—",
            verdict,
            "0",
        ]
    lo, hi = est.confidence_interval
    slo, shi = row.scaled_confidence_interval
    ratio = (
        est.var / row.theory.var if math.isfinite(row.theory.var) and row.theory.var else math.nan
    )
    capped = " [yellow](time cap)[/]" if est.stop_reason == "max-seconds" else ""
    return [
        str(row.dk),
        fmt(row.theory.var),
        f"{fmt(est.var)} {_interval(lo, hi)}{capped}"
        + (" †" if _marginal_only(row, confidence) else ""),
        fmt(ratio),
        f"{fmt(row.scaled_var)} {_interval(slo, shi)}",
        fmt_p(row.p_adjusted),
        verdict,
        f"{est.samples:,}",
    ]


def sweep_title(result: SweepResult) -> str:
    q, k = result.q_dist.spec, result.k_dist.spec
    dists = f"q, k ~ {q}" if q == k else f"q ~ {q}, k ~ {k}"
    if result.rho:
        dists += f", corr(q_i, k_i) = {result.rho:g}"
    return f"Var(q·k) for {dists}; claim: {result.claim}"


def render_sweep_table(result: SweepResult, console: Console) -> None:
    """Print the sweep as a rich table with its header, fit line and notes."""
    from rich.table import Table

    conf = (
        f"{result.confidence:.0%}"
        if result.confidence * 100 == round(result.confidence * 100)
        else f"{result.confidence:.4g}"
    )
    target = (
        f"target precision ±{result.precision:.3g}"
        if result.precision is not None
        else f"{result.samples:,} products per row"
    )
    table = Table(
        title=sweep_title(result),
        caption=(
            f"seed {result.seed} · {conf} intervals · {target} · verdicts Holm-adjusted over "
            f"{len(result.rows)} rows (family-wise error ≤ {result.alpha:.3g}) · varcheck "
            f"{result.version}"
        ),
        caption_justify="left",
    )
    for name, justify in [
        ("d_k", "right"),
        ("theory Var", "right"),
        (f"estimate [{conf} CI]", "right"),
        ("ratio", "right"),
        ("scaled Var [CI]", "right"),
        ("p (Holm)", "right"),
        ("verdict", "left"),
        ("products", "right"),
    ]:
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in result.rows:
        table.add_row(*_row_cells(row, result.confidence))
    console.print(table)
    fit = result.fit
    if fit is not None:
        lo, hi = fit.confidence_interval
        style = VERDICT_STYLE[fit.verdict]
        console.print(
            f"growth law: Var ∝ d_k^b with b = {fit.slope:.4f} [{lo:.4f}, {hi:.4f}] "
            f"(theory {fit.expected:g}) [{style}]{fit.verdict}[/]"
        )
    for note in sweep_notes(result):
        console.print(note)


def sweep_notes(result: SweepResult) -> list[str]:
    notes = []
    verdicts = {r.verdict for r in result.rows}
    if "infinite" in verdicts:
        notes.append(
            "[bold magenta]Var(q·k) is infinite[/] for some rows (an entry distribution has "
            "infinite variance): there is no variance to estimate, and the sample variance "
            "never settles however many products are drawn."
        )
    if "unreliable" in verdicts:
        notes.append(
            "[bold yellow]unreliable:[/] Var(q·k) is finite but E[(q·k)^4] is infinite (an entry "
            "distribution has an infinite fourth moment), so the sample variance has no finite "
            "variance and no interval for it can be trusted. Estimates are shown, verdicts are not."
        )
    if any(r.theory.slow_convergence for r in result.rows):
        notes.append(
            "[yellow]heavy tails:[/] an entry distribution has an infinite sixth moment, so the "
            "variance estimate has no finite skewness and its interval approaches nominal "
            "coverage slowly (a few points short at coarse precision; see "
            "tests/test_calibration.py). A finer --precision helps."
        )
    if any(_marginal_only(r, result.confidence) for r in result.rows):
        notes.append(
            "† this row's own interval excludes the claim, but over all rows that happens by "
            "chance more often than 1 − confidence; the Holm-adjusted p-value is not small "
            "enough to reject."
        )
    if any(r.estimate is not None and r.estimate.stop_reason == "max-seconds" for r in result.rows):
        notes.append("[yellow]Some rows stopped at --max-seconds before the target precision.[/]")
    if result.interrupted:
        notes.append("[bold yellow]Interrupted:[/] the rows above are those finished (partial).")
    return notes


def render_sweep(result: SweepResult, fmt_name: str, console: Console) -> None:
    """Write a sweep in one of :data:`FORMATS` to ``console``."""
    if fmt_name == "table":
        render_sweep_table(result, console)
        return
    meta = sweep_meta(result)
    if fmt_name == "json":
        text = sweep_to_json(result)
    elif fmt_name == "csv":
        text = records_to_csv(sweep_records(result), meta)
    else:
        text = records_to_markdown(sweep_records(result), meta, sweep_title(result))
        fit = _fit_record(result)
        if fit:
            text += (
                f"\nGrowth law: slope {fit['slope']:.4f} [{fit['ci_low']:.4f}, "
                f"{fit['ci_high']:.4f}], {fit['verdict']}.\n"
            )
    console.file.write(text)
