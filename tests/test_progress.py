"""The progress bar (#18): monotone, and gone from the terminal when the run ends."""

from __future__ import annotations

import io

from varcheck.cli.console import ProgressReporter


def test_progress_never_goes_backwards() -> None:
    bar = ProgressReporter("check", enabled=False)
    seen = []
    for index, fraction in [(0, 0.5), (0, 0.2), (1, 1.0), (2, 0.9), (2, 0.4), (2, 1.0)]:
        bar(index, 3, fraction)
        seen.append(bar.done)
    assert seen == sorted(seen) and seen[-1] == 3.0


def test_progress_bar_is_transient(monkeypatch) -> None:
    """Shown on a (forced) terminal, then erased: nothing of it stays in the scrollback."""
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    monkeypatch.setattr("varcheck.cli.console.stderr_console", lambda: console)
    with ProgressReporter("sweep", delay=0.0, enabled=True) as bar:
        bar(0, 2, 0.5)
        bar(1, 2, 1.0)
    text = out.getvalue()
    assert "sweep" in text  # it was drawn
    assert text.rstrip().endswith("\x1b[2K") or "\x1b[2K" in text[-40:]  # and erased
