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
from ..output.figure_style import error_bars, figure_size, projected
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


def _histogram(ax: Any, result: ExplainResult, sims: np.ndarray) -> None:
    """The simulated np.var values ``sims`` up to HISTOGRAM_TOP, with the cut tail stated in the
    legend."""
    raw = result.raw
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
        ax.axvline(mean, color=PALETTE["black"], ls="--", lw=2, label=f"E[np.var] = {mean:,.6g}")
    if math.isfinite(raw.theory_var):
        ax.axvline(
            raw.theory_var,
            color=PALETTE["orange"],
            ls=":",
            lw=3,
            label=f"variance of one entry = {raw.theory_var:,.6g}",
        )
    if raw.observed is not None:
        ax.axvline(
            raw.observed,
            color=PALETTE["vermillion"],
            lw=2.5,
            label=f"observed {raw.observed:,.6g} (p = {raw.p_value:.3g}, {raw.verdict})",
        )


def _explain_growth(ax: Any, result: ExplainResult) -> None:
    rows = [r for r in result.growing if math.isfinite(r.relative_sd)]
    if not rows:
        ax.set_axis_off()
        return
    x = [r.shape.entries for r in rows]
    y = [r.relative_sd for r in rows]
    ax.loglog(x, y, "o-", color=PALETTE["blue"])
    # each shape named above its point, the last one to its left (the curve falls to the
    # right, so labels one step apart are a row apart); margins keep them inside the axes
    for i, (r, xi, yi) in enumerate(zip(rows, x, y, strict=True)):
        last = i == len(rows) - 1 and len(rows) > 1
        ax.annotate(
            str(r.shape),
            (xi, yi),
            xytext=(-6 if last else 6, 6),
            textcoords="offset points",
            ha="right" if last else "left",
        )
    ax.margins(x=0.25, y=0.3)
    ax.set_xlabel("entries of A @ B (N·M)")
    ax.set_ylabel("sd / E of np.var (exact)")
    ax.set_title("the spread shrinks as the shape grows")


@projected
def plot_explain(result: ExplainResult, path: str) -> None:
    """The distribution of np.var with the observed value marked; the spread over shapes.

    E[np.var], the observed value and the entry variance can lie a few pixels apart (1.5, 1.6
    and 2 in the seed's case): each has a line style of its own and is named in the legend,
    never beside its line."""
    plt = require_matplotlib()
    fig, (ax, ax_grow) = plt.subplots(1, 2, figsize=figure_size(height=6.0), width_ratios=(3, 2))
    raw = result.raw
    mean, sd = raw.expected, raw.sd
    if result.samples is not None:
        _histogram(ax, result, result.samples)
    elif math.isfinite(mean) and math.isfinite(sd) and sd > 0 and mean > 0:
        _gamma_curve(ax, result)
    _explain_marks(ax, result)
    ax.set_xlabel("np.var(A @ B)")
    ax.set_ylabel("density")
    ax.set_title(f"np.var of a {result.shape} product (ddof={result.ddof})")
    ax.legend(loc="upper right")
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


@projected
def plot_softmax(result: SoftmaxResult, path: str) -> None:
    """Entropy fraction, largest weight and Jacobian norm against d_k, raw and scaled, with
    95% intervals (as the table); one legend for the three panels, below them."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 3, figsize=figure_size(height=5.4))
    dks = [r.dk for r in result.rows]
    panels = [
        ("entropy_fraction", "entropy / log L", "attention entropy"),
        ("max_weight", "mean largest weight", "largest weight"),
        ("jacobian_norm", "‖diag(p) − ppᵀ‖_F", "softmax Jacobian"),
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
        ax.set_xticks(dks, [str(d) for d in dks])  # 64, not 2⁶, for a lecture
        ax.minorticks_off()
        ax.set_xlabel("d_k")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=2,
        title=f"{error_bars(0.95)} (±{z:.2f} se between blocks)",
    )
    q, k = result.q_dist.spec, result.k_dist.spec
    title_figure(
        fig,
        f"varcheck softmax: {_laws(q, k, ('q', 'k'))}, L = {result.keys} keys, "
        f"{result.queries:,} queries per d_k",
        result,
    )
    save_figure(fig, path)


def _derive_panel(ax: Any, s: Any, conf: str) -> None:
    """One step: the textbook's value, the exact value and the Monte-Carlo estimate with its
    interval; titled with the textbook's status and the check of the exact value."""
    lo, hi = s.confidence_interval
    ax.axhline(s.textbook_value, color=PALETTE["grey"], ls="--", lw=2, label="textbook value")
    if math.isfinite(s.value):
        ax.axhline(s.value, color=PALETTE["orange"], lw=2.5, label="exact value")
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
    ax.set_title(f"{s.number}. {s.quantity}\ntextbook: {s.status}\nexact value: {s.verdict}")
    ax.set_xlabel(f"textbook: {s.textbook}")


def _derive_verdict(result: DeriveResult) -> str:
    """What the panels say, in their words: which textbook steps break, and the right value."""
    broken = [str(s.number) for s in result.steps if s.status == "breaks"]
    if not broken:
        return "every textbook step holds"
    said = (
        f"textbook step {broken[0]} breaks"
        if len(broken) == 1
        else (f"textbook steps {', '.join(broken[:-1])} and {broken[-1]} break")
    )
    if result.broken_step is not None:
        said += f"; Var(q·k) = {result.correct_var:.4g}"
    return said


@projected
def plot_derive(result: DeriveResult, path: str) -> None:
    """One panel per step, in the table's words: whether the textbook's step holds, breaks or
    inherits, and whether the exact value is consistent with the Monte-Carlo interval."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 4, figsize=figure_size(height=6.0))
    conf = confidence_label(result.confidence)
    for ax, s in zip(axes, result.steps, strict=True):
        _derive_panel(ax, s, conf)
    labels: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            labels.setdefault(label, handle)
    fig.legend(list(labels.values()), list(labels), loc="outside lower center", ncols=len(labels))
    q, k = result.q_dist.spec, result.k_dist.spec
    laws = f"q_i, k_i ~ {q}" if q == k else f"q_i ~ {q}, k_i ~ {k}"
    if result.rho:
        laws += f", ρ = {result.rho:g}"
    verdict = _derive_verdict(result)
    title_figure(
        fig,
        f"varcheck derive: claim Var(q·k) = d_k = {result.dk} ({verdict}); {laws}; level {conf}",
        result,
    )
    save_figure(fig, path)
