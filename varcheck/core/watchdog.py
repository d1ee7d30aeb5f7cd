"""A user's code under a time cap and beside the results: a watchdog for calls that never return,
and its prints kept off stdout.

varcheck checks ``--max-seconds`` between calls of a user's function (a sampler, a kernel); a
call stuck in the user's Python code (a sleep, a loop, a lock) would never return to be checked.
:func:`guarded` runs the user's code with a SIGALRM timer: a call still running at the cap plus a
grace raises :class:`~varcheck.core.distributions.DrawDeadline`, the exception the estimators
already read as "the time cap passed", and the caller keeps what the calls before it gave. Only
a call on the main thread is stopped (signals reach no other thread), only where SIGALRM exists,
and only in Python code: a call stuck in C, in a worker thread, or swallowing every exception
runs on. The timer and the handler found are restored afterwards.

Within :func:`guarded`, what the user's code prints goes to stderr: stdout carries the JSON, CSV
or Markdown results. The redirection is process-wide, so it is made once around the whole run,
not per call from worker threads.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType

from ..errors import VarcheckError
from .distributions import DrawDeadline

__all__ = ["GRACE_SECONDS", "limit", "guarded", "watchdog", "watched_call"]

#: Seconds a call may run past the time cap before it is stopped (at least; 10% of the cap for
#: caps over 10 s).
GRACE_SECONDS = 1.0
#: How often the timer looks again while no call of the user's code is under way.
_RECHECK_SECONDS = 0.25


class _State:
    """Whether the main thread is inside a call of the user's code, while a timer is armed."""

    def __init__(self) -> None:
        self.main: int | None = None  # the main thread's ident while a watchdog is installed
        self.calling = False


_state = _State()


def limit(max_seconds: float | None) -> float | None:
    """Seconds after which a call is stopped: the cap and its grace (None: no cap)."""
    if max_seconds is None:
        return None
    return max_seconds + max(GRACE_SECONDS, 0.1 * max_seconds)


#: The longest timer set (``setitimer`` overflows near 1e10 s; no cap that long can be reached).
_LONGEST_SECONDS = 1e8


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    if _state.main is None:  # the watchdog is being taken down: a late alarm does nothing
        return
    # look again soon: a call may start once the cap has passed, and user code that swallows
    # this stop (an ``except Exception``) must not leave its next stuck call unwatched
    signal.setitimer(signal.ITIMER_REAL, _RECHECK_SECONDS)
    # only a call of the user's code is stopped: varcheck's own work checks the cap itself
    if not _state.calling:
        return
    _state.calling = False
    raise DrawDeadline("a call of the user's code ran past the time cap")


@contextlib.contextmanager
def watchdog(seconds: float | None) -> Iterator[Callable[[], None]]:
    """Within the block, ``arm()`` stops a call made in :func:`watched_call` that still runs
    ``seconds`` from now (``None``: never); ``arm()`` again restarts the count. A no-op off
    the main thread, without SIGALRM, or inside another watchdog."""
    usable = (
        hasattr(signal, "setitimer")
        and _state.main is None
        and threading.current_thread() is threading.main_thread()
    )
    if seconds is None or not usable:
        yield lambda: None
        return
    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, 0)
    _state.main = threading.get_ident()

    def arm() -> None:
        signal.setitimer(signal.ITIMER_REAL, min(seconds, _LONGEST_SECONDS))

    try:
        yield arm
    finally:
        _state.main, _state.calling = None, False  # first: an alarm pending now does nothing
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
        if old_delay > 0:
            left = old_delay - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), old_interval)


@contextlib.contextmanager
def guarded(max_seconds: float | None) -> Iterator[Callable[[], None]]:
    """Run a user's code within the block: prints to stderr, and ``arm()`` starts the
    :func:`watchdog` for ``max_seconds`` and its grace."""
    # the redirection is process-wide: only the outermost run on the main thread makes it
    # (two API calls in two threads would otherwise leave stdout pointing at stderr)
    outermost = _state.main is None and threading.current_thread() is threading.main_thread()
    redirect = contextlib.redirect_stdout(sys.stderr) if outermost else contextlib.nullcontext()
    with redirect, watchdog(limit(max_seconds)) as arm:
        yield arm


class watched_call:  # noqa: N801 - used as a function: ``with watched_call(what):``
    """Around one call of the user's code: the watchdog may stop it (main thread only).

    The stop surfaces as :class:`DrawDeadline` naming ``what``, also when the user's exception
    handling (or :func:`~varcheck.core.user_code.call_user`) turned it into a
    :class:`~varcheck.errors.VarcheckError`.
    """

    __slots__ = ("what", "watched")

    def __init__(self, what: str) -> None:
        self.what = what
        self.watched = False

    def __enter__(self) -> None:
        self.watched = _state.main is not None and threading.get_ident() == _state.main
        if self.watched:
            _state.calling = True

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.watched:
            _state.calling = False
        stopped = isinstance(exc, DrawDeadline) or (
            isinstance(exc, VarcheckError) and isinstance(exc.__cause__, DrawDeadline)
        )
        if stopped:
            raise DrawDeadline(f"a call of {self.what} ran past the time cap") from None
