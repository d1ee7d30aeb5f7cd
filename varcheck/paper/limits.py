"""What a paper command would need, checked before any work (``project``, ``beta``, ``train``).

Each command estimates, from its options alone, the memory its largest arrays take at once and
the time its work takes, and refuses a run above :data:`MAX_BYTES` or :data:`MAX_SECONDS` in one
line naming the options, the estimate and the limit. The estimates are deliberately rough (a
factor of two either way); what matters is that a typo such as ``--keys 1000000`` or
``--precision 1e-9`` is answered in a second instead of eating the runner's memory or hanging
a CI job.

Logit variances are also kept inside :data:`VARIANCE_RANGE`: the estimators form squares and
fourth powers of the logits, which leave float64's normal range (and turn into ``inf``, ``0`` or
slow subnormal arithmetic) long before the logits themselves do.
"""

from __future__ import annotations

import math

from ..core.messages import duration_text, size_text
from ..errors import VarcheckError

__all__ = [
    "MAX_BYTES",
    "MAX_SECONDS",
    "MAX_FILE_BYTES",
    "VARIANCE_RANGE",
    "DRAW_SECONDS",
    "MAC_SECONDS",
    "check_memory",
    "check_time",
    "check_variance",
    "log10",
]

#: Largest memory a run may plan for (its biggest arrays at once).
MAX_BYTES = 2 * 1024**3
#: Longest estimated run time without --max-seconds.
MAX_SECONDS = 600.0
#: Largest weights file ``beta`` reads, and the most its arrays may hold once decompressed.
MAX_FILE_BYTES = 1024**3
#: Logit variances the Monte Carlo and the training can handle in float64 (see the module notes).
VARIANCE_RANGE = (1e-100, 1e100)
#: Rough cost of one random draw and of one multiply-add on a slow, shared core.
DRAW_SECONDS = 6e-9
MAC_SECONDS = 2e-10


def check_memory(what: str, n_bytes: float, accepted: str) -> None:
    """Refuse a run whose arrays would take more than :data:`MAX_BYTES`."""
    if not n_bytes <= MAX_BYTES:
        raise VarcheckError(
            f"{what} needs about {size_text(n_bytes)} of memory, above the "
            f"{size_text(MAX_BYTES)} limit; accepted: {accepted}"
        )


def check_time(what: str, seconds: float, accepted: str) -> None:
    """Refuse a run estimated to take longer than :data:`MAX_SECONDS`."""
    if not seconds <= MAX_SECONDS:
        raise VarcheckError(
            f"{what} would take about {duration_text(seconds)}, above the "
            f"{duration_text(MAX_SECONDS)} limit; accepted: {accepted}"
        )


def check_variance(what: str, log10_var: float, accepted: str) -> None:
    """Refuse logits whose variance (given as its log10) is outside :data:`VARIANCE_RANGE`."""
    low, high = (math.log10(v) for v in VARIANCE_RANGE)
    if not low <= log10_var <= high:
        size = f"about 1e{log10_var:+.0f}" if math.isfinite(log10_var) else "0"
        raise VarcheckError(
            f"{what} gives logits q·k of variance {size}, outside the range "
            f"{VARIANCE_RANGE[0]:g}..{VARIANCE_RANGE[1]:g} that float64 can estimate; "
            f"accepted: {accepted}"
        )


def log10(x: float) -> float:
    """log10 of a positive float, subnormals included (``-inf`` for 0)."""
    return math.log10(x) if x > 0 else -math.inf
