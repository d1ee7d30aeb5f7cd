"""The signal that stopped this run, recorded for the exit status the results report.

Kept apart from :mod:`varcheck.core.verdicts` (which needs numpy through the estimators) so
that the command line can install its signal handlers without loading numpy: ``--help`` and
usage errors stay fast.
"""

from __future__ import annotations

__all__ = ["EXIT_INTERRUPTED", "note_signal", "interrupted_exit"]

#: the exit status of a run stopped by Ctrl-C (128 + SIGINT)
EXIT_INTERRUPTED = 130

_noted: list[int] = [EXIT_INTERRUPTED]


def note_signal(signum: int | None) -> None:
    """Record the signal that stops this run: an interrupted run's exit status is then
    128 + ``signum`` (``None``: back to 130, Ctrl-C's). The command line's signal handler
    calls it, so the status written in the results is the one the process exits with."""
    _noted[0] = EXIT_INTERRUPTED if signum is None else 128 + signum


def interrupted_exit() -> int:
    """The exit status of an interrupted run: 128 + the signal :func:`note_signal` recorded."""
    return _noted[0]
