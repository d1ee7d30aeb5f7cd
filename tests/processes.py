"""What the tests that start varcheck in a child process share."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """Give a child Python's Ctrl-C handling (a ``preexec_fn``).

    A background job of a non-interactive shell (a CI step, ``make test &``) starts with SIGINT
    ignored, and a child inherits that: it would run on after the test's Ctrl-C.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
