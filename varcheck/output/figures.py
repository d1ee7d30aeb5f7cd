"""Figure plumbing every family shares (optional extra ``varcheck[plot]``): path checks, saving."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..errors import VarcheckError
from .figure_style import DPI, TITLE_PT
from .text import visible

__all__ = [
    "ensure_writable",
    "ensure_plot_path",
    "save_figure",
    "require_matplotlib",
    "title_figure",
    "wrap_to_width",
    "in_session",
]

#: What a figure's title adds when Ctrl-C (or SIGTERM) cut the run short.
PARTIAL = " — interrupted, partial"


def ensure_writable(path: str, option: str = "--plot") -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(folder):
        raise VarcheckError(f"{option} {path!r}: the folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise VarcheckError(f"{option} {path!r} is a folder; give a file name")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise VarcheckError(f"{option} {path!r}: not writable")


def ensure_plot_path(path: str, option: str = "--plot") -> str:
    """Check, before any work, that a figure can be written to ``path``.

    Needs matplotlib (a clear message when it is missing), a writable file in an existing folder
    and a format matplotlib writes, taken from the extension (none means PNG). ``option`` names
    the path in the messages (``path`` for a result's ``plot(path)``).
    """
    ensure_writable(path, option)
    require_matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if ext and ext not in formats:
        raise VarcheckError(
            f"{option} {path!r}: cannot write a .{ext} figure; accepted: a file ending in "
            + ", ".join("." + f for f in formats)
            + " (.png recommended)"
        )
    return path


def save_figure(fig: Any, path: str) -> None:
    """Write a figure to exactly ``path`` (PNG when it has no extension) and close it."""
    import matplotlib.pyplot as plt

    try:
        # without an extension matplotlib would append ".png"; write the path as given.
        # No "Software" in a PNG: the same result gives the same bytes across versions (the
        # other writers refuse that key, and JPEG, TIFF, WebP and GIF any metadata).
        ext = os.path.splitext(path)[1].lstrip(".").lower()
        fmt = ext or "png"
        extra = {"metadata": {"Software": None}} if fmt == "png" else {}
        # one layout pass before the saved one: constrained layout makes room for a legend
        # below its axes only once it has been sized, and would otherwise cut it off
        fig.draw_without_rendering()
        fig.savefig(path, dpi=DPI, format=None if ext else fmt, **extra)
    except OSError as exc:
        raise VarcheckError(f"--plot {path!r}: cannot write the figure ({exc.strerror})") from None
    except ValueError as exc:  # an unknown format (ensure_plot_path refuses it first)
        raise VarcheckError(f"--plot {path!r}: cannot write the figure ({exc})") from None
    finally:
        plt.close(fig)


def title_figure(
    fig: Any, text: str, result: Any, *, stopped: str | None = None, **style: Any
) -> None:
    """Title a whole figure: ``text``, then the run's seed (a run without one is deterministic)
    and whether it was cut short; shown as text (a ``$`` is not mathtext, an escape is shown).

    ``stopped`` replaces the usual :data:`PARTIAL` when the figure can say more (where a run
    stopped, or that a time limit stopped it); ``style``: matplotlib text keywords. The title
    is wrapped to the figure's width.
    """
    seed = getattr(result, "seed", None)
    said = "no seed (deterministic)" if seed is None else f"seed {seed}"
    if stopped is None:
        stopped = PARTIAL if result.interrupted else ""
    # the title names a model or a file as it is called: text, not mathtext ($…$) or escapes
    title = visible(f"{text}; {said}{stopped}", keep="\n")
    size = style.pop("fontsize", TITLE_PT)
    fig.suptitle(
        wrap_to_width(title, fig.get_figwidth(), size),
        **{"fontsize": size, "parse_math": False, **style},
    )


def wrap_to_width(text: str, inches: float, points: float) -> str:
    """``text`` wrapped at spaces to lines that fit ``inches`` at a font of ``points`` (each
    line of it on its own); a character is taken as 0.62 em wide, a little more than the
    average of DejaVu Sans."""
    chars = max(20, int(inches * 72 / (0.62 * points)))
    return "\n".join(textwrap.fill(line, chars) or line for line in text.split("\n"))


#: True while a result's ``plot()`` draws (see :func:`in_session`).
_IN_SESSION: ContextVar[bool] = ContextVar("varcheck_plot_in_session", default=False)


def require_matplotlib() -> Any:
    """Import matplotlib with a headless backend (the session's own inside :func:`in_session`),
    or explain how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise VarcheckError(
            "--plot needs matplotlib, which is not installed; install it with "
            "pip install 'varcheck[plot]'"
        ) from None
    if not _IN_SESSION.get():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def in_session() -> Iterator[None]:
    """Draw with the session's backend, interactive mode off, instead of switching to Agg.

    Switching a notebook's pyplot to Agg would close the user's open figures and stop their
    later ones showing inline; the figure drawn here is saved and closed, so it shows nowhere.
    """
    token = _IN_SESSION.set(True)
    try:
        plt = require_matplotlib()
        with plt.ioff():
            yield
    finally:
        _IN_SESSION.reset(token)
