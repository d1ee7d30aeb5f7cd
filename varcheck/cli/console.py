"""Where the command line writes: the stdout and stderr consoles and the progress bar."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["ProgressReporter", "stderr_console", "stdout_console"]


def stdout_console() -> Console:
    """A rich console on stdout: wide when piped, and a closed pipe reported to ``main``."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit with status 1 ("rejected" here); let main() report a closed pipe
            self.quiet = True
            raise BrokenPipeError

    # a pipe or file gets a wide table instead of rich's 80-column default
    width = None if sys.stdout.isatty() else 150
    return _Console(soft_wrap=False, width=width)


def stderr_console() -> Console:
    """A rich console on stderr (progress bars)."""
    from rich.console import Console

    return Console(stderr=True)


class ProgressReporter:
    """A rich progress bar on stderr, shown only on a terminal and only after ``delay`` seconds."""

    def __init__(self, label: str, *, delay: float = 0.5, enabled: bool | None = None) -> None:
        self.label = label
        self.delay = delay
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.start = time.perf_counter()
        self._progress: Any = None
        self._task: Any = None
        self.done = 0.0

    def __call__(self, index: int, total: int, fraction: float) -> None:
        # never backwards: an adaptive round that grows lowers the fraction of the current one
        self.done = max(self.done, index + min(fraction, 1.0))
        if not self.enabled:
            return
        if self._progress is None:
            if time.perf_counter() - self.start < self.delay:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                console=stderr_console(),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=total)
        self._progress.update(
            self._task,
            completed=self.done,
            description=f"{self.label} {min(index + 1, total)}/{total}",
        )

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
