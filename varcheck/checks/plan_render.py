"""``varcheck plan``'s output: the table, JSON, CSV and Markdown of a :class:`PlanResult`."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..core.messages import cut
from ..output import formats
from ..output.formats import Column, json_header
from ..output.text import markup
from .plan_result import PlanResult, PlanRow

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["render_plan", "plan_dict", "plan_records"]


def _seconds(x: float) -> str:
    return f"{float(f'{x:.2g}'):g}"


def _meta(result: PlanResult) -> dict[str, Any]:
    head = json_header(
        "plan",
        result,
        claim=result.claim,
        source=result.source,
        sampler=result.sampler,
        kernel=result.kernel,
        run_command=result.run_command or None,
        file=result.file,
        detect=result.detect,
        tolerance=result.tolerance,
        power=result.power,
        alpha=result.alpha,
        family=result.family,
        row_alpha=result.alpha / result.family,
    )
    return {**head, "notes": list(result.notes), "interrupted": result.interrupted}


def plan_records(result: PlanResult) -> list[dict[str, Any]]:
    """One record per row (the CSV's rows and the JSON's ``rows``)."""
    return [dataclasses.asdict(row) for row in result.rows]


def plan_dict(result: PlanResult) -> dict[str, Any]:
    """The JSON document: the run's targets, ``samples`` (for ``--samples``), and the rows."""
    return {
        **_meta(result),
        "samples": result.samples,
        "seconds": result.seconds,
        "rows": plan_records(result),
    }


def _cells(row: PlanRow, result: PlanResult) -> list[str]:
    extra = "" if row.power_at_claim is None else f"{row.power_at_claim:.2f}"
    calls = " calls" if result.file is not None and row.unit == "calls" else ""
    return [
        cut(row.name, 18),
        str(row.dk),
        f"{row.samples:,}{calls}",
        f"{row.blocks:,}",
        _seconds(row.seconds),
        "±" + formats.percent_up(row.detectable_error),
        extra,
        row.floor,
    ]


_COLUMNS = (
    Column("claim", "left", 0),
    Column("d_k", "right", 0),
    Column("samples", "right", 0),
    Column("blocks", "right", 2),
    Column("seconds", "right", 1),
    Column("detects", "right", 1),
    Column("passes", "right", 1),
    Column("set by", "left", 3),
)


def _target(result: PlanResult) -> str:
    share = "" if result.family == 1 else f" (α/{result.family} per test: Holm over the tests)"
    level = f"at α = {result.alpha:g}{share}"
    if result.file is not None and result.detect is None:
        return f"a true claim passes its tolerance test with probability {result.power:g}"
    if result.file is not None:
        tol = any(row.power_at_claim is not None for row in result.rows)
        also = f"; a claim with a tolerance: a true claim passes with {result.power:g}"
        return (
            f"an error of {formats.percent_up(result.detect or 0.0)} either way is caught with "
            f"probability {result.power:g} {level}{also if tol else ''}"
        )
    if result.tolerance is not None:
        return (
            f"a true claim passes the tolerance test (T = {result.tolerance:g}) with "
            f"probability {result.power:g} {level}"
        )
    return (
        f"an error of {formats.percent_up(result.detect or 0.0)} either way is caught with "
        f"probability {result.power:g} {level}"
    )


def _next_step(result: PlanResult) -> str:
    rows = result.rows
    dk = str(rows[0].dk) if len(rows) == 1 else ",".join(str(r.dk) for r in rows)
    if result.file is not None:
        return f"varcheck check {result.file} --samples {result.samples} --seed S"
    if result.kernel:
        return result.run_command
    verb = "assert" if len(rows) == 1 else "sweep"
    source = f"--sampler {result.source}" if result.sampler else ""
    tol = "" if result.tolerance is None else f" --tolerance {result.tolerance:g}"
    return (
        f"varcheck {verb} --dk {dk} {source}{' ' if source else ''}--claim '{result.claim}'"
        f"{tol} --samples {result.samples} --seed S"
    )


def _shown(result: PlanResult, column: Column) -> bool:
    if column.name == "passes":
        return any(row.power_at_claim is not None for row in result.rows)
    return column.name != "claim" or result.file is not None


def _title(result: PlanResult) -> str:
    if result.file is not None:
        return f"each claim of {result.source}"
    quantity = "scale" if result.kernel else "Var"
    return f"{quantity} = {result.claim} ({result.source})"


def _probe_precision(result: PlanResult) -> str:
    """A claim file's probe rows run to a precision, 0.01 under ``--samples``: is it enough?"""
    needs = [row.precision for row in result.rows if not result.shares_budget(row)]
    if not needs:
        return ""
    p = min(needs)
    if p >= 0.01:
        return " Probe rows: the precision 0.01 they run to under --samples is enough."
    return (
        f" Probe rows run to a precision, 0.01 under --samples: theirs needs {p:.2g} "
        f"(--precision {p:.2g} sizes every row by width instead)."
    )


def _summary(result: PlanResult) -> str:
    when = f"about {_seconds(result.seconds)} s on this machine now (an estimate, not a bound)."
    if result.file is not None:
        return (
            f"samples: {result.samples:,} per variance test (the largest need: products, or a "
            f"sampler's values); {when}{_probe_precision(result)}"
        )
    what = "calls" if result.kernel else "values" if result.sampler else "products"
    return f"samples: {result.samples:,} {what} per row (the largest row's need); {when}"


def _table(result: PlanResult, console: Console) -> None:
    columns = [c for c in _COLUMNS if _shown(result, c)]
    keep = [i for i, c in enumerate(_COLUMNS) if c in columns]
    rows = [[_cells(row, result)[i] for i in keep] for row in result.rows]
    title = markup(f"Plan: {_title(result)}")
    table, dropped = formats.fit_rows(console, title, None, columns, rows)
    console.print(markup(f"Target: {_target(result)}."))
    console.print(table)
    formats.print_dropped(console, dropped)
    console.print(markup(_summary(result)))
    for note in result.notes:
        console.print(markup(f"Caution: {note}."))
    console.print(markup(f"Run: {_next_step(result)}"))
    if result.interrupted:
        console.print(f"Interrupted: the rows planned before the signal ({len(result.rows)}).")


render_plan = formats.renderer(
    _table,
    plan_dict,
    plan_records,
    _meta,
    title=lambda r: f"varcheck plan: {_title(r)}",
)
