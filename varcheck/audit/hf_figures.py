"""Figures of a checkpoint audit (layer × head heatmaps) and of a run's trend (per-layer lines);
they need ``varcheck[plot]``."""

from __future__ import annotations

import numpy as np

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


def plot_checkpoint(result: CheckpointAudit, path: str) -> None:
    """Three heatmaps (layer × head): maximum logit, sink ratio, entropy; colour-blind-safe."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.5), constrained_layout=True)
    panels = (
        ("max_logit", "maximum scaled logit", "cividis"),
        ("sink", "sink ratio (weight on token 0)", "viridis"),
        ("entropy", "attention entropy (nats)", "magma"),
    )
    for ax, (field, label, cmap) in zip(axes, panels, strict=True):
        grid, layers, heads = _grid(result, field)
        image = ax.imshow(grid, aspect="auto", cmap=cmap, origin="lower")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(len(heads)), [str(h) for h in heads], fontsize=7)
        ax.set_yticks(range(len(layers)), [str(x) for x in layers], fontsize=7)
        fig.colorbar(image, ax=ax)
    title_figure(
        fig,
        f"varcheck audit: {result.name} ({result.family}), {result.sequences} "
        f"sequences; declared scale {result.scale_rule}",
        result,
    )
    save_figure(fig, path)


def plot_trend(result: TrendResult, path: str) -> None:
    """Per layer across checkpoints: largest logit and mean scaled variance (log scale)."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    names = [a.name for a in result.checkpoints]
    x = np.arange(len(names))
    for t in result.layers:
        axes[0].plot(x, t.max_logit, marker="o", label=f"layer {t.layer}")
        axes[1].plot(x, t.scaled_var, marker="o", label=f"layer {t.layer}")
    for ax, label in zip(axes, ("largest scaled logit", "mean scaled variance"), strict=True):
        ax.set_xticks(x, names, rotation=30, fontsize=7)
        ax.set_ylabel(label)
        ax.set_yscale("log")
    axes[0].legend(fontsize=7, ncols=2)
    fastest = ", ".join(f"L{g.layer}H{g.head} ×{g.factor:.3g}" for g in result.fastest[:3])
    title_figure(
        fig,
        f"varcheck audit: trend over {len(names)} checkpoints; fastest-growing "
        f"heads per step: {fastest}",
        result,
    )
    save_figure(fig, path)
