"""SIGINT and SIGTERM: stop the work, keep what it found, print it whole.

Ctrl-C sends SIGINT; CI cancellation and ``timeout`` send SIGTERM. Both raise a
``KeyboardInterrupt`` in the main thread (:class:`Terminated` for SIGTERM), so every path that
keeps partial results on Ctrl-C keeps them on SIGTERM too. Only the first signal interrupts:
once the work has been stopped, or once its results are being written (:func:`results_phase`),
further signals are only noted, so the partial output is never cut in the middle. Only a third
signal, two seconds or more after the first, stops the output too (for a writer stuck on a
blocked pipe): a burst of signals (a CI runner's, a key held down) cannot cut it. The exit status
is 128 + the first signal's number (130 for SIGINT, 143 for SIGTERM), and so is the
``exit_code`` the results write (:func:`varcheck.core.interrupts.note_signal`). Once that status is
known, the console script ignores both signals: Python's own teardown would otherwise restore
their default actions, and a late signal would kill the process instead of letting it exit with
its status.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from ..core.interrupts import note_signal

__all__ = [
    "Terminated",
    "exit_status",
    "handling_signals",
    "ignore_signals",
    "received",
    "results_phase",
    "writing",
]

_HANDLED = (signal.SIGINT, signal.SIGTERM)
#: seconds after the first signal from which a third one stops a stuck output
_ESCALATE = 2.0


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM: stops the work like Ctrl-C."""


class _State:
    def __init__(self) -> None:
        self.first: int | None = None  # the first signal received
        self.raised = False  # the work has been interrupted once
        self.shielded = False  # the results are being written
        self.closing = False  # main() is mapping the outcome: never raise again
        self.noted = 0  # signals received since the work stopped or the output began
        self.since = 0.0  # when the first signal arrived (time.monotonic)


_state = _State()


def _interrupt(signum: int) -> KeyboardInterrupt:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _state.first is None:
        _state.first = signum
        note_signal(signum)  # the results' exit_code: the status the process will exit with
        _state.since = time.monotonic()
    if not (_state.raised or _state.shielded or _state.closing):
        _state.raised = True
        raise _interrupt(signum)
    _state.noted += 1
    if _state.noted >= 2 and not _state.closing and time.monotonic() - _state.since >= _ESCALATE:
        _state.closing = True
        raise _interrupt(signum)


def writing() -> bool:
    """Whether the results were being written (an interrupt then may cut them)."""
    return _state.shielded


def results_phase() -> None:
    """From now on the process writes its results: a signal no longer cuts them."""
    _state.shielded = True


def received() -> int | None:
    """The first signal received during this command line, if any."""
    return _state.first


def exit_status(code: int) -> int:
    """``code``, or 128 + the signal's number when a signal arrived during the run."""
    _state.closing = True
    return code if _state.first is None else 128 + _state.first


@contextmanager
def handling_signals(*, restore: bool = True) -> Iterator[None]:
    """Install the handlers for one command line (main thread only); ``restore`` the old ones."""
    global _state
    _state = _State()
    note_signal(None)
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a signal the process was started with ignored stays ignored: a shell starts background
    # jobs with SIGINT ignored, so that Ctrl-C in the terminal does not reach them
    previous = {
        sig: signal.signal(sig, _on_signal)
        for sig in _HANDLED
        if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        _state.closing = True
        note_signal(None)  # the results are written: a later run in this process starts afresh
        if restore:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def ignore_signals() -> None:
    """Ignore SIGINT and SIGTERM from now on (the process is exiting with its status)."""
    if threading.current_thread() is threading.main_thread():
        for sig in _HANDLED:
            signal.signal(sig, signal.SIG_IGN)
