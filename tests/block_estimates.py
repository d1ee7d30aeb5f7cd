"""The estimate a run makes from its blocks, for tests that simulate many runs at once."""

from __future__ import annotations

import numpy as np

from varcheck.core.estimation import BlockAccumulator, VarianceEstimate, summarise


def block_estimate(
    m: np.ndarray, a: np.ndarray, per_block: int, shift: float = 0.0, alpha: float = 0.05
) -> VarianceEstimate:
    """The estimate of one run from its blocks' means ``m`` and mean squares ``a`` (Hall's
    interval at level 1 - ``alpha``, as a fixed-budget run reports it)."""
    acc = BlockAccumulator()
    acc.add(m, a)
    return summarise(
        acc,
        confidence=1 - alpha,
        method="hall",
        products_per_block=per_block,
        block_side=0,
        stop_reason="samples",
        shift=shift,
    )
