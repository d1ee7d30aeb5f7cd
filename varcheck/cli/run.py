"""The steps every command runs once its options are parsed."""

from __future__ import annotations

__all__ = ["check_plot_path"]


def check_plot_path(plot: str | None) -> None:
    """Fail before the run, not after it, when the figure cannot be written."""
    if plot is not None:
        from ..output.figures import check_plot_path as check

        check(plot)
