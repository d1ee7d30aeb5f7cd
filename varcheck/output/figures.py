"""Figures (optional extra ``varcheck[plot]``): pure functions of a result, written to a PNG."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from ..errors import VarcheckError

if TYPE_CHECKING:
    from ..checks.sweep import SweepResult

__all__ = [
    "check_output_path",
    "check_plot_path",
    "save_figure",
    "require_matplotlib",
    "plot_sweep",
]


def check_output_path(path: str, option: str = "--plot") -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise VarcheckError(f"{option} {path!r}: the folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise VarcheckError(f"{option} {path!r} is a folder; give a file name")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise VarcheckError(f"{option} {path!r}: not writable")


def check_plot_path(path: str) -> str:
    """Check, before any work, that a figure can be written to ``path``.

    Needs matplotlib (a clear message when it is missing), a writable file in an existing folder
    and a format matplotlib writes, taken from the extension (none means PNG).
    """
    check_output_path(path)
    require_matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if ext and ext not in formats:
        raise VarcheckError(
            f"--plot {path!r}: cannot write a .{ext} figure; accepted: a file ending in "
            + ", ".join("." + f for f in formats)
            + " (.png recommended)"
        )
    return path


def save_figure(fig: Any, path: str) -> None:
    """Write a figure to exactly ``path`` (PNG when it has no extension) and close it."""
    import matplotlib.pyplot as plt

    try:
        # without an extension matplotlib would append ".png"; write the path as given.
        # No "Software" metadata: the same result gives the same bytes across versions.
        fmt = None if os.path.splitext(path)[1] else "png"
        fig.savefig(path, dpi=110, format=fmt, metadata={"Software": None})
    except OSError as exc:
        raise VarcheckError(f"--plot {path!r}: cannot write the figure ({exc.strerror})") from None
    except ValueError as exc:  # an unknown format (check_plot_path refuses it first)
        raise VarcheckError(f"--plot {path!r}: cannot write the figure ({exc})") from None
    finally:
        plt.close(fig)


def require_matplotlib():  # noqa: ANN201
    """Import matplotlib with a headless backend, or explain how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise VarcheckError(
            "--plot needs matplotlib, which is not installed; install it with "
            "pip install 'varcheck[plot]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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
