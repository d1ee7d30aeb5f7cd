"""How a probe is shown: a paragraph for one d_k, a table for several, JSON, CSV, Markdown.

Every text line fits 80 columns (long sentences wrap with an indent), except the reproduce
command, which stays one line to copy.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

from ..core.interrupts import interrupted_exit
from ..core.next_step import NEXT_STEP_KEY, command_lines
from ..core.power import LOW_POWER_AT_CLAIM
from ..core.probe.judge import mask_words
from ..core.verdicts import UNRELIABLE
from ..output import formats
from ..output import text as shown_text
from ..output.formats import confidence_label, fmt_p
from ..output.formats import fmt as _fmt
from .commands import reproduce_command

if TYPE_CHECKING:
    from rich.console import Console

    from .probe import ProbeResult, ProbeSweepResult

__all__ = [
    "probe_paragraph",
    "probe_dict",
    "probe_row_dict",
    "probe_sweep_dict",
    "probe_records",
    "render_probe",
    "render_probe_row",
    "reproduce_command",
]

WIDTH = 80
#: The footer of a probe stopped by its time cap (the words of the other commands' footer).
TIME_LIMITED_NOTE = (
    "[yellow]time-limited:[/] stopped at --max-seconds, so these numbers depend on this "
    "machine's speed, not only on the seed."
)
#: Significant digits of a table's scale, its interval's ends and its ratio: one count for all,
#: as output.formats.fmt's elsewhere, so rounding keeps the estimate inside its interval as shown
#: (0.015625 beside [0.01562, 0.01562] read as outside it).
DIGITS = 4
#: The interval column of a row without a valid interval (the words of sweep's table).
NO_VALID_CI = "(no valid CI)"


def fmt(x: float | None, digits: int = 4) -> str:
    """:func:`output.formats.fmt` of ``x`` rounded to 12 digits first: an exact kernel's
    1 - 1e-16 shows as 1.000, not 1.0000, whatever the platform's last bits."""
    return _fmt(x if x is None else float(f"{x:.12g}"), digits)


def interval(low: float, high: float, digits: int = 4) -> str:
    """``[low, high]`` through :func:`fmt`."""
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]"


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent="  ", subsequent_indent="    ")


def probe_paragraph(result: ProbeResult, reproduce: str | None = None) -> str:
    """A plain-text account of one probe (the table form of one d_k, the pytest message)."""
    tol = "" if result.tolerance is None else f" within ±{result.tolerance:g} (relative)"
    law = result.law
    mask = mask_words(result.diagnostics.mask, result.queries, result.keys)
    head = (
        f"varcheck: {result.outcome.upper()}: scale of {result.kernel.label} = {result.expect}"
        f"{tol} at d_k={result.dk}" + (f", {mask}" if mask else "")
    )
    lines = [
        *textwrap.wrap(head, WIDTH, subsequent_indent="    "),
        *_wrap(_estimate_line(result)),
        *_equivalence_lines(result),
        *_wrap(
            f"ratio to expected {fmt(result.ratio, 6)}; nearest law {law.law}"
            + ("" if law.factor_label in ("1", "—") else f" × {law.factor_label}")
            + f": {law.meaning}"
        ),
        *_wrap(result.reason),
        *_detectable_lines(result),
    ]
    step = _step(result)
    if step is not None:
        cause, *command = step.lines
        lines += textwrap.wrap(
            f"  {cause}", WIDTH, subsequent_indent="        ", break_on_hyphens=False
        )
        lines += [part for line in command for part in command_lines(f"  {line}", WIDTH)]
    if len(result.per_head) > 1:
        heads = ", ".join(f"{fmt(h.scale, 6)}" for h in result.per_head)
        lines += _wrap(f"per head ({result.layout}): {heads}")
    lines += _wrap(f"reading: {result.reading}")
    for note in result.diagnostics.notes:
        lines += _wrap(note)
    cmd = reproduce or reproduce_command(result)
    if cmd:
        lines.append(f"  reproduce: {cmd}")
    return "\n".join(lines)


def _detectable_lines(result: ProbeResult) -> list[str]:
    """What the weakest head's test could have caught, in the scale; a tolerance's pass
    probability for a true kernel."""
    det = result.detectable
    if det is None:
        return []
    lines = _wrap(f"this run {formats.detectable_text(det, 'a scale error')}")
    if det.power_at_claim is not None:
        low = det.power_at_claim < LOW_POWER_AT_CLAIM
        below = f" (below {LOW_POWER_AT_CLAIM:g}: widen the tolerance or add calls)" if low else ""
        shown = formats.probability_down(det.power_at_claim)
        lines += _wrap(f"a kernel as expected passes this test with probability {shown}{below}")
    return lines


def _estimate_line(result: ProbeResult) -> str:
    """The scale with its interval and p-value, or, without a valid interval, without them (as
    ``assert`` says it)."""
    head = f"expected {fmt(result.expected, 6)}; effective scale {fmt(result.scale, 6)}"
    if not result.has_interval:
        return f"{head} from {result.calls:,} calls; no valid interval, no p-value"
    lo, hi = result.confidence_interval
    p = (
        f"p = {fmt_p(result.p_value)}"
        if result.tolerance is None
        else f"p_value = {fmt_p(result.p_value)} (two-sided, of the expected scale)"
    )
    return (
        f"{head}, {confidence_label(result.confidence)} interval [{fmt(lo, 6)}, {fmt(hi, 6)}] "
        f"from {result.calls:,} calls; {p}"
    )


def _equivalence_lines(result: ProbeResult) -> list[str]:
    """What a pass and a fail under a tolerance need (as in ``assert``), or nothing without
    one."""
    if result.equivalence_interval is None or result.tolerance is None:
        return []
    low, high = sorted(result.expected * (1 + s * result.tolerance) for s in (-1, 1))
    level = confidence_label(max(2 * result.confidence - 1, 0.0))
    return _wrap(
        f"pass needs the whole {level} interval {interval(*result.equivalence_interval, 6)} "
        f"inside the band {interval(low, high, 6)}: "
        f"p_equivalence = {fmt_p(result.p_equivalence)}"  # type: ignore[arg-type]
    ) + _wrap(
        f"fail needs the whole {confidence_label(result.confidence)} interval outside it: "
        f"p_outside = {fmt_p(result.p_outside)}"  # type: ignore[arg-type]
    )


def _fields(obj: Any, names: str) -> dict[str, Any]:
    """``{name: obj.name}`` for the space-separated ``names``."""
    return {name: getattr(obj, name) for name in names.split()}


def _ci(iv: Any, prefix: str = "ci") -> dict[str, Any]:
    """An interval as ``{prefix}_low`` and ``{prefix}_high`` (both None for no interval)."""
    low, high = (None, None) if iv is None else iv
    return {f"{prefix}_low": low, f"{prefix}_high": high}


def _head_dict(h: Any) -> dict[str, Any]:
    return {
        **_fields(h, "head scale"),
        **_ci(h.confidence_interval),
        **_fields(h, "p_value raw_p_value p_equivalence p_outside outcome"),
        **formats.detectable_fields(h.detectable),
    }


def probe_dict(result: ProbeResult) -> dict[str, Any]:
    """Everything about one probe, for JSON (a row of a sweep's document)."""
    d, law = result.diagnostics, result.law
    return {
        "kernel": result.kernel.as_dict(),
        **_fields(
            result,
            "dk layout out_layout heads kv_heads law_heads queries keys dv dtype "
            "computes_in returned format_source reading expect expected scale",
        ),
        **_ci(result.confidence_interval),
        **_fields(result, "se ratio"),
        **_ci(result.ratio_interval, "ratio"),
        "law": law.law,
        "factor": law.factor,
        "factor_label": law.factor_label,
        "meaning": law.meaning,
        **_fields(result, "outcome reason more_calls p_value tolerance"),
        **_ci(result.equivalence_interval, "equivalence"),
        **_fields(result, "p_equivalence p_outside causal"),
        **formats.detectable_fields(result.detectable),
        "per_head": [_head_dict(h) for h in result.per_head],
        "diagnostics": {
            **_fields(d, "mask masked bias bias_size"),
            "alibi_slopes": list(d.alibi_slopes),
            **_fields(d, "nonlinear curvature linearity_residual explained underflowed"),
            "notes": list(d.notes),
        },
        **_fields(result, "calls min_samples kernel_calls stop_reason precision input_sd"),
        NEXT_STEP_KEY: _said(_step(result)),
    }


def _step(result: ProbeResult, dks: str | None = None) -> Any:
    from .next_steps import probe_step

    return probe_step(result, dks)


def _said(step: Any) -> str | None:
    return None if step is None else str(step)


def _exponent_dict(result: ProbeSweepResult) -> dict[str, Any] | None:
    fit = result.exponent
    if fit is None:
        return None
    return {
        "slope": fit.slope,
        **_ci(fit.confidence_interval),
        "expected": fit.expected,
        "verdict": fit.verdict,
    }


def probe_sweep_dict(result: ProbeSweepResult) -> dict[str, Any]:
    """The JSON document of ``varcheck probe`` (one d_k or several)."""
    return {
        **formats.json_header("probe", result),
        **_fields(result, "confidence expect outcome time_limited interrupted"),
        "exponent": _exponent_dict(result),
        "rows": [probe_dict(r) for r in result.rows],
        NEXT_STEP_KEY: _said(_sweep_step(result)),
    }


def _sweep_step(result: ProbeSweepResult) -> Any:
    from .next_steps import probe_sweep_step

    return probe_sweep_step(result)


def probe_row_dict(result: ProbeResult) -> dict[str, Any]:
    """The JSON document of one :func:`~varcheck.kernels.probe.probe` (a Python result)."""
    return {
        **formats.json_header("probe", result),
        **_fields(result, "confidence"),
        **probe_dict(result),
        **_fields(result, "time_limited interrupted"),
    }


def probe_records(result: ProbeSweepResult) -> list[dict[str, Any]]:
    """One flat record per d_k (CSV, Markdown)."""
    return [
        {
            **_fields(r, "dk scale"),
            **_ci(r.confidence_interval),
            **_fields(r, "expected ratio"),
            "law": r.law.law,
            "factor": r.law.factor_label,
            **_fields(r.diagnostics, "mask bias nonlinear"),
            **_fields(r, "calls min_samples p_value"),
            **formats.detectable_fields(r.detectable),
            **_fields(r, "outcome"),
            NEXT_STEP_KEY: _said(_step(r, ",".join(str(x.dk) for x in result.rows))),
        }
        for r in result.rows
    ]


def _meta(result: ProbeSweepResult) -> dict[str, Any]:
    r = result.rows[0]
    return {
        **formats.json_header("probe", result),
        "kernel": r.kernel.label,
        **_fields(result, "expect"),
        **_fields(r, "layout dtype"),
        **_fields(result, "confidence time_limited interrupted"),
    }


def _exponent_line(result: ProbeSweepResult) -> str | None:
    fit = result.exponent
    if fit is None:
        return None
    # an exponent is read to 1e-9 at best: exact kernels show [-0.5000, -0.5000], not ±1e-15
    slope, lo, hi, want = (
        round(v, 9) + 0.0 for v in (fit.slope, *fit.confidence_interval, fit.expected)
    )
    return (
        f"s ∝ d_k^b: b = {fmt(slope, 4)} {interval(lo, hi)} against {fmt(want, 4)} "
        f"expected ({fit.verdict}); −0.5 is 1/√d_k, −1 is 1/d_k, 0 a forgotten scale"
    )


def _print(result: ProbeSweepResult, console: Console) -> None:
    if len(result.rows) == 1:
        style = formats.VERDICT_STYLE.get(result.outcome, "")
        head, *rest = map(shown_text.visible, probe_paragraph(result.rows[0]).splitlines())
        # the kernel's path and arguments are a user's text: never markup
        styled_head = f"[{style}]{shown_text.markup(head)}[/]" if style else head
        console.print(styled_head, highlight=False, markup=bool(style))
        for line in rest:
            console.print(line, highlight=False, soft_wrap=True, markup=False)
        if result.rows[0].outcome == UNRELIABLE:
            for line in _wrap(
                "(no verdict: no interval for this scale can be trusted, for the reason above; "
                f"exit {result.exit_code})"
            ):
                console.print(line, highlight=False, soft_wrap=True, markup=False)
    else:
        _print_table(result, console)
    if result.time_limited:
        console.print("  " + TIME_LIMITED_NOTE, soft_wrap=True)
    if result.interrupted:
        console.print(_interrupted_line(result), highlight=False, soft_wrap=True)
    console.print(f"  seed {result.seed} · varcheck {result.version}", highlight=False)


def _interrupted_line(result: ProbeSweepResult) -> str:
    """Which d_k the signal that arrived left whole, and which one it cut short."""
    code = interrupted_exit()
    signal = {130: "Ctrl-C", 143: "SIGTERM"}.get(code, f"signal {code - 128}")
    whole = [r for r in result.rows if not r.interrupted]
    cut = [r for r in result.rows if r.interrupted]
    partial = "" if not cut else f"d_k={cut[0].dk} from its {cut[0].calls:,} calls made by then"
    if not whole:
        return f"  interrupted by {signal} (exit {code}): {partial} (partial)"
    text = f"  interrupted: {len(whole)} d_k finished before {signal} (exit {code})"
    return text + (f"; {partial} (partial)" if cut else "")


def _print_table(result: ProbeSweepResult, console: Console) -> None:
    r0 = result.rows[0]
    columns = [
        formats.Column("d_k"),
        formats.Column("scale"),
        formats.Column(confidence_label(result.confidence), "left"),
        formats.Column("ratio"),
        formats.Column("nearest law", "left"),
        formats.Column("verdict", "left"),
        # what each row could have caught (its weakest head's): the first left out
        formats.Column("detects", "right", 1),
    ]
    rows = []
    for r in result.rows:
        lo, hi = r.confidence_interval
        law = r.law.law + ("" if r.law.factor_label in ("1", "—") else f" × {r.law.factor_label}")
        shown = interval(lo, hi, DIGITS) if r.has_interval else NO_VALID_CI
        rows.append(
            [
                str(r.dk),
                fmt(r.scale, DIGITS),
                shown,
                fmt(r.ratio, DIGITS),
                law,
                formats.styled(r.outcome),
                formats.detectable_cell(r.detectable),
            ]
        )
    title = shown_text.markup(f"varcheck probe {r0.kernel.label}: expected {result.expect}")
    # laid out at WIDTH, as the lines under it are, whatever the terminal
    table, dropped = formats.fit_rows(console, title, None, columns, rows, width=WIDTH)
    console.print(table)
    if dropped:
        at = min(WIDTH, console.width)
        note = f"not shown at {at} columns: {', '.join(dropped)} (--format json shows it)"
        for line in _wrap(note):
            console.print(line, style="dim", markup=False, highlight=False)
    lines = []
    if (exponent := _exponent_line(result)) is not None:
        lines += _wrap(exponent)
    for text in dict.fromkeys(r.reading for r in result.rows):
        lines += _wrap(f"reading: {text}")
    notes = dict.fromkeys(n for r in result.rows for n in r.diagnostics.notes)
    for note in notes:
        lines += _wrap(note)
    worst = next((r for r in result.rows if r.outcome == result.outcome), r0)
    lines += _wrap(f"verdict {result.outcome}: d_k={worst.dk}: {worst.reason}")
    step = _sweep_step(result)
    if step is not None:
        cause, *command = step.lines
        lines += textwrap.wrap(
            f"  {cause}", WIDTH, subsequent_indent="        ", break_on_hyphens=False
        )
        lines += [part for line in command for part in command_lines(f"  {line}", WIDTH)]
    dks = ",".join(str(r.dk) for r in result.rows)
    cmd = reproduce_command(r0, dks)
    if cmd:
        lines.append(f"  reproduce: {cmd}")
    for line in lines:
        console.print(shown_text.visible(line), highlight=False, soft_wrap=True, markup=False)


def render_probe(result: ProbeSweepResult, fmt_name: str, console: Console) -> None:
    """Write a probe in one of the output formats (through :func:`output.formats.write`)."""
    formats.write(
        fmt_name,
        console,
        result,
        table=_print,
        data=probe_sweep_dict,
        records=probe_records,
        meta=_meta,
        title=lambda r: f"varcheck probe {r.rows[0].kernel.label}",
    )


def render_probe_row(result: ProbeResult, fmt_name: str, console: Console) -> None:
    """One probe (a Python result) as ``varcheck probe`` shows a single d_k."""
    from .probe import ProbeSweepResult

    sweep = ProbeSweepResult(
        (result,), None, result.expect, result.seed, result.confidence, result.interrupted
    )
    formats.write(
        fmt_name,
        console,
        result,
        table=lambda r, c: _print(sweep, c),
        data=probe_row_dict,
        records=lambda r: probe_records(sweep),
        meta=lambda r: _meta(sweep),
        title=lambda r: f"varcheck probe {r.kernel.label}",
    )
