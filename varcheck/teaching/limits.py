"""Feasibility of the teaching commands: sizes checked against time and memory before any work.

Each command estimates its cost in *units* of about a nanosecond (one multiply-add; drawing a
random entry costs more) and its largest allocation in bytes, and refuses in one line, naming
the option, the estimate and the limit, when either is too large. Refused values are echoed cut
to about 60 characters.
"""

from __future__ import annotations

import math

from ..core.options import shown as _core_shown
from ..errors import VarcheckError

__all__ = [
    "approx",
    "duration",
    "overflowing_laws",
    "refuse",
    "shown",
]


def shown(value: object) -> str:
    """``value`` as typed, cut to about 60 characters; a huge whole number as ``1e+308``."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"{approx(value):.3g}"  # 1e+308, not 309 digits
    return _core_shown(value)


def approx(value: float | int) -> float:
    """A float for estimates, ``inf`` for a whole number too large for a float."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def duration(units: float) -> str:
    """Cost units (about a nanosecond each) as a duration: ``3.2 s``, ``5 min``, ``2e+09 years``."""
    seconds = units / 1e9
    if not math.isfinite(seconds) or seconds > 1e30:
        return "forever"
    if seconds < 120:
        return f"{seconds:.2g} s"
    if seconds < 7200:
        return f"{seconds / 60:.2g} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.2g} h"
    if seconds < 2 * 365 * 86400:
        return f"{seconds / 86400:.2g} days"
    return f"{seconds / (365 * 86400):.2g} years"


def _size(nbytes: float) -> str:
    return "unbounded" if not math.isfinite(nbytes) or nbytes > 1e30 else f"{nbytes / 1e9:.3g} GB"


def refuse(
    option: str,
    value: object,
    *,
    units: float | None = None,
    max_units: float | None = None,
    nbytes: float | None = None,
    max_bytes: float | None = None,
    accepted: str,
) -> VarcheckError:
    """The one-line refusal of an infeasible size: option, value, estimate, limit, what is accepted.

    With ``value`` None, ``option`` is shown as it is (several options together).

    Examples
    --------
    >>> str(refuse("replicates", 10**9, nbytes=1.6e10, max_bytes=1e9, accepted="100..50000000"))
    'replicates=1000000000 needs about 16 GB of memory (limit 1 GB); accepted: 100..50000000'
    """
    parts = []
    if nbytes is not None and max_bytes is not None and nbytes > max_bytes:
        need = f"about {_size(nbytes)} of" if _size(nbytes) != "unbounded" else "unbounded"
        parts.append(f"needs {need} memory (limit {_size(max_bytes)})")
    if units is not None and max_units is not None and units > max_units:
        about = "about " if duration(units) != "forever" else ""
        parts.append(f"would take {about}{duration(units)} (limit about {duration(max_units)})")
    what = option if value is None else f"{option}={shown(value)}"
    return VarcheckError(f"{what} {' and '.join(parts)}; accepted: {accepted}")


def overflowing_laws(*specs: str) -> VarcheckError:
    """The refusal of entry laws whose draws leave the float range (``t:df=1e-320`` draws
    ``inf``): a simulation of them has no numbers to show."""
    laws = ", ".join(dict.fromkeys(shown(s) for s in specs))
    return VarcheckError(
        f"the entry law {laws} draws values beyond the range of floating point (inf or nan in "
        "the simulation); accepted: a law whose draws stay finite, e.g. t:df=D with D >= 0.1"
    )
