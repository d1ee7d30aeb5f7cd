"""The steps every command runs once its options are parsed.

A command reads its options, then hands :func:`run` what to compute; how the result is rendered
and drawn is looked up in :mod:`varcheck.output.presenters` (the table the notebook methods use
too). ``run`` does the rest in the same order for every command:
check the figure's path (before any work), compute (with a progress bar on a terminal), render
to stdout, write the figure. Once the computation has returned (maybe cut short by Ctrl-C or
SIGTERM, with partial results), a further signal no longer interrupts the output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from .console import ProgressReporter, stdout_console
from .signals import results_phase

__all__ = ["run"]

R = TypeVar("R")


def _ensure_plot_path(plot: str | None) -> None:
    """Fail before the run, not after it, when the figure cannot be written."""
    if plot is not None:
        from ..output.figures import ensure_plot_path

        ensure_plot_path(plot)


def run(
    compute: Callable[..., R],
    *,
    fmt: str,
    plot: str | None = None,
    progress: str | None = None,
) -> R:
    """Compute a command's result, print it and draw its figure.

    Parameters
    ----------
    compute : callable
        The work. Called with a progress callback ``(index, total, fraction)`` when
        ``progress`` names the bar, with no argument otherwise.
    fmt : str
        The --format value.
    plot : str, optional
        The --plot path: checked before ``compute`` runs, then the result's figure drawn there.
    progress : str, optional
        Label of the progress bar (shown on a terminal only, and only after half a second).

    Returns
    -------
    The result of ``compute``, for the command's exit status.
    """
    _ensure_plot_path(plot)
    if progress is None:
        result = compute()
    else:
        with ProgressReporter(progress) as reporter:
            result = compute(reporter)
    # from here on a signal is noted, not raised: the (maybe partial) results are printed whole
    results_phase()
    from ..output.presenters import figure_of, presenter_of

    render, _ = presenter_of(result)
    render(result, fmt, stdout_console())
    if plot is not None:
        figure = figure_of(result)
        if callable(figure):
            figure(result, plot)
            from ..output.text import visible

            # on stderr, so that stdout stays the --format document alone
            click.echo(f"varcheck: wrote {visible(plot)}", err=True)
    return result
