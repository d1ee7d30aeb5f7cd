"""Feasibility of the teaching commands: sizes checked against time and memory before any work.

Each command estimates its cost in *units* of about a nanosecond (one multiply-add; drawing a
random entry costs more) and its largest allocation in bytes, and refuses in one line, naming
the option, the estimate and the limit, when either is too large. Refused values are echoed cut
to about 60 characters.
"""

from __future__ import annotations

import math

from ..core.messages import duration_text, shown, size_text
from ..errors import VarcheckError

__all__ = [
    "approx",
    "overflowing_laws",
    "refuse",
]


def approx(value: float | int) -> float:
    """A float for estimates, ``inf`` for a whole number too large for a float."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


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
    >>> str(refuse("replicates", 10**9, nbytes=1.6e10, max_bytes=2**30, accepted="100..50000000"))
    'replicates=1000000000 needs about 14.9 GiB of memory (limit 1 GiB); accepted: 100..50000000'
    """
    parts = []
    if nbytes is not None and max_bytes is not None and nbytes > max_bytes:
        need = f"about {size_text(nbytes)} of" if size_text(nbytes) != "unbounded" else "unbounded"
        parts.append(f"needs {need} memory (limit {size_text(max_bytes)})")
    if units is not None and max_units is not None and units > max_units:
        took, limit = duration_text(units / 1e9), duration_text(max_units / 1e9)
        about = "about " if took != "forever" else ""
        parts.append(f"would take {about}{took} (limit about {limit})")
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
