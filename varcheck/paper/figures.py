"""Figures for the paper commands (needs ``varcheck[plot]``): pure functions of a result."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..output.figures import require_matplotlib, save_figure

if TYPE_CHECKING:
    from .projection import ProjectionResult
    from .training import TrainResult

__all__ = ["plot_train", "plot_project"]

_COLORS = {"fixed": "tab:red", "paper": "tab:blue", "exact": "tab:green"}
_LABELS = {
    "fixed": "fixed β = 1/√d_k",
    "paper": "adaptive β (paper)",
    "exact": "adaptive β (exact)",
}


def plot_train(result: TrainResult, path: str) -> None:
    """Four panels over steps: σ_W, logit variance (measured with its interval band, and
    predicted), entropy, accuracy."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), constrained_layout=True)
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
    ax_sigma.set_ylabel(f"σ_Wq (solid), σ_Wk (dotted), entries' {kind}")
    ax_var.axhline(1.0, color="gray", lw=0.8)
    ax_var.set_yscale("log")
    level = f"{100 * result.config.confidence:g}%"
    ax_var.set_ylabel("Var(β q·k)")
    ax_var.set_title(
        f"measured, {level} interval band (solid); paper's prediction (dashed)", fontsize=9
    )
    ax_ent.axhline(math.log(result.config.memory), color="gray", lw=0.8)
    ax_ent.set_ylabel("attention entropy (nats)")
    ax_acc.axhline(1.0 / result.config.values, color="gray", lw=0.8)
    ax_acc.set_ylabel("accuracy (fresh evaluation sequences)")
    for ax in axes.ravel():
        ax.set_xlabel("step")
    ax_sigma.legend(fontsize=8)
    fig.suptitle(f"varcheck train, seed {result.seed}", fontsize=10)
    save_figure(fig, path)


def plot_project(result: ProjectionResult, path: str) -> None:
    """Monte Carlo over prediction for every row, with its interval, on a log scale."""
    plt = require_matplotlib()
    rows = [r for r in result.rows if r.estimate is not None and r.predicted_var > 0]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5), constrained_layout=True)
    for i, row in enumerate(rows):
        est = row.estimate
        assert est is not None
        lo, hi = est.confidence_interval
        ratio = est.var / row.predicted_var
        err = [[ratio - lo / row.predicted_var], [hi / row.predicted_var - ratio]]
        color = "tab:green" if row.verdict == "consistent" else "tab:red"
        ax.errorbar([ratio], [i], xerr=err, fmt="o", color=color, capsize=3)
    ax.axvline(1.0, color="gray", lw=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r.section} · {r.case} · {r.claim} ({r.role})" for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("Monte-Carlo Var(q·k) / predicted (1 = prediction right)")
    ax.set_title(
        f"varcheck project: d_x = {result.dx}, d_k = {result.dk}, init {result.init}, "
        f"seed {result.seed}",
        fontsize=10,
    )
    save_figure(fig, path)
