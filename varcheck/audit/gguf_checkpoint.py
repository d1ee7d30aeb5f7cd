"""A Llama-architecture GGUF file seen as a Hugging Face checkpoint, for the same forward pass.

The file is opened and checked by :func:`varcheck.audit.llama.load_llama` (metadata bounds,
tensor shapes, the tokenizer). :class:`GGUFCheckpoint` then answers the questions
:mod:`varcheck.audit.hf_forward` asks of a directory: the :class:`~.families.ModelSpec`
(declared scale ``attention.scale`` when set, else 1/√d_head), and each tensor under its
Hugging Face name, dequantised one at a time, with the rows of W_q and W_k put back in the
order the original checkpoint had (llama.cpp's converter interleaves each head's two halves so
that RoPE pairs adjacent coordinates; undoing it lets the rotate-half RoPE apply).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.messages import cut
from ..errors import VarcheckError
from .families import ModelSpec, Rope

__all__ = ["GGUFCheckpoint", "open_gguf_checkpoint", "unpermute"]

_BLOCK = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_GLOBAL = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """GGUF's W_q or W_k rows (pairs adjacent) back to the original order (halves)."""
    rows = w.shape[0]
    half = rows // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(rows, *w.shape[1:])


@dataclass(frozen=True)
class GGUFCheckpoint:
    """An opened GGUF file answering as an :class:`~.checkpoint.HFCheckpoint` does."""

    path: Path
    spec: ModelSpec
    model: Any
    tokenizer: Any
    prefix: str = ""

    @property
    def name(self) -> str:
        return self.model.config.name or self.path.name

    def _gguf_name(self, name: str) -> str:
        if name in _GLOBAL:
            return _GLOBAL[name]
        parts = name.split(".", 2)
        if len(parts) == 3 and parts[0] == "layers" and parts[2] in _BLOCK:
            return f"blk.{parts[1]}.{_BLOCK[parts[2]]}"
        raise VarcheckError(f"{cut(str(self.path))}: no tensor for {cut(name)!r}")

    def tensor(self, name: str, *, raw: bool = False) -> np.ndarray:
        """The tensor of Hugging Face name ``name``, dequantised to float32."""
        if raw and name == "lm_head.weight":
            return self.model.file.tensor("output.weight")
        w = self.model.file.tensor(self._gguf_name(name))
        if name.endswith("q_proj.weight"):
            return unpermute(w, self.spec.heads)
        if name.endswith("k_proj.weight"):
            return unpermute(w, self.spec.kv_heads)
        return w

    def rows(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` of the token embedding, dequantising only the distinct ids used."""
        if name != "embed_tokens.weight":
            raise VarcheckError(f"{cut(str(self.path))}: no table {cut(name)!r}")
        unique, inverse = np.unique(ids, return_inverse=True)
        return self.model.file.tensor("token_embd.weight", unique)[inverse.reshape(ids.shape)]

    def output_matrix(self) -> np.ndarray:
        has_output = "output.weight" in self.model.file.tensors
        return (
            self.tensor("lm_head.weight", raw=True)
            if has_output
            else self.tensor("embed_tokens.weight")
        )

    def layer_bytes(self) -> int:
        d, f, dk = self.spec.hidden, self.spec.intermediate, self.spec.head_dim
        attention = d * dk * (2 * self.spec.heads + 2 * self.spec.kv_heads)
        return 4 * (attention + 3 * d * f + 2 * d)

    def embedding_rows(self) -> int:
        return self.model.config.vocab_size


def _tokenizer(model: Any) -> Any:
    """The file's tokenizer with its BOS convention as a template (so token 0 is as llama.cpp
    puts it)."""
    from tokenizers import processors

    tok = model.tokenizer.tokenizer
    bos = model.tokenizer.bos_id
    if bos is None:
        tok.post_processor = processors.TemplateProcessing(single="$A")
    else:
        token = tok.id_to_token(bos)
        tok.post_processor = processors.TemplateProcessing(
            single=f"{token} $A", special_tokens=[(token, bos)]
        )
    tok.no_padding()
    return tok


def _refuse_unused(model: Any, where: str) -> None:
    file = model.file
    experts = file.get(f"{file.architecture}.expert_count", 0)
    if experts:
        raise VarcheckError(f"{where}: a mixture of {experts} experts; accepted: dense models")
    used = set(_GLOBAL.values()) | {"output.weight", "rope_freqs.weight"}
    for name in file.tensors:
        short = name.split(".", 2)[2] if name.startswith("blk.") else name
        if short not in used and short not in _BLOCK.values():
            raise VarcheckError(
                f"{where}: tensor {cut(name)!r} is not used by the Llama forward "
                "pass; accepted: a plain Llama GGUF"
            )


def open_gguf_checkpoint(path: str | os.PathLike[str]) -> GGUFCheckpoint:
    """Open a Llama-architecture GGUF file for the audit (nothing dequantised yet)."""
    from .llama import load_llama

    model = load_llama(path)
    where = cut(str(path))
    _refuse_unused(model, where)
    cfg = model.config
    scale = cfg.declared_scale
    inv = (np.asarray(model.inv_freq, np.float64) / cfg.rope_scale).astype(np.float32)
    spec = ModelSpec(
        family="llama",
        hidden=cfg.hidden_size,
        layers=cfg.num_layers,
        heads=cfg.num_heads,
        kv_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        intermediate=cfg.intermediate_size,
        eps=cfg.rms_eps,
        activation="silu",
        max_positions=cfg.context_length,
        scales=(scale,) * cfg.num_layers,
        scale_rule=cfg.scale_rule,
        softcap=None,
        final_softcap=None,
        windows=(None,) * cfg.num_layers,
        rope=Rope(tuple(float(v) for v in inv), "default", cfg.rope_base),
        qkv_bias=False,
        o_bias=False,
        mlp_bias=False,
        qk_norm=False,
        norm_offset=0.0,
        embed_scale=None,
        tied="output.weight" not in model.file.tensors,
        pad_token_id=0,
    )
    return GGUFCheckpoint(Path(path), spec, model, _tokenizer(model))
