"""The sweep's figure (optional extra ``varcheck[plot]``): Var(q·k) against d_k with intervals."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..output.figures import require_matplotlib, save_figure

if TYPE_CHECKING:
    from .sweep import SweepResult

__all__ = ["plot_sweep"]


def plot_sweep(result: SweepResult, path: str) -> None:
    """Estimate and interval against d_k, raw (with theory and claim) and scaled."""
    plt = require_matplotlib()
    rows = [r for r in result.rows if r.estimate is not None]
    fig, (ax_raw, ax_scaled) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    dks = [r.dk for r in rows]
    for ax, scaled in ((ax_raw, False), (ax_scaled, True)):
        div = [r.dk if scaled else 1 for r in rows]
        est = [r.estimate.var / dv for r, dv in zip(rows, div, strict=True)]
        lo = [r.estimate.confidence_interval.low / dv for r, dv in zip(rows, div, strict=True)]
        hi = [r.estimate.confidence_interval.high / dv for r, dv in zip(rows, div, strict=True)]
        err = [
            [e - lw for e, lw in zip(est, lo, strict=True)],
            [h - e for e, h in zip(est, hi, strict=True)],
        ]
        ax.errorbar(dks, est, yerr=err, fmt="o", capsize=3, label="estimate ± CI")
        th = [
            r.theory.var / dv if math.isfinite(r.theory.var) else math.nan
            for r, dv in zip(rows, div, strict=True)
        ]
        ax.plot(dks, th, "-", color="gray", label="theory")
        if result.claim != "theory":
            cl = [(r.claim_value or math.nan) / dv for r, dv in zip(rows, div, strict=True)]
            ax.plot(dks, cl, "--", color="red", label=f"claim: {result.claim}")
        ax.set_xscale("log", base=2)
        if not scaled:
            ax.set_yscale("log")
        ax.set_xlabel("d_k")
        ax.set_ylabel("Var(q·k / √d_k)" if scaled else "Var(q·k)")
        ax.set_title("scaled" if scaled else "raw")
        ax.legend()
    fig.suptitle(f"varcheck sweep, seed {result.seed}", fontsize=10)
    save_figure(fig, path)
