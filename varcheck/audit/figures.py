"""Figures for ``varcheck audit --plot`` (needs ``varcheck[plot]``): layer × head heatmaps, and
for a decoder the logit scale by distance i − j below them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..output.figure_style import TEXT_PT, figure_size, projected, tick_step
from ..output.figures import require_matplotlib, save_figure, title_figure
from ..output.formats import confidence_label

if TYPE_CHECKING:
    from .decoder import DecoderAuditResult
    from .encoder import AuditResult

    AnyResult = AuditResult | DecoderAuditResult

__all__ = [
    "plot_audit",
    "plot_decoder_audit",
    "plot_distance",
    "audit_figure_title",
    "HOLDS_LABEL",
]

#: Legend entry of the outlined cells: heads whose interval holds 1.
HOLDS_LABEL = "outlined: interval holds 1 (1/√d_k consistent)"


def _grid(result: AnyResult, values: dict[tuple[int, int], float]) -> np.ndarray:
    grid = np.full((len(result.layers), result.num_heads), np.nan)
    for i, layer in enumerate(result.layers):
        for h in range(result.num_heads):
            grid[i, h] = values.get((layer, h), np.nan)
    return grid


def audit_figure_title(result: AnyResult) -> str:
    """Model, text and confidence in one title (:func:`title_figure` adds that the audit has
    no seed and whether it was interrupted)."""
    conf = confidence_label(result.confidence)
    # the decoder's intervals are Hall's over sequences, the encoder's a jackknife over them
    kind = "intervals over sequences" if hasattr(result, "kv_groups") else "jackknife intervals"
    intervals = (
        f"{conf} {kind}"
        if result.has_intervals
        else f"no intervals (too few sequences: {result.sequences} < {result.min_sequences})"
    )
    return (
        f"varcheck audit: {result.model_name}, {result.sequences} sequences, {result.tokens} "
        f"tokens; {intervals}"
    )


def _outline_holds(ax: Any, result: AnyResult) -> Any:
    """Outline the cells of heads whose interval holds 1; the legend handle for them."""
    from matplotlib.patches import Rectangle

    rows = {layer: i for i, layer in enumerate(result.layers)}
    for r in result.rows:
        if r.scale_check == "holds":
            ax.add_patch(
                Rectangle(
                    (r.head - 0.5, rows[r.layer] - 0.5),
                    1,
                    1,
                    fill=False,
                    edgecolor="black",
                    linewidth=2.2,
                )
            )
    return Rectangle((0, 0), 1, 1, fill=False, edgecolor="black", linewidth=2.2)


@projected
def plot_audit(result: AuditResult, path: str) -> None:
    """Two heatmaps: log2 of the scaled logit variance, and attention entropy over its maximum.

    Colour-blind-safe palettes (PuOr diverging around 0, cividis); heads whose interval holds
    1 are outlined, with a legend.
    """
    plt = require_matplotlib()
    panels = 3 if result.metrics else 2
    fig, axes = plt.subplots(1, panels, figsize=figure_size(height=_heatmap_height(result) + 0.8))
    _heatmaps(fig, axes, result)
    title_figure(fig, audit_figure_title(result), result)
    save_figure(fig, path)


@projected
def plot_decoder_audit(result: DecoderAuditResult, path: str) -> None:
    """A decoder's heatmaps (as :func:`plot_audit`), and its logit scale by distance below."""
    plt = require_matplotlib()
    height = _heatmap_height(result)
    fig = plt.figure(figsize=figure_size(height=height + 4.0))
    panels = 3 if result.metrics else 2
    grid = fig.add_gridspec(2, panels, height_ratios=[height, 4.0])
    _heatmaps(fig, [fig.add_subplot(grid[0, i]) for i in range(panels)], result)
    _distance_panel(fig.add_subplot(grid[1, :]), result)
    title_figure(fig, audit_figure_title(result), result)
    save_figure(fig, path)


@projected
def plot_distance(result: DecoderAuditResult, path: str) -> None:
    """The logit scale by distance i − j alone."""
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=figure_size(12.8, 6.4))
    _distance_panel(ax, result)
    title_figure(fig, audit_figure_title(result), result)
    save_figure(fig, path)


def _distance_panel(ax: Any, result: DecoderAuditResult) -> None:
    """One line per layer (median over its heads), the medians over all heads measured and
    predicted (RoPE on independent tokens), and the line of unit variance."""
    import matplotlib as mpl

    if not result.layer_distance:
        ax.set_axis_off()
        return
    bands = result.layer_distance[0]
    x = np.arange(len(bands))
    cmap = mpl.colormaps["viridis"]
    done = result.finished_layers
    norm = mpl.colors.Normalize(min(done), max(max(done), min(done) + 1))
    for layer, profile in zip(done, result.layer_distance, strict=True):
        ax.plot(x, [b.scaled_var for b in profile], color=cmap(norm(layer)), lw=1.1, alpha=0.8)
    measured = np.array([[b.scaled_var for b in r.distance] for r in result.rows])
    predicted = np.array([[b.predicted_scaled_var for b in r.distance] for r in result.rows])
    ax.plot(x, np.median(measured, axis=0), color="black", lw=2.5, label="measured, median")
    ax.plot(
        x,
        np.median(predicted, axis=0),
        color="black",
        lw=2,
        ls="--",
        label="rope prediction (independent tokens), median",
    )
    ax.axhline(1.0, color="grey", lw=1, ls=":", label="1: 1/√d_k gives unit variance")
    ax.set_yscale("log", base=2)
    names = [str(b.low) if b.low == b.high else f"{b.low}–{b.high}" for b in bands]
    step = tick_step(len(names), 9.0, max(map(len, names)))
    ax.set_xticks(x[::step], names[::step])
    pairs = ", ".join(str(b.pairs) for b in bands)
    ax.set_xlabel(f"distance i − j between query and key\n(causal pairs per band: {pairs})")
    ax.set_ylabel("Var(q·k/√d_k)")
    mappable = mpl.cm.ScalarMappable(cmap=cmap, norm=norm)
    ax.figure.colorbar(mappable, ax=ax, label="layer (median over its heads)")
    ax.legend(loc="best")
    ax.set_title("logit scale by distance (RoPE rotates q and k by position)")


def _heatmap_height(result: AuditResult | DecoderAuditResult) -> float:
    """Inches for a layer × head heatmap: a row a layer, within the projector frame."""
    return min(2.4 + 0.4 * len(result.layers), 6.0)


def _max_logit_panel(ax: Any, result: AnyResult) -> tuple[Any, np.ndarray, dict, str, Any]:
    """The largest scaled logit of each head on the text (the figure training engineers watch)."""
    grid = _grid(result, {(m.layer, m.head): m.max_logit for m in result.metrics})
    top = float(np.nanmax(grid)) if np.isfinite(grid).any() else 1.0
    return (
        ax,
        grid,
        dict(cmap="magma", vmin=0.0, vmax=top),
        "largest scaled logit\non the text",
        lambda v: v < 0.6 * top,
    )


def _heatmaps(fig: Any, axes: Any, result: AuditResult | DecoderAuditResult) -> None:
    """log₂ of the scaled variance and the relative entropy, layer × head, and the largest
    scaled logit when the audit measured it; one axis each."""
    from matplotlib.colors import TwoSlopeNorm

    log_scaled = _grid(
        result, {(r.layer, r.head): math.log2(r.measured_scaled_var) for r in result.rows}
    )
    entropy = _grid(
        result, {(r.layer, r.head): r.entropy / result.mean_log_tokens for r in result.rows}
    )
    # a fixed ±3 (8× either way) keeps ordinary heads visible next to a very sharp one; cells
    # beyond it saturate and their label still gives the value
    span = 3.0
    panels = [
        (
            axes[0],
            log_scaled,
            dict(cmap="PuOr_r", norm=TwoSlopeNorm(0.0, -span, span)),
            "log₂ Var(q·k/√d_k)\n(0: 1/√d_k is right; +1: twice too large)",
            lambda v: abs(v) > 0.6 * span,
        ),
        (
            axes[1],
            entropy,
            dict(cmap="cividis", vmin=0.0, vmax=1.0),
            "attention entropy /\nentropy of uniform attention",
            lambda v: v < 0.45,
        ),
    ]
    if len(axes) > 2:
        panels.append(_max_logit_panel(axes[2], result))
    layers, heads = len(result.layers), result.num_heads
    width = 10.0 / len(axes)  # inches of one heatmap
    # the value in each cell only where a cell holds it at the projector's text size
    labelled = width / heads >= 4 * 0.62 * TEXT_PT / 72 and _heatmap_height(result) / layers >= 0.3
    for ax, grid, style, title, dark in panels:
        image = ax.imshow(grid, aspect="auto", **style)
        step = tick_step(heads, width, len(str(heads - 1)))
        ax.set_xticks(range(0, heads, step))
        every = tick_step(layers, _heatmap_height(result) - 1.0, across=False)
        ax.set_yticks(range(0, layers, every), [str(layer) for layer in result.layers][::every])
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(title)
        for (i, h), value in np.ndenumerate(grid):
            if labelled and np.isfinite(value):
                colour = "white" if dark(value) else "black"
                ax.text(h, i, f"{value:.1f}", ha="center", va="center", color=colour)
        fig.colorbar(image, ax=ax, shrink=0.9, extend="both" if grid is log_scaled else "neither")
    handle = _outline_holds(axes[0], result)
    label = HOLDS_LABEL if result.has_intervals else "no intervals: too few sequences"
    axes[0].legend(
        [handle],
        [label],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.12 - 0.4 / len(result.layers)),
        frameon=False,
    )
