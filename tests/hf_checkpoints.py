"""Tiny random Hugging Face checkpoints of every family, written in numpy for the audit tests.

:func:`write_checkpoint` writes config.json, model.safetensors and a word-level tokenizer.json
with the family's own template (``[CLS] … [SEP]``, ``<s> … </s>``, ``<bos> …`` or nothing), so
that position 0 holds what that family's tokenizer puts there. Weights are drawn large enough for
attention to be far from uniform (projections of standard deviation 0.2 on width 32), norm gains
away from 1 (Gemma's stored gains away from 0) and biases away from 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from varcheck.audit import families

WORDS = (
    "the a one two red blue cat dog sat ran on under over model layer head logit scale grows "
    "training step loss weight query key value token first last sink mass entropy large small "
    "quick brown fox jumps lazy river stone tree house light dark"
).split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "<s>", "</s>", "<bos>", "<eos>"]
VOCAB = 64

_SHAPE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)
_DECODER = dict(_SHAPE, num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=40)

#: family name -> (config.json, prefix before the base model's names, tokenizer template)
CONFIGS: dict[str, tuple[dict[str, Any], str, str]] = {
    "bert": (
        dict(
            _SHAPE,
            model_type="bert",
            vocab_size=VOCAB,
            max_position_embeddings=40,
            type_vocab_size=2,
        ),
        "",
        "cls",
    ),
    "roberta": (
        dict(
            _SHAPE,
            model_type="roberta",
            vocab_size=VOCAB,
            max_position_embeddings=42,
            type_vocab_size=1,
            pad_token_id=1,
        ),
        "roberta.",
        "s",
    ),
    "gpt2": (
        dict(model_type="gpt2", n_embd=32, n_layer=2, n_head=4, n_positions=40, vocab_size=VOCAB),
        "transformer.",
        "none",
    ),
    "llama": (dict(_DECODER, model_type="llama", tie_word_embeddings=False), "model.", "bos"),
    "mistral": (dict(_DECODER, model_type="mistral", sliding_window=4), "model.", "bos"),
    "qwen2": (dict(_DECODER, model_type="qwen2", tie_word_embeddings=True), "model.", "none"),
    "qwen3": (dict(_DECODER, model_type="qwen3", head_dim=12), "model.", "none"),
    "gemma": (dict(_DECODER, model_type="gemma", head_dim=8), "model.", "bos"),
    "gemma2": (
        dict(
            _DECODER,
            model_type="gemma2",
            head_dim=8,
            query_pre_attn_scalar=12,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=3.0,
            sliding_window=4,
        ),
        "model.",
        "bos",
    ),
}


def sentences(count: int = 40, seed: int = 0) -> list[str]:
    """``count`` lines of 4 to 12 words of :data:`WORDS`."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, rng.integers(4, 13))) for _ in range(count)]


def _tokenizer_json(template: str) -> str:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    ids = {t: vocab[t] for t in SPECIALS}
    if template == "cls":
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
        )
    elif template == "s":
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", special_tokens=[("<s>", ids["<s>"]), ("</s>", ids["</s>"])]
        )
    elif template == "bos":
        tok.post_processor = processors.TemplateProcessing(
            single="<bos> $A", special_tokens=[("<bos>", ids["<bos>"])]
        )
    return tok.to_str()


def random_tensors(config: dict[str, Any], prefix: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Every tensor the config implies, random, named as a saved model names them."""
    spec = families.model_spec(config)
    rng = np.random.default_rng(seed)
    shapes = dict(families.expected_tensors(spec))
    for layer in range(spec.layers):
        shapes.update(families.expected_tensors(spec, layer))
    rows = {
        "position_embeddings": config.get("max_position_embeddings"),
        "wpe": config.get("n_positions"),
    }
    out = {}
    for name, shape in shapes.items():
        first = next((v for k, v in rows.items() if k in name), None)
        first = 2 if "token_type" in name else first
        shape = tuple((first or VOCAB) if s is None else s for s in shape)
        gain = name.endswith("weight") and len(shape) == 1
        if gain and spec.norm_offset:  # Gemma stores g - 1
            value = 0.3 * rng.standard_normal(shape)
        elif gain:
            value = 1 + 0.3 * rng.standard_normal(shape)
        elif len(shape) == 1:
            value = 0.1 * rng.standard_normal(shape)
        elif "embed" in name or name in ("wte.weight", "wpe.weight"):
            value = rng.standard_normal(shape)
        else:
            value = 0.2 * rng.standard_normal(shape)
        out[prefix + name] = value.astype(np.float32)
    if not spec.tied and spec.family not in families.ENCODERS:
        out["lm_head.weight"] = (0.2 * rng.standard_normal((VOCAB, spec.hidden))).astype(np.float32)
    return out


def write_checkpoint(
    folder: Path,
    family: str,
    *,
    seed: int = 0,
    tensors: dict[str, np.ndarray] | None = None,
    config: dict[str, Any] | None = None,
) -> Path:
    """A checkpoint directory of ``family`` (tensors and config may be given instead)."""
    from safetensors.numpy import save_file

    base, prefix, template = CONFIGS[family]
    config = dict(base if config is None else config)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file(
        tensors if tensors is not None else random_tensors(config, prefix, seed),
        str(folder / "model.safetensors"),
        metadata={"format": "pt"},
    )
    (folder / "tokenizer.json").write_text(_tokenizer_json(template))
    return folder
