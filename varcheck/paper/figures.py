"""Figures for the paper commands (needs ``varcheck[plot]``): pure functions of a result.

Colours are from the Okabe-Ito palette (distinct under the common colour-vision deficiencies),
and every colour is paired with a marker or line style and named in a legend, so no figure
relies on colour alone. Titles carry the settings, the confidence level and the seed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..output.figure_style import figure_size, projected
from ..output.figures import require_matplotlib, save_figure, title_figure
from ..output.formats import confidence_label

if TYPE_CHECKING:
    from .projection import ProjectionResult
    from .training import TrainResult

__all__ = ["plot_train", "plot_project", "PALETTE"]

#: Okabe-Ito colours by role.
PALETTE = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "green": "#009E73",
    "orange": "#E69F00",
    "grey": "#777777",
}
_COLORS = {"fixed": PALETTE["vermillion"], "paper": PALETTE["blue"], "exact": PALETTE["green"]}
_LABELS = {
    "fixed": "fixed β = 1/√d_k",
    "paper": "adaptive β (paper)",
    "exact": "adaptive β (exact)",
}


@projected
def plot_train(result: TrainResult, path: str) -> None:
    """Four titled panels over steps: σ_W, logit variance (measured with its interval band, and
    predicted), entropy, accuracy; reference lines labelled in the legends."""
    plt = require_matplotlib()
    cfg = result.config
    fig, axes = plt.subplots(2, 2, figsize=figure_size(12.8, 7.2))
    ax_sigma, ax_var, ax_ent, ax_acc = axes.ravel()
    for run in result.runs:
        steps = [s.step for s in run.steps]
        color, label = _COLORS[run.scheme], _LABELS[run.scheme]
        ax_sigma.plot(steps, [s.sigma_wq for s in run.steps], "-", color=color, label=label)
        ax_sigma.plot(steps, [s.sigma_wk for s in run.steps], ":", color=color)
        ax_var.plot(steps, [s.measured_var for s in run.steps], "-", color=color, label=label)
        low, high = zip(*(s.measured_var_ci for s in run.steps), strict=True)
        ax_var.fill_between(steps, low, high, color=color, alpha=0.25, lw=0)
        ax_var.plot(steps, [s.predicted_var_paper for s in run.steps], "--", color=color, lw=1)
        ax_ent.plot(steps, [s.entropy for s in run.steps], "-", color=color, label=label)
        ax_acc.plot(steps, [s.accuracy for s in run.steps], "-", color=color, label=label)
    kind = "RMS" if result.sigma_w_kind == "rms" else result.sigma_w_kind
    ax_sigma.set_title(f"σ_W (entries' {kind}): W_q solid, W_k dotted")
    ax_sigma.set_ylabel("σ_W")
    level = confidence_label(cfg.confidence)
    refs = [ax_var.axhline(1.0, color=PALETTE["grey"], lw=0.8, label="target: 1")]
    ax_var.set_yscale("log")
    _readable_log_ticks(ax_var.yaxis)
    ax_var.set_ylabel("Var(β q·k)")
    ax_var.set_title(
        f"logit variance: measured, {level} interval band\n(solid); paper's prediction (dashed)"
    )
    refs.append(
        ax_ent.axhline(
            math.log(cfg.memory), color=PALETTE["grey"], lw=0.8, label="uniform attention: log M"
        )
    )
    ax_ent.set_title("attention entropy")
    ax_ent.set_ylabel("nats")
    refs.append(
        ax_acc.axhline(1.0 / cfg.values, color=PALETTE["grey"], lw=0.8, label="chance: 1/values")
    )
    ax_acc.set_title("accuracy on fresh evaluation sequences")
    ax_acc.set_ylabel("accuracy")
    for ax in axes.ravel():
        ax.set_xlabel("step")
    if result.runs:
        ax_sigma.legend(loc="best")
    for ax, ref in zip((ax_var, ax_ent, ax_acc), refs, strict=True):
        ax.legend(handles=[ref], loc="best")
    stopped = ""
    last = max((run.final.step for run in result.runs), default=0)
    if result.interrupted:
        stopped = f" — interrupted at step {last:,} (partial)"
    elif result.time_limited:
        stopped = f" — time-limited at step {last:,}"
    title_figure(
        fig,
        f"varcheck train: key-value lookup, d_x = {cfg.dx}, d_k = {cfg.dk}, init {cfg.init}, "
        f"{cfg.memory} items, {level} intervals",
        result,
        stopped=stopped,
    )
    save_figure(fig, path)


def _readable_log_ticks(axis: Any) -> None:
    """Ticks at 1, 2 and 5 times each power of ten, written as plain numbers (0.5, 1, 20)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


_VERDICT_STYLE = {
    "consistent": (PALETTE["blue"], "o", "consistent"),
    "marginal": (PALETTE["orange"], "D", "consistent † (own interval excludes it)"),
    "rejected": (PALETTE["vermillion"], "s", "rejected"),
}


@projected
def plot_project(result: ProjectionResult, path: str) -> None:
    """Monte Carlo over prediction for every row, with its interval, on a log scale: colour
    and marker give the verdict, a hollow marker a finding (the paper's formula where it is
    not exact), and the legend says which is which."""
    plt = require_matplotlib()
    from matplotlib.lines import Line2D

    rows = [r for r in result.rows if r.estimate is not None and r.predicted_var > 0]
    fig, ax = plt.subplots(figsize=figure_size(12.8, 0.4 * len(rows) + 2.6))
    for i, row in enumerate(rows):
        est = row.estimate
        assert est is not None
        lo, hi = est.confidence_interval
        ratio = est.var / row.predicted_var
        err = [[ratio - lo / row.predicted_var], [hi / row.predicted_var - ratio]]
        key = "marginal" if row.marginal_only(result.alpha) else row.verdict
        color, marker, _ = _VERDICT_STYLE.get(key, (PALETTE["grey"], "x", key))
        face = color if row.role == "check" else "white"
        ax.errorbar([ratio], [i], xerr=err, fmt=marker, color=color, mfc=face, mec=color, capsize=3)
    ax.axvline(1.0, color=PALETTE["grey"], lw=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r.section} · {r.case} · {r.claim}" for r in rows])
    ax.invert_yaxis()
    ax.set_xscale("log")
    _readable_log_ticks(ax.xaxis)
    level = confidence_label(result.confidence)
    ax.set_xlabel(f"Monte-Carlo Var(q·k) / predicted, with {level} interval (1 = prediction right)")
    shown = {("marginal" if r.marginal_only(result.alpha) else r.verdict) for r in rows}
    handles = [
        Line2D([], [], ls="", marker=m, color=c, label=text)
        for key, (c, m, text) in _VERDICT_STYLE.items()
        if key in shown
    ]
    handles += [
        Line2D([], [], ls="", marker="o", color="black", label="filled: check (sets exit)"),
        Line2D([], [], ls="", marker="o", color="black", mfc="white", label="hollow: finding"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    title_figure(
        fig,
        f"varcheck project: d_x = {result.dx}, d_k = {result.dk}, init {result.init}, "
        f"x ~ {result.x.spec} (σ_X = {result.x.sigma:.3g}), {level} intervals, "
        f"Holm over {len(result.rows)} rows",
        result,
    )
    save_figure(fig, path)
