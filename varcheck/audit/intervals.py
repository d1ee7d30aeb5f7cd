"""How many sequences an audit's interval needs, and the pooled variance's interval with
sequences as the independent units (used by the bundled audits and the checkpoint metrics)."""

from __future__ import annotations

import math

import numpy as np

from ..core.estimation import ConfidenceInterval, hall_interval, t_quantile

__all__ = ["MIN_SEQUENCES", "sequence_interval"]

#: Fewest sequences (the independent units) for a jackknife interval. Below it the per-sequence
#: contributions, which are skewed and heavy-tailed (one long or odd sentence can carry a head's
#: variance), leave the t-interval's coverage far from nominal and its lower end often negative;
#: docs/audit.md gives the simulation behind the number (coverage against the number of
#: sequences, for resampled MiniLM heads and for heavy-tailed synthetic sequences).
MIN_SEQUENCES = 30


def sequence_interval(
    s0: np.ndarray, s1: np.ndarray, s2: np.ndarray, confidence: float
) -> tuple[np.ndarray, list[ConfidenceInterval]]:
    """Pooled variance per column and its interval with sequences as the independent units.

    Parameters
    ----------
    s0 : ndarray ``(sequences,)`` or ``(sequences, k)``
        Pairs per sequence (broadcast against ``s1``).
    s1, s2 : ndarray ``(sequences, k)``
        Per sequence, sums of the values and of their squares.
    confidence : float

    Returns
    -------
    var : ndarray ``(k,)``
        Σ s2 / Σ s0 − (Σ s1 / Σ s0)².
    intervals : list of ConfidenceInterval
        Hall's interval on the influence values (nan with fewer than MIN_SEQUENCES sequences
        that hold a pair).
    """
    c = np.broadcast_to(s0 if s0.ndim == s1.ndim else s0[:, None], s1.shape).astype(float)
    total = c.sum(axis=0)
    used = (c > 0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s1.sum(axis=0) / total
        var = s2.sum(axis=0) / total - mean**2
        # a sequence without pairs adds nothing to the estimate, so it is not a unit of it
        c_bar = total / used
        # Σ over a sequence's pairs of (x − m)², minus V times its pairs, over the mean count
        z = (s2 - 2 * mean * s1 + mean**2 * c - var * c) / c_bar
    cis = []
    for col in range(s1.shape[1]):
        if used[col] < MIN_SEQUENCES or not np.isfinite(var[col]):
            cis.append(ConfidenceInterval(math.nan, math.nan))
        else:
            zc = z[c[:, col] > 0, col]
            cis.append(_hall(float(var[col]), zc, confidence))
    return var, cis


def _hall(var: float, z: np.ndarray, confidence: float) -> ConfidenceInterval:
    n = z.size
    sd = float(z.std(ddof=1))
    se = sd / math.sqrt(n)
    centred = z - z.mean()
    skew = float(np.mean(centred**3) / sd**3) if sd > 0 else 0.0
    return hall_interval(var, se, skew, n, t_quantile(confidence, n - 1))
