"""The attention layer of ``attention.py`` under test with varcheck's pytest fixture.

    pytest examples/test_attention.py                      # a fresh seed, shown in the header
    pytest examples/test_attention.py --varcheck-seed 7    # rerun one seed exactly

Why the tolerance and precision are safe: the scaled logits have variance exactly
``1 + 2 / (TOKENS * D_MODEL) = 1.00024`` on average over a batch (the diagonal, a token's logit
with itself, is a little wider), so the truth sits 0.00024 from the claim, far inside ±2%. An
equivalence test passes when its whole 90% interval lies within 1 ± 0.02; at precision 0.006
that interval's half-width is at most 0.006 · 1.645 / 1.96 = 0.005, so the estimate may stray
up to 0.02 - 0.005 - 0.00024 = 0.0148 from the truth, 4.8 standard errors (SE = 0.006 / 1.96):
a true claim is inconclusive with probability below 1e-5 per test, whatever seed the session
draws (docs/own-code.md works the same numbers). The wrong variants have
variance d_k (16 or 64) and (256 / d_k)² (256 or 16): hundreds of standard errors from 1.
"""

from __future__ import annotations

import functools

import attention  # the module next to this file: pytest puts this folder on sys.path
import pytest

TOLERANCE = 0.02
PRECISION = 0.006
DKS = [16, 64]
#: the two wrong variants: the 1/√d_k forgotten, and the head width taken as fan-in
WRONG = {"unscaled": attention.logits_unscaled, "head-fan": attention.logits_head_fan}


def assert_unit_variance(varcheck, sampler, dk: int) -> None:
    """The one assertion every variant faces: Var(logits) = 1 within ±2%."""
    __tracebackhide__ = True
    varcheck.assert_variance(dk, claim=1, sampler=sampler, tolerance=TOLERANCE, precision=PRECISION)


@pytest.mark.parametrize("dk", DKS)
def test_scaled_logits_have_unit_variance(varcheck, dk: int) -> None:
    assert_unit_variance(varcheck, attention.logits, dk)


def test_unit_variance_does_not_depend_on_heads_or_tokens(varcheck) -> None:
    one_wide_head = functools.partial(attention.logits, heads=1, tokens=64)
    assert_unit_variance(varcheck, one_wide_head, 64)


@pytest.mark.parametrize("wrong", list(WRONG.values()), ids=list(WRONG))
@pytest.mark.parametrize("dk", DKS)
def test_the_same_assertion_catches_the_wrong_variants(varcheck, wrong, dk: int) -> None:
    with pytest.raises(AssertionError, match="FAIL"):
        assert_unit_variance(varcheck, wrong, dk)


@pytest.mark.parametrize("dk", DKS)
def test_unscaled_logits_have_variance_dk(varcheck, dk: int) -> None:
    """What the wrong variant does get right: Var(Q Kᵀ) = d_k, so Var(Q Kᵀ / √d_k) = 1."""
    result = varcheck.verify(
        dk,
        claim=1,
        scaled=True,
        sampler=attention.logits_unscaled,
        tolerance=TOLERANCE,
        precision=PRECISION,
    )
    assert result.outcome == "pass", result.reason
