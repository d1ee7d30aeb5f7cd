"""Whole attention modules through :func:`varcheck.module_kernel`: transformers' LlamaAttention,
GPT2Attention and BloomAttention (eager and sdpa, causal), timm's Attention (fused, unfused, a
custom scale, causal) and ``torch.nn.MultiheadAttention`` (float64, float32, float16, causal).

A module's values are d_k wide, so with 80 tokens (more keys than d_v = 64) every probe here
reads its weights 64 keys at a time, the reading a causal mask was once lost in."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from transformers import BloomConfig, GPT2Config, LlamaConfig
    from transformers.models.bloom.modeling_bloom import BloomAttention, build_alibi_tensor
    from transformers.models.gpt2.modeling_gpt2 import GPT2Attention
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

from conftest import timm_attention  # noqa: E402

import varcheck  # noqa: E402
from varcheck.core.estimation import MIN_BLOCKS  # noqa: E402
from varcheck.errors import VarcheckError  # noqa: E402

TOKENS = 80
#: the fewest calls a valid interval rests on (core.estimation.MIN_BLOCKS)
RUN = {"samples": MIN_BLOCKS, "seed": 1}


def _probe(kernel, **kw):  # noqa: ANN001, ANN202
    return varcheck.probe(kernel, kernel.dk, **{**kernel.options, **RUN, **kw})


def _llama(impl: str) -> LlamaAttention:
    config = LlamaConfig(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64)
    config._attn_implementation = impl
    return LlamaAttention(config, layer_idx=0)


def _gpt2(impl: str, layer: int = 0, inverse_layer: bool = False) -> GPT2Attention:
    config = GPT2Config(n_embd=256, n_head=4, scale_attn_by_inverse_layer_idx=inverse_layer)
    config._attn_implementation = impl
    return GPT2Attention(config, layer_idx=layer)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_llama_attention_causal(impl: str) -> None:
    kernel = varcheck.module_kernel(_llama(impl), tokens=TOKENS, mask="causal")
    assert (kernel.heads, kernel.kv_heads, kernel.dk) == (4, 2, 64)
    assert "rotary embeddings off (cos = 1, sin = 0)" in kernel.changes
    r = _probe(kernel, causal=True)
    assert (r.outcome, r.diagnostics.mask) == ("pass", "causal"), r.reason
    assert "2 calls per matrix" in r.reading and abs(r.ratio - 1) < 1e-5


def test_llama_sdpa_is_causal_without_a_mask_and_eager_is_not() -> None:
    sdpa = _probe(varcheck.module_kernel(_llama("sdpa"), tokens=TOKENS), causal=True)
    assert (sdpa.outcome, sdpa.diagnostics.mask) == ("pass", "causal")
    eager = _probe(varcheck.module_kernel(_llama("eager"), tokens=TOKENS), causal=True)
    assert eager.outcome == "fail" and "the weights show mask none" in eager.reason


def test_llama_with_rotary_embeddings_on_is_refused_naming_rope() -> None:
    attention = _llama("eager")
    rotary = LlamaRotaryEmbedding(attention.config)
    cos, sin = rotary(torch.zeros(1, TOKENS, 64), torch.arange(TOKENS)[None])
    kernel = varcheck.module_kernel(attention, tokens=TOKENS, position_embeddings=(cos, sin))
    with pytest.raises(VarcheckError, match=r"rotary embeddings, RoPE.*switched off"):
        _probe(kernel)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_gpt2_attention_causal(impl: str) -> None:
    r = _probe(varcheck.module_kernel(_gpt2(impl), tokens=TOKENS, mask="causal"), causal=True)
    assert (r.outcome, r.diagnostics.mask) == ("pass", "causal"), r.reason


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_gpt2_inverse_layer_factor_is_named(impl: str) -> None:
    module = _gpt2(impl, layer=2, inverse_layer=True)
    r = _probe(varcheck.module_kernel(module, tokens=TOKENS, mask="causal"), causal=True)
    assert (r.outcome, r.law.law, r.law.factor_label) == ("fail", "1/sqrt(dk)", "1/3")
    assert r.reason.startswith("every head (4)") and "1/(layer+1)" in r.law.meaning


def test_bloom_attention_alibi_in_float32() -> None:
    """BLOOM's slopes 2^-2..2^-8 (4 heads) in float32, read 64 keys at a time: head 0 was read
    as 0.12488 (p = 0.0003) when the weights were solved for."""
    alibi = build_alibi_tensor(torch.ones(1, TOKENS), 4, torch.float32)
    module = BloomAttention(BloomConfig(hidden_size=256, n_head=4), layer_idx=0)
    kernel = varcheck.module_kernel(module, tokens=TOKENS, mask="causal", alibi=alibi)
    r = _probe(kernel, causal=True)
    assert (r.outcome, r.diagnostics.mask, r.diagnostics.bias) == ("pass", "causal", "alibi")
    want = [-(2.0**-p) for p in (2, 4, 6, 8)]
    assert list(r.diagnostics.alibi_slopes) == pytest.approx(want, rel=1e-5)
    assert all(abs(h.scale * 8 - 1) < 1e-5 for h in r.per_head)


@pytest.mark.parametrize("fused", [True, False])
def test_timm_attention(fused: bool) -> None:
    module = timm_attention()(dim=256, num_heads=4)
    module.fused_attn = fused
    r = _probe(varcheck.module_kernel(module, tokens=TOKENS))
    assert (r.outcome, r.diagnostics.mask) == ("pass", "none")
    causal = _probe(varcheck.module_kernel(module, tokens=TOKENS, mask="causal"), causal=True)
    assert (causal.outcome, causal.diagnostics.mask) == ("pass", "causal")


def test_timm_fused_path_ignores_a_custom_scale() -> None:
    """A module's own ``scale`` is applied by the unfused path; the fused path calls SDPA with
    its default 1/√d_k and ignores it."""
    module = timm_attention()(dim=256, num_heads=4)
    module.scale = 0.05
    module.fused_attn = False
    assert _probe(varcheck.module_kernel(module, tokens=TOKENS), expect="0.05").outcome == "pass"
    module.fused_attn = True
    r = _probe(varcheck.module_kernel(module, tokens=TOKENS), expect="0.05")
    assert (r.outcome, r.law.law, r.law.factor_label) == ("fail", "1/sqrt(dk)", "1")


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_multihead_attention_causal(dtype: str) -> None:
    mha = torch.nn.MultiheadAttention(256, 4, batch_first=True).to(getattr(torch, dtype))
    kernel = varcheck.module_kernel(mha, tokens=TOKENS, mask="causal")
    r = _probe(kernel, causal=True)
    assert (r.outcome, r.diagnostics.mask, r.computes_in) == ("pass", "causal", dtype), r.reason
    assert not r.diagnostics.nonlinear  # float16 was reported curved in most seeds


def test_multihead_attention_float16_is_linear_at_every_seed() -> None:
    mha = torch.nn.MultiheadAttention(256, 4, batch_first=True).half()
    kernel = varcheck.module_kernel(mha, tokens=TOKENS)
    # the curvature is the pilot's reading: 20 calls after it (no interval) read it as well
    curved = [_probe(kernel, seed=s, samples=20).diagnostics.nonlinear for s in range(10)]
    assert not any(curved)
