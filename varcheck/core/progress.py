"""How a long computation tells its caller how far it has got.

The command line turns these calls into a progress bar on stderr; a Python caller may pass any
function of the same shape, or nothing.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ProgressCallback"]

#: ``progress(step, steps, fraction)``: ``fraction`` (0 to 1) of step ``step`` (counted from 0) of
#: ``steps`` is done; a row of a sweep, a d_k of a claim, a batch of an audit are steps.
ProgressCallback = Callable[[int, int, float], None]
