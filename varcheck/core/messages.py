"""How a value, a size, a duration and a suggestion are written in what varcheck tells a user.

Every refusal, note and table that repeats a user's value, names a memory size or a time uses
these functions, so that the same refusal reads the same in every command: values cut to about
60 characters (numpy scalars as their Python value), sizes in binary units (KiB, MiB, GiB,
TiB), durations in s, min, h, days or years. The module imports nothing, so the command line
and the core use it at no start-up cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["SHOWN_CHARS", "cut", "did_you_mean", "duration_text", "shown", "size_text"]

#: the longest value a message repeats in full
SHOWN_CHARS = 60

_SIZES = (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024))
_YEAR = 365.25 * 86400.0
_DURATIONS = (("years", _YEAR), ("days", 86400.0), ("h", 3600.0), ("min", 60.0))


def cut(text: str, width: int = SHOWN_CHARS) -> str:
    """``text`` for a message: at most ``width`` characters, its start and end kept.

    Examples
    --------
    >>> cut("2.." + "9" * 100)
    '2..999999999999999999999999999999999999…99999999999999999999'
    >>> cut("--dk 2..8")
    '--dk 2..8'
    """
    if len(text) <= width:
        return text
    tail = width // 3
    return text[: width - tail - 1] + "…" + text[len(text) - tail :]


def shown(value: object, width: int = SHOWN_CHARS) -> str:
    """A value a user gave, for a message: as typed (its ``repr``), cut to ``width`` characters.

    A numpy scalar is shown as its Python value (``3``, not ``np.int64(3)``), and a whole number
    of 20 digits or more as a float (``1e+308``, not 309 digits).

    Examples
    --------
    >>> shown(0.5), shown("x" * 3), shown(-3 * 10**400)
    ('0.5', "'xxx'", '-3e+400')
    >>> shown(2**70)
    '1.18e+21'
    """
    item = getattr(value, "item", None)
    if type(value).__module__ == "numpy" and callable(item) and getattr(value, "ndim", 1) == 0:
        value = item()
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        try:
            return f"{float(value):.3g}"
        except OverflowError:  # beyond a float: its leading digits and exponent from log10
            power = math.log10(abs(value))
            exponent = math.floor(power)
            digits = f"{10 ** (power - exponent):.3g}"
            if digits == "10":  # 9.999... rounded up
                digits, exponent = "1", exponent + 1
            return f"{'-' if value < 0 else ''}{digits}e+{exponent}"
    return cut(repr(value), width)


def size_text(n_bytes: float) -> str:
    """A memory size in bytes (below a kibibyte), KiB, MiB, GiB or TiB, to 3 significant digits.

    Examples
    --------
    >>> size_text(8), size_text(3 << 20), size_text(1.5 * 1024**4), size_text(float("inf"))
    ('8 bytes', '3 MiB', '1.5 TiB', 'unbounded')
    """
    if not math.isfinite(n_bytes) or n_bytes > 1e30:
        return "unbounded"
    for unit, scale in _SIZES:
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes:.0f} bytes"


def duration_text(seconds: float) -> str:
    """A duration in s, min, h, days or years (of 365.25 days), to 2 significant digits.

    A unit is used from twice its length on (``119 s``, then ``2 min``).

    Examples
    --------
    >>> duration_text(40), duration_text(7200), duration_text(3e12), duration_text(math.inf)
    ('40 s', '2 h', '9.5e+04 years', 'forever')
    """
    if not math.isfinite(seconds) or seconds > 1e30:
        return "forever"
    for unit, scale in _DURATIONS:
        if seconds >= 2 * scale:
            return f"{seconds / scale:.2g} {unit}"
    return f"{seconds:.2g} s"


def did_you_mean(word: str, choices: Iterable[str], prefix: str = "") -> str:
    """`` (did you mean 'NAME'?)`` for the choice closest to a mistyped ``word``, or ``""``.

    ``prefix`` is written before the choice (``scipy.`` for a scipy law's name).

    Examples
    --------
    >>> did_you_mean("swep", ["sweep", "assert"])
    " (did you mean 'sweep'?)"
    >>> did_you_mean("zzz", ["sweep"])
    ''
    """
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {prefix + close[0]!r}?)" if close else ""
