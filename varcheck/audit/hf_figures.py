"""Figures of a checkpoint audit (layer × head heatmaps) and of a run's trend (per-layer lines);
they need ``varcheck[plot]``."""

from __future__ import annotations

import numpy as np

from ..output.figure_style import figure_size, projected, tick_step
from ..output.figures import require_matplotlib, save_figure, title_figure
from .results import CheckpointAudit, TrendResult

__all__ = ["plot_checkpoint", "plot_trend"]


def _grid(result: CheckpointAudit, field: str) -> tuple[np.ndarray, list[int], list[int]]:
    layers = sorted({h.layer for h in result.heads})
    heads = sorted({h.head for h in result.heads})
    grid = np.full((len(layers), len(heads)), np.nan)
    for h in result.heads:
        grid[layers.index(h.layer), heads.index(h.head)] = getattr(h, field)
    return grid, layers, heads


@projected
def plot_checkpoint(result: CheckpointAudit, path: str) -> None:
    """Three heatmaps (layer × head): maximum logit, sink ratio, entropy; colour-blind-safe."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 3, figsize=figure_size(height=5.4))
    panels = (
        ("max_logit", "maximum scaled logit", "cividis"),
        ("sink", "sink ratio (weight on token 0)", "viridis"),
        ("entropy", "attention entropy (nats)", "magma"),
    )
    for ax, (field, label, cmap) in zip(axes, panels, strict=True):
        grid, layers, heads = _grid(result, field)
        image = ax.imshow(grid, aspect="auto", cmap=cmap, origin="lower")
        ax.set_title(label)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        across = tick_step(len(heads), 3.0, max(len(str(h)) for h in heads))
        up = tick_step(len(layers), 3.6, across=False)
        ax.set_xticks(range(0, len(heads), across), [str(h) for h in heads][::across])
        ax.set_yticks(range(0, len(layers), up), [str(x) for x in layers][::up])
        fig.colorbar(image, ax=ax)
    title_figure(
        fig,
        f"varcheck audit: {result.name} ({result.family}), {result.sequences} "
        f"sequences; declared scale {result.scale_rule}",
        result,
    )
    save_figure(fig, path)


@projected
def plot_trend(result: TrendResult, path: str) -> None:
    """Per layer across checkpoints: largest logit and mean scaled variance (log scale)."""
    plt = require_matplotlib()
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(1, 2, figsize=figure_size(height=6.0))
    names = [a.name for a in result.checkpoints]
    x = np.arange(len(names))
    for t in result.layers:
        axes[0].plot(x, t.max_logit, marker="o", label=f"layer {t.layer}")
        axes[1].plot(x, t.scaled_var, marker="o", label=f"layer {t.layer}")
    for ax, label in zip(axes, ("largest scaled logit", "mean scaled variance"), strict=True):
        # checkpoint names upright in a column each, thinned so that they do not touch
        step = tick_step(len(names), 2.4, 1, across=False)
        ax.set_xticks(x[::step], names[::step], rotation=90)
        ax.set_ylabel(label)
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")  # 7.2, not 7.2×10⁰
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", ncols=1 + len(result.layers) // 12)
    fastest = ", ".join(f"L{g.layer}H{g.head} ×{g.factor:.3g}" for g in result.fastest[:3])
    title_figure(
        fig,
        f"varcheck audit: trend over {len(names)} checkpoints; fastest-growing "
        f"heads per step: {fastest}",
        result,
    )
    save_figure(fig, path)
