"""A Llama-family decoder in numpy, from a GGUF file: configuration, weights, the forward pass.

Written from the architecture (Touvron et al. 2023) rather than from any implementation: token
embeddings, then ``block_count`` pre-norm blocks of

    x = RMSNorm(h) · g_attn;  q = x W_qᵀ, k = x W_kᵀ, v = x W_vᵀ  (no biases)
    q, k rotated by position (RoPE, θ_p = base^(−2p/d_k));  h += softmax(q·kᵀ/√d_k + causal) v W_oᵀ
    x = RMSNorm(h) · g_ffn;  h += (silu(x W_gateᵀ) ⊙ x W_upᵀ) W_downᵀ

with grouped-query attention: ``head_count`` query heads share ``head_count_kv`` key/value heads,
query head h reading key/value head h // (head_count / head_count_kv). A final RMSNorm and the
output matrix (the embedding matrix when the file has no ``output.weight``) give next-token
logits.

**RoPE and the GGUF row order.** RoPE rotates pairs of coordinates of each head's q and k. The
original (Hugging Face) checkpoints pair coordinate p with p + d_k/2 ("rotate half"); llama.cpp's
converter permutes the rows of ``attn_q`` and ``attn_k`` so that, in the GGUF file, the pairs are
adjacent, (2p, 2p + 1). :data:`ROPE_LAYOUTS` names both; ``"adjacent"`` is the right one for GGUF
weights, which ``tests/test_llama_forward.py`` shows on the model's own predictions rather than
assuming it (with ``"half"`` the model no longer completes "The capital of France is" with
" Paris").

Weights are dequantised layer by layer (``gguf.quants.dequantize``), so memory holds one layer's
float32 weights at a time, and the embedding rows of the tokens in use.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..errors import VarcheckError
from .gguf_file import GGUFFile, open_gguf
from .llama_tokenizer import GGUFTokenizer, load_tokenizer

__all__ = [
    "LlamaConfig",
    "LlamaModel",
    "LayerWeights",
    "AttentionLayer",
    "ROPE_LAYOUTS",
    "load_llama",
    "rms_norm",
    "rope_angles",
    "apply_rope",
    "embed",
    "attention_layer",
    "next_token_logits",
    "mean_log_likelihood",
    "log_likelihood",
    "final_states",
    "output_matrix",
]

#: How RoPE pairs the coordinates of a head: ``adjacent`` (2p, 2p+1), GGUF's order after the
#: converter's permutation; ``half`` (p, p + d_k/2), the original checkpoints' order.
ROPE_LAYOUTS = ("adjacent", "half")
#: Largest value of each size in the metadata. d_k (``key_length``) at most 1024: released
#: models use 64 to 256, and the audit's per-head moments and RoPE predictions grow with d_k²
#: (a 4 MB file declaring d_k = 4096 asked for 5 GB).
_LIMITS = {
    "block_count": 1024,
    "embedding_length": 1 << 16,
    "feed_forward_length": 1 << 20,
    "attention.head_count": 1024,
    "attention.head_count_kv": 1024,
    "attention.key_length": 1024,
    "rope.dimension_count": 1024,
    "context_length": 1 << 24,
}


@dataclass(frozen=True)
class LlamaConfig:
    """The shape of a Llama-family decoder, read from GGUF metadata (``llama.*``).

    Attributes
    ----------
    num_layers, hidden_size, intermediate_size : int
    num_heads, num_kv_heads, head_dim : int
        Query heads, key/value heads (grouped-query attention when fewer) and d_k.
    rope_base : float
        ``rope.freq_base``: θ_p = base^(−2p/d_k).
    rope_scale : float
        Positions are divided by it (``rope.scaling.type = linear``); 1 otherwise.
    rms_eps : float
    context_length, vocab_size : int
    name : str
        ``general.name`` (or the file's name).
    attention_scale : float or None
        ``attention.scale``, the multiplier of q·k the file declares; None: 1/√d_k.
    """

    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_base: float
    rope_scale: float
    rms_eps: float
    context_length: int
    vocab_size: int
    name: str
    attention_scale: float | None = None

    @property
    def declared_scale(self) -> float:
        """The multiplier of q·k the model uses: ``attention.scale``, or 1/√d_k."""
        return self.attention_scale or 1.0 / math.sqrt(self.head_dim)

    @property
    def scale_rule(self) -> str:
        """Where :attr:`declared_scale` comes from, for reports."""
        return "attention.scale" if self.attention_scale else "1/√d_head"

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    def kv_head(self, head: int) -> int:
        """The key/value head query head ``head`` reads."""
        return head // self.group_size


class LayerWeights(NamedTuple):
    """One block's float32 weights, PyTorch layout ``(out, in)``."""

    attn_norm: np.ndarray
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    ffn_norm: np.ndarray
    gate: np.ndarray
    up: np.ndarray
    down: np.ndarray


@dataclass(frozen=True)
class LlamaModel:
    """An opened GGUF decoder: its file, configuration, tokenizer and RoPE frequencies."""

    file: GGUFFile
    config: LlamaConfig
    tokenizer: GGUFTokenizer
    inv_freq: np.ndarray

    @property
    def path(self) -> str:
        return str(self.file.path)

    def layer(self, index: int, *, attention_only: bool = False) -> LayerWeights:
        """Dequantise block ``index``; with ``attention_only`` the MLP and W_o, W_v are skipped."""
        p = f"blk.{index}."
        t = self.file.tensor
        norm, wq, wk = t(p + "attn_norm.weight"), t(p + "attn_q.weight"), t(p + "attn_k.weight")
        if attention_only:
            empty = np.empty((0, 0), np.float32)
            return LayerWeights(norm, wq, wk, empty, empty, empty, empty, empty, empty)
        names = ("attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
        return LayerWeights(norm, wq, wk, *(t(p + n + ".weight") for n in names))

    def query_key(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Block ``index``'s W_q ``(heads·d_k, d)`` and W_k ``(kv_heads·d_k, d)``, float32."""
        p = f"blk.{index}."
        return self.file.tensor(p + "attn_q.weight"), self.file.tensor(p + "attn_k.weight")


# --- loading and validation ---------------------------------------------------------------------


def _meta_int(file: GGUFFile, key: str, default: int | None = None) -> int:
    arch = file.architecture
    value = file.get(f"{arch}.{key}", default)
    limit = _LIMITS.get(key, 1 << 30)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        shown = "missing" if value is None else repr(value)
        raise VarcheckError(
            f"{file.path}: metadata {arch}.{key} is {str(shown)[:40]}; expected a whole number "
            f"in 1..{limit}"
        )
    return value


def _meta_float(file: GGUFFile, key: str, default: float, low: float, high: float) -> float:
    value = file.get(f"{file.architecture}.{key}", default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < value < high:
        raise VarcheckError(
            f"{file.path}: metadata {file.architecture}.{key} is {str(value)[:40]}; expected a "
            f"number in ({low:g}, {high:g})"
        )
    return float(value)


def _read_config(file: GGUFFile) -> LlamaConfig:
    """The configuration, every size bounded and consistent before any tensor is read."""
    heads = _meta_int(file, "attention.head_count")
    kv_heads = _meta_int(file, "attention.head_count_kv", heads)
    hidden = _meta_int(file, "embedding_length")
    if heads % kv_heads:
        raise VarcheckError(
            f"{file.path}: {heads} query heads cannot share {kv_heads} key/value heads evenly"
        )
    head_dim = _meta_int(file, "attention.key_length", max(2, min(hidden // heads, 1024)))
    rope_dims = _meta_int(file, "rope.dimension_count", head_dim)
    if rope_dims != head_dim or head_dim % 2:
        raise VarcheckError(
            f"{file.path}: RoPE over {rope_dims} of {head_dim} dimensions per head is not "
            "supported; accepted: every dimension, d_k even"
        )
    scaling = file.get(f"{file.architecture}.rope.scaling.type", "none")
    if scaling not in ("none", "linear"):
        raise VarcheckError(
            f"{file.path}: rope.scaling.type {str(scaling)[:30]!r} is not supported; accepted: "
            "none, linear"
        )
    scale = 1.0
    if scaling == "linear":
        scale = _meta_float(file, "rope.scaling.factor", 1.0, 0.0, 1e6)
    embedding = file.tensors.get("token_embd.weight")
    name = file.get("general.name") or file.path.stem
    declared = file.get(f"{file.architecture}.attention.scale", 0.0) or 0.0
    number = isinstance(declared, int | float) and not isinstance(declared, bool)
    if not (number and math.isfinite(declared) and declared >= 0):
        raise VarcheckError(
            f"{file.path}: metadata attention.scale {str(declared)[:40]!r}; accepted: a number >= 0"
        )
    return LlamaConfig(
        num_layers=_meta_int(file, "block_count"),
        hidden_size=hidden,
        intermediate_size=_meta_int(file, "feed_forward_length"),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rope_base=_meta_float(file, "rope.freq_base", 10000.0, 1.0, 1e12),
        rope_scale=scale,
        rms_eps=_meta_float(file, "attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0),
        context_length=_meta_int(file, "context_length", 2048),
        vocab_size=embedding.shape[0] if embedding is not None else 0,
        name=str(name)[:80],
        attention_scale=float(declared) or None,
    )


def _expected_shapes(cfg: LlamaConfig) -> dict[str, tuple[int, ...]]:
    d, f, dk = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    out: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (cfg.vocab_size, d),
        "output_norm.weight": (d,),
    }
    for i in range(cfg.num_layers):
        p = f"blk.{i}."
        out |= {
            p + "attn_norm.weight": (d,),
            p + "attn_q.weight": (cfg.num_heads * dk, d),
            p + "attn_k.weight": (cfg.num_kv_heads * dk, d),
            p + "attn_v.weight": (cfg.num_kv_heads * dk, d),
            p + "attn_output.weight": (d, cfg.num_heads * dk),
            p + "ffn_norm.weight": (d,),
            p + "ffn_gate.weight": (f, d),
            p + "ffn_up.weight": (f, d),
            p + "ffn_down.weight": (d, f),
        }
    return out


def _check_tensors(file: GGUFFile, cfg: LlamaConfig) -> None:
    """Every tensor the forward pass reads exists with the shape the metadata implies."""
    expected = _expected_shapes(cfg)
    if "output.weight" in file.tensors:
        expected["output.weight"] = (cfg.vocab_size, cfg.hidden_size)
    if "rope_freqs.weight" in file.tensors:
        expected["rope_freqs.weight"] = (cfg.head_dim // 2,)
    for name, shape in expected.items():
        info = file.tensors.get(name)
        if info is None:
            raise VarcheckError(
                f"{file.path}: no tensor {name!r}; the metadata describes {cfg.num_layers} Llama "
                "blocks"
            )
        if info.shape != shape:
            raise VarcheckError(
                f"{file.path}: tensor {name!r} has shape {info.shape}, expected {shape} from the "
                "metadata"
            )
    file.check_types(list(expected))


def load_llama(path: str | os.PathLike[str]) -> LlamaModel:
    """Open a Llama-family GGUF file: validated layout, configuration, shapes and tokenizer.

    No weight is dequantised here; :meth:`LlamaModel.layer` does it one block at a time.

    Raises
    ------
    VarcheckError
        For a file that is not a supported, consistent Llama GGUF (see
        :func:`varcheck.audit.gguf_file.open_gguf`), or whose tokenizer is not supported.
    """
    file = open_gguf(path)
    cfg = _read_config(file)
    if cfg.vocab_size < 1:
        raise VarcheckError(f"{file.path}: no tensor 'token_embd.weight'")
    _check_tensors(file, cfg)
    tokenizer = load_tokenizer(file)
    if len(file.get("tokenizer.ggml.tokens")) > cfg.vocab_size:
        raise VarcheckError(f"{file.path}: the tokenizer has more tokens than the embedding rows")
    inv_freq = cfg.rope_base ** (-np.arange(0, cfg.head_dim, 2, dtype=np.float64) / cfg.head_dim)
    if "rope_freqs.weight" in file.tensors:
        # Llama 3.1's per-frequency factors: llama.cpp divides each θ_p by its factor
        factors = file.tensor("rope_freqs.weight").astype(np.float64)
        if not (factors > 0).all():
            raise VarcheckError(f"{file.path}: tensor 'rope_freqs.weight' has a factor <= 0")
        inv_freq = inv_freq / factors
    return LlamaModel(file, cfg, tokenizer, inv_freq)


# --- the forward pass ---------------------------------------------------------------------------


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """x / √(mean(x²) + eps) · gain over the last axis."""
    scale = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return (x * scale * gain).astype(x.dtype, copy=False)


def rope_angles(model: LlamaModel, length: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of position · θ_p, shape ``(length, d_k / 2)``, float32."""
    positions = np.arange(length, dtype=np.float64) / model.config.rope_scale
    angles = np.outer(positions, model.inv_freq)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, layout: str) -> np.ndarray:
    """Rotate each head's pairs of coordinates by position; ``x`` is ``(..., tokens, d_k)``."""
    half = x.shape[-1] // 2
    if layout == "adjacent":
        a, b = x[..., 0::2], x[..., 1::2]
    elif layout == "half":
        a, b = x[..., :half], x[..., half:]
    else:
        raise VarcheckError(f"RoPE layout {layout!r}; accepted: " + ", ".join(ROPE_LAYOUTS))
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = np.empty_like(x)
    if layout == "adjacent":
        out[..., 0::2], out[..., 1::2] = ra, rb
    else:
        out[..., :half], out[..., half:] = ra, rb
    return out


def embed(model: LlamaModel, ids: np.ndarray) -> np.ndarray:
    """Embedding rows of ``ids`` (any shape), dequantising only the distinct ids used."""
    if ids.size and (ids.min() < 0 or ids.max() >= model.config.vocab_size):
        raise VarcheckError(f"{model.path}: a token id is outside the embedding table")
    unique, inverse = np.unique(ids, return_inverse=True)
    rows = model.file.tensor("token_embd.weight", unique)
    return rows[inverse.reshape(ids.shape)]


@dataclass(frozen=True)
class AttentionLayer:
    """What one block's attention sees for a batch ``(batch, tokens)``, right-padded.

    Attributes
    ----------
    x : ndarray ``(batch, tokens, d)``
        The attention's input, RMSNorm(h) · g.
    q, k : ndarray ``(batch, heads, tokens, d_k)`` and ``(batch, kv_heads, tokens, d_k)``
        Projections before RoPE.
    logits : ndarray ``(batch, heads, tokens, tokens)``
        Raw q·k after RoPE, unscaled and unmasked (query i, key j; the model uses j ≤ i).
    output : ndarray or None
        The block's output hidden state (None when not asked for).
    """

    x: np.ndarray
    q: np.ndarray
    k: np.ndarray
    logits: np.ndarray
    output: np.ndarray | None


def _split(x: np.ndarray, heads: int) -> np.ndarray:
    b, n, width = x.shape
    return x.reshape(b, n, heads, width // heads).transpose(0, 2, 1, 3)


def _project(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return (x.reshape(-1, x.shape[-1]) @ w.T).reshape(*x.shape[:-1], w.shape[0])


def _causal_softmax(scores: np.ndarray) -> np.ndarray:
    n = scores.shape[-1]
    future = np.triu(np.ones((n, n), dtype=bool), 1)
    scores = np.where(future, -np.inf, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    return probs / probs.sum(axis=-1, keepdims=True)


def attention_layer(
    model: LlamaModel,
    w: LayerWeights,
    h: np.ndarray,
    *,
    rope_layout: str = "adjacent",
    with_output: bool = True,
) -> AttentionLayer:
    """One block on hidden states ``h`` ``(batch, tokens, d)``, float32, right-padded.

    Right padding needs no mask: under the causal mask a real query sees only earlier tokens,
    which are real. ``with_output=False`` stops after the attention logits (``w`` may then come
    from ``model.layer(i, attention_only=True)``).
    """
    cfg = model.config
    x = rms_norm(h, w.attn_norm, cfg.rms_eps)
    q, k = _split(_project(x, w.wq), cfg.num_heads), _split(_project(x, w.wk), cfg.num_kv_heads)
    cos, sin = rope_angles(model, h.shape[1])
    q_rot, k_rot = apply_rope(q, cos, sin, rope_layout), apply_rope(k, cos, sin, rope_layout)
    b, n, g = h.shape[0], h.shape[1], cfg.group_size
    grouped = q_rot.reshape(b, cfg.num_kv_heads, g, n, cfg.head_dim)
    logits = (grouped @ k_rot[:, :, None].swapaxes(-1, -2)).reshape(b, cfg.num_heads, n, n)
    if not with_output:
        return AttentionLayer(x, q, k, logits, None)
    if cfg.attention_scale is None:
        probs = _causal_softmax(logits / np.float32(math.sqrt(cfg.head_dim)))
    else:
        probs = _causal_softmax(logits * np.float32(cfg.attention_scale))
    v = _split(_project(x, w.wv), cfg.num_kv_heads)
    context = probs.reshape(b, cfg.num_kv_heads, g, n, n) @ v[:, :, None]
    context = context.reshape(b, cfg.num_heads, n, cfg.head_dim).transpose(0, 2, 1, 3)
    h = h + _project(context.reshape(b, n, -1), w.wo)
    y = rms_norm(h, w.ffn_norm, cfg.rms_eps)
    gate = _project(y, w.gate)
    inner = gate / (1.0 + np.exp(-gate)) * _project(y, w.up)
    return AttentionLayer(x, q, k, logits, h + _project(inner, w.down))


def final_states(
    model: LlamaModel, sequences: Sequence[Sequence[int]], rope_layout: str
) -> tuple[np.ndarray, np.ndarray]:
    """Every block on right-padded sequences, then the final norm: ``(batch, tokens, d)``, and
    the sequences' lengths."""
    lengths = np.array([len(s) for s in sequences])
    if not len(sequences) or lengths.min() < 1:
        raise VarcheckError("every sequence needs at least one token")
    ids = np.zeros((len(sequences), int(lengths.max())), dtype=np.int64)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = seq
    h = embed(model, ids)
    for index in range(model.config.num_layers):
        out = attention_layer(model, model.layer(index), h, rope_layout=rope_layout).output
        assert out is not None
        h = out
    return rms_norm(h, model.file.tensor("output_norm.weight"), model.config.rms_eps), lengths


def output_matrix(model: LlamaModel) -> np.ndarray:
    """The ``(vocab, d)`` matrix of next-token logits, float32."""
    # without output.weight the embedding matrix is tied to the output
    name = "output.weight" if "output.weight" in model.file.tensors else "token_embd.weight"
    return model.file.tensor(name)


def next_token_logits(
    model: LlamaModel, sequences: Sequence[Sequence[int]], *, rope_layout: str = "adjacent"
) -> np.ndarray:
    """Logits over the vocabulary for the token after each sequence, ``(sequences, vocab)``.

    The whole model runs (every block, the final norm, the output matrix), so this is the check
    that the forward pass is right, not part of an audit.
    """
    h, lengths = final_states(model, sequences, rope_layout)
    return h[np.arange(len(sequences)), lengths - 1] @ output_matrix(model).T


def mean_log_likelihood(
    model: LlamaModel, sequences: Sequence[Sequence[int]], *, rope_layout: str = "adjacent"
) -> float:
    """Mean log-probability (nats) the model gives each next token of the sequences."""
    h, lengths = final_states(model, sequences, rope_layout)
    return log_likelihood(h, lengths, sequences, output_matrix(model))


def log_likelihood(
    h: np.ndarray, lengths: np.ndarray, sequences: Sequence[Sequence[int]], out: np.ndarray
) -> float:
    """Mean next-token log-probability from final states ``h`` and the output matrix ``out``."""
    total, count = 0.0, 0
    for row, seq in enumerate(sequences):
        logits = (h[row, : lengths[row] - 1] @ out.T).astype(np.float64)
        top = logits.max(axis=1, keepdims=True)
        log_z = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
        total += float((logits[np.arange(len(seq) - 1), seq[1:]] - log_z).sum())
        count += len(seq) - 1
    return total / count if count else math.nan


def describe(model: LlamaModel) -> dict[str, Any]:
    """The configuration as a plain dict (for reports)."""
    cfg = model.config
    return {
        "architecture": model.file.architecture,
        "layers": cfg.num_layers,
        "hidden_size": cfg.hidden_size,
        "heads": cfg.num_heads,
        "kv_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "rope_base": cfg.rope_base,
    }
