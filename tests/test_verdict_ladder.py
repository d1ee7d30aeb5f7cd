"""The one verdict rule and exit-code ladder (core.verdicts.verdict_of, judge, exit_code)."""

from __future__ import annotations

import itertools
import math

import pytest

from varcheck.core.verdicts import (
    CONSISTENT,
    FAIL,
    INCONCLUSIVE,
    INFINITE,
    PASS,
    REJECTED,
    UNRELIABLE,
    exit_code,
    judge,
    verdict_of,
)


def test_a_p_value_equal_to_alpha_is_not_rejected() -> None:
    """Guards against `<=` for `<`: a claim is rejected only when p < alpha (its interval then
    excludes it); p == alpha sits on the interval's edge, which still contains the claim."""
    assert verdict_of(0.05, 0.05) == CONSISTENT
    assert verdict_of(0.0499, 0.05) == REJECTED


def test_judge_refuses_lists_of_different_lengths() -> None:
    """Guards against zip without strict=True: a row without its `finite`/`valid` flag would be
    dropped silently instead of failing loudly."""
    with pytest.raises(ValueError):
        judge([0.01, 0.2], alpha=0.05, finite=[True], valid=[True, True])
    with pytest.raises(ValueError):
        judge([0.01], alpha=0.05, finite=[True], valid=[True, True])


def test_judge_adjusts_then_decides() -> None:
    adjusted, verdicts = judge(
        [0.01, 0.04, math.nan, math.nan],
        alpha=0.05,
        finite=[True, True, False, True],
        valid=[True, True, True, False],
    )
    assert adjusted[:2] == pytest.approx([0.02, 0.04])
    assert verdicts == [REJECTED, REJECTED, INFINITE, UNRELIABLE]


EXIT = {PASS: 0, CONSISTENT: 0, REJECTED: 1, FAIL: 1, INCONCLUSIVE: 3, UNRELIABLE: 4, INFINITE: 4}
RANK = {PASS: 0, CONSISTENT: 0, INCONCLUSIVE: 1, UNRELIABLE: 2, INFINITE: 2, REJECTED: 3, FAIL: 3}


@pytest.mark.parametrize("pair", list(itertools.combinations_with_replacement(EXIT, 2)))
def test_exit_code_of_every_pair(pair: tuple[str, str]) -> None:
    """The worst of two outcomes decides (rejected/fail over no valid test over inconclusive
    over pass), in either order; an interrupted run exits 130 whatever it found."""
    worst = max(pair, key=RANK.__getitem__)
    assert exit_code(pair) == exit_code(pair[::-1]) == EXIT[worst]
    assert exit_code(pair, interrupted=True) == 130


def test_no_verdicts_exit_zero() -> None:
    assert exit_code([]) == 0


def test_marginal_mark_needs_p_below_alpha() -> None:
    """Guards against `<=` in the marginal rule: a row is marked † only when its own interval
    excludes the claim (p < alpha, as for a rejection); p == alpha sits on the interval's edge.
    A rejected row is never marked (its verdict already says so)."""
    from varcheck.core.verdicts import marginal_only

    assert marginal_only(CONSISTENT, 0.0499, 0.05)
    assert not marginal_only(CONSISTENT, 0.05, 0.05)
    assert not marginal_only(REJECTED, 0.001, 0.05)
