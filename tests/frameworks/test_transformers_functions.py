"""transformers' attention functions (eager and sdpa) for Llama, GPT-2, Gemma 2, and BLOOM's
attention, as a probe sees them. They take (batch, heads, n, d) and return (batch, n, heads, d)
(``out_layout="bnhd"``) with the weights beside the output."""

from __future__ import annotations

import functools
import math
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the library's own import-time chatter
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.models.gemma2.modeling_gemma2 import (
        eager_attention_forward as gemma2_eager,
    )
    from transformers.models.gpt2.modeling_gpt2 import eager_attention_forward as gpt2_eager
    from transformers.models.llama.modeling_llama import eager_attention_forward as llama_eager

from conftest import HFModule, causal_additive, tensors  # noqa: E402

import varcheck  # noqa: E402
from varcheck.core.estimation import MIN_BLOCKS  # noqa: E402

#: the fewest calls a valid interval rests on (core.estimation.MIN_BLOCKS)
HF = {"layout": "bhnd", "out_layout": "bnhd", "heads": 2, "samples": MIN_BLOCKS, "seed": 1}
FUNCTIONS = {"llama-eager": llama_eager, "gpt2-eager": gpt2_eager, "sdpa": sdpa_attention_forward}


def hf_kernel(
    q, k, v, function="llama-eager", dtype="float64", mask="none", scaling=None, softcap=None
):  # noqa: ANN001, ANN201
    """One of transformers' attention functions on the probe's inputs: the output only."""
    tq, tk, tv = tensors(q, k, v, dtype=dtype)
    n, m = tq.shape[-2], tk.shape[-2]
    attention_mask = None
    if mask == "causal":
        attention_mask = causal_additive(n, m, tq.dtype, bottom_right=True)
    extra = {} if softcap is None else {"softcap": softcap}
    fn = gemma2_eager if function == "gemma2-eager" else FUNCTIONS[function]
    if function == "llama-eager" and scaling is None:
        scaling = q.shape[-1] ** -0.5  # what LlamaAttention passes (its self.scaling)
    kwargs = {"scaling": scaling} if scaling is not None else {}
    with torch.no_grad():
        out, _ = fn(
            HFModule(q.shape[-1], is_causal=mask == "is_causal"),
            tq,
            tk,
            tv,
            attention_mask,
            dropout=0.0,
            **kwargs,
            **extra,
        )
    return out


@pytest.mark.parametrize("function", ["llama-eager", "gpt2-eager", "sdpa"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_attention_functions_apply_one_over_sqrt_dk(function: str, dtype: str) -> None:
    kernel = functools.partial(hf_kernel, function=function, dtype=dtype, mask="causal")
    r = varcheck.probe(kernel, 64, dtype=dtype, causal=True, **HF)
    assert (r.outcome, r.diagnostics.mask) == ("pass", "causal (bottom-right)"), r.reason
    assert r.computes_in == dtype and not r.diagnostics.nonlinear


def test_llama_eager_with_float64_inputs_computes_its_softmax_in_float32() -> None:
    """It upcasts the softmax to float32 and casts back: the float64 array it returns holds
    float32 numbers, which varcheck reads off (this kernel could not be probed at all)."""
    kernel = functools.partial(hf_kernel, function="llama-eager", dtype="float64")
    r = varcheck.probe(kernel, 64, **HF)
    assert (r.outcome, r.computes_in, r.returned, r.format_source) == (
        "pass",
        "float32",
        "float64",
        "values",
    )
    declared = varcheck.probe(kernel, 64, dtype="float32", **HF)
    assert (declared.outcome, declared.format_source) == ("pass", "declared")


def test_sdpa_without_a_mask_is_causal_and_crops_the_keys_top_left() -> None:
    """transformers' sdpa path is causal without a mask (the module's is_causal), and with more
    keys than queries it keeps the first n keys: the mask seen is top-left."""
    kernel = functools.partial(hf_kernel, function="sdpa", mask="is_causal")
    r = varcheck.probe(kernel, 64, causal=True, **HF)
    assert (r.outcome, r.diagnostics.mask) == ("pass", "causal (top-left)")


def test_gemma2_soft_capping_is_named_and_the_scale_read_at_zero() -> None:
    kernel = functools.partial(
        hf_kernel, function="gemma2-eager", dtype="float32", softcap=50.0, scaling=64**-0.5
    )
    r = varcheck.probe(kernel, 64, **HF)
    assert r.outcome == "pass" and r.diagnostics.nonlinear and abs(r.ratio - 1) < 1e-3
    assert any("soft-capping" in n for n in r.diagnostics.notes)


def test_gemma2_27b_query_pre_attn_scalar_is_not_one_over_sqrt_dk() -> None:
    """Gemma 2 27B scales by query_pre_attn_scalar^-1/2 = 144^-1/2 at d_k = 128."""
    kernel = functools.partial(
        hf_kernel, function="gemma2-eager", dtype="float32", softcap=50.0, scaling=144**-0.5
    )
    r = varcheck.probe(kernel, 128, **HF)
    assert r.outcome == "fail" and r.law.law == "1/sqrt(dk)"
    assert r.ratio == pytest.approx(math.sqrt(128 / 144), rel=1e-3)
    assert varcheck.probe(kernel, 128, expect="1/sqrt(144)", **HF).outcome == "pass"


def test_gpt2_upcast_and_reordered_attention_with_float64_inputs() -> None:
    """GPT-2's reorder-and-upcast path computes q·k and the softmax in float32 and returns
    the inputs' float64: read at float32, with the scale folded into the product."""
    from conftest import HFModule as _  # noqa: F401
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Attention

    config = GPT2Config(n_embd=128, n_head=2, reorder_and_upcast_attn=True)
    attention = GPT2Attention(config, layer_idx=0).double().eval()

    def kernel(q, k, v):  # noqa: ANN001, ANN202
        tq, tk, tv = tensors(q, k, v)
        with torch.no_grad():
            out, _ = attention._upcast_and_reordered_attn(tq, tk, tv)
        return out

    r = varcheck.probe(kernel, 64, **HF)
    assert (r.outcome, r.computes_in, r.returned) == ("pass", "float32", "float64")
