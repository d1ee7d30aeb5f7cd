"""Rendering results: rich tables, JSON, CSV and Markdown. Pure functions of a result."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from ..core.estimation import MIN_BLOCKS, normal_quantile
from ..core.next_step import NEXT_STEP_KEY, command_lines
from ..core.power import LOW_POWER_AT_CLAIM
from ..core.verdicts import CONSISTENT, INTERRUPTED, marginal_only, worst
from ..output import formats
from ..output import text as shown_text
from ..output.formats import (
    confidence_label,
    fmt,
    fmt_p,
    interval,
    print_next_step,
    records_to_markdown,
    styled,
)
from .commands import reproduce_command, rerun_command
from .next_steps import check_row_step, claim_step, sweep_row_step, sweep_step, verify_step

if TYPE_CHECKING:
    from collections.abc import Sequence

    from rich.console import Console

    from .claim_file import CheckResult
    from .sweep import SweepResult, SweepRow
    from .verify import VerifyResult

__all__ = [
    "sweep_records",
    "sweep_meta",
    "sweep_dict",
    "sweep_markdown",
    "render_sweep",
    "render_sweep_table",
    "render_verify",
    "render_check",
]

# --- sweep -------------------------------------------------------------------------------------


def sweep_meta(result: SweepResult) -> dict[str, Any]:
    return {
        **formats.json_header("sweep", result),
        "confidence": result.confidence,
        "q_dist": _spec(result.q_dist),
        "k_dist": _spec(result.k_dist),
        "rho": result.rho,
        "sampler": _sampler(result.sampler),
        "claim": result.claim,
        "precision": result.precision,
        "samples": result.samples,
        "max_seconds": result.max_seconds,
        "time_limited": _time_limited(r.estimate for r in result.rows),
        "interrupted": result.interrupted,
    }


def _time_limited(estimates: Any) -> bool:
    """True when some estimate stopped at --max-seconds: the output then depends on the
    machine's speed, not only on the seed."""
    return any(e is not None and e.stop_reason == "max-seconds" for e in estimates)


#: the footer of a run stopped by its time cap
TIME_LIMITED_NOTE = (
    "[yellow]time-limited:[/] stopped at --max-seconds, so these numbers depend on this "
    "machine's speed, not only on the seed."
)


def _spec(dist: Any) -> str | None:
    return None if dist is None else dist.spec


def _sampler(sampler: Any) -> str | None:
    """The sampler with its arguments in one cell (JSON gives them as a table instead)."""
    return None if sampler is None else sampler.label


def _sampler_json(sampler: Any) -> dict[str, Any] | None:
    return None if sampler is None else sampler.as_dict()


def sweep_records(result: SweepResult) -> list[dict[str, Any]]:
    recs = []
    for row in result.rows:
        est = row.estimate
        th = row.theory
        lo, hi = est.confidence_interval if est else (math.nan, math.nan)
        slo, shi = row.scaled_confidence_interval
        if row.verdict == "unreliable":  # an interval exists numerically but is not valid
            lo = hi = slo = shi = math.nan
        recs.append(
            {
                "dk": row.dk,
                "theory_var": th.var if th else None,
                "theory_status": th.status if th else None,
                "claim_value": row.claim_value,
                "var": est.var if est else None,
                "ci_low": lo,
                "ci_high": hi,
                "ratio": _ratio(
                    est,
                    row.claim_value if row.claim_value is not None else (th.var if th else None),
                ),
                "scaled_var": row.scaled_var,
                "scaled_ci_low": slo,
                "scaled_ci_high": shi,
                "mean": est.mean if est else None,
                "p_value": row.p_value,
                "p_adjusted": row.p_adjusted,
                **formats.detectable_fields(row.detectable),
                "verdict": row.verdict,
                "samples": est.samples if est else 0,
                "blocks": est.blocks if est else 0,
                "block_side": est.block_side if est else None,
                "groups_per_block": est.groups if est else None,
                "precision_reached": est.precision if est else None,
                "stop_reason": est.stop_reason if est else None,
                "min_samples": row.min_samples,
                "caution": row.caution,
                NEXT_STEP_KEY: _said(sweep_row_step(result, row)),
            }
        )
    return recs


def _said(step: Any) -> str | None:
    """A next step as the one string every machine format carries, or ``None``."""
    return None if step is None else str(step)


def _ratio(est: Any, reference: float | None) -> float | None:
    """The estimate over the claimed value (the theory's when the claim is the theory)."""
    if est is None or reference is None or not math.isfinite(reference) or not reference:
        return None
    return est.var / reference


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
        **({} if result.fit_law is None else {"law": result.fit_law}),
    }


def sweep_dict(result: SweepResult) -> dict[str, Any]:
    return {
        **sweep_meta(result),
        "sampler": _sampler_json(result.sampler),
        "rows": sweep_records(result),
        "fit": _fit_record(result),
        NEXT_STEP_KEY: _said(sweep_step(result)),
    }


def _interval(lo: float, hi: float, *, valid: bool = True) -> str:
    return interval(lo, hi) if valid else "(no valid CI)"


def _claimed_column(result: SweepResult) -> bool:
    """Whether the sweep shows a claimed value beside the theory (a claim that is not it)."""
    return result.sampler is None and result.claim != "theory"


def _row_cells(row: SweepRow, confidence: float, claimed: bool = False) -> list[str]:
    """d_k, theory (or, for a sampler, the claim), [claimed,] estimate [CI], ratio (to what
    the verdict judges: the claim), scaled Var [CI], p (Holm), verdict, the error it detects,
    products."""
    est = row.estimate
    verdict = styled(row.verdict)
    # with a user's sampler there is no theory: the column holds the claim
    shown = row.claim_value if row.theory is None else row.theory.var
    shown = math.nan if shown is None else shown
    reference = row.claim_value if row.claim_value is not None else shown
    head = [str(row.dk), fmt(shown)] + ([fmt(row.claim_value)] if claimed else [])
    if est is None:
        return [*head, "no estimate: Var is infinite", "", "", "—", verdict, "—", "0"]
    lo, hi = est.confidence_interval
    slo, shi = row.scaled_confidence_interval
    valid = row.verdict != "unreliable"  # an interval exists numerically but is not valid
    ratio = est.var / reference if math.isfinite(reference) and reference else math.nan
    capped = {"max-seconds": " [yellow](time cap)[/]", "interrupted": " [yellow](partial)[/]"}.get(
        est.stop_reason, ""
    )
    return [
        *head,
        f"{fmt(est.var)} {_interval(lo, hi, valid=valid)}{capped}"
        + (" †" if row.marginal_only(1.0 - confidence) else ""),
        fmt(ratio),
        f"{fmt(row.scaled_var)} {_interval(slo, shi, valid=valid)}",
        fmt_p(row.p_adjusted),
        verdict,
        formats.detectable_cell(row.detectable),
        f"{est.samples:,}",
    ]


def _print_fitted(console: Console, build: Any, names: list[str], priorities: list[int]) -> None:
    """Print the table ``build(kept columns)`` makes, fitted to the console by
    :func:`~varcheck.output.formats.fit_columns`, and the line naming the columns left out."""
    table, dropped = formats.fit_columns(console, build, priorities)
    console.print(table)
    formats.print_dropped(console, [names[i] for i in dropped])


def sweep_title(result: SweepResult) -> str:
    if result.sampler is not None:
        return f"Var of the values of {result.sampler.label}; claim: {result.claim}"
    q, k = result.q_dist, result.k_dist
    dists = laws_text(q, k)
    if result.rho:
        dists += f", corr(q_i, k_i) = {result.rho:g}"
    return f"Var(q·k) for {dists}; claim: {result.claim}"


def laws_text(q: Any, k: Any) -> str:
    """The entry laws with the mean and variance each uses (built-in laws are standardised,
    scipy's keep their own scale): ``q, k ~ t:df=5 (mean 0, var 1)``."""

    def law(dist: Any) -> str:
        return f"{dist.spec} (mean {dist.mean:.4g}, var {dist.var:.4g})"

    return f"q, k ~ {law(q)}" if q == k else f"q ~ {law(q)}, k ~ {law(k)}"


def render_sweep_table(result: SweepResult, console: Console) -> None:
    """Print the sweep as a rich table with its header, fit line and notes."""
    from rich.table import Table

    conf = confidence_label(result.confidence)
    unit = "products" if result.sampler is None else "values"
    # what the count column counts: pairs of a block's vectors (explained in sweep --help)
    counted = "q·k pairs" if result.sampler is None else "values"
    target = (
        f"target precision ±{result.precision:.3g}"
        if result.precision is not None
        else f"{result.samples:,} {unit} per row"
    )
    if result.precision is None and result.sampler is not None:
        target = "at least " + target  # whole calls: the last one may overshoot
    if result.sampler is not None or _claimed_column(result):
        target += " · ratio = estimate / claim"
    caption = (
        f"seed {result.seed} · {conf} intervals · {target} · verdicts Holm-adjusted over "
        f"{len(result.rows)} {'row' if len(result.rows) == 1 else 'rows'} "
        f"(family-wise error ≤ {result.alpha:.3g}) · varcheck "
        f"{result.version}"
    )
    claimed = _claimed_column(result)
    # (header, justify, priority): 0 is never left out, else the lowest goes first
    columns = [
        ("d_k", "right", 0),
        # the theory holds the answer when the claim differs from it: never left out
        ("theory Var" if result.sampler is None else "claim Var", "right", 0),
        *([("claimed", "right", 0)] if claimed else []),
        (f"estimate [{conf} CI]", "right", 0),
        ("ratio", "right", 6),
        ("scaled Var [CI]", "right", 3),
        ("p (Holm)", "right", 5),
        ("verdict", "left", 0),
        ("detects", "right", 1),
        (counted, "right", 2),
    ]
    cells = [_row_cells(row, result.confidence, claimed) for row in result.rows]
    if result.sampler is not None:  # a user's values are not q·k: dividing by d_k means nothing
        shown = [i for i, c in enumerate(columns) if c[0] != "scaled Var [CI]"]
        columns = [columns[i] for i in shown]
        cells = [[row[i] for i in shown] for row in cells]

    def build(keep: list[int]) -> Table:
        table = Table(
            title=shown_text.markup(
                f"{sweep_title(result)} · seed {result.seed} · {conf} intervals"
            ),
            caption=caption,
            caption_justify="left",
        )
        for i in keep:
            name, justify, _ = columns[i]
            table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        for row in cells:
            table.add_row(*(row[i] for i in keep))
        return table

    _print_fitted(console, build, [c[0] for c in columns], [c[2] for c in columns])
    fit = result.fit
    if fit is not None:
        lo, hi = fit.confidence_interval
        source = "theory" if result.fit_law is None else "claim"
        console.print(
            f"growth law: Var ∝ d_k^b with b = {fit.slope:.4f} [{lo:.4f}, {hi:.4f}] "
            f"({source} {fit.expected:.4g}) {styled(fit.verdict)}"
        )
        if result.fit_law is not None and fit.verdict != CONSISTENT:
            console.print(shown_text.markup(f"  {result.fit_law}"), highlight=False)
    for note in sweep_notes(result):
        console.print(note)
    print_next_step(console, sweep_step(result))


def _tails_note(caution: str | None) -> str | None:
    """The table's line for a sampler's heavy-tail caution
    (:func:`~varcheck.checks.verify.sampler_tails_caution`), if any."""
    return None if caution is None else f"[yellow]caution:[/] {caution}"


def _unreliable_note(rows: Sequence[SweepRow]) -> str:
    """Why rows without a budget shortfall have no interval: the cause the theory names."""
    statuses = {r.theory.status for r in rows if r.theory is not None}
    if statuses == {"infinite-fourth-moment"}:
        cause = (
            "Var(q·k) is finite but E[(q·k)^4] is infinite (an entry distribution has an "
            "infinite fourth moment, as t with df <= 4): no number of products gives the sample "
            "variance a trustworthy interval; a law with a finite fourth moment can be tested"
        )
    elif statuses == {"extreme-kurtosis"}:
        worst = max(r.theory.kurtosis for r in rows if r.theory is not None)
        cause = (
            f"the kurtosis of q·k is {worst:.3g} (> 10^6): the sample variance converges so "
            "slowly that no run varcheck can afford gives a trustworthy interval"
        )
    else:
        cause = (
            "E[(q·k)^4] is infinite, or the kurtosis of q·k is above 10^6 (each row's reason in "
            "JSON says which); no interval for the variance can be trusted"
        )
    return f"[bold yellow]unreliable:[/] {cause}. Estimates are shown, verdicts are not."


def _heavy_tail_note(precision: float | None) -> str:
    """The caution for entry laws with an infinite sixth moment, and whether this run's
    precision is one at which the measured coverage is nominal (docs/calibration.md)."""
    head = (
        "[yellow]heavy tails:[/] an entry distribution has an infinite sixth moment, so the "
        "variance estimate has no finite skewness and its interval approaches nominal "
        "coverage slowly"
    )
    if precision is not None and precision <= 0.01:
        return f"{head}; at this run's precision (±{precision:g}) the measured coverage is nominal."
    return (
        f"{head}: expect up to about 1.5 points short of nominal at coarse precision "
        "(t:df=5 at --precision 0.03: 93.5-94.5% for 95%, docs/calibration.md), although every "
        "row drew at least the products varcheck's budget rule asks for. --precision 0.01 "
        "recovers it."
    )


def sweep_notes(result: SweepResult) -> list[str]:
    tails = _tails_note(next((r.tails_caution for r in result.rows if r.tails_caution), None))
    notes = [tails] if tails else []
    verdicts = {r.verdict for r in result.rows}
    if "infinite" in verdicts:
        notes.append(
            "[bold magenta]Var(q·k) is infinite[/] for some rows (an entry distribution has "
            "infinite variance): there is no variance to estimate, and the sample variance "
            "never settles however many products are drawn."
        )
    short = [r for r in result.rows if r.min_samples is not None]
    if short:
        needs = ", ".join(f"{r.min_samples:,} at d_k = {r.dk}" for r in short)
        notes.append(
            "[bold yellow]unreliable:[/] too few products for a valid interval where the "
            f"kurtosis of q·k is high; a valid interval needs at least {needs} "
            f"(--samples {max(r.min_samples for r in short)}, or --precision). "  # type: ignore[type-var]
            "Estimates are shown, verdicts are not."
        )
    unreliable = [
        r
        for r in result.rows
        if r.verdict == "unreliable" and r.min_samples is None and not _cut(r)
    ]
    if unreliable:
        notes.append(_unreliable_note(unreliable))
    if any(r.theory is not None and r.theory.slow_convergence for r in result.rows):
        notes.append(_heavy_tail_note(result.precision))
    if any(r.marginal_only(result.alpha) for r in result.rows):
        notes.append(formats.MARGINAL_NOTE)
    if _time_limited(r.estimate for r in result.rows):
        notes.append(_capped_note(result.rows))
        notes.append(TIME_LIMITED_NOTE)
    if result.interrupted:
        notes.append(_interrupted_note(result.rows))
    return notes


def _capped_note(rows: Sequence[SweepRow]) -> str:
    """Which rows their time cap stopped, and why a row so stopped is unreliable: it drew
    fewer blocks than a valid interval needs (the next step gives the time it needs)."""
    note = "[yellow]Some rows stopped at --max-seconds before the target precision"
    cut = [r for r in rows if _cut(r) and r.estimate.stop_reason == "max-seconds"]  # type: ignore[union-attr]
    if cut:
        which = ", ".join(f"{r.estimate.blocks} at d_k = {r.dk}" for r in cut)  # type: ignore[union-attr]
        note += (
            f"; unreliable where they drew fewer than the {MIN_BLOCKS} blocks a valid interval "
            f"needs ({which})"
        )
    return note + ".[/]"


def _interrupted_note(rows: tuple[SweepRow, ...]) -> str:
    """What an interrupted sweep shows: the rows reached, the one cut short marked partial."""
    note = "[bold yellow]Interrupted:[/] the rows above are those reached (partial)"
    if any(r.estimate is not None and r.estimate.stop_reason == "interrupted" for r in rows):
        note += (
            "; a row marked (partial) rests on the blocks drawn before the signal (with fewer "
            f"than {MIN_BLOCKS}, no interval is valid)"
        )
    return note + "."


def _cut(row: SweepRow) -> bool:
    """A row interrupted before it had the blocks a valid interval needs."""
    return row.estimate is not None and row.estimate.cut_short


def sweep_markdown(result: SweepResult) -> str:
    """The rows as a Markdown table, then the growth law in a sentence."""
    text = records_to_markdown(sweep_records(result), sweep_meta(result), sweep_title(result))
    fit = _fit_record(result)
    if fit:
        text += (
            f"\nGrowth law: slope {fit['slope']:.4f} [{fit['ci_low']:.4f}, "
            f"{fit['ci_high']:.4f}], {fit['verdict']}.\n"
        )
    return text


#: Write a sweep in one of :data:`~varcheck.output.formats.FORMATS` to ``console``.
render_sweep = formats.renderer(
    render_sweep_table, sweep_dict, sweep_records, sweep_meta, markdown=sweep_markdown
)


# --- single claims (assert) and claim files (check) ---------------------------------------------


def verify_record(result: VerifyResult) -> dict[str, Any]:
    lo, hi = result.confidence_interval
    if result.outcome == "unreliable":  # no interval is valid: none is shown
        lo = hi = math.nan
    elo, ehi = result.equivalence_interval or (None, None)
    # a probe row's kernel is its claim's "probe": the variance fields mean nothing for it (null)
    probe = result.kernel is not None
    return {
        "dk": result.dk,
        "q_dist": _spec(result.q_dist),
        "k_dist": _spec(result.k_dist),
        "rho": None if probe else result.rho,
        "sampler": None if probe else _sampler(result.sampler),
        "claim": result.claim,
        "claim_value": result.claim_value,
        "scaled": None if probe else result.scaled,
        "tolerance": result.tolerance,
        "theory_value": result.theory_value,
        "estimate": result.estimate,
        "ci_low": lo,
        "ci_high": hi,
        "equivalence_ci_low": elo,
        "equivalence_ci_high": ehi,
        "p_value": result.p_value,
        "p_equivalence": result.p_equivalence,
        "p_outside": result.p_outside,
        **formats.detectable_fields(result.detectable),
        "outcome": result.outcome,
        "reason": result.reason,
        "more_samples": result.more_samples,
        "samples": result.samples,
        "min_samples": result.min_samples,
        NEXT_STEP_KEY: _said(verify_step(result)),
    }


def verify_dict(result: VerifyResult) -> dict[str, Any]:
    """assert's JSON. Interrupted, its ``outcome`` is ``interrupted`` (the word its exit code
    follows, as in every command's JSON), and ``reason`` says what the blocks drawn by then
    decided."""
    record = list(verify_record(result).items())
    if result.interrupted:
        said = dict(record)
        said["reason"] = (
            f"interrupted: from the blocks drawn so far, {result.outcome} ({result.reason})"
        )
        said["outcome"] = INTERRUPTED
        record = list(said.items())
    after_reason = [k for k, _ in record].index("reason") + 1
    record.insert(after_reason, ("caution", result.caution))
    return {
        **formats.json_header("assert", result),
        "confidence": result.confidence,
        "time_limited": _time_limited([result.raw]),
        "interrupted": result.interrupted,
        **dict(record),
        "sampler": _sampler_json(result.sampler),
        **({} if result.sampler is None else {"law": result.law}),
    }


def _quantity(result: VerifyResult) -> str:
    if result.kernel is not None:
        return "scale"
    if result.sampler is not None:
        return "Var(values/√d_k)" if result.scaled else "Var(values)"
    return "Var(q·k/√d_k)" if result.scaled else "Var(q·k)"


def verify_paragraph(result: VerifyResult, reproduce: str | None = None, step: Any = None) -> str:
    """A plain-text account of one claim test (the pytest helper's message, JUnit details).

    ``reproduce`` replaces the ``varcheck assert`` command line that reruns the test, ``step``
    its next step (:func:`~varcheck.checks.next_steps.verify_step`'s by default).
    """
    tol = "" if result.tolerance is None else f" within ±{result.tolerance:g} (relative)"
    claimed = f"  claimed value {fmt(result.claim_value, 6)}"
    if result.sampler is None:
        claimed += f"; exact theory {fmt(result.theory_value, 6)}"
    lines = [
        f"varcheck: {result.outcome.upper()}: claim {_quantity(result)} = {result.claim}"
        f"{tol} at d_k={result.dk} ({_source(result)})",
        claimed,
        *_estimate_lines(result),
        f"  {result.reason}",
        *_detectable_lines(result),
    ]
    if result.law is not None:
        lines.append(f"  {result.law}")
    if step is None:
        step = verify_step(result)
    if step is not None:
        lines += [f"  {line}" for line in step.lines]
    lines.append(f"  reproduce: {reproduce or reproduce_command(result)}")
    return "\n".join(lines)


def _detectable_lines(result: VerifyResult) -> list[str]:
    """What the test could have caught, and for a tolerance claim how often a true claim
    passes it (with what would lift that chance when it is below 0.8)."""
    det = result.detectable
    if det is None:
        return []
    what = "a scale error" if result.kernel is not None else "an error"
    lines = [f"  this run {formats.detectable_text(det, what)}"]
    if det.power_at_claim is None:
        return lines
    shown = formats.probability_down(det.power_at_claim)
    line = f"  a true claim passes this test with probability {shown}"
    if det.power_at_claim < LOW_POWER_AT_CLAIM and result.raw is not None:
        line += f" (below {LOW_POWER_AT_CLAIM:g}: {_lift_power(result)})"
    return [*lines, line]


def _lift_power(result: VerifyResult) -> str:
    """What lifts a tolerance test's power at the claim to 0.8 (normal approximation:
    T ≥ (z_{1−α} + z_0.9) r, r the relative standard error, which falls as 1/√samples)."""
    est, tol = result.raw, result.tolerance
    r = est.se / est.var  # type: ignore[union-attr]
    need = (normal_quantile(result.confidence) + normal_quantile(0.9)) * r
    if need <= tol:  # type: ignore[operator]
        # the skewness terms, not the size, hold it below: the normal rule has no figure
        return f"more {_unit(result)} raise it"
    samples = math.ceil(result.samples * (need / tol) ** 2)  # type: ignore[operator]
    step = 10.0 ** (math.floor(math.log10(need)) - 1)  # two digits, rounded up
    wider = math.ceil(need / step) * step
    return f"use a tolerance ≥ {wider:.2g} or about {samples:,} {_unit(result)}"


def _estimate_lines(result: VerifyResult) -> list[str]:
    """The estimate with its interval(s) and p-value, or without any where none is valid."""
    unit = _unit(result)
    head = f"  estimate {fmt(result.estimate, 6)}"
    if result.outcome in ("unreliable", "infinite"):
        return [f"{head} from {result.samples:,} {unit}; no valid interval, no p-value"]
    lo, hi = result.confidence_interval
    line = (
        f"{head}, {confidence_label(result.confidence)} interval [{fmt(lo, 6)}, {fmt(hi, 6)}] "
        f"from {result.samples:,} {unit}"
    )
    if result.equivalence_interval is None:
        return [f"{line}; p = {fmt_p(result.p_value)}"]
    elo, ehi = result.equivalence_interval
    band = sorted(result.claim_value * (1 + s * result.tolerance) for s in (-1, 1))  # type: ignore[operator]
    level = confidence_label(max(2 * result.confidence - 1, 0.0))
    band_text = f"the band [{fmt(band[0], 6)}, {fmt(band[1], 6)}]"
    return [
        f"{line}; p_value = {fmt_p(result.p_value)} (two-sided, of the claimed value)",
        f"  pass needs the whole {level} interval [{fmt(elo, 6)}, {fmt(ehi, 6)}] inside "
        f"{band_text}: p_equivalence = {fmt_p(result.p_equivalence)}",  # type: ignore[arg-type]
        f"  fail needs the whole {confidence_label(result.confidence)} interval outside it: "
        f"p_outside = {fmt_p(result.p_outside)}",  # type: ignore[arg-type]
    ]


def _unit(result: VerifyResult) -> str:
    """What a test counts: q·k products, a sampler's values, or a kernel's calls."""
    if result.kernel is not None:
        return "calls"
    return "products" if result.sampler is None else "values"


def _source(result: VerifyResult) -> str:
    """Where the values come from, in words: the entry laws, the sampler or the kernel."""
    if result.kernel is not None:
        return f"kernel {result.kernel.label}, {result.samples:,} calls"
    if result.sampler is not None:
        calls = "" if result.raw is None else f", {result.raw.blocks:,} calls"
        return f"sampler {result.sampler.label}{calls}"
    dists = laws_text(result.q_dist, result.k_dist)
    return dists + (f", rho={result.rho:g}" if result.rho else "")


#: Under an assert cut short by Ctrl-C or SIGTERM (its exit code is then 130 or 143).
VERIFY_INTERRUPTED_NOTE = (
    "[bold yellow]Interrupted:[/] the estimate and outcome above are from the blocks drawn "
    "before the signal, short of the target precision (partial)."
)


def _print_verify(result: VerifyResult, console: Console) -> None:
    style = formats.VERDICT_STYLE.get(result.outcome, "")
    head, *rest = verify_paragraph(result).splitlines()
    # the paragraph holds a user's claim, sampler path and arguments: text, never markup
    for part in _hanging(shown_text.visible(head), console.width, "    "):
        styled_part = f"[{style}]{shown_text.markup(part)}[/]" if style else part
        console.print(styled_part, highlight=False, markup=bool(style))
    for line in map(shown_text.visible, rest):
        if line.startswith("    run: "):
            for part in command_lines(line, console.width):
                console.print(part, highlight=False, soft_wrap=True, markup=False)
            continue
        if line.startswith("  reproduce: "):
            # a long reproduce command stays one line to copy, whatever the width
            console.print(line, highlight=False, soft_wrap=True, markup=False)
            continue
        for part in _hanging(line, console.width, "      "):
            console.print(part, highlight=False, markup=False)
    if result.outcome in ("unreliable", "infinite"):
        console.print(
            "  (no verdict: no interval for this variance can be trusted, for the reason "
            f"above; exit {result.exit_code})"
        )
    if _time_limited([result.raw]):
        console.print("  " + TIME_LIMITED_NOTE)
    if result.interrupted:
        console.print("  " + VERIFY_INTERRUPTED_NOTE)
    if result.caution:
        console.print(f"  {_tails_note(result.caution)}")
    console.print(f"  seed {result.seed} · varcheck {result.version}", highlight=False)


def _hanging(line: str, width: int, indent: str) -> list[str]:
    """``line`` wrapped to ``width`` at spaces, its continuation lines indented by ``indent``
    (a terminal's own wrapping starts them at column 0)."""
    import textwrap

    lead = line[: len(line) - len(line.lstrip(" "))]
    return textwrap.wrap(
        line,
        width,
        initial_indent="",
        subsequent_indent=lead + indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [line]


#: Write one claim's result: JSON, or its paragraph (in every text format).
render_verify = formats.renderer(_print_verify, verify_dict)


def check_records(result: CheckResult) -> list[dict[str, Any]]:
    out = []
    for co in result.claims:
        for r in co.results:
            out.append({"name": co.spec.name, **_check_record(result, co.spec, r)})
    return out


def _check_record(result: CheckResult, spec: Any, row: VerifyResult) -> dict[str, Any]:
    """A claim file's test as :func:`verify_record` writes it, its next step naming the
    command that tests this claim alone."""
    return {
        **verify_record(row),
        NEXT_STEP_KEY: _said(check_row_step(result, spec, row)),
    }


def _check_head(result: CheckResult) -> dict[str, Any]:
    """The first keys of check's JSON and of its CSV comment line."""
    return {
        **formats.json_header("check", result, file=result.path),
        "confidence": result.confidence,
    }


def check_dict(result: CheckResult) -> dict[str, Any]:
    return {
        **_check_head(result),
        "alpha": round(1.0 - result.confidence, 12),
        "family_size": result.family_size,
        "outcome": result.outcome,
        "time_limited": _check_time_limited(result),
        "interrupted": result.interrupted,
        "claims": [
            {
                "name": co.spec.name,
                "description": co.spec.description,
                "line": co.spec.line,
                "sampler": _sampler_json(co.spec.sampler),
                "probe": None if co.spec.probe is None else co.spec.probe.kernel.as_dict(),
                "outcome": co.outcome,
                NEXT_STEP_KEY: _said(claim_step(result, co)),
                "tests": [_check_record(result, co.spec, r) for r in co.results],
            }
            for co in result.claims
        ],
    }


def _check_time_limited(result: CheckResult) -> bool:
    return _time_limited(r.raw for co in result.claims for r in co.results)


def check_marginal(result: VerifyResult) -> bool:
    """A consistency test that passes under Holm although its own interval excludes the claim
    (the sweep's † rule, :func:`~varcheck.core.verdicts.marginal_only`, on the raw p-value)."""
    if result.tolerance is not None or result.raw is None or result.claim_value is None:
        return False
    raw_claim = result.claim_value * result.dk if result.scaled else result.claim_value
    verdict = CONSISTENT if result.outcome == "pass" else result.outcome
    return marginal_only(verdict, result.raw.p_value(raw_claim), 1.0 - result.confidence)


def check_title(result: CheckResult) -> str:
    return f"varcheck check {result.path}"


def render_check_table(result: CheckResult, console: Console) -> None:
    from rich.table import Table

    caption = (
        f"seed {result.seed} · {confidence_label(result.confidence)} intervals · Holm over "
        f"{result.family_size} tests (family-wise error ≤ {1 - result.confidence:.3g}) · "
        f"varcheck {result.version}"
    )
    tolerances = any(co.spec.tolerance is not None for co in result.claims)
    # (header, priority: 0 never left out), in order; claim names and the claim fold
    columns = [
        ("claim", 0),
        ("asserts", 3),
        ("d_k", 0),
        ("claimed", 0),
        ("estimate [CI]", 0),
        ("p (Holm)", 2),
        ("outcome", 0),
        ("detects", 1),
    ]
    cells = [
        [
            shown_text.markup(co.spec.name) if i == 0 else "",
            shown_text.markup(_asserts(co.spec, r)) if i == 0 else "",
            str(r.dk),
            # the band of a tolerance claim in a column never left out (asserts may be)
            fmt(r.claim_value) + ("" if r.tolerance is None else f" ±{100 * r.tolerance:.3g}%"),
            f"{fmt(r.estimate)} "
            f"{_interval(*r.confidence_interval, valid=r.outcome != 'unreliable')}"
            + (" †" if check_marginal(r) else ""),
            fmt_p(r.p_values.p_fail),
            styled(r.outcome),
            formats.detectable_cell(r.detectable),
        ]
        for co in result.claims
        for i, r in enumerate(co.results)
    ]

    def build(keep: list[int]) -> Table:
        table = Table(
            title=shown_text.markup(check_title(result)), caption=caption, caption_justify="left"
        )
        for i in keep:
            name = columns[i][0]
            if name == "claim":
                table.add_column(name, overflow="fold", max_width=24)
            elif name == "asserts":
                table.add_column(name, max_width=36, overflow="fold")
            else:
                justify = "left" if name == "outcome" else "right"
                table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        for row in cells:
            table.add_row(*(row[i] for i in keep))
        return table

    _print_fitted(console, build, [c[0] for c in columns], [c[1] for c in columns])
    _check_notes(result, console, tolerances)


def _check_notes(result: CheckResult, console: Console, tolerances: bool) -> None:
    """What follows check's table: the outcome counts, notes, and each claim's next step."""
    counts: dict[str, int] = {}
    for co in result.claims:
        counts[co.outcome] = counts.get(co.outcome, 0) + 1
    summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
    console.print(f"{len(result.claims)} claims: {summary} → {styled(result.outcome)}")
    if any(check_marginal(r) for co in result.claims for r in co.results):
        console.print(formats.MARGINAL_NOTE)
    tails = next((r.caution for co in result.claims for r in co.results if r.caution), None)
    if tails:
        console.print(_tails_note(tails))
    if tolerances:
        console.print(
            "p (Holm): the adjusted p-value of the test a claim can fail on: of the claimed value; "
            "with ± T, that the quantity lies outside claim × [1 − T, 1 + T] (p_outside in JSON).",
            width=min(console.width, 100),
        )
    for co in result.claims:
        step = claim_step(result, co)
        print_next_step(console, step, co.spec.name)
    if _check_time_limited(result):
        console.print(TIME_LIMITED_NOTE)
    if result.interrupted:
        console.print("[bold yellow]Interrupted:[/] the claims above are those finished (partial).")


def _asserts(spec: Any, result: VerifyResult) -> str:
    """The claim in words for check's table: the quantity, the claim, and the sampler if any."""
    tol = "" if spec.tolerance is None else f" ± {spec.tolerance:g}"
    text = f"{_quantity(result)} = {spec.claim.text}{tol}"
    if result.sampler is not None:
        text += f" of {result.sampler.label}"
    return text


def check_meta(result: CheckResult) -> dict[str, Any]:
    return {
        **_check_head(result),
        "family_size": result.family_size,
        "outcome": result.outcome,
        "time_limited": _check_time_limited(result),
        "interrupted": result.interrupted,
    }


#: Write a claim file's results in one of :data:`~varcheck.output.formats.FORMATS`.
render_check = formats.renderer(
    render_check_table, check_dict, check_records, check_meta, title=check_title
)


def _junit_reading(spec: Any, row: VerifyResult) -> str:
    """``; × 1/2 of the expected scale: nearest law …`` for a probe row, else nothing."""
    if spec.probe is None:
        return ""
    from .probe_claims import probe_reading

    return f"; {probe_reading(spec.probe, row)}"


def _junit_paragraph(result: CheckResult, spec: Any, row: VerifyResult, rerun: str) -> str:
    """A row's paragraph in JUnit: a probe row's names its nearest law and the ``varcheck
    probe`` command that shows its numbers, then the file's rerun."""
    step = check_row_step(result, spec, row)
    if spec.probe is None:
        return verify_paragraph(row, rerun, step)
    from .probe_claims import probe_command, probe_reading

    probe = probe_command(spec.probe, row, os.path.dirname(result.path))
    text = verify_paragraph(row, probe, step)
    head, _, reproduce = text.rpartition("\n")
    reading = f"  {probe_reading(spec.probe, row)}"
    return "\n".join([head, reading, reproduce, f"  rerun the file: {rerun}"])


def _junit_properties(case: Any, rows: tuple[VerifyResult, ...]) -> None:
    """Each row's detectable-error fields as properties of its test case, named
    ``d_k=64 detectable_error`` (the JSON's keys; a row without a valid test has none)."""
    import xml.etree.ElementTree as ET

    props = None
    for r in rows:
        for key, value in formats.detectable_fields(r.detectable).items():
            if value is None:
                continue
            props = ET.SubElement(case, "properties") if props is None else props
            shown = str(value).lower() if isinstance(value, bool) else repr(value)
            ET.SubElement(props, "property", {"name": f"d_k={r.dk} {key}", "value": shown})


def check_to_junit(result: CheckResult) -> str:
    """JUnit XML: one test case per claim; fail → <failure>, inconclusive → <failure
    type="inconclusive">, no valid test → <error>.

    Names, messages and paragraphs pass through :func:`~varcheck.output.text.xml`: a control
    character or a byte XML forbids in a claim file cannot make the report ill-formed."""
    import xml.etree.ElementTree as ET

    failures = sum(co.outcome in ("fail", "inconclusive") for co in result.claims)
    errors = sum(co.outcome in ("unreliable", "infinite") for co in result.claims)
    errors += result.interrupted
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        {
            "name": shown_text.xml(check_title(result)),
            "tests": str(len(result.claims) + result.interrupted),
            "failures": str(failures),
            "errors": str(errors),
            "skipped": "0",
        },
    )
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("seed", result.seed),
        ("confidence", result.confidence),
        ("family_size", result.family_size),
        ("varcheck", result.version),
    ):
        ET.SubElement(props, "property", {"name": key, "value": str(value)})
    for co in result.claims:
        case = ET.SubElement(
            suite, "testcase", {"classname": "varcheck.check", "name": shown_text.xml(co.spec.name)}
        )
        _junit_properties(case, co.results)
        rerun = rerun_command(result)
        details = shown_text.xml(
            "\n\n".join(_junit_paragraph(result, co.spec, r, rerun) for r in co.results),
            multiline=True,
        )
        bad = [r for r in co.results if r.outcome != "pass"]
        if co.outcome == "pass":
            ET.SubElement(case, "system-out").text = details
            continue
        first = worst(bad, key=lambda r: r.outcome)
        message = f"{co.outcome}: {first.reason}{_junit_reading(co.spec, first)} (d_k={first.dk})"
        tag = "error" if co.outcome in ("unreliable", "infinite") else "failure"
        ET.SubElement(
            case, tag, {"message": shown_text.xml(message), "type": co.outcome}
        ).text = details
    if result.interrupted:
        case = ET.SubElement(
            suite, "testcase", {"classname": "varcheck.check", "name": "interrupted"}
        )
        ET.SubElement(
            case,
            "error",
            {
                "message": "interrupted: only the claims above were checked",
                "type": "interrupted",
            },
        )
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )
