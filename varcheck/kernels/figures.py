"""The probe's figure (optional extra ``varcheck[plot]``): effective scale against d_k."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..output.figure_style import error_bars, figure_size, projected
from ..output.figures import require_matplotlib, save_figure

if TYPE_CHECKING:
    from .probe import ProbeSweepResult

__all__ = ["plot_probe"]


@projected
def plot_probe(result: ProbeSweepResult, path: str) -> None:
    """Each d_k's effective scale with its interval, and the expected law drawn through them."""
    plt = require_matplotlib()
    rows = result.rows
    fig, ax = plt.subplots(figsize=figure_size(9.0, 6.0))
    dks = [r.dk for r in rows]
    est = [r.scale for r in rows]
    shown = [r for r in rows if r.has_interval]
    if shown:
        err = [
            [r.scale - r.confidence_interval.low for r in shown],
            [r.confidence_interval.high - r.scale for r in shown],
        ]
        ax.errorbar(
            [r.dk for r in shown],
            [r.scale for r in shown],
            yerr=err,
            fmt="o",
            capsize=3,
            label=f"effective scale ({error_bars(result.confidence)})",
        )
    if len(shown) < len(rows):
        bare = [r for r in rows if not r.has_interval]
        ax.plot(
            [r.dk for r in bare],
            [r.scale for r in bare],
            "s",
            color="#999999",
            label="effective scale (no valid interval)",
        )
    ax.plot(dks, [r.expected for r in rows], "--", color="red", label=f"expected: {result.expect}")
    ax.set_xscale("log", base=2)
    if all(s > 0 for s in est):
        ax.set_yscale("log")
    ax.set_xlabel("d_k")
    ax.set_ylabel("effective scale s")
    fit = result.exponent
    title = f"varcheck probe {rows[0].kernel.label}, seed {result.seed}"
    if fit is not None:
        title += f"\ns ∝ d_k^b, b = {fit.slope:.4g} (expected {fit.expected:.4g})"
    ax.set_title(title, parse_math=False)  # a kernel's path: text, not mathtext
    ax.legend(loc="best")
    save_figure(fig, path)
