"""Holm adjustment and the growth-law fit."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from varcheck.core.verdicts import fit_growth, holm_adjust


def test_holm_known_values() -> None:
    assert holm_adjust([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    out = holm_adjust([0.01, math.nan, 0.02])
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1]) and out[2] == pytest.approx(0.02)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_properties(ps: list[float]) -> None:
    adj = holm_adjust(ps)
    m = len(ps)
    for p, a in zip(ps, adj, strict=True):
        assert p <= a + 1e-15 <= 1 + 1e-15
        assert a <= min(1.0, m * p) + 1e-12  # never more conservative than Bonferroni
    order = np.argsort(ps, kind="stable")
    sorted_adj = [adj[i] for i in order]
    assert sorted_adj == sorted(sorted_adj)  # monotone in the raw p-values


def test_fit_recovers_slope_one() -> None:
    dks = [2, 4, 8, 16, 32]
    fit = fit_growth(dks, [d * 1.0 for d in dks], [d * 0.01 for d in dks], confidence=0.95)
    assert fit is not None and fit.slope == pytest.approx(1.0) and fit.verdict == "consistent"
    fit = fit_growth(dks, [d**1.2 for d in dks], [d * 0.001 for d in dks], confidence=0.95)
    assert fit is not None and fit.verdict == "rejected"
    assert fit_growth([4], [4.0], [0.1], confidence=0.95) is None
