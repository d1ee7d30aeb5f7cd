"""Figures for the teaching commands (optional extra ``varcheck[plot]``), written to a PNG."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..output.figures import require_matplotlib, save_figure

if TYPE_CHECKING:
    from .explain import ExplainResult
    from .softmax import SoftmaxResult

__all__ = ["plot_explain", "plot_softmax"]


def plot_explain(result: ExplainResult, path: str) -> None:
    """The distribution of np.var with the observed value marked; the spread over shapes."""
    plt = require_matplotlib()
    fig, (ax, ax_grow) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    raw = result.raw
    mean, sd = raw.expected, raw.sd
    lo, hi = raw.central_range
    if result.samples is not None:
        sims = result.samples
        top = float(np.quantile(sims, 0.995))
        if raw.observed is not None and math.isfinite(raw.observed):
            top = max(top, raw.observed * 1.05)
        ax.hist(
            sims[sims <= top],
            bins=120,
            density=True,
            color="#8fb3d9",
            label=f"{result.replicates:,} simulated experiments",
        )
    elif math.isfinite(mean) and math.isfinite(sd) and sd > 0 and mean > 0:
        from scipy import stats

        # the same gamma law (exact mean and sd) that gave the quantiles and p-values
        law = stats.gamma(a=(mean / sd) ** 2, scale=sd * sd / mean)
        top = float(law.ppf(0.9995))
        if raw.observed is not None:
            top = max(top, raw.observed * 1.05)
        xs = np.linspace(float(law.ppf(0.0005)), top, 400)
        ax.plot(xs, law.pdf(xs), color="#4a7bb7", label="gamma approximation (exact mean, sd)")
    if math.isfinite(lo) and math.isfinite(hi):
        ax.axvspan(lo, hi, color="gray", alpha=0.12, label="central 95%")
    if math.isfinite(mean):
        ax.axvline(mean, color="black", ls="--", lw=1, label=f"E[np.var] = {mean:,.6g}")
    if math.isfinite(raw.theory_var):
        ax.axvline(
            raw.theory_var, color="gray", ls=":", lw=1.2, label=f"entry var = {raw.theory_var:,.6g}"
        )
    if raw.observed is not None:
        ax.axvline(
            raw.observed,
            color="crimson",
            lw=2,
            label=f"observed {raw.observed:,.6g} (p = {raw.p_value:.3g}, {raw.verdict})",
        )
    ax.set_xlabel("np.var(A @ B)")
    ax.set_ylabel("density")
    ax.set_title(f"np.var of a {result.shape} product (ddof={result.ddof})")
    ax.legend(fontsize=8)
    rows = [r for r in result.growing if math.isfinite(r.relative_sd)]
    if rows:
        x = [r.shape.entries for r in rows]
        y = [r.relative_sd for r in rows]
        ax_grow.loglog(x, y, "o-", color="#4a7bb7")
        for r, xi, yi in zip(rows, x, y, strict=True):
            ax_grow.annotate(
                str(r.shape), (xi, yi), fontsize=7, xytext=(4, 4), textcoords="offset points"
            )
        ax_grow.set_xlabel("entries of A @ B (N·M)")
        ax_grow.set_ylabel("sd / E of np.var (exact)")
        ax_grow.set_title("the spread shrinks as the shape grows")
    else:
        ax_grow.set_axis_off()
    fig.suptitle(f"varcheck explain, seed {result.seed}", fontsize=10)
    save_figure(fig, path)


def plot_softmax(result: SoftmaxResult, path: str) -> None:
    """Entropy fraction, largest weight and Jacobian norm against d_k, raw and scaled."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), constrained_layout=True)
    dks = [r.dk for r in result.rows]
    panels = [
        ("entropy_fraction", "entropy / log L", "attention entropy"),
        ("max_weight", "mean largest weight", "largest weight"),
        ("jacobian_norm", "‖diag(p) − ppᵀ‖_F", "softmax Jacobian (gradient size)"),
    ]
    for ax, (key, ylabel, title) in zip(axes, panels, strict=True):
        for tag, label, color in (("raw", "q·k", "crimson"), ("scaled", "q·k / √d_k", "#4a7bb7")):
            stats = [getattr(r, tag) for r in result.rows]
            ys = [getattr(s, key) for s in stats]
            es = [1.96 * getattr(s, key + "_se") for s in stats]
            ax.errorbar(dks, ys, yerr=es, fmt="o-", capsize=3, color=color, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"varcheck softmax, L = {result.keys} keys, {result.queries:,} queries per d_k "
        f"(±1.96 se), seed {result.seed}",
        fontsize=10,
    )
    save_figure(fig, path)
