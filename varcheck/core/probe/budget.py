"""When a probe's interval is valid: enough calls, and a design whose calls' slopes are not
heavy-tailed.

Each call gives one slope per head, and the interval is Student's t over the calls
(:mod:`.measure`). Two things make it miscover, and neither is mended by the words around it:

* **Too few calls.** The rule of every estimate of varcheck's: below
  :data:`~varcheck.core.estimation.MIN_BLOCKS` blocks (here calls) no interval is given. A
  fixed budget below it (``samples``), or a run that its time cap or a signal stops short of it,
  gives the scale without an interval: each head ``unreliable``, its p-values ``nan`` (left out
  of any Holm family).
* **Too small a design.** A call's slope is Σ x̃ỹ / Σ x̃² over the centred dot products x̃ of
  its n queries and m keys; its error is the kernel's deviation weighted by 1 / Σ x̃², and
  Σ x̃² is small, with a chance that falls only as t^a, when the queries or the keys span few
  directions of the d_k-dimensional space: a = min(n · min(m − 1, d_k), (m − 1) · min(n, d_k))
  / 2 (:func:`tail_exponent`). The slopes' moments of order 2a and above are infinite, and with
  a small a no number of calls gives a calibrated t interval (2 × 4 at d_k = 2, a = 2: 7.7% of
  95% intervals missed at 200 calls, 6.4% at 1000). Below :data:`MIN_TAIL` the scale has no
  interval either, whatever the calls, and the reason names a design that has one.

docs/probe.md ("When there is no interval") gives the measured rates behind both.
"""

from __future__ import annotations

from ..estimation import MIN_BLOCKS
from ..verdicts import UNRELIABLE, Decision
from .measure import Measurement
from .weights import Design

__all__ = ["MIN_TAIL", "tail_exponent", "no_interval", "min_calls"]

#: The least tail exponent (:func:`tail_exponent`) of a design with a valid interval: at 200
#: calls, designs with a <= 2 missed 7.2% of their 95% intervals, a = 3 to 5 5.4% (95% CI
#: 5.04-5.75%), a >= 6 5.03% (2000 replicates a design: docs/probe.md).
MIN_TAIL = 6
#: The largest queries and keys :func:`no_interval` searches for a design to propose.
_SEARCH = 64


def tail_exponent(queries: int, keys: int, dk: int) -> float:
    """The exponent a with P(Σ x̃² < t) ~ t^a for one call's centred dot products (module
    docstring): half the dimensions the queries' and the keys' directions give, the smaller."""
    n, m = queries, keys - 1
    return min(n * min(m, dk), m * min(n, dk)) / 2


def _design_with_interval(d: Design) -> tuple[int, int]:
    """The fewest queries × keys, at least ``d``'s each, whose tail exponent reaches
    :data:`MIN_TAIL` at ``d``'s d_k."""
    fits = [
        (n * m, n, m)
        for n in range(d.queries, max(d.queries, _SEARCH) + 1)
        for m in range(d.keys, max(d.keys, _SEARCH) + 1)
        if tail_exponent(n, m, d.dk) >= MIN_TAIL
    ]
    _, n, m = min(fits)
    return n, m


def no_interval(m: Measurement) -> Decision | None:
    """Why no interval of ``m`` is valid, or ``None`` when every head's is: a design too small
    (:data:`MIN_TAIL`), or fewer calls than :data:`~varcheck.core.estimation.MIN_BLOCKS`.

    The words of the calls' shortfall are those of ``assert``: a fixed budget names the calls
    it needs (``--samples 200``); a run stopped by its time cap or a signal says so.
    """
    d = m.design
    a = tail_exponent(d.queries, d.keys, d.dk)
    if a < MIN_TAIL:
        n, k = _design_with_interval(d)
        return Decision(
            UNRELIABLE,
            f"{d.queries} queries and {d.keys} keys at d_k={d.dk} are too few for a valid "
            f"interval: each call's slope rests on q·k in too few directions, so the slopes are "
            f"heavy-tailed (tail exponent {a:g} < {MIN_TAIL}) and no number of calls makes the "
            f"interval calibrated; probe more (--queries {n} --keys {k})",
        )
    if m.blocks >= MIN_BLOCKS:
        return None
    if m.stop_reason == "samples":
        return Decision(
            UNRELIABLE,
            f"{m.blocks:,} calls are too few for a valid interval: it needs at least "
            f"{MIN_BLOCKS} (--samples {MIN_BLOCKS})",
        )
    how = "interrupted" if m.stop_reason == "interrupted" else "stopped at --max-seconds"
    return Decision(
        UNRELIABLE,
        f"{how} after {m.blocks:,} calls: an interval needs at least {MIN_BLOCKS}, so the "
        "estimate from them has none",
    )


def min_calls(m: Measurement) -> int | None:
    """The calls a valid interval needs when a fixed budget gave ``m`` fewer and its design
    allows one (else ``None``), as ``min_samples`` of ``assert`` is the products one needs."""
    d = m.design
    if tail_exponent(d.queries, d.keys, d.dk) < MIN_TAIL:
        return None
    return MIN_BLOCKS if m.stop_reason == "samples" and m.blocks < MIN_BLOCKS else None
