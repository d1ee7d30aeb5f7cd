"""The kernels of ``attention_kernels.py`` under test with varcheck's pytest fixture.

    pytest examples/test_attention_kernels.py                      # a fresh seed, in the header
    pytest examples/test_attention_kernels.py --varcheck-seed 7    # rerun one seed exactly

``varcheck.assert_scale(kernel, dk)`` reads the kernel's effective scale off its outputs and
fails unless it is 1/√d_k (or ``expect=``). The numpy kernels are exact: the scale comes out to
~1e-15, so a correct kernel passes at every seed and a wrong one fails at every seed. The last
test wraps torch's scaled_dot_product_attention and is skipped where torch is not installed.
"""

from __future__ import annotations

import functools

import attention_kernels as ak  # the module next to this file: pytest puts it on sys.path
import pytest

DK = 64
#: the bugs: each fails the default expectation 1/sqrt(dk)
WRONG = {
    "forgotten": ak.scale_forgotten,
    "twice": ak.scaled_twice,
    "model-width": ak.model_width,
    "layer": ak.layer_scaled,
}


@pytest.mark.parametrize(
    "kernel", [ak.attention, ak.alibi, ak.causal, ak.softcapped], ids=lambda k: k.__name__
)
def test_correct_kernels_pass(varcheck, kernel) -> None:
    varcheck.assert_scale(kernel, DK)


def test_mup_scale_passes_when_it_is_the_intent(varcheck) -> None:
    varcheck.assert_scale(ak.scaled_by_dk, DK, expect="1/dk")


@pytest.mark.parametrize("kernel", list(WRONG.values()), ids=list(WRONG))
def test_scale_bugs_fail(varcheck, kernel) -> None:
    with pytest.raises(AssertionError, match="FAIL"):
        varcheck.assert_scale(kernel, DK)


def test_the_bug_is_named(varcheck) -> None:
    result = varcheck.probe(functools.partial(ak.layer_scaled, layer=2), DK)
    assert (result.law.law, result.law.factor_label) == ("1/sqrt(dk)", "1/3")


def test_every_head_of_a_4d_kernel(varcheck) -> None:
    result = varcheck.assert_scale(ak.alibi_heads, DK, layout="bhnd", heads=4)
    assert result.diagnostics.bias == "alibi"


def test_torch_sdpa(varcheck) -> None:
    pytest.importorskip("torch", reason="torch is not installed; varcheck never needs it")
    varcheck.assert_scale(ak.torch_sdpa, DK, layout="bhnd", heads=2)
    varcheck.assert_scale(
        functools.partial(ak.torch_sdpa, scale=1 / DK), DK, expect="1/dk", layout="bhnd", heads=2
    )
