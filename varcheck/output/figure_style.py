"""How every varcheck figure looks: its size, its fonts and its error bars, set in one place.

Figures are made to be projected. Each is saved at :data:`DPI` dots per inch and at most
:data:`MAX_WIDTH` × :data:`MAX_HEIGHT` inches, i.e. 1280 × 720 pixels: the native frame of a
720p (16:9) projector and half of a 1080p one in each direction, so a projector shows it at
full size or larger and never shrinks its text. No text is smaller than :data:`TEXT_PT` points
at that size (12 pt is 17 pixels at 100 dpi, about 2.3% of the frame's height); titles are
:data:`TITLE_PT`.

Error bars and bands are confidence intervals at the run's level everywhere (95% by default:
about ±2 standard errors where the interval is normal), the convention of the tables too;
:func:`error_bars` is the phrase each figure's legend or caption says it with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

__all__ = [
    "DPI",
    "error_bars",
    "MAX_HEIGHT",
    "MAX_WIDTH",
    "TEXT_PT",
    "TITLE_PT",
    "figure_size",
    "projected",
    "tick_step",
]

#: Dots per inch of every saved figure.
DPI = 100
#: The largest figure, in inches (1280 × 720 pixels at :data:`DPI`).
MAX_WIDTH, MAX_HEIGHT = 12.8, 7.2
#: The smallest text in any figure, and the size of titles, in points.
TEXT_PT, TITLE_PT = 12, 14

#: matplotlib settings in force while a figure is drawn (keys typed loosely: matplotlib's
#: stubs list every rc name as a literal).
RC: dict[Any, Any] = {
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "font.size": TEXT_PT,
    "axes.titlesize": TEXT_PT + 1,
    "axes.labelsize": TEXT_PT,
    "xtick.labelsize": TEXT_PT,
    "ytick.labelsize": TEXT_PT,
    "legend.fontsize": TEXT_PT,
    "legend.title_fontsize": TEXT_PT,
    "figure.titlesize": TITLE_PT,
    "figure.constrained_layout.use": True,
}

F = TypeVar("F", bound=Callable[..., Any])


def error_bars(confidence: float = 0.95) -> str:
    """What every error bar and band is, as a figure says it: ``error bars: 95% intervals``."""
    from .formats import confidence_label

    return f"error bars: {confidence_label(confidence)} intervals"


def figure_size(width: float = MAX_WIDTH, height: float = 5.4) -> tuple[float, float]:
    """A figure size in inches, capped at the projector frame (:data:`MAX_WIDTH` ×
    :data:`MAX_HEIGHT`)."""
    return min(width, MAX_WIDTH), min(height, MAX_HEIGHT)


def tick_step(count: int, inches: float, chars: int = 3, *, across: bool = True) -> int:
    """Label every ``tick_step``-th of ``count`` ticks along ``inches`` so that labels of up to
    ``chars`` characters do not touch: ``across`` for labels side by side (an x axis), else
    stacked (a y axis, one line of text each)."""
    need = (chars * 0.62 + 0.8) * TEXT_PT if across else 1.6 * TEXT_PT
    fits = max(1, int(inches * 72 / need))
    return max(1, -(-count // fits))


@contextmanager
def _style() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(RC):
        yield


def projected(draw: F) -> F:
    """Draw (and save) a figure with the projector style: fonts of at least :data:`TEXT_PT`
    points, :data:`DPI` dots per inch, constrained layout."""

    @wraps(draw)
    def drawn(*args: Any, **kwargs: Any) -> Any:
        with _style():
            return draw(*args, **kwargs)

    return drawn  # type: ignore[return-value]
