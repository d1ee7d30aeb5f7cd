"""The simple law nearest to the scale a kernel applies, and the exponent a law implies.

Expectations (``expect``) are parsed by :mod:`varcheck.core.probe.expectation`, the laws are
:mod:`varcheck.core.probe.laws`' (shared with probe claims).
"""

from __future__ import annotations

import math

from ..core.probe.expectation import Expectation, parse_expectation
from ..core.probe.laws import LAWS, Reading, nearest_law

__all__ = ["Expectation", "parse_expectation", "Reading", "nearest_law", "LAWS", "law_exponent"]


def law_exponent(expect: Expectation, dks: list[int], h: int) -> float:
    """The exponent b of s ∝ d_k^b an expectation implies between the first and last d_k."""
    a, b = min(dks), max(dks)
    if a == b:
        a, b = a, 2 * a
    return math.log(abs(expect.value(b, h) / expect.value(a, h))) / math.log(b / a)
