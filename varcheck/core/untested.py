"""Runs that test nothing: ``softmax``, ``train``, ``beta`` and ``audit``.

A study, a training run, a β report and an audit of a model's heads measure and report, with no
verdict (an audit's per-head ``scale_check`` is a reading the exit code does not follow). Their
exit code says only whether the run went to its end (0) or was interrupted (130), and their
``outcome`` says the same in a word, so that every command's JSON carries an ``outcome`` a
script can read without knowing the command.
"""

from __future__ import annotations

from .verdicts import INTERRUPTED, exit_code

__all__ = ["DONE", "INTERRUPTED", "Untested"]

#: The outcome of a run that tests nothing and went to its end (exit 0).
DONE = "done"


class Untested:
    """Mixin for a result with no verdict: ``outcome`` and ``exit_code`` from ``interrupted``.

    A result without an ``interrupted`` field (``beta``: nothing to interrupt once the file is
    read) is always :data:`DONE`.
    """

    @property
    def outcome(self) -> str:
        """:data:`DONE`, or :data:`INTERRUPTED` when the run was stopped."""
        return INTERRUPTED if getattr(self, "interrupted", False) else DONE

    @property
    def exit_code(self) -> int:
        """0 (the run tests nothing), or 130 when it was interrupted."""
        return exit_code([], interrupted=getattr(self, "interrupted", False))
