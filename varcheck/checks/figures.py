"""The sweep's figure (optional extra ``varcheck[plot]``): each row's estimate against its
reference, and the scaled variance where it adds to that, with intervals and verdicts marked."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..output.figure_style import TITLE_PT, figure_size, projected
from ..output.figures import require_matplotlib, save_figure, wrap_to_width
from ..output.formats import confidence_label
from ..output.text import visible

if TYPE_CHECKING:
    from .sweep import SweepResult, SweepRow

__all__ = ["plot_sweep", "PALETTE"]

#: Okabe–Ito colours (distinguishable with the common colour-vision deficiencies).
PALETTE = {
    "consistent": "#0072B2",
    "rejected": "#D55E00",
    "marginal": "#E69F00",
    "unreliable": "#999999",
    "reference": "#000000",
    "claim": "#CC79A7",
}


def _reference(row: SweepRow) -> float:
    """What a row is judged against: the claimed value (the theory's when the claim is it)."""
    value = row.theory.var if row.claim_value is None and row.theory else row.claim_value
    return math.nan if value is None or not math.isfinite(value) else value


def _kind(row: SweepRow, alpha: float) -> str:
    if row.verdict in ("rejected", "unreliable"):
        return row.verdict
    return "marginal" if row.marginal_only(alpha) else "consistent"


_LABELS = {
    "consistent": "consistent",
    "rejected": "rejected (Holm)",
    "marginal": "† own interval excludes it; Holm keeps it",
    "unreliable": "no valid interval (estimate only)",
}
_MARKERS = {"consistent": "o", "rejected": "X", "marginal": "D", "unreliable": "s"}


def _points(ax: Any, rows: list[SweepRow], alpha: float, scale: Any) -> None:
    """One marker per row, its interval as an error bar, styled by the row's verdict."""
    for kind in _LABELS:
        mine = [r for r in rows if _kind(r, alpha) == kind]
        if not mine:
            continue
        estimates = [(r, r.estimate) for r in mine if r.estimate is not None]
        x = [r.dk for r, _ in estimates]
        y = [e.var / scale(r) for r, e in estimates]
        err = None
        if kind != "unreliable":
            lo = [e.confidence_interval.low / scale(r) for r, e in estimates]
            hi = [e.confidence_interval.high / scale(r) for r, e in estimates]
            err = [
                [a - b for a, b in zip(y, lo, strict=True)],
                [b - a for a, b in zip(y, hi, strict=True)],
            ]
        ax.errorbar(
            x,
            y,
            yerr=err,
            fmt=_MARKERS[kind],
            capsize=3,
            color=PALETTE[kind],
            markersize=6,
            label=_LABELS[kind],
        )


def _scaled_panel_adds(result: SweepResult, rows: list[SweepRow]) -> bool:
    """Whether the scaled panel shows what the ratio panel does not: with a sampler it would only
    divide the user's values by d_k, and where the theory and the reference are d_k itself on
    every row the two panels are the same picture."""
    if result.sampler is None:
        for r in rows:
            theory = r.theory.var if r.theory is not None else math.nan
            if not (math.isclose(theory, r.dk) and math.isclose(_reference(r), r.dk)):
                return True
    return False


@projected
def plot_sweep(result: SweepResult, path: str) -> None:
    """Left: estimate / reference with its interval (1 is the claim holding); right, where it
    adds anything: the scaled variance Var/d_k with the theory and the claim; verdicts marked."""
    from .render import sweep_title

    plt = require_matplotlib()
    alpha = 1.0 - result.confidence
    rows = [r for r in result.rows if r.estimate is not None and math.isfinite(_reference(r))]
    two = _scaled_panel_adds(result, rows)
    fig, axes = plt.subplots(
        1, 2 if two else 1, figsize=figure_size(12.8 if two else 8.0, 6.0), squeeze=False
    )
    ax_ratio = axes[0][0]
    against = "theory" if result.claim == "theory" else "claim"
    _points(ax_ratio, rows, alpha, _reference)
    ax_ratio.axhline(1.0, color=PALETTE["reference"], lw=1, label=f"estimate = {against}")
    same = "" if two or result.sampler is not None else "  (= Var / d_k here)"
    ax_ratio.set_ylabel(f"estimate / {against}{same}")
    level = confidence_label(result.confidence)
    ax_ratio.set_title(f"Var estimate over the {against} ({level} CI)")
    if two:
        _scaled_panel(axes[0][1], result, rows, alpha)
    dks = sorted({r.dk for r in rows})
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        if dks:
            ax.set_xticks(dks, [str(d) for d in dks])  # 64, not 2⁶
            ax.minorticks_off()
        ax.set_xlabel("d_k")
        ax.legend(loc="best")
    left_out = len(result.rows) - len(rows)
    note = f" · {left_out} rows without an estimate not drawn" if left_out else ""
    title = (
        visible(sweep_title(result))  # a user's claim and sampler: text, not mathtext
        + f"\nerror bars: {confidence_label(result.confidence)} intervals · verdicts "
        f"Holm-adjusted · seed {result.seed}{note}"
    )
    fig.suptitle(
        wrap_to_width(title, fig.get_figwidth(), TITLE_PT), fontsize=TITLE_PT, parse_math=False
    )
    save_figure(fig, path)


def _scaled_panel(ax: Any, result: SweepResult, rows: list[SweepRow], alpha: float) -> None:
    """The scaled variance Var/d_k of each row, with the exact theory and the claim drawn."""
    _points(ax, rows, alpha, lambda r: r.dk)
    dks = [r.dk for r in rows]
    th = [
        r.theory.var / r.dk if r.theory is not None and math.isfinite(r.theory.var) else math.nan
        for r in rows
    ]
    ax.plot(dks, th, "-", color=PALETTE["reference"], lw=1, label="exact theory / d_k")
    if result.claim != "theory":
        cl = [(r.claim_value if r.claim_value is not None else math.nan) / r.dk for r in rows]
        ax.plot(dks, cl, "--", color=PALETTE["claim"], label=f"claim: {result.claim}, / d_k")
    ax.set_ylabel("Var / d_k  (the scaled variance)")
    ax.set_title("scaled: Var(q·k/√d_k)")
