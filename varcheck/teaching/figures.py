"""Figures for the teaching commands (optional extra ``varcheck[plot]``), written to a PNG.

Every figure stands alone: its title names the law, the claim or observed value, the confidence
(where there is one) and the seed; colours come from the Okabe-Ito palette (distinguishable with
the common colour-vision deficiencies) and every mark is in a legend; error bars say what they
are; a histogram whose tail is cut says where and how much.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.estimation import normal_quantile
from ..output.figures import require_matplotlib, save_figure, title_figure
from ..output.formats import confidence_label

if TYPE_CHECKING:
    from .derive import DeriveResult
    from .explain import ExplainResult
    from .softmax import SoftmaxResult

__all__ = ["PALETTE", "plot_derive", "plot_explain", "plot_softmax"]

#: Okabe-Ito colours by role.
PALETTE = {
    "blue": "#0072B2",
    "sky": "#56B4E9",
    "vermillion": "#D55E00",
    "orange": "#E69F00",
    "green": "#009E73",
    "purple": "#CC79A7",
    "black": "#000000",
    "grey": "#999999",
}
#: The histogram of explain shows the simulated values up to this quantile (or the observed
#: value, if larger); the figure says how many lie beyond.
HISTOGRAM_TOP = 0.995


def _laws(a: str, b: str, names: tuple[str, str]) -> str:
    return f"entries ~ {a}" if a == b else f"{names[0]} ~ {a}, {names[1]} ~ {b}"


def _histogram(ax: Any, result: ExplainResult) -> None:
    """The simulated np.var values up to HISTOGRAM_TOP, with the cut tail stated in the legend."""
    raw, sims = result.raw, result.samples
    top = float(np.quantile(sims, HISTOGRAM_TOP))
    if raw.observed is not None and math.isfinite(raw.observed):
        top = max(top, raw.observed * 1.05)
    shown = sims[sims <= top]
    beyond = sims.shape[0] - shown.shape[0]
    ax.hist(
        shown,
        bins=120,
        density=True,
        color=PALETTE["sky"],
        label=f"{result.replicates:,} simulated experiments",
    )
    if beyond:
        ax.plot(
            [],
            [],
            " ",
            label=f"not shown: {beyond:,} values ({100 * beyond / sims.shape[0]:.2g}%) above "
            f"{top:,.4g}, up to {float(sims.max()):,.4g}",
        )


def _gamma_curve(ax: Any, result: ExplainResult) -> None:
    """The gamma law (exact mean and sd) behind the quantiles when nothing was simulated."""
    from scipy import stats

    raw = result.raw
    mean, sd = raw.expected, raw.sd
    law = stats.gamma(a=(mean / sd) ** 2, scale=sd * sd / mean)
    top = float(law.ppf(0.9995))
    if raw.observed is not None:
        top = max(top, raw.observed * 1.05)
    xs = np.linspace(float(law.ppf(0.0005)), top, 400)
    ax.plot(xs, law.pdf(xs), color=PALETTE["blue"], label="gamma approximation (exact mean, sd)")
    ax.plot([], [], " ", label=f"curve shown from the 0.05% to the 99.95% quantile ({top:,.4g})")


def _explain_marks(ax: Any, result: ExplainResult) -> None:
    raw = result.raw
    mean = raw.expected
    lo, hi = raw.central_range
    if math.isfinite(lo) and math.isfinite(hi):
        ax.axvspan(lo, hi, color=PALETTE["grey"], alpha=0.2, label="central 95% of np.var")
    if math.isfinite(mean):
        ax.axvline(mean, color=PALETTE["black"], ls="--", lw=1, label=f"E[np.var] = {mean:,.6g}")
    if math.isfinite(raw.theory_var):
        ax.axvline(
            raw.theory_var,
            color=PALETTE["orange"],
            ls=":",
            lw=1.5,
            label=f"variance of one entry = {raw.theory_var:,.6g}",
        )
    if raw.observed is not None:
        ax.axvline(
            raw.observed,
            color=PALETTE["vermillion"],
            lw=2,
            label=f"observed {raw.observed:,.6g} (p = {raw.p_value:.3g}, {raw.verdict})",
        )


def _explain_growth(ax: Any, result: ExplainResult) -> None:
    rows = [r for r in result.growing if math.isfinite(r.relative_sd)]
    if not rows:
        ax.set_axis_off()
        return
    x = [r.shape.entries for r in rows]
    y = [r.relative_sd for r in rows]
    ax.loglog(x, y, "o-", color=PALETTE["blue"], label="sd / E of np.var (exact)")
    for r, xi, yi in zip(rows, x, y, strict=True):
        ax.annotate(str(r.shape), (xi, yi), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("entries of A @ B (N·M)")
    ax.set_ylabel("sd / E of np.var (exact)")
    ax.set_title("the spread shrinks as the shape grows")
    ax.legend(fontsize=8)


def plot_explain(result: ExplainResult, path: str) -> None:
    """The distribution of np.var with the observed value marked; the spread over shapes."""
    plt = require_matplotlib()
    fig, (ax, ax_grow) = plt.subplots(1, 2, figsize=(11, 4.4), constrained_layout=True)
    raw = result.raw
    mean, sd = raw.expected, raw.sd
    if result.samples is not None:
        _histogram(ax, result)
    elif math.isfinite(mean) and math.isfinite(sd) and sd > 0 and mean > 0:
        _gamma_curve(ax, result)
    _explain_marks(ax, result)
    ax.set_xlabel("np.var(A @ B)")
    ax.set_ylabel("density")
    ax.set_title(f"np.var of a {result.shape} product (ddof={result.ddof})")
    ax.legend(fontsize=7)
    _explain_growth(ax_grow, result)
    observed = "nothing observed" if raw.observed is None else f"observed {raw.observed:g}"
    laws = _laws(result.a_dist.spec, result.b_dist.spec, ("A", "B"))
    title_figure(
        fig,
        f"varcheck explain: np.var(A @ B), {laws}; {observed}; "
        f"level {confidence_label(result.confidence)}",
        result,
    )
    save_figure(fig, path)


def plot_softmax(result: SoftmaxResult, path: str) -> None:
    """Entropy fraction, largest weight and Jacobian norm against d_k, raw and scaled."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), constrained_layout=True)
    dks = [r.dk for r in result.rows]
    panels = [
        ("entropy_fraction", "entropy / log L", "attention entropy"),
        ("max_weight", "mean largest weight", "largest weight"),
        ("jacobian_norm", "‖diag(p) − ppᵀ‖_F", "softmax Jacobian (gradient size)"),
    ]
    series = (
        ("raw", "q·k (unscaled)", PALETTE["vermillion"], "o-"),
        ("scaled", "q·k / √d_k", PALETTE["blue"], "s-"),
    )
    z = normal_quantile(0.95)
    for ax, (key, ylabel, title) in zip(axes, panels, strict=True):
        for tag, label, color, style in series:
            stats = [getattr(r, tag) for r in result.rows]
            ys = [getattr(s, key) for s in stats]
            es = [z * getattr(s, key + "_se") for s in stats]
            ax.errorbar(dks, ys, yerr=es, fmt=style, capsize=3, color=color, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, title=f"error bars: 95% (±{z:.2f} se)", title_fontsize=7)
    q, k = result.q_dist.spec, result.k_dist.spec
    title_figure(
        fig,
        f"varcheck softmax: {_laws(q, k, ('q', 'k'))}, L = {result.keys} keys, "
        f"{result.queries:,} queries per d_k; bars ±{z:.2f} se (the table shows ±1 se)",
        result,
    )
    save_figure(fig, path)


def plot_derive(result: DeriveResult, path: str) -> None:
    """One panel per step: the textbook's value, the exact value, and the Monte-Carlo estimate
    with its interval, the panel titled with whether the step holds and the check's verdict."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 4, figsize=(14, 4.2), constrained_layout=True)
    conf = confidence_label(result.confidence)
    for ax, s in zip(axes, result.steps, strict=True):
        lo, hi = s.confidence_interval
        ax.axhline(s.textbook_value, color=PALETTE["grey"], ls="--", lw=1.5, label="textbook value")
        if math.isfinite(s.value):
            ax.axhline(s.value, color=PALETTE["orange"], lw=2, label="exact value")
        if math.isfinite(s.estimate):
            yerr = None
            if math.isfinite(lo) and math.isfinite(hi):
                yerr = [[s.estimate - lo], [hi - s.estimate]]
            ax.errorbar(
                [0],
                [s.estimate],
                yerr=yerr,
                fmt="o",
                capsize=6,
                color=PALETTE["blue"],
                label=f"Monte-Carlo, {conf} interval",
            )
        ax.set_xlim(-1, 1)
        ax.set_xticks([])
        ax.set_title(f"{s.number}. {s.quantity}: {s.status}\ncheck: {s.verdict}", fontsize=9)
        ax.set_xlabel(s.textbook, fontsize=8)
        ax.legend(fontsize=7, loc="best")
    q, k = result.q_dist.spec, result.k_dist.spec
    laws = f"q_i, k_i ~ {q}" if q == k else f"q_i ~ {q}, k_i ~ {k}"
    if result.rho:
        laws += f", ρ = {result.rho:g}"
    verdict = (
        "holds"
        if result.broken_step is None
        else f"fails from step {result.broken_step} on: Var(q·k) = {result.correct_var:.4g}"
    )
    title_figure(
        fig,
        f"varcheck derive: claim Var(q·k) = d_k = {result.dk} ({verdict}); {laws}; level {conf}",
        result,
    )
    save_figure(fig, path)
