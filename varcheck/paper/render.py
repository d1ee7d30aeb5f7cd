"""Rendering the paper commands (project, beta, train): pure functions of their results."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.estimation import MIN_BLOCKS
from ..core.next_step import NEXT_STEP_KEY
from ..output import formats
from ..output import text as shown_text
from ..output.formats import Column, confidence_label, fmt, fmt_p, interval, styled

if TYPE_CHECKING:
    from rich.console import Console

    from .beta import BetaReport
    from .projection import ProjectionResult, ProjectionRow
    from .training import TrainResult, TrainStep

__all__ = [
    "ProjectCells",
    "project_cells",
    "project_table_rows",
    "project_meta",
    "project_records",
    "project_notes",
    "project_dict",
    "render_project",
    "beta_meta",
    "beta_records",
    "beta_dict",
    "render_beta",
    "train_meta",
    "train_records",
    "train_summary",
    "train_dict",
    "train_step_cells",
    "train_headers",
    "render_train",
]

#: How tables name the σ of the weights (``sigma_w_kind`` in JSON).
_KIND = {"rms": "RMS"}


def print_fitted(
    console: Console,
    title: str,
    caption: str | None,
    columns: list[Column],
    rows: list[list[str]],
) -> list[str]:
    """Print a table that fits the console, headers wrapping at their spaces before a column
    goes (:func:`~varcheck.output.formats.fit_columns`); return the headers left out, for
    :func:`~varcheck.output.formats.print_dropped`."""
    table, dropped = formats.fit_rows(
        console,
        title,
        caption,
        columns,
        rows,
        wrap_headers=True,
        padding=(0, 0, 0, 1),
        show_edge=False,
        fold=True,
    )
    console.print(table)
    return dropped


# --- project -----------------------------------------------------------------------------------


def project_meta(result: ProjectionResult) -> dict[str, Any]:
    return {
        **formats.json_header("project", result),
        "dx": result.dx,
        "dk": result.dk,
        "init": result.init,
        "init_sd": result.init_sd,
        "x_dist": result.x.spec,
        "sigma_x": result.x.sigma,
        "x_kurtosis": result.x.kurtosis,
        "sigma_w_kind": result.sigma_w_kind,
        "tokens": result.tokens,
        "confidence": result.confidence,
        "precision": result.precision,
        "blocks": result.blocks,
        "max_seconds": result.max_seconds,
        "time_limited": result.time_limited,
        "interrupted": result.interrupted,
    }


def project_records(result: ProjectionResult) -> list[dict[str, Any]]:
    recs = []
    for row in result.rows:
        est = row.estimate
        lo, hi = est.confidence_interval if est else (math.nan, math.nan)
        if row.verdict == "unreliable":  # an interval exists numerically but is not valid
            lo = hi = math.nan
        mlo, mhi = est.mean_confidence_interval if est else (math.nan, math.nan)
        recs.append(
            {
                "section": row.section,
                "case": row.case,
                "claim": row.claim,
                "role": row.role,
                "predicted_var": row.predicted_var,
                "predicted_mean": row.predicted_mean,
                "var": est.var if est else None,
                "ci_low": lo,
                "ci_high": hi,
                "ratio": row.ratio,
                "mean": est.mean if est else None,
                "mean_ci_low": mlo,
                "mean_ci_high": mhi,
                "beta": row.beta,
                "logit_var_at_beta": row.logit_var_at_beta,
                "p_value": row.p_value,
                "p_adjusted": row.p_adjusted,
                "verdict": row.verdict,
                "samples": est.samples if est else 0,
                "blocks": est.blocks if est else 0,
                "precision_reached": est.precision if est else None,
                "stop_reason": est.stop_reason if est else None,
                "min_blocks": row.min_blocks,
                "min_samples": row.min_samples,
            }
        )
    return recs


def _section_records(result: ProjectionResult) -> list[dict[str, Any]]:
    """One record per weight setting: every field of :class:`ProjectionSection`, in its order."""
    return [dataclasses.asdict(s) for s in result.sections]


def project_title(result: ProjectionResult) -> str:
    return (
        f"q = x W_q, k = x' W_k: d_x = {result.dx}, d_k = {result.dk}, init {result.init} "
        f"(σ_W = {fmt(result.init_sd)}), x ~ {result.x.spec} with σ_X = {fmt(result.x.sigma)}"
    )


_CASE_LABEL = {"different-tokens": "diff", "same-token": "same"}
_CASE_LONG = {"different-tokens": "different", "same-token": "same"}
_SECTION_SHORT = {
    "random-weights": "random",
    "fixed-draw": "draw",
    "aligned": "aligned",
    "rank-one": "rank-1",
}
_CLAIM_SHORT = {
    "relaxed": "relaxed",
    "same-token": "same-token",
    "sigma-based": "σ-based",
    "exact": "exact",
}


#: Marks on an estimate that stopped before its target (explained under the table).
_STOP_MARK = {"max-seconds": "*", "max-blocks": "*", "interrupted": "‡"}


class ProjectCells(NamedTuple):
    """One row of a project result as the cells of its tables (see :func:`project_cells`)."""

    weights: str
    case: str
    prediction: str
    role: str
    predicted_var: str
    estimate: str
    ratio: str
    p_adjusted: str
    verdict: str
    beta: str
    var_at_beta: str


def project_cells(
    row: ProjectionRow,
    *,
    short_labels: bool = True,
    digits: int = 3,
    verdict: Callable[[str], str] = styled,
    alpha: float | None = None,
) -> ProjectCells:
    """The cells of one project row: labels, prediction, estimate with its interval, verdict, β.

    The terminal tables take the defaults (short labels, ratios to 3 digits, a rich-styled
    verdict); docs/paper.md takes full labels, 4 digits and its own verdict markup. With
    ``alpha``, a row whose own interval excludes its prediction but Holm keeps is marked †.
    """
    est = row.estimate
    if short_labels:
        labels = (
            _SECTION_SHORT.get(row.section, row.section),
            _CASE_LABEL[row.case],
            _CLAIM_SHORT[row.claim],
        )
    else:
        labels = (row.section, _CASE_LONG[row.case], row.claim)
    if est is None:
        measured = ("—", "", "—")
    else:
        capped = _STOP_MARK.get(est.stop_reason, "")
        dagger = " †" if alpha is not None and row.marginal_only(alpha) else ""
        # an unreliable row's interval exists numerically but is not valid: not shown
        shown_ci = "" if row.verdict == "unreliable" else f" {interval(*est.confidence_interval)}"
        measured = (
            f"{fmt(est.var)}{shown_ci}{capped}{dagger}",
            fmt(row.ratio, digits),
            fmt_p(row.p_adjusted),
        )
    return ProjectCells(
        *labels,
        row.role,
        fmt(row.predicted_var),
        *measured,
        verdict(row.verdict),
        fmt(row.beta),
        fmt(row.logit_var_at_beta, digits),
    )


def project_table_rows(
    result: ProjectionResult,
    *,
    short_labels: bool = True,
    digits: int = 3,
    verdict: Callable[[str], str] = styled,
) -> list[ProjectCells]:
    """:func:`project_cells` of every row of ``result``: the project table, written once."""
    return [
        project_cells(
            row, short_labels=short_labels, digits=digits, verdict=verdict, alpha=result.alpha
        )
        for row in result.rows
    ]


def _mean_cell(row: ProjectionRow) -> str:
    est = row.estimate
    if est is None:
        return "—"
    return f"{fmt(est.mean, 3)} ± {fmt(est.mean_confidence_interval.high - est.mean, 1)}"


def _shortfall_note(result: ProjectionResult) -> str | None:
    """The note naming the blocks each setting short of the budget rule needs (None if none)."""
    needs = {(r.section, r.case): r.min_blocks for r in result.rows if r.min_blocks is not None}
    if not needs:
        return None
    said = ", ".join(
        f"{_SECTION_SHORT.get(sec, sec)} · {_CASE_LABEL[case]}: {n:,}"
        for (sec, case), n in needs.items()
    )
    return (
        "[bold yellow]unreliable:[/] too few blocks for a valid interval where the logits' "
        f"kurtosis is high; a valid interval needs at least {said} blocks "
        f"(--blocks {max(needs.values())}, or --precision). Estimates are shown, intervals "
        "and verdicts are not."
    )


def project_notes(result: ProjectionResult) -> list[str]:
    """Plain-language notes under the table (rich markup)."""
    notes = [
        "relaxed = (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k (σ-based: the same with the "
        f"{_KIND[result.sigma_w_kind]} of the fixed W's entries, so that the different-token "
        "exact ≤ d_k · σ-based); "
        "same-token = relaxed · (1 + (κ−1)/d_x) "
        f"with input kurtosis κ = {fmt(result.x.kurtosis)}; exact = σ_X⁴‖W_q W_kᵀ‖_F² "
        "(different tokens), (μ₄−3σ_X⁴)Σ A_aa² + σ_X⁴(‖A‖_F² + tr A²) with mean σ_X² tr A "
        "(same token), A = W_q W_kᵀ.",
        "β is 1/√(predicted Var); Var(β·q·k) is the Monte-Carlo variance of the logits "
        "under that β (1 when the prediction is right). case: diff = q and k from independent "
        "input rows, same = from one row (the diagonal of self-attention).",
    ]
    findings = result.findings
    checks_rejected = result.rejected_checks
    notes.append(
        "role: [bold]check[/] rows hold predictions derived to be exact in their setting; "
        "a rejection there sets exit status 1. [bold]finding[/] rows apply the paper's formula "
        "where it is not exact (same token; σ-based for one fixed W); they are tested the same "
        "way but do not set the exit status."
    )
    if findings:
        notes.append(
            f"Findings: the paper's formula is rejected in {len(findings)} of "
            f"{sum(r.role == 'finding' for r in result.rows)} finding rows ("
            + ", ".join(
                f"{r.section} · {_CASE_LABEL[r.case]}: ratio {fmt(r.ratio, 3)}" for r in findings
            )
            + ")."
        )
    if any(r.marginal_only(result.alpha) for r in result.rows):
        notes.append(formats.MARGINAL_NOTE)
    if checks_rejected:
        notes.append(
            "[bold red]A check is rejected[/]: a derived prediction disagrees with the "
            "simulation (exit status 1); please report it with the command line and seed."
        )
    verdicts = {r.verdict for r in result.rows}
    if "infinite" in verdicts:
        notes.append(
            "[bold magenta]infinite:[/] the input law lacks the moment this variance needs "
            "(σ_X for any logit, μ₄ for the same-token one); nothing to estimate."
        )
    short = _shortfall_note(result)
    if short:
        notes.append(short)
    if any(r.verdict == "unreliable" and r.min_blocks is None for r in result.rows):
        notes.append(
            "[bold yellow]unreliable:[/] no verdict: the variance is finite but the estimator's "
            "own variance is not (needs E\\[x⁴] for different tokens, E\\[x⁸] for one token), or "
            f"the time limit stopped the setting before {MIN_BLOCKS} blocks."
        )
    stops = {r.estimate.stop_reason for r in result.rows if r.estimate is not None}
    if "max-blocks" in stops:
        notes.append(
            "[yellow]*[/] stopped at the limit of 1,048,576 blocks per setting before the "
            "target precision (the interval is still valid, only wider)."
        )
    if result.time_limited:
        notes.append(
            "[yellow]* Time-limited:[/] some settings stopped at --max-seconds (or their share "
            "of the 10-minute limit) before the target precision, so these numbers depend on "
            "this machine's speed."
        )
    if result.interrupted:
        notes.append(
            "[bold yellow]Interrupted (partial):[/] the rows above are the weight settings "
            "reached; ‡ marks rows whose interval uses the blocks drawn before the signal."
        )
    return notes


_PROJECT_COLUMNS = [
    Column("weights", "left"),
    Column("case", "left"),
    Column("prediction", "left"),
    Column("role", "left", priority=3),
    Column("pred. Var", priority=4),
    Column("MC Var [CI]"),
    Column("ratio", priority=2),
    Column("p (Holm)", priority=1),
    Column("verdict", "left"),
]


def render_project_table(result: ProjectionResult, console: Console) -> None:
    conf = confidence_label(result.confidence)
    target = (
        f"target precision ±{result.precision:.3g}"
        if result.precision is not None
        else f"{result.blocks:,} blocks per setting"
    )
    columns = list(_PROJECT_COLUMNS)
    columns[5] = Column(f"MC Var [{conf} CI]")
    cells = project_table_rows(result)
    title = project_title(result) + (" (interrupted: partial)" if result.interrupted else "")
    caption = (
        f"seed {result.seed} · {conf} intervals over independent blocks ({result.tokens} "
        f"input rows each) · {target} · verdicts Holm-adjusted over {len(result.rows)} rows "
        f"(family-wise error ≤ {result.alpha:.3g}) · varcheck {result.version}"
    )
    dropped = print_fitted(console, title, caption, columns, [list(c[:9]) for c in cells])
    beta_rows = [
        [
            c.weights,
            c.case,
            c.prediction,
            c.beta,
            c.var_at_beta,
            fmt(row.predicted_mean, 3),
            _mean_cell(row),
        ]
        for row, c in zip(result.rows, cells, strict=True)
    ]
    dropped += print_fitted(
        console,
        "The β each prediction recommends, and the mean of q·k",
        None,
        [
            Column("weights", "left"),
            Column("case", "left"),
            Column("prediction", "left"),
            Column("β"),
            Column("MC Var(βq·k)", priority=3),
            Column("pred. mean", priority=1),
            Column(f"MC mean ± {conf}", priority=2),
        ],
        beta_rows,
    )
    kind = _KIND[result.sigma_w_kind]
    for sec in result.sections:
        if math.isnan(sec.frobenius2):
            sigmas, extra = f"init σ_W = {fmt(sec.sigma_wq)}", ""
        else:
            sigmas = f"σ_Wq ({kind}) = {fmt(sec.sigma_wq)}, σ_Wk ({kind}) = {fmt(sec.sigma_wk)}"
            extra = f", ‖W_q W_kᵀ‖_F² = {fmt(sec.frobenius2)}, tr W_q W_kᵀ = {fmt(sec.trace)}"
        console.print(f"[bold]{sec.name}[/]: {sec.description}; {sigmas}{extra}")
    for note in project_notes(result):
        console.print(note)
    formats.print_dropped(console, dropped)
    from .next_steps import project_step

    formats.print_next_step(console, project_step(result))


def project_dict(result: ProjectionResult) -> dict[str, Any]:
    from .next_steps import project_step

    step = project_step(result)
    return {
        **project_meta(result),
        "rows": project_records(result),
        "sections": _section_records(result),
        NEXT_STEP_KEY: None if step is None else str(step),
    }


#: Write a project result as table, json, csv or markdown.
render_project = formats.renderer(
    render_project_table, project_dict, project_records, project_meta, title=project_title
)


# --- beta --------------------------------------------------------------------------------------


def beta_meta(report: BetaReport) -> dict[str, Any]:
    return {
        **formats.json_header("beta", report),
        "path": report.path,
        "sigma_x": report.sigma_x,
        "sigma_x_source": report.sigma_x_source,
        "sigma_w_kind": report.sigma_w_kind,
    }


def beta_records(report: BetaReport) -> list[dict[str, Any]]:
    return [
        {
            "head": h.head,
            "dx": h.dx,
            "dk": h.dk,
            "sigma_wq": h.sigma_wq,
            "sigma_wk": h.sigma_wk,
            "var_paper": h.var_paper,
            "var_exact": h.var_exact,
            "exact_over_paper": h.exact_over_paper,
            "beta_default": h.beta_default,
            "beta_paper": h.beta_paper,
            "beta_exact": h.beta_exact,
        }
        for h in report.heads
    ]


def beta_title(report: BetaReport) -> str:
    h0 = report.heads[0]
    return (
        f"Recommended β per head for {report.path}: d_x = {h0.dx}, d_k = {h0.dk}, "
        f"σ_X = {fmt(report.sigma_x)} ({report.sigma_x_source})"
    )


def beta_dict(report: BetaReport) -> dict[str, Any]:
    return {**beta_meta(report), "rows": beta_records(report)}


def render_beta_table(report: BetaReport, console: Console) -> None:
    kind = _KIND[report.sigma_w_kind]
    rows = [
        [
            str(h.head),
            fmt(h.sigma_wq),
            fmt(h.sigma_wk),
            fmt(h.var_paper),
            fmt(h.var_exact),
            fmt(h.exact_over_paper),
            fmt(h.beta_default),
            fmt(h.beta_paper),
            fmt(h.beta_exact),
        ]
        for h in report.heads
    ]
    dropped = print_fitted(
        console,
        shown_text.markup(beta_title(report)),  # the file's path: text, never markup
        (
            "nothing is drawn · β_paper = 1/√[(d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k], σ_W the "
            "entries' RMS · β_exact = 1/(σ_X² ‖W_q W_kᵀ‖_F), exact for different tokens with "
            f"i.i.d. zero-mean inputs · exact/σ-based ≤ d_k · varcheck {report.version}"
        ),
        [
            Column("head"),
            Column(f"σ_Wq ({kind})", priority=3),
            Column(f"σ_Wk ({kind})", priority=2),
            Column("Var σ-based", priority=5),
            Column("Var exact", priority=6),
            Column("exact/σ-based", priority=4),
            Column("1/√d_k", priority=1),
            Column("β paper"),
            Column("β exact"),
        ],
        rows,
    )
    formats.print_dropped(console, dropped)


#: Write per-head β as table, json, csv or markdown.
render_beta = formats.renderer(
    render_beta_table, beta_dict, beta_records, beta_meta, title=beta_title
)


# --- train -------------------------------------------------------------------------------------


def train_meta(result: TrainResult) -> dict[str, Any]:
    cfg = result.config
    return {
        **formats.json_header("train", result),
        "steps": cfg.steps,
        "lr": cfg.lr,
        "dx": cfg.dx,
        "dk": cfg.dk,
        "dv": cfg.dv,
        "memory": cfg.memory,
        "keys": cfg.keys,
        "values": cfg.values,
        "batch": cfg.batch,
        "eval_size": cfg.eval_size,
        "every": cfg.every,
        "init": cfg.init,
        "confidence": cfg.confidence,
        "sigma_w_kind": result.sigma_w_kind,
        "schemes": ",".join(r.scheme for r in result.runs),
        "max_seconds": cfg.max_seconds,
        "time_limited": result.time_limited,
        "interrupted": result.interrupted,
    }


def train_records(result: TrainResult) -> list[dict[str, Any]]:
    recs = []
    for run in result.runs:
        for s in run.steps:
            recs.append(
                {
                    "scheme": run.scheme,
                    "step": s.step,
                    "beta": s.beta,
                    "sigma_x": s.sigma_x,
                    "sigma_wq": s.sigma_wq,
                    "sigma_wk": s.sigma_wk,
                    "predicted_var_paper": s.predicted_var_paper,
                    "predicted_var_exact": s.predicted_var_exact,
                    "measured_var": s.measured_var,
                    "measured_var_ci_low": s.measured_var_ci.low,
                    "measured_var_ci_high": s.measured_var_ci.high,
                    "entropy": s.entropy,
                    "match_weight": s.match_weight,
                    "loss": s.loss,
                    "accuracy": s.accuracy,
                }
            )
    return recs


def train_summary(result: TrainResult) -> list[dict[str, Any]]:
    """One record per scheme: first and last σ_W, the range of the measured logit variance."""
    out = []
    for run in result.runs:
        first, last = run.steps[0], run.final
        measured = [s.measured_var for s in run.steps]
        out.append(
            {
                "scheme": run.scheme,
                "sigma_wq_start": first.sigma_wq,
                "sigma_wq_end": last.sigma_wq,
                "sigma_wk_start": first.sigma_wk,
                "sigma_wk_end": last.sigma_wk,
                "measured_var_start": first.measured_var,
                "measured_var_min": min(measured),
                "measured_var_max": max(measured),
                "measured_var_end": last.measured_var,
                "measured_var_end_ci_low": last.measured_var_ci.low,
                "measured_var_end_ci_high": last.measured_var_ci.high,
                "entropy_end": last.entropy,
                "match_weight_end": last.match_weight,
                "loss_end": last.loss,
                "accuracy_end": last.accuracy,
            }
        )
    return out


_SCHEME_LABEL = {
    "fixed": "fixed β = 1/√d_k",
    "paper": "adaptive β, paper (σ-based)",
    "exact": "adaptive β, exact (‖W_q W_kᵀ‖_F)",
}


def train_title(result: TrainResult) -> str:
    cfg = result.config
    return (
        f"Key-value lookup: {cfg.memory} items, {cfg.values} values, d_x = {cfg.dx}, "
        f"d_k = {cfg.dk}, init {cfg.init}, Adam lr {cfg.lr:g}, batch {cfg.batch}"
    )


def train_dict(result: TrainResult) -> dict[str, Any]:
    return {
        **train_meta(result),
        "rows": train_records(result),
        "summary": train_summary(result),
    }


def train_step_cells(step: TrainStep, *, attention_decimals: int = 3) -> list[str]:
    """The cells of one recorded step, from ``step`` to accuracy (the train table, written once).

    The measured variance carries its interval. ``attention_decimals``: decimals of the
    attention entropy and matching weight (docs/paper.md shows 2).
    """
    return [
        str(step.step),
        fmt(step.beta, 3),
        fmt(step.sigma_wq, 3),
        fmt(step.sigma_wk, 3),
        fmt(step.predicted_var_paper, 3),
        fmt(step.predicted_var_exact, 3),
        f"{fmt(step.measured_var, 3)} {interval(*step.measured_var_ci, digits=3)}",
        f"{step.entropy:.{attention_decimals}f}",
        f"{step.match_weight:.{attention_decimals}f}",
        f"{step.loss:.3f}",
        f"{step.accuracy:.3f}",
    ]


def train_headers(result: TrainResult) -> list[str]:
    """Column names of the train table, for the cells of :func:`train_step_cells`."""
    kind = _KIND[result.sigma_w_kind]
    return [
        "step",
        "β",
        f"σ_Wq ({kind})",
        f"σ_Wk ({kind})",
        "Var pred. paper",
        "Var pred. exact",
        f"Var meas. [{confidence_label(result.config.confidence)} CI]",
        "entropy",
        "w(match)",
        "loss",
        "acc.",
    ]


_TRAIN_PRIORITY = (0, 0, 2, 1, 5, 6, 0, 4, 3, 7, 8)


def render_train_tables(result: TrainResult, console: Console) -> None:
    console.print(f"[bold]{train_title(result)}[/]")
    headers = zip(train_headers(result), _TRAIN_PRIORITY, strict=True)
    columns = [Column(h, priority=p) for h, p in headers]
    dropped: list[str] = []
    for run in result.runs:
        dropped += print_fitted(
            console,
            _SCHEME_LABEL[run.scheme] + (" (interrupted: partial)" if result.interrupted else ""),
            (
                f"seed {result.seed} · measured at each step on {result.config.eval_size} fresh "
                "sequences (the same for every scheme; intervals over sequences as independent "
                f"blocks) · varcheck {result.version}"
            ),
            columns,
            [train_step_cells(s) for s in run.steps],
        )
    console.print(
        "Var columns are of the logits β·q·k (the softmax input), so 1 is the target. "
        "pred. (paper) = β²(d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k, σ_W the entries' "
        f"{_KIND[result.sigma_w_kind]}; pred. (exact) = β² σ_X⁴ ‖W_q W_kᵀ‖_F², never above "
        "d_k times pred. (paper); entropy in nats (uniform attention: "
        f"{fmt(math.log(result.config.memory), 3)})."
    )
    if result.time_limited:
        console.print(
            f"[yellow]Time-limited:[/] --max-seconds {result.config.max_seconds:g} stopped the "
            f"runs at step {result.runs[0].final.step:,} of {result.config.steps:,} (recorded "
            "above), so where they stop depends on this machine's speed."
        )
    if result.interrupted:
        last = max((run.final.step for run in result.runs), default=None)
        reached = "before any step was recorded" if last is None else f"at step {last:,}"
        console.print(
            f"[bold yellow]Interrupted (partial):[/] stopped {reached} of "
            f"{result.config.steps:,}; the rows above are the steps recorded so far."
        )
    formats.print_dropped(console, dropped)


#: Write a training result as tables over steps, json, csv or markdown.
render_train = formats.renderer(
    render_train_tables, train_dict, train_records, train_meta, title=train_title
)
