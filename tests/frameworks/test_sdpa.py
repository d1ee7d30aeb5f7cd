"""torch's ``scaled_dot_product_attention`` as a probe sees it: its default scale, explicit
scales, its causal flag (top-left) and a bottom-right mask, 16-bit formats, grouped queries,
and the law of a d_k sweep."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
from conftest import tensors  # noqa: E402

import varcheck  # noqa: E402
from varcheck.core.estimation import MIN_BLOCKS  # noqa: E402

#: the fewest calls a valid interval rests on (core.estimation.MIN_BLOCKS)
SMALL = {"layout": "bhnd", "heads": 2, "samples": MIN_BLOCKS, "seed": 1}


def sdpa(
    q, k, v, scale=None, is_causal=False, dtype="float64", bottom_right=False, enable_gqa=False
):  # noqa: ANN001, ANN201
    """torch's SDPA on (batch, heads, n, d) inputs in ``dtype``; the output as torch returns it."""
    tq, tk, tv = tensors(q, k, v, dtype=dtype)
    mask = None
    if bottom_right:  # a boolean mask: True where a query may attend
        n, m = tq.shape[-2], tk.shape[-2]
        mask = torch.ones(n, m, dtype=torch.bool).tril(diagonal=m - n)
    with torch.no_grad():
        return torch.nn.functional.scaled_dot_product_attention(
            tq, tk, tv, attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa
        )


def test_the_default_scale_is_one_over_sqrt_dk() -> None:
    r = varcheck.probe(sdpa, 64, **SMALL)
    assert r.outcome == "pass" and abs(r.ratio - 1) < 1e-9
    assert r.diagnostics.notes == ("no mask, no position bias, log-weights linear in q·k",)


def test_scale_one_is_read_as_the_forgotten_scale() -> None:
    r = varcheck.probe(sdpa, 64, args={"scale": 1.0}, **SMALL)
    assert (r.outcome, r.law.law, r.law.factor_label) == ("fail", "1", "1")
    assert varcheck.probe(sdpa, 64, args={"scale": 1.0}, expect="1", **SMALL).outcome == "pass"


def test_scale_one_over_dk_given_as_an_expression() -> None:
    args = {"scale": varcheck.ArgExpression("1/dk")}
    r = varcheck.probe_sweep(sdpa, [16, 64], args=args, expect="1/dk", **SMALL)
    assert r.outcome == "pass" and r.exponent.slope == pytest.approx(-1.0, abs=1e-9)
    wrong = varcheck.probe(sdpa, 64, args=args, **SMALL)
    assert (wrong.outcome, wrong.law.law) == ("fail", "1/dk")


def test_is_causal_is_the_top_left_mask_and_named_so() -> None:
    r = varcheck.probe(sdpa, 64, args={"is_causal": True}, causal=True, **SMALL)
    assert (r.outcome, r.diagnostics.mask) == ("pass", "causal (top-left)")
    assert "causal mask top-left" in str(r).splitlines()[1]


def test_a_bottom_right_boolean_mask_is_named_so() -> None:
    r = varcheck.probe(sdpa, 64, args={"bottom_right": True}, causal=True, **SMALL)
    assert (r.outcome, r.diagnostics.mask) == ("pass", "causal (bottom-right)")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_formats(dtype: str) -> None:
    """A bfloat16 tensor comes back as such: varcheck reads it (no .float() needed)."""
    r = varcheck.probe(sdpa, 64, dtype=dtype, args={"dtype": dtype}, **SMALL)
    assert (r.outcome, r.computes_in, r.returned) == ("pass", dtype, dtype), r.reason
    assert not r.diagnostics.nonlinear and r.diagnostics.bias == "none"
    wrong = varcheck.probe(sdpa, 64, dtype=dtype, args={"dtype": dtype, "scale": 1.05 / 8}, **SMALL)
    assert wrong.outcome == "fail"


def test_grouped_query_attention() -> None:
    r = varcheck.probe(sdpa, 64, args={"enable_gqa": True}, **{**SMALL, "heads": 4}, kv_heads=2)
    assert (r.outcome, r.kv_heads, len(r.per_head)) == ("pass", 2, 4)


def test_a_dk_sweep_follows_one_over_sqrt_dk() -> None:
    r = varcheck.probe_sweep(sdpa, "8..256", **SMALL)
    assert r.outcome == "pass" and r.exponent.verdict == "consistent"
    assert r.exponent.slope == pytest.approx(-0.5, abs=1e-9)
    assert np.allclose([row.ratio for row in r.rows], 1.0, rtol=1e-9)
