"""Rendering the teaching commands (explain, softmax, derive). Pure functions of a result."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..core.estimation import normal_quantile
from ..core.verdicts import CONSISTENT, REJECTED, UNRELIABLE
from ..output import formats
from ..output.formats import (
    Column,
    confidence_label,
    fmt,
    fmt_p,
    interval,
    records_to_markdown,
    styled,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from .derive import DeriveResult, DeriveStep
    from .explain import ExplainResult, Reading
    from .softmax import SoftmaxResult, SoftmaxStats

__all__ = [
    "explain_dict",
    "explain_account",
    "explain_answer",
    "full_account",
    "render_explain",
    "softmax_dict",
    "softmax_records",
    "softmax_summary",
    "render_softmax",
    "derive_dict",
    "derive_records",
    "derive_notes",
    "render_derive",
]

STATUS_STYLE = {"holds": "green", "breaks": "bold red", "inherits": "yellow"}


def _pm(value: float, se: float, digits: int = 4) -> str:
    if math.isnan(value):
        return "—"
    if math.isnan(se) or se == 0:
        return fmt(value, digits)
    return f"{fmt(value, digits)} ± {fmt(se, 2)}"


# --- explain -----------------------------------------------------------------------------------


def _dists(a_spec: str, b_spec: str) -> str:
    return f"entries ~ {a_spec}" if a_spec == b_spec else f"A ~ {a_spec}, B ~ {b_spec}"


def _reading_dict(r: Reading) -> dict[str, Any]:
    return {
        "theory_var": r.theory_var,
        "expected": r.expected,
        "sd": r.sd,
        "quantiles": [
            {"level": q.level, "value": q.value, "ci_low": q.low, "ci_high": q.high}
            for q in r.quantiles
        ],
        "central_95": list(r.central_range),
        "observed": r.observed,
        "percentile": r.percentile,
        "percentile_se": r.percentile_se,
        "p_value": r.p_value,
        "verdict": r.verdict,
    }


def explain_dict(result: ExplainResult) -> dict[str, Any]:
    """Everything :func:`varcheck.teaching.explain.explain` found, as JSON-ready data."""
    mom = result.moments
    out: dict[str, Any] = {
        **formats.json_header("explain", result),
        "shape": list(result.shape),
        "ddof": result.ddof,
        "a_dist": result.a_dist.spec,
        "b_dist": result.b_dist.spec,
        "confidence": result.confidence,
        "entries": result.shape.entries,
        "entry_kurtosis": result.entry_kurtosis,
        "row_cov": mom.row_cov,
        "col_cov": mom.col_cov,
        "bias_factor": mom.bias_factor,
        "method": result.method,
        "replicates": result.replicates,
        "simulation": {
            "mean": result.mc_mean,
            "mean_se": result.mc_mean_se,
            "sd": result.mc_sd,
        },
    }
    out.update(_reading_dict(result.raw))
    out["scaled"] = _reading_dict(result.scaled)
    out["growing"] = _growing_records(result)
    out["answer"] = explain_answer(result)
    out["interrupted"] = result.interrupted
    out["planned_replicates"] = result.planned_replicates
    return out


def _growing_records(result: ExplainResult) -> list[dict[str, Any]]:
    recs = []
    for row in result.growing:
        m = row.moments
        recs.append(
            {
                "shape": str(row.shape),
                "entries": row.shape.entries,
                "entry_var": m.entry_var,
                "expected": m.expected,
                "bias_factor": m.bias_factor,
                "sd": m.sd,
                "relative_sd": row.relative_sd,
                "scaled_expected": m.expected / row.shape.d,
                "scaled_sd": m.sd / row.shape.d,
                "entry_kurtosis": row.entry_kurtosis,
            }
        )
    return recs


def _explain_meta(result: ExplainResult) -> dict[str, Any]:
    return {
        **formats.json_header("explain", result),
        "shape": str(result.shape),
        "ddof": result.ddof,
        "a_dist": result.a_dist.spec,
        "b_dist": result.b_dist.spec,
        "observed": result.observed,
        "interrupted": result.interrupted,
    }


def _p_eq(p: float) -> str:
    text = fmt_p(p)
    return f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}"


def explain_account(result: ExplainResult) -> list[str]:
    """The plain-language account of the observed value, one paragraph per cause."""
    if not math.isfinite(result.moments.entry_var):
        return [
            "Entries with infinite variance: one entry of A @ B has no finite variance, so "
            "np.var has no expected value to aim at; it grows without settling as entries are "
            "added. Only the percentiles (by simulation) are meaningful."
        ]
    paragraphs = [
        _bias_paragraph(result),
        _tails_sentence(result) + _spread_sentence(result.raw),
        _observed_paragraph(result),
        _shrinking_paragraph(result),
    ]
    return [p for p in paragraphs if p]


def _bias_paragraph(result: ExplainResult) -> str:
    """Why np.var differs from one entry's variance on average: its own mean, ddof, and the
    correlation of entries sharing a row or a column."""
    mom, n = result.moments, result.shape.entries
    mean_part = (
        ""
        if mom.row_cov == 0 and mom.col_cov == 0
        else (
            f" With non-zero means, entries sharing a row of A are correlated (covariance "
            f"{fmt(mom.row_cov)}) and so are entries sharing a column of B "
            f"({fmt(mom.col_cov)}); the mean subtraction removes that shared part too."
        )
    )
    return (
        f"Bias of np.var: one entry of A @ B has variance {fmt(mom.entry_var)}"
        f" (D = {result.shape.d} products per entry), but np.var takes its {n:,} entries, "
        f"subtracts their own mean and divides by {n - result.ddof:,}. On average it returns "
        f"{fmt(mom.expected)}, {mom.bias_factor:.6g} × the entry variance.{mean_part}"
    )


def _tails_sentence(result: ExplainResult) -> str:
    """What spreads np.var out, by the result's tail regime."""
    n, d, kurt = result.shape.entries, result.shape.d, result.entry_kurtosis
    regime = result.tail_regime
    if regime == "infinite":
        return (
            "Heavy tails: the entries' fourth moment is infinite, so single huge entries "
            "dominate np.var and its spread has no finite value."
        )
    if regime == "heavy":
        return (
            f"Heavy tails: each entry is a sum of only {d} product{'s' if d > 1 else ''} of two "
            f"entries, with kurtosis {fmt(kurt)} (a normal variable has 3), and np.var sees only "
            f"{n} of them, so one large entry often dominates the squared deviations."
        )
    if regime == "few":
        return (
            f"Few entries: one entry (a sum of {d} products) is close to normal (kurtosis "
            f"{fmt(kurt)}; a normal variable has 3), but np.var sees only {n} of them, and the "
            f"variance of {n} normal values is itself spread roughly like a chi-square with "
            f"{n - 1} degree{'s' if n > 2 else ''} of freedom: skewed, with a long right tail."
        )
    return (
        f"Tails: one entry (a sum of {d} products) has kurtosis {fmt(kurt)} (a normal "
        f"variable has 3); with {n:,} entries single large ones average out."
    )


def _spread_sentence(raw: Reading) -> str:
    """How far np.var strays: its sd, the middle 95% of outcomes, and its skew."""
    lo, hi = raw.central_range
    if math.isfinite(raw.sd):
        skew = (
            f" and the median is {fmt(raw.median)}, below the mean because the distribution is "
            "skewed to the right"
            if raw.skewed_right
            else ""
        )
        return (
            f" The standard deviation of np.var is {fmt(raw.sd)}; the middle 95% of outcomes "
            f"run from {fmt(lo)} to {fmt(hi)}{skew}."
        )
    if math.isfinite(lo) and math.isfinite(hi):
        return f" The middle 95% of outcomes run from {fmt(lo)} to {fmt(hi)}."
    return (
        " Without a finite spread and without a simulation (the shape is too large; try a "
        "smaller one or --replicates) there is no valid test of the observed value."
    )


def _observed_paragraph(result: ExplainResult) -> str:
    """Where the observed value sits under both readings ("" when nothing was observed)."""
    raw, sc = result.raw, result.scaled
    if raw.observed is None or math.isnan(raw.percentile):
        return ""
    return (
        f"The observed {raw.observed:g} sits at percentile {raw.percentile:.1f} of "
        f"np.var(A @ B) (two-sided {_p_eq(raw.p_value)}: {raw.verdict}); read as np.var "
        f"of the scaled product A @ B / √{result.shape.d}, it sits at percentile "
        f"{sc.percentile:.1f} ({_p_eq(sc.p_value)}: {sc.verdict})."
    )


def _shrinking_paragraph(result: ExplainResult) -> str:
    """How the relative spread falls over the growing shapes ("" with fewer than two)."""
    finite_rows = [r for r in result.growing if math.isfinite(r.relative_sd)]
    if len(finite_rows) < 2:
        return ""
    first, last = finite_rows[0], finite_rows[-1]
    return (
        f"The spread shrinks as the shape grows: the sd of np.var relative to its mean falls "
        f"from {100 * first.relative_sd:.3g}% at {first.shape} to "
        f"{100 * last.relative_sd:.3g}% at {last.shape}, where np.var is "
        f"{fmt(last.moments.expected)} ± {fmt(last.moments.sd)} (scaled: "
        f"{fmt(last.moments.expected / last.shape.d)} ± "
        f"{fmt(last.moments.sd / last.shape.d)})."
    )


def _quantile_cell(q: Any, split: bool = False) -> str:
    """A quantile and its interval, on two lines with ``split`` (narrow terminals)."""
    return f"{fmt(q.value)}{chr(10) if split else ' '}{interval(q.low, q.high)}".strip()


#: Set by :func:`full_account`: the table form of explain prints its whole account.
_FULL_ACCOUNT: ContextVar[bool] = ContextVar("varcheck_explain_full_account", default=False)


@contextmanager
def full_account() -> Iterator[None]:
    """Within this block the table form of explain is the full account (``explain --long``):
    the simulation check, every quantile, the growing shapes and why; outside it, one screen."""
    token = _FULL_ACCOUNT.set(True)
    try:
        yield
    finally:
        _FULL_ACCOUNT.reset(token)


def _percentile(value: float) -> str:
    """A percentile to one decimal, without rounding a tail value to 0 or 100."""
    if value > 99.95:
        return "above 99.9"
    if value < 0.05:
        return "below 0.1"
    return f"{value:.1f}"


#: What the answer calls an observed value by the verdict of its reading.
_ANSWER_WORD = {CONSISTENT: "unremarkable", REJECTED: "unusual"}


def _observed_at(reading: Reading, confidence: float) -> str:
    """``percentile 71.2 (two-sided p = 0.5765: consistent at level 95%)``."""
    return (
        f"percentile {_percentile(reading.percentile)} (two-sided {_p_eq(reading.p_value)}: "
        f"{reading.verdict} at level {confidence_label(confidence)})"
    )


def explain_answer(result: ExplainResult) -> str:
    """The answer in one sentence: how unusual the observed value is, from the exact mean and sd
    of np.var at this size and the value's percentile (the middle 95% when nothing was
    observed)."""
    raw, sc, shp = result.raw, result.scaled, result.shape
    size = f"for A {shp.n}×{shp.d} and B {shp.d}×{shp.m}"
    if not math.isfinite(result.moments.entry_var):
        where = (
            ""
            if raw.observed is None or math.isnan(raw.percentile)
            else f"; {raw.observed:g} sits at {_observed_at(raw, result.confidence)}"
        )
        return (
            f"F{size[1:]}, np.var(A @ B) has no expected value: the entries of A @ B have "
            f"infinite variance, so only its percentiles mean something{where}."
        )
    spread = f"exact sd {fmt(raw.sd)}" if math.isfinite(raw.sd) else "an infinite sd"
    moments = f"{size}, np.var(A @ B) has exact mean {fmt(raw.expected)} and {spread}"
    if raw.observed is None or math.isnan(raw.percentile):
        lo, hi = raw.central_range
        middle = (
            f"; the middle 95% of outcomes run from {fmt(lo)} to {fmt(hi)}"
            if math.isfinite(lo) and math.isfinite(hi)
            else ""
        )
        return f"F{moments[1:]}{middle}."
    obs = f"{raw.observed:g}"
    word = _ANSWER_WORD.get(raw.verdict, "not testable")
    text = f"{obs} is {word}: {moments}; {obs} sits at {_observed_at(raw, result.confidence)}"
    if sc.verdict != raw.verdict and not math.isnan(sc.percentile):
        text += (
            f"; read as np.var(A @ B / √{shp.d}) it sits at {_observed_at(sc, result.confidence)}"
        )
    return text + "."


def _render_explain_table(result: ExplainResult, console: Console) -> None:
    """One screen: the answer, the exact moments and the observed value's test under both
    readings, and how to get the full account (the full account itself inside
    :func:`full_account`)."""
    if _FULL_ACCOUNT.get():
        _render_explain_long(result, console)
        return
    from rich.markup import escape

    console.print(f"[bold]{escape(_explain_title(result))}[/]")
    console.print(escape(explain_answer(result)), highlight=False)
    if result.interrupted:
        console.print(_interrupted_line(result), highlight=False)
    console.print(_short_table(result))
    console.print(escape(_short_source(result)), highlight=False)
    console.print(
        f"seed {result.seed} · varcheck {result.version} · quantiles, larger shapes and why: "
        "--long",
        highlight=False,
    )


def _short_source(result: ExplainResult) -> str:
    """Which numbers are exact and where the others come from (no simulated sd beside the
    exact one: students took one for the other)."""
    rest = "middle 95%" + (", percentile and p-value" if result.observed is not None else "")
    if result.method == "monte-carlo":
        return (
            f"exact: computed from the laws, not simulated; {rest}: from "
            f"{result.replicates:,} simulated experiments"
        )
    return f"exact: computed from the laws; {rest}: a gamma law with the exact mean and sd"


def _short_table(result: ExplainResult) -> Table:
    """Both readings: exact moments, the middle 95%, and the observed value's test."""
    from rich.box import SIMPLE_HEAD
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=SIMPLE_HEAD)
    table.add_column("")
    table.add_column("np.var(A @ B)", justify="right")
    table.add_column(escape(f"np.var(A @ B / √{result.shape.d})"), justify="right")
    raw, sc = result.raw, result.scaled

    def both(fn: Any) -> tuple[str, str]:
        return fn(raw), fn(sc)

    def middle(r: Reading) -> str:
        lo, hi = r.central_range
        return "—" if not (math.isfinite(lo) and math.isfinite(hi)) else f"{fmt(lo)} to {fmt(hi)}"

    table.add_row("variance of one entry", *both(lambda r: fmt(r.theory_var)))
    table.add_row(escape("E[np.var] (exact)"), *both(lambda r: fmt(r.expected)))
    table.add_row("sd of np.var (exact)", *both(lambda r: fmt(r.sd)))
    table.add_row("middle 95% of np.var", *both(middle))
    if result.observed is not None:
        table.add_row(
            f"percentile of {result.observed:g}",
            *both(lambda r: "—" if math.isnan(r.percentile) else _percentile(r.percentile) + "%"),
        )
        table.add_row("p-value (two-sided)", *both(lambda r: fmt_p(r.p_value)))
        table.add_row(
            f"verdict (level {confidence_label(result.confidence)})",
            *both(lambda r: styled(r.verdict)),
        )
    return table


def _render_explain_long(result: ExplainResult, console: Console) -> None:
    """The full account: answer, simulation check, quantiles, growing shapes and why."""
    from rich.markup import escape

    _print_explain_header(result, console)
    readings = _readings_table(result)
    if formats.natural_width(console, readings) > console.width:
        readings = _readings_table(result, split=True)
    console.print(readings)
    if result.growing:
        _print_fitted(console, lambda keep: _growing_table(result, keep), _GROWING_COLUMNS)
    console.print()
    console.print("[bold]Why[/]")
    for para in explain_account(result):
        console.print("• " + escape(para))
    if result.interrupted:
        console.print(_interrupted_line(result), highlight=False)


def _interrupted_line(result: ExplainResult) -> str:
    """What an interrupted explain still shows."""
    if result.method == "monte-carlo":
        done = (
            f"from {result.replicates:,} of the {result.planned_replicates:,} planned experiments"
        )
    elif result.planned_replicates:
        done = (
            "from the gamma law (exact mean and sd): too few of the "
            f"{result.planned_replicates:,} planned experiments were simulated"
        )
    else:
        done = "exact"
    return f"[bold yellow]interrupted[/]: partial result; quantiles and p-values {done}"


def _explain_title(result: ExplainResult) -> str:
    shp = result.shape
    title = (
        f"np.var(A @ B, ddof={result.ddof}) for A {shp.n}×{shp.d}, B {shp.d}×{shp.m} "
        f"({_dists(result.a_dist.spec, result.b_dist.spec)})"
    )
    return title if result.observed is None else title + f"; observed {result.observed:g}"


def _print_explain_header(result: ExplainResult, console: Console) -> None:
    """The experiment, the seed, and where the quantiles and p-values come from."""
    from rich.markup import escape

    console.print(f"[bold]{escape(_explain_title(result))}[/]")
    console.print(escape(explain_answer(result)), highlight=False)
    console.print(f"seed {result.seed} · varcheck {result.version}")
    console.print(escape(_method_note(result)))
    if result.interrupted:
        console.print(_interrupted_line(result), highlight=False)


def _method_note(result: ExplainResult) -> str:
    if result.method == "monte-carlo" and not math.isfinite(result.moments.sd):
        why = (
            "the exact mean is infinite, so a simulated mean would not settle"
            if not math.isfinite(result.moments.expected)
            else "the exact sd is infinite, so a simulated mean has no valid standard error"
        )
        return (
            f"quantiles and p-values from {result.replicates:,} simulated experiments ({why}; "
            "the exact values are not compared with the simulation)"
        )
    if result.method == "monte-carlo":
        return (
            "simulation check of the exact values: simulated mean "
            f"{_pm(result.mc_mean, normal_quantile(0.95) * result.mc_mean_se)} (95% interval; "
            "exact "
            f"{fmt(result.moments.expected)}), simulated sd {fmt(result.mc_sd)} (exact "
            f"{fmt(result.moments.sd)}), from "
            f"{result.replicates:,} simulated experiments"
        )
    return (
        "quantiles and p-values: a gamma law with the exact mean and sd (the shape is too "
        "large to simulate thousands of times in a few seconds; --replicates forces a "
        "simulation)"
    )


def _readings_table(result: ExplainResult, split: bool = False) -> Table:
    """Both readings side by side: exact moments, quantiles, and the observed value's test
    (with ``split``, each quantile's interval on a line of its own)."""
    from rich.markup import escape
    from rich.table import Table

    alpha = f"{1 - result.confidence:.3g}"
    table = Table(
        caption=(
            "quantiles with their 95% Monte-Carlo interval (order statistics); percentile ± the "
            f"half-width of its 95% interval; two-sided p-value; rejected when p < {alpha}"
            if result.method == "monte-carlo"
            else "gamma approximation (exact mean and sd), no Monte-Carlo error; rejected "
            f"when p < {alpha}"
        ),
        caption_justify="left",
    )
    table.add_column("")
    table.add_column("np.var(A @ B)", justify="right")
    table.add_column(escape(f"np.var(A @ B / √{result.shape.d})"), justify="right")
    raw, sc = result.raw, result.scaled

    def both(fn: Any) -> tuple[str, str]:
        return fn(raw), fn(sc)

    table.add_row("variance of one entry", *both(lambda r: fmt(r.theory_var)))
    table.add_row(escape("E[np.var] (exact)"), *both(lambda r: fmt(r.expected)))
    table.add_row("sd (exact)", *both(lambda r: fmt(r.sd)), end_section=True)
    for i, q in enumerate(raw.quantiles):
        label = "median" if q.level == 0.5 else f"{100 * q.level:g}% quantile"
        table.add_row(
            label,
            *both(lambda r, i=i: escape(_quantile_cell(r.quantiles[i], split))),
            end_section=i == len(raw.quantiles) - 1,
        )
    if result.observed is not None:
        table.add_row(
            f"percentile of {result.observed:g}",
            *both(
                lambda r: (
                    "—"
                    if math.isnan(r.percentile)
                    else _pm(r.percentile, normal_quantile(0.95) * r.percentile_se, 3) + "%"
                )
            ),
        )
        table.add_row("p-value (two-sided)", *both(lambda r: fmt_p(r.p_value)))
        table.add_row(
            f"verdict (level {confidence_label(result.confidence)})",
            *both(lambda r: styled(r.verdict)),
        )
    return table


#: The growing shapes' columns; a narrow terminal drops kurtosis first, then entry var, ...
_GROWING_COLUMNS = (
    Column("shape", "left"),
    Column("entries", priority=3),
    Column("entry var", priority=2),
    Column("E[np.var]"),
    Column("sd"),
    Column("sd / E"),
    Column("scaled E", priority=5),
    Column("scaled sd", priority=4),
    Column("kurtosis", priority=1),
)


def _print_fitted(console: Console, build: Any, columns: tuple[Column, ...]) -> None:
    """Print ``build(kept indices)`` fitted to the console, and a note naming what it left out."""
    table, dropped = formats.fit_columns(console, build, [c.priority for c in columns])
    console.print(table)
    formats.print_dropped(console, [columns[i].name for i in dropped])


def _kept(columns: tuple[Column, ...], keep: list[int] | None) -> list[Column]:
    return list(columns) if keep is None else [columns[i] for i in keep]


def _growing_table(result: ExplainResult, keep: list[int] | None = None) -> Table:
    """Exact mean and spread of np.var over the growing shapes (the ``keep`` columns; all)."""
    from rich.box import SIMPLE_HEAD
    from rich.markup import escape
    from rich.table import Table

    columns = _kept(_GROWING_COLUMNS, keep)
    names = [c.name for c in columns]
    grow = Table(
        box=SIMPLE_HEAD,
        title="how the spread shrinks with the shape (exact)",
        caption="scaled = after dividing A @ B by √D"
        + ("; kurtosis of one entry (normal: 3)" if "kurtosis" in names else ""),
        caption_justify="left",
    )
    for col in columns:
        grow.add_column(escape(col.name), justify=col.justify, no_wrap=True)  # type: ignore[arg-type]
    for rec in _growing_records(result):
        cells = {
            "shape": rec["shape"],
            "entries": f"{rec['entries']:,}",
            "entry var": fmt(rec["entry_var"]),
            "E[np.var]": fmt(rec["expected"]),
            "sd": fmt(rec["sd"]),
            "sd / E": (
                f"{100 * rec['relative_sd']:.3g}%" if math.isfinite(rec["relative_sd"]) else "—"
            ),
            "scaled E": fmt(rec["scaled_expected"]),
            "scaled sd": fmt(rec["scaled_sd"]),
            "kurtosis": fmt(rec["entry_kurtosis"]),
        }
        grow.add_row(*(cells[n] for n in names))
    return grow


def _explain_markdown(result: ExplainResult) -> str:
    d = explain_dict(result)
    lines = [
        f"**explain** — shape `{result.shape}`, ddof `{result.ddof}`, "
        f"{_dists(result.a_dist.spec, result.b_dist.spec)}, seed `{result.seed}`, "
        f"varcheck `{result.version}`",
        "",
        explain_answer(result),
        "",
        "| reading | entry var | E[np.var] | sd | median | central 95% | percentile | p "
        "| verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, r in (("`A @ B`", result.raw), ("`A @ B / √D`", result.scaled)):
        lo, hi = r.central_range
        pct = "—" if math.isnan(r.percentile) else f"{r.percentile:.1f}%"
        lines.append(
            f"| {label} | {fmt(r.theory_var)} | {fmt(r.expected)} | {fmt(r.sd)} | "
            f"{fmt(r.median)} | {interval(lo, hi)} | {pct} | {fmt_p(r.p_value)} | "
            f"{r.verdict} |"
        )
    text = "\n".join(lines) + "\n"
    if d["growing"]:
        text += (
            "\n"
            + records_to_markdown(
                d["growing"], {"seed": result.seed}, "np.var over growing shapes (exact)"
            ).split("\n", 2)[2]
        )
    text += "\n" + "\n".join("- " + p for p in explain_account(result)) + "\n"
    if result.interrupted:
        line = _interrupted_line(result).replace("[bold yellow]interrupted[/]", "**interrupted**")
        text += "\n" + line + "\n"
    return text


#: Write an explain result as ``table``, ``json``, ``csv`` (growing shapes) or ``markdown``.
render_explain = formats.renderer(
    _render_explain_table, explain_dict, _growing_records, _explain_meta, markdown=_explain_markdown
)


# --- softmax -----------------------------------------------------------------------------------


def _stats_dict(s: SoftmaxStats) -> dict[str, float]:
    """The statistics by their field names, in field order (the JSON keys and CSV columns)."""
    return dataclasses.asdict(s)


def _softmax_meta(result: SoftmaxResult) -> dict[str, Any]:
    return {
        **formats.json_header("softmax", result),
        "keys": result.keys,
        "queries": result.queries,
        "blocks": result.blocks,
        "q_dist": result.q_dist.spec,
        "k_dist": result.k_dist.spec,
        "interrupted": result.interrupted,
    }


def softmax_dict(result: SoftmaxResult) -> dict[str, Any]:
    return {
        **_softmax_meta(result),
        "log_keys": math.log(result.keys),
        "rows": [
            {
                "dk": r.dk,
                "queries": r.queries,
                "logit_sd_raw": r.logit_sd_raw,
                "logit_sd_scaled": r.logit_sd_scaled,
                "raw": _stats_dict(r.raw),
                "scaled": _stats_dict(r.scaled),
            }
            for r in result.rows
        ],
    }


def softmax_records(result: SoftmaxResult) -> list[dict[str, Any]]:
    """Flat rows (one per d_k) for CSV and Markdown."""
    recs = []
    for r in result.rows:
        rec: dict[str, Any] = {
            "dk": r.dk,
            "queries": r.queries,
            "logit_sd_raw": r.logit_sd_raw,
            "logit_sd_scaled": r.logit_sd_scaled,
        }
        for tag, s in (("raw", r.raw), ("scaled", r.scaled)):
            for key, value in _stats_dict(s).items():
                rec[f"{key}_{tag}"] = value
        recs.append(rec)
    return recs


def softmax_summary(result: SoftmaxResult) -> str:
    rows = result.rows
    if len(rows) < 2:
        return ""
    first, last = rows[0], rows[-1]
    fr = [r.scaled.entropy_fraction for r in rows]
    mw = [r.scaled.max_weight for r in rows]
    return (
        f"Without scaling, as d_k goes from {first.dk} to {last.dk}, the entropy falls from "
        f"{100 * first.raw.entropy_fraction:.3g}% to {100 * last.raw.entropy_fraction:.3g}% of "
        f"log L, the largest weight rises from {fmt(first.raw.max_weight, 3)} to "
        f"{fmt(last.raw.max_weight, 3)} and the Jacobian norm goes from "
        f"{fmt(first.raw.jacobian_norm, 3)} to {fmt(last.raw.jacobian_norm, 3)}. With 1/√d_k "
        f"the entropy stays within {100 * min(fr):.3g}–{100 * max(fr):.3g}% of log L and the "
        f"largest weight within {fmt(min(mw), 3)}–{fmt(max(mw), 3)}."
    )


def _half_width(blocks: int) -> str:
    """What every ± of the softmax study is (the figure's error bars are the same intervals)."""
    return (
        f"the half-width of its 95% interval ({normal_quantile(0.95):.2f} standard errors, "
        f"between {blocks} independent blocks)"
    )


#: The study's columns; a narrow terminal drops the entropy in nats first, then the logits' sd.
_SOFTMAX_COLUMNS = (
    Column("d_k"),
    Column("logits", "left"),
    Column("sd", priority=2),
    Column("entropy (nats)", priority=1),
    Column("entropy / log L"),
    Column("max weight"),
    Column("‖J‖"),
)


def _softmax_table(result: SoftmaxResult, keep: list[int] | None = None) -> Table:
    """The study's table with the ``keep`` columns (all by default); a row an interruption cut
    short says ``partial`` under its d_k."""
    from rich.table import Table

    q, k = result.q_dist.spec, result.k_dist.spec
    dists = f"q, k ~ {q}" if q == k else f"q ~ {q}, k ~ {k}"
    table = Table(
        title=f"softmax over L = {result.keys} keys ({dists}), with and without 1/√d_k",
        caption=(
            f"mean over {result.queries:,} queries ± {_half_width(result.blocks)} · uniform "
            f"weights: entropy log L = {math.log(result.keys):.4f}, "
            f"max weight 1/L = {1 / result.keys:.4g} · ‖J‖ = Frobenius norm of diag(p) − ppᵀ · "
            f"seed {result.seed} · varcheck {result.version}"
        ),
        caption_justify="left",
    )
    columns = _kept(_SOFTMAX_COLUMNS, keep)
    for col in columns:
        table.add_column(col.name, justify=col.justify, no_wrap=True)  # type: ignore[arg-type]
    for r in result.rows:
        partial = r.blocks < result.blocks
        for label, sd, s, last in (
            ("q·k", r.logit_sd_raw, r.raw, False),
            ("q·k/√d_k", r.logit_sd_scaled, r.scaled, True),
        ):
            cells = {
                "d_k": str(r.dk) if not last else ("[bold yellow]partial[/]" if partial else ""),
                "logits": label,
                "sd": fmt(sd),
                **_softmax_cells(s),
            }
            table.add_row(*(cells[c.name] for c in columns), end_section=last)
    return table


def softmax_interrupted_note(result: SoftmaxResult) -> str:
    """What an interrupted study still shows ("" when it ran to the end)."""
    if not result.interrupted:
        return ""
    if not result.rows:
        return "interrupted: no d_k value had finished"
    cut = [r for r in result.rows if r.blocks < result.blocks]
    part = (
        f"; d_k = {cut[0].dk} from {cut[0].queries:,} of {result.queries:,} queries (marked "
        "partial)"
        if cut
        else ""
    )
    return f"interrupted: partial result, rows up to d_k = {result.rows[-1].dk} only{part}"


def _render_softmax_table(result: SoftmaxResult, console: Console) -> None:
    _print_fitted(console, lambda keep: _softmax_table(result, keep), _SOFTMAX_COLUMNS)
    summary = softmax_summary(result)
    if summary:
        console.print(summary, highlight=False)
    note = softmax_interrupted_note(result)
    if note:
        console.print("[bold yellow]interrupted[/]" + note[len("interrupted") :], highlight=False)


def _softmax_cells(s: SoftmaxStats) -> dict[str, str]:
    """The four statistics of one row, each ± the half-width of its 95% interval."""
    z = normal_quantile(0.95)
    return {
        "entropy (nats)": _pm(s.entropy, z * s.entropy_se),
        "entropy / log L": _pm(s.entropy_fraction, z * s.entropy_fraction_se),
        "max weight": _pm(s.max_weight, z * s.max_weight_se),
        "‖J‖": _pm(s.jacobian_norm, z * s.jacobian_norm_se),
    }


def _softmax_markdown(result: SoftmaxResult) -> str:
    """The study as a table a person reads (the lesson's columns, raw and scaled rows), under a
    line giving the settings; the CSV and JSON forms keep every field by its name."""
    q, k = result.q_dist.spec, result.k_dist.spec
    dists = f"q, k ~ `{q}`" if q == k else f"q ~ `{q}`, k ~ `{k}`"
    lines = [
        f"**softmax over L = {result.keys} keys** ({dists}), with and without 1/√d_k: mean "
        f"over {result.queries:,} queries per d_k ± {_half_width(result.blocks)}; uniform "
        "weights give entropy log L = "
        f"{math.log(result.keys):.4f}; seed `{result.seed}`, varcheck `{result.version}`.",
        "",
        "| d_k | logits | sd | entropy (nats) | entropy / log L | max weight | ‖J‖_F |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in result.rows:
        partial = " (partial)" if r.blocks < result.blocks else ""
        for label, sd, st in (
            ("q·k", r.logit_sd_raw, r.raw),
            ("q·k/√d_k", r.logit_sd_scaled, r.scaled),
        ):
            cells = _softmax_cells(st)
            lines.append(
                f"| {r.dk}{partial} | {label} | {fmt(sd)} | {cells['entropy (nats)']} | "
                f"{cells['entropy / log L']} | {cells['max weight']} | {cells['‖J‖']} |"
            )
    text = "\n".join(lines) + "\n"
    summary = softmax_summary(result)
    text = text + "\n" + summary + "\n" if summary else text
    note = softmax_interrupted_note(result)
    return text + "\n**" + note.replace(":", ":**", 1) + "\n" if note else text


#: Write a softmax study in one of table, json, csv, markdown.
render_softmax = formats.renderer(
    _render_softmax_table, softmax_dict, softmax_records, _softmax_meta, markdown=_softmax_markdown
)


# --- derive ------------------------------------------------------------------------------------


def _step_dict(s: DeriveStep) -> dict[str, Any]:
    return {
        "step": s.number,
        "quantity": s.quantity,
        "formula": s.formula,
        "textbook": s.textbook,
        "textbook_value": s.textbook_value,
        "value": s.value,
        "status": s.status,
        "reason": s.reason,
        "estimate": s.estimate,
        "ci_low": s.confidence_interval.low,
        "ci_high": s.confidence_interval.high,
        "se": s.se,
        "samples": s.samples,
        "p_value": s.p_value,
        "p_adjusted": s.p_adjusted,
        "textbook_p_value": s.textbook_p_value,
        "verdict": s.verdict,
        "stop_reason": s.stop_reason,
        "min_samples": s.min_samples,
    }


def _derive_meta(result: DeriveResult) -> dict[str, Any]:
    return {
        **formats.json_header("derive", result),
        "dk": result.dk,
        "q_dist": result.q_dist.spec,
        "k_dist": result.k_dist.spec,
        "rho": result.rho,
        "confidence": result.confidence,
        "precision": result.precision,
        "samples": result.samples,
        "max_seconds": result.max_seconds,
        "interrupted": result.interrupted,
        "time_limited": result.time_limited,
    }


def derive_records(result: DeriveResult) -> list[dict[str, Any]]:
    return [_step_dict(s) for s in result.steps]


def derive_dict(result: DeriveResult) -> dict[str, Any]:
    return {
        **_derive_meta(result),
        "broken_step": result.broken_step,
        "correct_var": result.correct_var,
        "correct_scaled_var": result.correct_scaled_var,
        "steps": derive_records(result),
        "notes": derive_notes(result, markup=False) + derive_footer(result),
    }


def _shortfall_note(steps: tuple[DeriveStep, ...]) -> str | None:
    """The note naming the products each step short of the budget rule needs (None if none)."""
    short = [s for s in steps if s.min_samples is not None and s.number < 4]
    if not short:
        return None
    needs = ", ".join(
        f"{s.min_samples:,} for step {s.number}" + (" (and 4)" if s.number == 3 else "")
        for s in short
    )
    most = max(s.min_samples for s in short)  # type: ignore[type-var]
    return (
        "unreliable: too few products for a valid interval where the kurtosis of the product "
        f"is high; a valid interval needs at least {needs} (--samples {most}, or --precision). "
        "Estimates are shown, intervals and verdicts are not."
    )


def derive_notes(result: DeriveResult, *, markup: bool = True) -> list[str]:
    """What the derivation concludes for these distributions."""
    from rich.markup import escape

    def b(text: str, style: str) -> str:
        return f"[{style}]{text}[/]" if markup else text

    def e(text: str) -> str:
        return escape(text) if markup else text

    notes = []
    steps = result.steps
    if steps[0].status == "breaks":
        mean = steps[0].value
        extra = f"; so E[q·k] = {fmt(result.dk * mean)}, not 0" if math.isfinite(mean) else ""
        notes.append(f"{b('Step 1 breaks:', 'bold red')} {e(steps[0].reason + extra)}.")
    if result.broken_step is not None:
        s = steps[result.broken_step - 1]
        notes.append(
            f"{b(f'Step {s.number} breaks', 'bold red')} "
            + e(
                f"({s.quantity}): {s.reason}. Steps 3 and 4 still hold as reasoning but inherit "
                f"that value: the correct Var(q·k) is {fmt(result.correct_var)} (not d_k = "
                f"{result.dk}) and Var(q·k/√d_k) is {fmt(result.correct_scaled_var)} (not 1)."
            )
        )
    elif steps[0].status == "holds":
        notes.append(
            f"{b('Every step holds', 'green')}: Var(q·k) = d_k = {result.dk}, and dividing by "
            f"√d_k gives unit variance."
        )
    verdicts = {s.verdict for s in steps}
    short = _shortfall_note(steps)
    if short:
        word, rest = short.split(":", 1)
        notes.append(f"{b(word + ':', 'bold yellow')}{e(rest)}")
    if any(s.verdict == UNRELIABLE and s.min_samples is None for s in steps):
        notes.append(
            f"{b('unreliable checks:', 'bold yellow')} "
            + e(
                "the Monte-Carlo interval is not valid, because a moment the check needs "
                "(E[(XY)²] for step 1, E[(q·k)⁴] for steps 2–4) is infinite, or because (q·k)² "
                "is constant and the interval degenerates; the formulas still give the values "
                "shown."
            )
        )
    budget = [s for s in steps if s.stop_reason == "budget"]
    if budget:
        notes.append(
            f"{b('fixed budget:', 'bold yellow')} "
            + e(
                f"at d_k = {result.dk} reaching the precision would take minutes, so step "
                f"{budget[0].number}"
                + (" (and 4)" if budget[0].number == 3 else "")
                + f" used {budget[0].samples:,} products; "
                + (
                    "its interval is wider than asked "
                    if budget[0].min_samples is None
                    else "too few for a valid interval "
                )
                + "(pass --samples to choose the number)."
            )
        )
    if REJECTED in verdicts:
        notes.append(
            f"{b('A check rejected its formula', 'bold red')} (after Holm over the steps): "
            "with a true formula this happens at most 1 − confidence of the time; rerun with "
            "another --seed or report it."
        )
    return notes


def _derive_caption(result: DeriveResult) -> str:
    conf = confidence_label(result.confidence)
    return (
        "textbook: the textbook's step holds, breaks (an assumption behind it is false) or "
        "inherits (sound reasoning, wrong input); exact: the formula for these "
        "distributions; simulated: "
        f"Monte-Carlo estimate and {conf} interval, and whether the exact value is consistent "
        "with it (p Holm-adjusted over steps 1–3; step 4 reuses step 3's draws) · seed "
        f"{result.seed} · varcheck {result.version}"
    )


def _simulated(s: DeriveStep, alpha: float) -> str:
    """``0.2498 [0.2444, 0.2551]; exact value: p = 1.0000`` (the estimate alone without an
    interval or a test)."""
    lo, hi = s.confidence_interval
    text = fmt(s.estimate) if math.isnan(lo) else f"{fmt(s.estimate)} {interval(lo, hi)}"
    text += " †" if s.marginal_only(alpha) else ""
    if s.stop_reason == "interrupted" and s.verdict != "interrupted":
        text += " (partial)"
    return text if math.isnan(s.p_adjusted) else f"{text}; exact value: p = {fmt_p(s.p_adjusted)}"


def _derive_table(result: DeriveResult) -> Table:
    """Each step as four lines: its name; the textbook's form and whether it holds; the exact
    formula and value; the simulation and whether the exact value is consistent with it. The
    formula and the textbook's form are the derivation itself: they are never dropped, and a
    narrow terminal wraps the formula rather than cut it."""
    from rich.box import SIMPLE_HEAD
    from rich.markup import escape
    from rich.table import Table

    q, k = result.q_dist.spec, result.k_dist.spec
    dists = f"X = q_i ~ {q}, Y = k_i ~ {k}"
    if result.rho:
        dists += f", corr(X, Y) = {result.rho:g}"
    table = Table(
        box=SIMPLE_HEAD,
        title=escape(f"Var(q·k) = d_k, step by step, for d_k = {result.dk} ({dists})"),
        caption=escape(_derive_caption(result)),
        caption_justify="left",
    )
    table.add_column("", no_wrap=True)
    table.add_column("formula = value")
    table.add_column("verdict", no_wrap=True)
    alpha = 1.0 - result.confidence
    for s in result.steps:
        table.add_row("", f"[bold]step {s.number}: {escape(s.quantity)}[/]", "")
        table.add_row("textbook", escape(s.textbook), styled(s.status, STATUS_STYLE))
        table.add_row("exact", escape(f"{s.formula} = {fmt(s.value)}"), "")
        table.add_row(
            "simulated",
            escape(_simulated(s, alpha)),
            styled(s.verdict),
            end_section=True,
        )
    return table


def _steps_said(numbers: list[int], what: str) -> str:
    """``"steps 1, 2 what; "`` ("" for no steps)."""
    if not numbers:
        return ""
    return f"step{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))} {what}; "


def derive_footer(result: DeriveResult) -> list[str]:
    """The lines saying a run was cut short: by Ctrl-C, or by ``max_seconds``."""
    lines = []
    if result.interrupted:
        cut = [s.number for s in result.steps if s.stop_reason == "interrupted"]
        whole = [s.number for s in result.steps if s.number < min(cut, default=5)]
        partial = [s.number for s in result.steps if s.number in cut and s.verdict != "interrupted"]
        said = (
            _steps_said(whole, "checked in full")
            + _steps_said(partial, "checked on the draws made before the interrupt (partial)")
            + _steps_said([n for n in cut if n not in partial], "not checked")
        )
        lines.append(
            "interrupted: partial result; the exact values of every step are shown; "
            + said.rstrip("; ")
        )
    if result.time_limited:
        lines.append(
            f"time-limited: --max-seconds {result.max_seconds:g} stopped a check before its "
            "target, so its interval depends on the machine's speed, not only on the seed"
        )
    return lines


def _render_derive_table(result: DeriveResult, console: Console) -> None:
    console.print(_derive_table(result))
    for note in derive_notes(result):
        console.print(note)
    if any(s.marginal_only(1.0 - result.confidence) for s in result.steps):
        console.print(formats.MARGINAL_NOTE)
    for line in derive_footer(result):
        word, rest = line.split(":", 1)
        console.print(f"[bold yellow]{word}[/]:{rest}", highlight=False)


#: The columns of the Markdown form of a derivation (the CSV and JSON forms have them all).
_DERIVE_MARKDOWN_KEYS = (
    "step",
    "quantity",
    "formula",
    "value",
    "textbook",
    "estimate",
    "ci_low",
    "ci_high",
    "p_adjusted",
    "verdict",
    "status",
)


def _derive_markdown(result: DeriveResult) -> str:
    recs = [{key: rec[key] for key in _DERIVE_MARKDOWN_KEYS} for rec in derive_records(result)]
    text = records_to_markdown(
        recs, _derive_meta(result), f"Var(q·k) = d_k step by step, d_k = {result.dk}"
    )
    notes = derive_notes(result, markup=False) + derive_footer(result)
    return text + "\n" + "\n".join("- " + n for n in notes) + "\n"


#: Write a derivation in one of table, json, csv, markdown.
render_derive = formats.renderer(
    _render_derive_table, derive_dict, derive_records, _derive_meta, markdown=_derive_markdown
)
