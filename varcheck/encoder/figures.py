"""Figure for ``varcheck audit --plot``: layer × head heatmaps (needs ``varcheck[plot]``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..output.figures import require_matplotlib, save_figure
from ..output.formats import confidence_label

if TYPE_CHECKING:
    from .heads import AuditResult

__all__ = ["plot_audit", "audit_figure_title", "HOLDS_LABEL"]

#: Legend entry of the outlined cells: heads whose interval holds 1.
HOLDS_LABEL = "outlined: interval holds 1 (1/√d_k consistent)"


def _grid(result: AuditResult, values: dict[tuple[int, int], float]) -> np.ndarray:
    grid = np.full((len(result.layers), result.num_heads), np.nan)
    for i, layer in enumerate(result.layers):
        for h in range(result.num_heads):
            grid[i, h] = values.get((layer, h), np.nan)
    return grid


def audit_figure_title(result: AuditResult) -> str:
    """Model, text, confidence and seed (none: the audit is deterministic) in one title."""
    conf = confidence_label(result.confidence)
    intervals = (
        f"{conf} jackknife intervals"
        if result.has_intervals
        else f"no intervals (too few sequences: {result.sequences} < {result.min_sequences})"
    )
    partial = " — partial (interrupted)" if result.interrupted else ""
    return (
        f"varcheck audit: {result.model_name}, {result.sequences} sequences, {result.tokens} "
        f"tokens; {intervals}; no seed (deterministic){partial}"
    )


def _outline_holds(ax: Any, result: AuditResult) -> Any:
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


def plot_audit(result: AuditResult, path: str) -> None:
    """Two heatmaps: log2 of the scaled logit variance, and attention entropy over its maximum.

    Colour-blind-safe palettes (PuOr diverging around 0, cividis); heads whose interval holds
    1 are outlined, with a legend.
    """
    plt = require_matplotlib()
    from matplotlib.colors import TwoSlopeNorm

    log_scaled = _grid(
        result, {(r.layer, r.head): math.log2(r.measured_scaled_var) for r in result.rows}
    )
    entropy = _grid(
        result, {(r.layer, r.head): r.entropy / result.mean_log_tokens for r in result.rows}
    )
    height = 2.2 + 0.45 * len(result.layers)
    fig, axes = plt.subplots(1, 2, figsize=(13, height), constrained_layout=True)
    # a fixed ±3 (8× either way) keeps ordinary heads visible next to a very sharp one; cells
    # beyond it saturate and their label still gives the value
    span = 3.0
    panels = [
        (
            axes[0],
            log_scaled,
            dict(cmap="PuOr_r", norm=TwoSlopeNorm(0.0, -span, span)),
            "log₂ Var(q·k/√d_k)  (0: 1/√d_k is right; +1: twice too large)",
            lambda v: abs(v) > 0.6 * span,
        ),
        (
            axes[1],
            entropy,
            dict(cmap="cividis", vmin=0.0, vmax=1.0),
            "attention entropy / entropy of uniform attention",
            lambda v: v < 0.45,
        ),
    ]
    for ax, grid, style, title, dark in panels:
        image = ax.imshow(grid, aspect="auto", **style)
        ax.set_xticks(range(result.num_heads))
        ax.set_yticks(range(len(result.layers)), [str(layer) for layer in result.layers])
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(title, fontsize=9)
        for (i, h), value in np.ndenumerate(grid):
            if np.isfinite(value):
                colour = "white" if dark(value) else "black"
                ax.text(h, i, f"{value:.1f}", ha="center", va="center", fontsize=7, color=colour)
        fig.colorbar(image, ax=ax, shrink=0.9, extend="both" if grid is log_scaled else "neither")
    handle = _outline_holds(axes[0], result)
    label = HOLDS_LABEL if result.has_intervals else "no intervals: too few sequences"
    axes[0].legend(
        [handle],
        [label],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.1 - 0.3 / len(result.layers)),
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(audit_figure_title(result), fontsize=10)
    save_figure(fig, path)
