"""The forward pass of every family in numpy, layer by layer, up to each layer's q and k.

The audit walks a model one layer at a time: it reads that layer's tensors
(:func:`layer_weights`), applies :func:`block` to the hidden states of every batch, keeps the
layer's queries, keys and attention weights for the statistics, and drops the weights before
the next layer. Everything is float32, as the reference implementation runs in float32: RoPE
angles are position × frequency in float32, Gemma's embedding multiplier is √d rounded to
float32, Gemma's norms multiply by (1 + g). docs/audit.md gives the equations of each family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import VarcheckError
from .checkpoint import HFCheckpoint
from .families import ENCODERS, ModelSpec, Rope
from .gguf_checkpoint import GGUFCheckpoint

__all__ = ["LayerQK", "embed", "layer_weights", "block", "visible", "final_logits", "run"]


@dataclass(frozen=True)
class LayerQK:
    """One layer's attention on one batch, as the model computes it.

    Attributes
    ----------
    layer : int
    q : ndarray ``(batch, heads, tokens, d_head)``
        Queries after bias, q-norm and RoPE.
    k : ndarray ``(batch, kv_heads, tokens, d_head)``
    logits : ndarray ``(batch, heads, tokens, tokens)``
        scale · q·k at the declared scale, before soft-capping and masking.
    probs : ndarray ``(batch, heads, tokens, tokens)``
        The attention weights the model uses (after cap and mask).
    visible : ndarray of bool ``(batch, 1, tokens, tokens)``
        Pairs (query, key) the model lets interact, between real tokens.
    """

    layer: int
    q: np.ndarray
    k: np.ndarray
    logits: np.ndarray
    probs: np.ndarray
    visible: np.ndarray


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    centred = x - x.mean(axis=-1, keepdims=True)
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * gain + bias


def _rms_norm(x: np.ndarray, gain: np.ndarray, eps: float, offset: float) -> np.ndarray:
    inv = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps))
    return x * inv * (gain + np.float32(offset))


def _act(x: np.ndarray, kind: str) -> np.ndarray:
    from scipy.special import erf, expit

    if kind == "gelu":
        return (0.5 * x * (1.0 + erf(x / np.float32(math.sqrt(2.0))))).astype(np.float32)
    if kind == "gelu_tanh":
        c = np.float32(math.sqrt(2.0 / math.pi))
        return 0.5 * x * (1.0 + np.tanh(c * (x + np.float32(0.044715) * x**3)))
    if kind == "silu":
        return x * expit(x)
    return np.maximum(x, 0)


def _linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, conv: bool = False) -> np.ndarray:
    """``x Wᵀ + b`` for a PyTorch ``(out, in)`` weight, ``x W + b`` for GPT-2's Conv1D."""
    flat = x.reshape(-1, x.shape[-1]) @ (w if conv else w.T)
    if b is not None:
        flat = flat + b
    return flat.reshape(*x.shape[:-1], flat.shape[-1])


def _heads(x: np.ndarray, n: int) -> np.ndarray:
    b, t, d = x.shape
    return x.reshape(b, t, n, d // n).transpose(0, 2, 1, 3)


def layer_weights(ckpt: HFCheckpoint | GGUFCheckpoint, layer: int) -> dict[str, np.ndarray]:
    """Layer ``layer``'s tensors, read now, named without the layer's prefix."""
    from .families import expected_tensors

    names = expected_tensors(ckpt.spec, layer)
    head = {"bert": f"encoder.layer.{layer}.", "roberta": f"encoder.layer.{layer}."}
    start = len(
        head.get(
            ckpt.spec.family, f"h.{layer}." if ckpt.spec.family == "gpt2" else f"layers.{layer}."
        )
    )
    return {name[start:]: ckpt.tensor(name) for name in names}


def _positions(spec: ModelSpec, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    if spec.family == "roberta":
        real = mask.astype(np.int64)
        return spec.pad_token_id + np.cumsum(real, axis=1) * real
    return np.broadcast_to(np.arange(ids.shape[1]), ids.shape)


def embed(ckpt: HFCheckpoint | GGUFCheckpoint, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The input of layer 0 for a right-padded batch of ids, float32."""
    spec = ckpt.spec
    rows = ckpt.embedding_rows()
    if ids.size and (ids.min() < 0 or ids.max() >= rows):
        raise VarcheckError(f"{ckpt.name}: a token id is outside the embedding's {rows} rows")
    if spec.family == "gpt2":
        wpe = ckpt.tensor("wpe.weight")
        if ids.shape[1] > wpe.shape[0]:
            raise VarcheckError(f"{ckpt.name}: {ids.shape[1]} tokens; at most {wpe.shape[0]}")
        return ckpt.rows("wte.weight", ids) + wpe[: ids.shape[1]]
    if spec.family in ENCODERS:
        return _embed_encoder(ckpt, ids, mask)
    x = ckpt.rows("embed_tokens.weight", ids)
    return x * np.float32(spec.embed_scale) if spec.embed_scale is not None else x


def _embed_encoder(
    ckpt: HFCheckpoint | GGUFCheckpoint, ids: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    spec = ckpt.spec
    pos = _positions(spec, ids, mask)
    table = ckpt.tensor("embeddings.position_embeddings.weight")
    if pos.max(initial=0) >= table.shape[0]:
        raise VarcheckError(
            f"{ckpt.name}: a sequence needs position {int(pos.max())}; the "
            f"table has {table.shape[0]} rows"
        )
    x = (
        ckpt.rows("embeddings.word_embeddings.weight", ids)
        + ckpt.tensor("embeddings.token_type_embeddings.weight")[0]
        + table[pos]
    )
    gain, bias = (ckpt.tensor(f"embeddings.LayerNorm.{n}") for n in ("weight", "bias"))
    return _layer_norm(x, gain, bias, spec.eps)


def visible(spec: ModelSpec, layer: int, mask: np.ndarray) -> np.ndarray:
    """``(batch, 1, tokens, tokens)``: pairs the model lets interact between real tokens."""
    n = mask.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    allowed = np.ones((n, n), bool) if spec.family in ENCODERS else j <= i
    window = spec.windows[layer]
    if window is not None:
        allowed = allowed & (j > i - window)
    return allowed[None, None] & mask[:, None, :, None] & mask[:, None, None, :]


def _model_mask(spec: ModelSpec, layer: int, mask: np.ndarray) -> np.ndarray:
    """What the model masks: padded keys for encoders; causality (and window) for decoders,
    with no key-padding mask (right padding: real queries see only real keys)."""
    if spec.family in ENCODERS:
        return mask[:, None, None, :]
    n = mask.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    allowed = j <= i
    if (window := spec.windows[layer]) is not None:
        allowed = allowed & (j > i - window)
    return allowed[None, None]


def _rope(x: np.ndarray, rope: Rope) -> np.ndarray:
    """Rotate-half RoPE at positions 0..tokens−1, angles in float32."""
    n = x.shape[-2]
    inv = np.asarray(rope.inv_freq, np.float32)
    angles = np.arange(n, dtype=np.float32)[:, None] * inv[None, :]
    emb = np.concatenate([angles, angles], axis=-1)
    cos, sin = np.cos(emb), np.sin(emb)
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def _qkv(spec: ModelSpec, w: dict[str, np.ndarray], x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Queries, keys, values split into heads (before RoPE)."""
    if spec.family in ENCODERS:
        names = ("attention.self.query", "attention.self.key", "attention.self.value")
        return tuple(
            _heads(_linear(x, w[f"{n}.weight"], w[f"{n}.bias"]), spec.heads) for n in names
        )
    if spec.family == "gpt2":
        both = _linear(x, w["attn.c_attn.weight"], w["attn.c_attn.bias"], conv=True)
        d = spec.hidden
        return tuple(_heads(both[..., i * d : (i + 1) * d], spec.heads) for i in range(3))
    out = []
    for name, n in (("q", spec.heads), ("k", spec.kv_heads), ("v", spec.kv_heads)):
        bias = w.get(f"self_attn.{name}_proj.bias")
        out.append(_heads(_linear(x, w[f"self_attn.{name}_proj.weight"], bias), n))
    return tuple(out)


def _softmax(scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    s = np.where(allowed, scores, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def _attention(
    spec: ModelSpec, w: dict[str, np.ndarray], layer: int, x: np.ndarray, mask: np.ndarray
) -> tuple[LayerQK, np.ndarray]:
    """The layer's q, k, logits and weights, and the attention output before its projection."""
    q, k, v = _qkv(spec, w, x)
    if spec.qk_norm:
        q = _rms_norm(q, w["self_attn.q_norm.weight"], spec.eps, 0.0)
        k = _rms_norm(k, w["self_attn.k_norm.weight"], spec.eps, 0.0)
    if spec.rope is not None:
        q, k = _rope(q, spec.rope), _rope(k, spec.rope)
    group = spec.heads // spec.kv_heads
    kk, vv = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    logits = (q @ kk.transpose(0, 1, 3, 2)) * np.float32(spec.scales[layer])
    capped = logits
    if spec.softcap is not None:
        c = np.float32(spec.softcap)
        capped = c * np.tanh(logits / c)
    probs = _softmax(capped, _model_mask(spec, layer, mask))
    context = (probs @ vv).transpose(0, 2, 1, 3).reshape(*x.shape[:2], -1)
    return LayerQK(layer, q, k, logits, probs, visible(spec, layer, mask)), context


def block(
    spec: ModelSpec, w: dict[str, np.ndarray], layer: int, h: np.ndarray, mask: np.ndarray
) -> tuple[LayerQK, np.ndarray]:
    """Layer ``layer`` (weights ``w`` from :func:`layer_weights`) on its input ``h``: its
    attention, and its output (the next layer's input)."""
    if spec.family in ENCODERS:
        return _encoder_block(spec, w, layer, h, mask)
    if spec.family == "gpt2":
        x = _layer_norm(h, w["ln_1.weight"], w["ln_1.bias"], spec.eps)
        att, ctx = _attention(spec, w, layer, x, mask)
        h = h + _linear(ctx, w["attn.c_proj.weight"], w["attn.c_proj.bias"], conv=True)
        x = _layer_norm(h, w["ln_2.weight"], w["ln_2.bias"], spec.eps)
        inner = _act(
            _linear(x, w["mlp.c_fc.weight"], w["mlp.c_fc.bias"], conv=True), spec.activation
        )
        return att, h + _linear(inner, w["mlp.c_proj.weight"], w["mlp.c_proj.bias"], conv=True)
    norm = lambda x, name: _rms_norm(x, w[f"{name}.weight"], spec.eps, spec.norm_offset)  # noqa: E731
    att, ctx = _attention(spec, w, layer, norm(h, "input_layernorm"), mask)
    out = _linear(ctx, w["self_attn.o_proj.weight"], w.get("self_attn.o_proj.bias"))
    if spec.family == "gemma2":
        h = h + norm(out, "post_attention_layernorm")
        mlp = _mlp(spec, w, norm(h, "pre_feedforward_layernorm"))
        return att, h + norm(mlp, "post_feedforward_layernorm")
    h = h + out
    return att, h + _mlp(spec, w, norm(h, "post_attention_layernorm"))


def _mlp(spec: ModelSpec, w: dict[str, np.ndarray], y: np.ndarray) -> np.ndarray:
    gate = _linear(y, w["mlp.gate_proj.weight"], w.get("mlp.gate_proj.bias"))
    up = _linear(y, w["mlp.up_proj.weight"], w.get("mlp.up_proj.bias"))
    return _linear(
        _act(gate, spec.activation) * up, w["mlp.down_proj.weight"], w.get("mlp.down_proj.bias")
    )


def _encoder_block(
    spec: ModelSpec, w: dict[str, np.ndarray], layer: int, h: np.ndarray, mask: np.ndarray
) -> tuple[LayerQK, np.ndarray]:
    att, ctx = _attention(spec, w, layer, h, mask)
    dense = "attention.output.dense"
    a = _layer_norm(
        h + _linear(ctx, w[f"{dense}.weight"], w[f"{dense}.bias"]),
        w["attention.output.LayerNorm.weight"],
        w["attention.output.LayerNorm.bias"],
        spec.eps,
    )
    inner = _act(
        _linear(a, w["intermediate.dense.weight"], w["intermediate.dense.bias"]), spec.activation
    )
    out = _linear(inner, w["output.dense.weight"], w["output.dense.bias"]) + a
    return att, _layer_norm(out, w["output.LayerNorm.weight"], w["output.LayerNorm.bias"], spec.eps)


def final_logits(
    ckpt: HFCheckpoint | GGUFCheckpoint, h: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """The final normalised states (the last hidden state a decoder reports) and the output
    logits (None for an encoder or a checkpoint without an output matrix)."""
    spec = ckpt.spec
    if spec.family in ENCODERS:
        return h, None
    if spec.family == "gpt2":
        h = _layer_norm(h, ckpt.tensor("ln_f.weight"), ckpt.tensor("ln_f.bias"), spec.eps)
    else:
        h = _rms_norm(h, ckpt.tensor("norm.weight"), spec.eps, spec.norm_offset)
    out = ckpt.output_matrix()
    if out is None:
        return h, None
    logits = _linear(h, out, None)
    if spec.final_softcap is not None:
        c = np.float32(spec.final_softcap)
        logits = c * np.tanh(logits / c)
    return h, logits


def run(
    ckpt: HFCheckpoint | GGUFCheckpoint,
    ids: np.ndarray,
    mask: np.ndarray,
    layers: int | None = None,
) -> tuple[list[LayerQK], list[np.ndarray]]:
    """Every layer's attention and every hidden state of one batch (layers read one at a time).

    Returns
    -------
    attention : list of LayerQK
    states : list of ndarray
        The embedding output, then each layer's output.
    """
    total = ckpt.spec.layers if layers is None else layers
    states = [embed(ckpt, ids, mask)]
    attention = []
    for layer in range(total):
        att, h = block(ckpt.spec, layer_weights(ckpt, layer), layer, states[-1], mask)
        attention.append(att)
        states.append(h)
    return attention, states
