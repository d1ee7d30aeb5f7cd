"""Attention kernels in numpy: a correct one, and the scale bugs ``varcheck probe`` must name.

Each kernel is ``fn(q, k, v)`` with q (..., n, d_k), k (..., m, d_k), v (..., m, d_v) returning
``softmax(s · q kᵀ + bias) v`` of shape (..., n, d_v): the leading axes (batch, heads) pass
through, so every kernel also takes the ``bhnd`` layout.

    varcheck probe examples/attention_kernels.py:attention --dk 64           # passes
    varcheck probe examples/attention_kernels.py:scale_forgotten --dk 64     # fails: law 1
    varcheck probe examples/attention_kernels.py:scaled_by_dk --dk 64 --expect 1/dk   # passes

The wrong variants are the bugs public reports describe: the 1/√d_k forgotten, applied twice,
the token count in place of d_k, the whole model's width in place of one head's, an extra
1/(layer+1). The others are correct
kernels with something a scale alone does not explain (soft-capping, ALiBi, a causal mask,
formats coarser than the arrays they return), one with rotary embeddings (refused, naming RoPE),
and two that are not softmax attention at all (refused).
"""

from __future__ import annotations

import zlib

import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis (max subtracted; a row of -inf would be NaN)."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _logits(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    return q @ np.swapaxes(k, -1, -2)


def attention(q, k, v):  # noqa: ANN001, ANN201
    """Scaled dot-product attention: softmax(q kᵀ / √d_k) v."""
    return softmax(_logits(q, k) / np.sqrt(q.shape[-1])) @ v


def scale_forgotten(q, k, v):  # noqa: ANN001, ANN201
    """Bug: no scale at all."""
    return softmax(_logits(q, k)) @ v


def scaled_twice(q, k, v):  # noqa: ANN001, ANN201
    """Bug: q is scaled by 1/√d_k, and the kernel scales the logits again."""
    q = q / np.sqrt(q.shape[-1])
    return attention(q, k, v)


def scaled_by_dk(q, k, v):  # noqa: ANN001, ANN201
    """1/d_k, as μP prescribes: right when that is the intent (``--expect 1/dk``)."""
    return softmax(_logits(q, k) / q.shape[-1]) @ v


def scaled_by_tokens(q, k, v):  # noqa: ANN001, ANN201
    """Bug: divides by √n, the number of queries (``q.shape[0]`` of a 2-D q), in place of √d_k.

    Right by coincidence whenever n = d_k: probe's default 48 queries and 80 keys match no
    d_k that is a power of two, so the bug shows at d_k = 64.
    """
    return softmax(_logits(q, k) / np.sqrt(q.shape[-2])) @ v


def model_width(q, k, v, heads: int = 4):  # noqa: ANN001, ANN201
    """Bug: the model's width (heads · d_k) in place of one head's d_k."""
    return softmax(_logits(q, k) / np.sqrt(heads * q.shape[-1])) @ v


def layer_scaled(q, k, v, layer: int = 2):  # noqa: ANN001, ANN201
    """Bug: an extra 1/(layer + 1) left over from a port (layer counted from 0)."""
    return softmax(_logits(q, k) / (np.sqrt(q.shape[-1]) * (layer + 1))) @ v


def softcapped(q, k, v, cap: float = 5.0):  # noqa: ANN001, ANN201
    """Correct scale, then tanh soft-capping of the logits: cap · tanh(logits / cap)."""
    x = _logits(q, k) / np.sqrt(q.shape[-1])
    return softmax(cap * np.tanh(x / cap)) @ v


def alibi(q, k, v, slope: float = 0.25):  # noqa: ANN001, ANN201
    """Correct scale plus an ALiBi bias, −slope · |i − j| (symmetric, no mask)."""
    n, m = q.shape[-2], k.shape[-2]
    distance = np.abs(np.arange(n)[:, None] - np.arange(m)[None, :])
    return softmax(_logits(q, k) / np.sqrt(q.shape[-1]) - slope * distance) @ v


def causal(q, k, v):  # noqa: ANN001, ANN201
    """Correct scale with a causal mask: query i sees keys 0..i."""
    n, m = q.shape[-2], k.shape[-2]
    future = np.arange(m)[None, :] > np.arange(n)[:, None]
    x = np.where(future, -np.inf, _logits(q, k) / np.sqrt(q.shape[-1]))
    return softmax(x) @ v


def causal_alibi(q, k, v, slope: float = 16.0):  # noqa: ANN001, ANN201
    """Correct scale, a causal mask and a steep ALiBi bias: far keys underflow to exactly 0."""
    n, m = q.shape[-2], k.shape[-2]
    i, j = np.arange(n)[:, None], np.arange(m)[None, :]
    x = _logits(q, k) / np.sqrt(q.shape[-1]) - slope * (i - j)
    return softmax(np.where(j > i, -np.inf, x)) @ v


def half_precision(q, k, v):  # noqa: ANN001, ANN201
    """Correct, computed in float16 throughout (a noisy kernel: rounding at 1e-3)."""
    q, k, v = (np.asarray(a, dtype=np.float16) for a in (q, k, v))
    x = _logits(q, k) * np.float16(1.0 / np.sqrt(q.shape[-1]))
    return (softmax(x) @ v).astype(np.float16)


def half_precision_upcast(q, k, v):  # noqa: ANN001, ANN201
    """Correct, computed in float16, returned as float32 (as a 16-bit tensor upcast for numpy):
    probe it with ``--dtype float16``, the format it computes in."""
    return half_precision(q, k, v).astype(np.float32)


def softmax_in_float32(q, k, v):  # noqa: ANN001, ANN201
    """Correct, its softmax computed in float32 and cast back to the inputs' float64 (as
    transformers' eager attention does with float64 inputs): varcheck reads float32 numbers in
    the float64 array it returns and says that it computes in float32."""
    x = (_logits(q, k) / np.sqrt(q.shape[-1])).astype(np.float32)
    return softmax(x).astype(np.float64) @ v


def float16_inside(q, k, v):  # noqa: ANN001, ANN201
    """Correct, its exponentials summed in float16 and divided in float32: it returns float32
    numbers with float16's rounding, which varcheck cannot see in them: probe it with
    ``--dtype float16`` (without it, its rows summing to 1 only to float16's rounding are
    refused, with that hint)."""
    x = (_logits(q, k) / np.sqrt(q.shape[-1])).astype(np.float16)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    total = e.sum(axis=-1, keepdims=True, dtype=np.float16)
    return (e.astype(np.float32) / total.astype(np.float32)) @ np.asarray(v, np.float32)


def _rotate(x: np.ndarray, positions: np.ndarray, base: float = 10_000.0) -> np.ndarray:
    """Rotary position embedding (the half-split form): pairs (x_f, x_(f+d/2)) rotated by
    position · base^(−2f/d)."""
    half = x.shape[-1] // 2
    angle = positions[:, None] * base ** (-np.arange(half) * 2.0 / x.shape[-1])
    cos, sin = np.tile(np.cos(angle), 2), np.tile(np.sin(angle), 2)
    return x * cos + np.concatenate([-x[..., half:], x[..., :half]], axis=-1) * sin


def rotary(q, k, v):  # noqa: ANN001, ANN201
    """Correct, with rotary embeddings (RoPE) applied to q and k: the logits are no longer a
    function of q·k, so it is refused, naming RoPE (probe it with the rotation switched off)."""
    n, m = q.shape[-2], k.shape[-2]
    q, k = _rotate(q, np.arange(n) + m - n), _rotate(k, np.arange(m))
    return attention(q, k, v)


def noisy(q, k, v, noise: float = 0.05):  # noqa: ANN001, ANN201
    """Correct scale with random logit noise of sd ``noise`` (seeded by the inputs)."""
    rng = np.random.default_rng(zlib.crc32(np.ascontiguousarray(q).tobytes()))
    x = _logits(q, k) / np.sqrt(q.shape[-1])
    return softmax(x + noise * rng.standard_normal(x.shape)) @ v


def linear_attention(q, k, v):  # noqa: ANN001, ANN201
    """Not softmax attention: elu(x) + 1 features, normalised (refused by the probe)."""

    def phi(x: np.ndarray) -> np.ndarray:
        return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))

    w = phi(q) @ np.swapaxes(phi(k), -1, -2)
    return (w / w.sum(axis=-1, keepdims=True)) @ v


def unnormalised(q, k, v):  # noqa: ANN001, ANN201
    """Not softmax attention: exp(logits) without the division (rows do not sum to 1)."""
    return np.exp(_logits(q, k) / np.sqrt(q.shape[-1])) @ v


def attention_bnhd(q, k, v):  # noqa: ANN001, ANN201
    """Correct, for inputs laid out (batch, tokens, heads, d)."""
    out = attention(*(np.swapaxes(a, 1, 2) for a in (q, k, v)))
    return np.swapaxes(out, 1, 2)


def grouped_query(q, k, v):  # noqa: ANN001, ANN201
    """Correct, grouped-query attention in (batch, heads, n, d): k and v have fewer heads, each
    serving heads / kv_heads query heads in turn (``--kv-heads``)."""
    groups = q.shape[1] // k.shape[1]
    return attention(q, np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1))


def alibi_heads(q, k, v):  # noqa: ANN001, ANN201
    """Correct scale with ALiBi's per-head slopes 2^(−8(h+1)/H), layout (batch, heads, n, d)."""
    heads, n, m = q.shape[1], q.shape[-2], k.shape[-2]
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    distance = np.abs(np.arange(n)[:, None] - np.arange(m)[None, :])
    bias = -slopes[:, None, None] * distance
    return softmax(_logits(q, k) / np.sqrt(q.shape[-1]) + bias) @ v


def torch_sdpa(q, k, v, scale: float | None = None):  # noqa: ANN001, ANN201
    """``torch.nn.functional.scaled_dot_product_attention`` (default or explicit ``scale``).

    Needs torch (imported here only); numpy arrays in, a CPU tensor out (varcheck reads it).
    """
    import torch

    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(a)) for a in (q, k, v))
    with torch.no_grad():
        return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, scale=scale)
