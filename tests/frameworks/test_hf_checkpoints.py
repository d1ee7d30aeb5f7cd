"""varcheck's numpy forward pass of each model family against transformers' own model.

Each family is built by transformers from a tiny random config, every parameter redrawn (norm
gains away from 1 and Gemma's stored gains away from 0, biases away from 0, weights large enough
for Gemma 2's soft-cap to bite: default initialisation would hide an offset or a cap), saved
with ``save_pretrained`` and read back by :func:`varcheck.audit.checkpoint.open_checkpoint`.
transformers runs it in float32 through a recording attention function (the eager one, with
its mask function registered too, since a custom attention name without one gets no causal
mask); each layer's q and k as that function receives them (after biases, q/k norms and RoPE),
its declared scaling, and the output logits must match varcheck's to 1e-5 relative (float32
rounding over a few layers of width 64 stays near 1e-6).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

from varcheck.audit import hf_forward  # noqa: E402
from varcheck.audit.checkpoint import open_checkpoint  # noqa: E402

COMMON = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
DECODER = dict(COMMON, num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
ENCODER = dict(COMMON, vocab_size=256, max_position_embeddings=66)
#: relative tolerance of every comparison (float32 throughout)
RTOL = 1e-5
GPT2 = dict(
    vocab_size=256,
    n_positions=64,
    n_embd=64,
    n_layer=2,
    n_head=4,
    bos_token_id=255,
    eos_token_id=255,
)

RECORDS: list[dict] = []


def _record(module, query, key, value, attention_mask, **kwargs):  # noqa: ANN001, ANN202
    RECORDS.append(
        {
            "layer": getattr(module, "layer_idx", None),
            "q": query.detach().numpy().copy(),
            "k": key.detach().numpy().copy(),
            "scaling": kwargs.get("scaling"),
            "softcap": kwargs.get("softcap"),
            "window": kwargs.get("sliding_window"),
        }
    )
    eager = sys.modules[type(module).__module__].eager_attention_forward
    return eager(module, query, key, value, attention_mask, **kwargs)


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register("varcheck_record", _record)
    AttentionMaskInterface.register("varcheck_record", eager_mask)


def _cases() -> dict[str, tuple]:
    """name -> (model class name, config class name, config keywords, save keywords)."""
    return {
        "bert": ("BertModel", "BertConfig", dict(ENCODER, hidden_act="gelu"), {}),
        "bert-mlm": ("BertForMaskedLM", "BertConfig", ENCODER, {}),
        "roberta": (
            "RobertaForMaskedLM",
            "RobertaConfig",
            dict(ENCODER, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2),
            {},
        ),
        "gpt2": ("GPT2LMHeadModel", "GPT2Config", GPT2, {}),
        "gpt2-layer-scaled": (
            "GPT2LMHeadModel",
            "GPT2Config",
            dict(GPT2, scale_attn_by_inverse_layer_idx=True),
            {},
        ),
        "llama": ("LlamaForCausalLM", "LlamaConfig", dict(DECODER, rms_norm_eps=1e-5), {}),
        "llama-bias": (
            "LlamaForCausalLM",
            "LlamaConfig",
            dict(DECODER, attention_bias=True, mlp_bias=True),
            {},
        ),
        "llama3-rope": (
            "LlamaForCausalLM",
            "LlamaConfig",
            dict(
                DECODER,
                rope_theta=5e5,
                rope_scaling={
                    "rope_type": "llama3",
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 16,
                },
            ),
            {},
        ),
        "llama-sharded": ("LlamaForCausalLM", "LlamaConfig", DECODER, {"max_shard_size": "100KB"}),
        "mistral": (
            "MistralForCausalLM",
            "MistralConfig",
            dict(DECODER, sliding_window=4, rope_theta=1e6),
            {},
        ),
        "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(DECODER, tie_word_embeddings=True), {}),
        "qwen2-sliding": (
            "Qwen2ForCausalLM",
            "Qwen2Config",
            dict(DECODER, use_sliding_window=True, sliding_window=4, max_window_layers=1),
            {},
        ),
        "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(DECODER, head_dim=24), {}),
        "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(DECODER, head_dim=16), {}),
        "gemma2": (
            "Gemma2ForCausalLM",
            "Gemma2Config",
            dict(
                DECODER,
                head_dim=16,
                query_pre_attn_scalar=24,
                attn_logit_softcapping=2.0,
                final_logit_softcapping=3.0,
                sliding_window=4,
            ),
            {},
        ),
    }


def _redraw(model, gemma: bool) -> None:  # noqa: ANN001
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            lowered = name.lower()
            if p.ndim == 1 and ("norm" in lowered or ".ln_" in lowered or "ln_f" in lowered):
                is_gain = name.endswith("weight")
                offset = 0.0 if (gemma and "q_norm" not in name and "k_norm" not in name) else 1.0
                p.copy_((offset if is_gain else 0.0) + (0.3 if is_gain else 0.1) * noise)
            elif p.ndim == 1:
                p.copy_(0.1 * noise)
            elif any(t in lowered for t in ("embed", "wte", "wpe")):
                p.copy_(noise)
            else:
                p.copy_(0.2 * noise)


#: configurations also saved in the older layout of config.json (``rope_theta`` and
#: ``rope_scaling`` at the top, no ``layer_types``), as most checkpoints on disk are
V4_CONFIGS = ("gemma2", "qwen2-sliding", "llama3-rope")


def _as_v4(path: Path) -> None:
    """Rewrite a saved config.json in the older layout."""
    raw = json.loads((path / "config.json").read_text())
    rope = raw.pop("rope_parameters", None) or {}
    raw["rope_theta"] = rope.pop("rope_theta", 10000.0)
    if rope.get("rope_type", "default") != "default":
        rope["type"] = rope.pop("rope_type")
        raw["rope_scaling"] = rope
    raw.pop("layer_types", None)
    raw["torch_dtype"] = raw.pop("dtype", "float32")
    (path / "config.json").write_text(json.dumps(raw))


def _build(root: Path, name: str) -> Path:
    v4 = name.endswith("-v4config")
    name = name.removesuffix("-v4config")
    model_cls, config_cls, kwargs, save = _cases()[name]
    torch.manual_seed(0)
    model = getattr(tf, model_cls)(getattr(tf, config_cls)(**kwargs)).eval()
    _redraw(model, gemma=name.startswith("gemma"))
    path = root / name
    model.save_pretrained(path, **save)
    if v4:
        _as_v4(path)
    return path


def _reference(path: Path, ids: np.ndarray, mask: np.ndarray) -> tuple[list, np.ndarray, list]:
    _register()
    RECORDS.clear()
    arch = json.loads((path / "config.json").read_text())["architectures"][0]
    model = getattr(tf, arch).from_pretrained(
        path, attn_implementation="varcheck_record", dtype=torch.float32
    )
    with torch.no_grad():
        out = model.eval()(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask.astype(np.int64)),
            output_hidden_states=True,
        )
    logits = getattr(out, "logits", None)
    hidden = [h.numpy() for h in out.hidden_states]
    return list(RECORDS), (None if logits is None else logits.numpy()), hidden


def _relative(ours: np.ndarray, theirs: np.ndarray) -> float:
    return float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))


@pytest.fixture(scope="module")
def batch() -> tuple[np.ndarray, np.ndarray]:
    """Three right-padded sequences of 12, 9 and 5 tokens (longer than the windows of 4)."""
    rng = np.random.default_rng(3)
    lengths = (12, 9, 5)
    ids = np.full((3, 12), 1, dtype=np.int64)  # 1 is RoBERTa's padding id
    mask = np.zeros((3, 12), bool)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(5, 250, n)
        mask[row, :n] = True
    return ids, mask


@pytest.mark.parametrize("name", [*_cases(), *(f"{n}-v4config" for n in V4_CONFIGS)])
def test_forward_matches_transformers(tmp_path: Path, name: str, batch: tuple) -> None:
    """q, k of every layer, the declared scale, and the logits (or last states) to 1e-5."""
    ids, mask = batch
    path = _build(tmp_path, name)
    records, logits, hidden = _reference(path, ids, mask)
    ckpt = open_checkpoint(path, tokenizer=False)
    attention, states = hf_forward.run(ckpt, ids, mask)
    assert len(records) == len(attention) == ckpt.spec.layers
    for rec, att in zip(records, attention, strict=True):
        real = mask[:, None, :, None]
        for ours, theirs in ((att.q, rec["q"]), (att.k, rec["k"])):
            assert ours.shape == theirs.shape
            err = _relative(np.where(real, ours, 0), np.where(real, theirs, 0))
            assert err < RTOL, (name, rec["layer"], err)
        assert ckpt.spec.scales[att.layer] == pytest.approx(rec["scaling"], rel=1e-7)
        assert ckpt.spec.softcap == rec["softcap"]
        assert ckpt.spec.windows[att.layer] == rec["window"]
    last, ours_logits = hf_forward.final_logits(ckpt, states[-1])
    if ours_logits is not None:
        real = mask[..., None]
        assert _relative(np.where(real, ours_logits, 0), np.where(real, logits, 0)) < RTOL
    else:
        real = mask[..., None]
        assert _relative(np.where(real, last, 0), np.where(real, hidden[-1], 0)) < RTOL
