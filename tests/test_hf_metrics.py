"""The intervals of the per-head figures cover at their nominal rate (sequences as units)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from varcheck.audit.metrics import MIN_SEQUENCES, mean_intervals, ratio_intervals

#: replications per check; all columns of one call, so one call per check
REPS = 400
SEQUENCES = 40


def _covered(intervals: list, truth: float) -> int:
    return sum(ci.low <= truth <= ci.high for ci in intervals)


def _assert_calibrated(hits: int, level: float = 0.95) -> None:
    # two-sided binomial test at 1e-3: a calibrated interval fails it once in a thousand runs;
    # at 400 replications it flags a true coverage of 0.92 or less about four times in five
    assert stats.binomtest(hits, REPS, level).pvalue > 1e-3, hits / REPS


@pytest.mark.parametrize("shape", [(2.0, 5.0), (0.5, 8.0)])
def test_ratio_interval_covers_a_pooled_mean_over_queries(shape: tuple) -> None:
    """Sink- and entropy-like figures: per sequence, c queries of mean m (m varies between
    sequences, skewed near 0 in the second case); the figure is Σ c·m / Σ c."""
    rng = np.random.default_rng(np.random.SeedSequence(11).spawn(2)[shape[0] < 1])
    c = rng.integers(5, 30, size=(SEQUENCES, REPS)).astype(float)
    m = rng.beta(*shape, size=(SEQUENCES, REPS))
    _, cis = ratio_intervals(c * m, c, 0.95, (0.0, 1.0))
    _assert_calibrated(_covered(cis, shape[0] / sum(shape)))


def test_mean_interval_covers_the_mean_per_sequence_maximum() -> None:
    """Per-sequence maxima are skewed (Gumbel-like); their mean gets a Hall-corrected t
    interval."""
    rng = np.random.default_rng(np.random.SeedSequence(12))
    x = rng.gumbel(3.0, 0.8, size=(SEQUENCES, REPS))
    _, cis = mean_intervals(x, 0.95)
    _assert_calibrated(_covered(cis, 3.0 + 0.8 * np.euler_gamma))


def test_too_few_sequences_give_no_interval() -> None:
    x = np.ones((MIN_SEQUENCES - 1, 3))
    assert all(math.isnan(ci.low) for ci in mean_intervals(x, 0.95)[1])
    assert all(math.isnan(ci.low) for ci in ratio_intervals(x, x, 0.95)[1])
