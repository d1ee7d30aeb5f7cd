"""The readings framework attention needs, reproduced in numpy
(tests/data/kernels/reading_kernels.py): a causal mask read with d_v < keys, a softmax upcast
to float32 in a float64 kernel, float16 multi-head attention with a float32 softmax, BLOOM's
steep ALiBi slopes in float32; and what frameworks return (``__array__``, ``__dlpack__``).

Where many seeds are asked for, the heads of one probe serve as independent replicates: each
head draws its own queries, keys and noise and has its own pilot, interval and (raw) test, so
200 heads are 200 one-head probes at the cost of one pilot loop (a head's ``raw_p_value`` is its
own; only ``p_value`` is adjusted over the heads).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import varcheck
from varcheck.core.estimation import MIN_BLOCKS
from varcheck.errors import VarcheckError

sys.path.insert(0, str(Path(__file__).parent / "data" / "kernels"))
import reading_kernels as rk  # noqa: E402

#: a causal kernel read with d_v = 8 < 12 keys (two calls per weight matrix), at the fewest
#: calls a valid interval rests on (docs/probe.md, "When there is no interval")
CAUSAL = {"layout": "bhnd", "queries": 8, "keys": 12, "dv": 8, "samples": MIN_BLOCKS}
#: float16 multi-head attention read with d_v = 16 < 24 keys; before the fix 8 of 10 seeds
#: were "curved" at this size. The readings come from the pilot, whatever the calls after it:
#: 20 calls read them (without an interval); a verdict takes 200
HALF = {
    "layout": "bnhd",
    "heads": 4,
    "queries": 16,
    "keys": 24,
    "dv": 16,
    "samples": 20,
    "dtype": "float16",
}
SEEDS = range(20)


@pytest.mark.statistical
def test_a_causal_kernel_read_with_narrow_values_passes_at_the_nominal_rate() -> None:
    """Masked weights were not 0 after the solve of the old reading (mask "none", a false
    fail at every seed). Now the mask is named for every replicate, and the replicates' own
    95% intervals cover 1/√d_k as often as Binomial(200, 0.95) allows (pinned count)."""
    r = varcheck.probe(rk.noisy_causal, 16, causal=True, seed=1, heads=200, **CAUSAL)
    assert r.diagnostics.mask == "causal (bottom-right)"  # every head's (else "mixed")
    assert "2 calls per matrix" in r.reading and r.outcome == "pass", r.reason
    missed = sum(h.raw_p_value < 0.05 for h in r.per_head)
    assert stats.binomtest(missed, 200, 0.05).pvalue > 0.001
    assert missed == 5


@pytest.mark.statistical
def test_the_same_causal_kernel_five_percent_off_fails_every_replicate() -> None:
    r = varcheck.probe(
        functools.partial(rk.noisy_causal, factor=1.05), 16, causal=True, seed=1, heads=20, **CAUSAL
    )
    assert r.outcome == "fail" and r.reason.startswith("every head (20)")
    assert all(h.raw_p_value < 0.05 and h.outcome == "fail" for h in r.per_head)
    assert r.diagnostics.mask == "causal (bottom-right)"


@pytest.mark.parametrize("dtype", ["float32", None])
def test_a_float32_softmax_in_a_float64_kernel_passes(dtype: str | None) -> None:
    """It was refused with and without --dtype float32 (rows summing to 1 only to float32's
    rounding, against float64's tolerance); its format is declared, or read off its numbers."""
    source = "declared" if dtype else "values"
    for seed in range(5):
        r = varcheck.probe(
            rk.softmax_in_float32,
            16,
            queries=16,
            keys=24,
            samples=MIN_BLOCKS,
            dtype=dtype,
            seed=seed,
        )
        assert (r.outcome, r.computes_in, r.returned) == ("pass", "float32", "float64")
        assert r.format_source == source and abs(r.ratio - 1) < 1e-6
    wrong = functools.partial(rk.softmax_in_float32, factor=1.05)
    kw = {"queries": 16, "keys": 24, "samples": MIN_BLOCKS}
    assert varcheck.probe(wrong, 16, dtype=dtype, seed=1, **kw).outcome == "fail"


@pytest.mark.statistical
def test_float16_multihead_attention_is_linear_and_soft_capping_at_50_is_named() -> None:
    """The curvature floor follows the rounding (1/8 of the larger of float16's unit roundoff
    and the log-weights' noise, about 6e-5 here): rounding curves them by ~5e-6, a tanh cap of
    50 on logits of sd 1 by ~5e-4. Both kernels' scales pass at 200 calls."""
    linear = [varcheck.probe(rk.multihead_half, 64, seed=s, **HALF) for s in SEEDS]
    assert sum(not r.diagnostics.nonlinear for r in linear) >= 19  # >= 95% of 20 seeds
    assert all(r.computes_in == "float16" for r in linear)
    capped = functools.partial(rk.multihead_half, cap=50.0)
    for s in SEEDS:
        r = varcheck.probe(capped, 64, seed=s, **HALF)
        assert r.diagnostics.nonlinear, (s, r.diagnostics.curvature)
        assert any("soft-capping" in n for n in r.diagnostics.notes)
    for kernel in (rk.multihead_half, capped):
        assert (
            varcheck.probe(kernel, 64, seed=0, **{**HALF, "samples": MIN_BLOCKS}).outcome == "pass"
        )


@pytest.mark.parametrize("factor,outcome", [(1.0, "pass"), (1.05, "fail")])
def test_bloom_steep_alibi_slopes_in_float32_with_narrow_values(
    factor: float, outcome: str
) -> None:
    """2^-2..2^-8 per head, causal, d_v = d_k = 64 < 80 keys: head 0 was read as 0.12488
    (p = 0.0003) when small weights carried the solve's absolute error."""
    kernel = functools.partial(rk.bloom_alibi, factor=factor)
    r = varcheck.probe(
        kernel,
        64,
        layout="bhnd",
        heads=4,
        dv=64,
        samples=MIN_BLOCKS,
        seed=1,
        dtype="float32",
        causal=True,
    )
    assert r.outcome == outcome and all(abs(h.scale * 8 / factor - 1) < 1e-6 for h in r.per_head)
    assert (r.diagnostics.mask, r.diagnostics.bias) == ("causal (bottom-right)", "alibi")
    assert np.allclose(r.diagnostics.alibi_slopes, [-(2.0**-p) for p in (2, 4, 6, 8)], rtol=1e-6)


class _DLPackOnly:
    """A framework's array that numpy reads only through ``__dlpack__``."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = np.ascontiguousarray(a)

    def __dlpack__(self, **kwargs):  # noqa: ANN003, ANN204
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):  # noqa: ANN204
        return self.a.__dlpack_device__()


def test_an_array_read_through_dlpack_is_probed() -> None:
    r = varcheck.probe(
        lambda q, k, v: _DLPackOnly(rk.softmax_in_float32(q, k, v)),
        16,
        queries=16,
        keys=24,
        samples=MIN_BLOCKS,
        seed=1,
    )
    assert (r.outcome, r.computes_in) == ("pass", "float32")


def test_arguments_may_be_expressions_in_dk_and_h() -> None:
    """``scale=1/dk`` is evaluated at each d_k (``--arg scale=1/dk``) and recorded as written."""
    from varcheck.core.probe.target import parse_kernel_arg

    def scaled(q, k, v, scale: float, heads: int):  # noqa: ANN001, ANN202
        assert isinstance(heads, int)
        return rk._softmax(scale * (q @ k.T)) @ v

    key, value = parse_kernel_arg("scale=1/dk")
    args = {key: value, "heads": varcheck.ArgExpression("dk*h")}
    sweep = varcheck.probe_sweep(
        scaled, [8, 32], expect="1/dk", args=args, queries=16, keys=24, samples=MIN_BLOCKS, seed=1
    )
    assert sweep.outcome == "pass" and sweep.rows[0].kernel.label.endswith(
        "(heads=dk*h, scale=1/dk)"
    )
    with pytest.raises(VarcheckError, match="not a Python literal .* or an expression in dk"):
        parse_kernel_arg("scale=1/q")
    with pytest.raises(VarcheckError, match="argument scale=1/\\(dk-8\\) cannot be evaluated"):
        varcheck.probe(scaled, 8, args={"scale": varcheck.ArgExpression("1/(dk-8)"), "heads": 1})


def test_a_kernel_returning_another_layout_is_told_to_say_so() -> None:
    with pytest.raises(VarcheckError, match="laid out bnhd: give --out-layout bnhd"):
        varcheck.probe(rk.heads_last, 16, layout="bhnd", heads=3, samples=20, seed=1)
    r = varcheck.probe(
        rk.heads_last, 16, layout="bhnd", out_layout="bnhd", heads=3, samples=MIN_BLOCKS, seed=1
    )
    assert (r.outcome, r.out_layout) == ("pass", "bnhd")


def test_grouped_query_heads_and_heads_wired_to_the_wrong_group() -> None:
    r = varcheck.probe(
        rk.grouped,
        16,
        layout="bhnd",
        heads=4,
        kv_heads=2,
        queries=16,
        keys=24,
        samples=MIN_BLOCKS,
        seed=1,
    )
    assert (r.outcome, r.kv_heads) == ("pass", 2)
    tiled = functools.partial(rk.grouped, interleave=False)
    with pytest.raises(
        VarcheckError,
        match="mixes its heads: the output of head 1 is the "
        "weighted sum of the values of head 1, not of head 0",
    ):
        varcheck.probe(tiled, 16, layout="bhnd", heads=4, kv_heads=2, samples=20, seed=1)
    swapped = lambda q, k, v: rk.grouped(q, k[:, ::-1], v)  # noqa: E731
    with pytest.raises(VarcheckError, match="weights of head 0 follow q·k with the keys of head 1"):
        varcheck.probe(swapped, 16, layout="bhnd", heads=2, samples=20, seed=1)


def test_rotary_embeddings_are_refused_by_name() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import attention_kernels as ak

    with pytest.raises(
        VarcheckError,
        match=r"rotary embeddings, RoPE\); probe it with RoPE "
        r"switched off \(cos = 1, sin = 0\)",
    ):
        varcheck.probe(ak.rotary, 64, samples=20, seed=1)
    with pytest.raises(VarcheckError, match="linear attention .* RoPE, unless it is switched off"):
        varcheck.probe(ak.linear_attention, 64, samples=20, seed=1)


def test_reproduce_lines_quote_string_arguments_plainly() -> None:
    from varcheck.core.probe.target import command_line

    line = command_line(
        [
            "varcheck",
            "probe",
            "k.py:f",
            "--arg",
            "dtype='float32'",
            "--arg",
            "scale=1/dk",
            "--arg",
            "name='a$b'",
        ]
    )
    assert line == (
        "varcheck probe k.py:f --arg \"dtype='float32'\" --arg scale=1/dk "
        "--arg 'name='\"'\"'a$b'\"'\"''"
    )
