"""Numpy kernels that reproduce what framework attention does to the probe's reading
(tests/test_probe_readings.py): a causal mask read with d_v < keys, a softmax upcast to float32
inside a float64 kernel, float16 multi-head attention with a float32 softmax (as
``torch.nn.MultiheadAttention`` in half precision), and BLOOM-like steep ALiBi slopes.

Every kernel takes the 4-D layouts (the leading axes pass through), so that heads can serve as
independent replicates: each head has its own queries, keys and noise.
"""

from __future__ import annotations

import zlib

import numpy as np


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _causal(x: np.ndarray) -> np.ndarray:
    """Bottom-right causal mask on the last two axes."""
    n, m = x.shape[-2:]
    return np.where(np.arange(m)[None, :] > np.arange(n)[:, None] + (m - n), -np.inf, x)


def noisy_causal(q, k, v, noise: float = 0.1, factor: float = 1.0):  # noqa: ANN001, ANN201
    """Causal softmax attention at ``factor`` × 1/√d_k with logit noise of sd ``noise``, the
    noise a function of the inputs (the same q, k give the same weights)."""
    rng = np.random.default_rng(zlib.crc32(np.ascontiguousarray(q).tobytes()))
    x = factor * (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    return _softmax(_causal(x + noise * rng.standard_normal(x.shape))) @ v


def softmax_in_float32(q, k, v, factor: float = 1.0):  # noqa: ANN001, ANN201
    """transformers' eager attention with float64 inputs: logits in float64, the softmax in
    float32, cast back to float64 before the weighted sum."""
    x = factor * (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1])
    w = _softmax(x.astype(np.float32)).astype(np.float64)
    return w @ np.asarray(v, np.float64)


def multihead_half(q, k, v, cap: float | None = None):  # noqa: ANN001, ANN201
    """(batch, n, heads, d) in float16: q scaled by 1/√d_k in float16, q·k accumulated in
    float32 and rounded to float16, optionally soft-capped (``cap · tanh(x / cap)``), the
    softmax in float32 rounded to float16, the weighted sum accumulated in float32 and rounded
    to float16 (as ``torch.nn.MultiheadAttention`` in half precision)."""
    q, k, v = (np.swapaxes(np.asarray(a, np.float16), 1, 2) for a in (q, k, v))
    scaled = (q * np.float16(1.0 / np.sqrt(q.shape[-1]))).astype(np.float16)
    x = (scaled.astype(np.float32) @ np.swapaxes(k, -1, -2).astype(np.float32)).astype(np.float16)
    x = x.astype(np.float32)
    if cap is not None:
        x = np.float32(cap) * np.tanh(x / np.float32(cap))
    w = _softmax(x).astype(np.float16)
    out = (w.astype(np.float32) @ v.astype(np.float32)).astype(np.float16)
    return np.swapaxes(out, 1, 2)


def bloom_alibi(q, k, v, factor: float = 1.0):  # noqa: ANN001, ANN201
    """BLOOM's attention in float32, (batch, heads, n, d): ALiBi slopes 2^-2, 2^-4, ... per
    head (4 heads: 2^-2..2^-8) added as slope · j (a row's constant apart, −slope · (i − j)),
    a causal mask, the softmax in float32."""
    q, k, v = (np.asarray(a, np.float32) for a in (q, k, v))
    heads, m = q.shape[1], k.shape[-2]
    slopes = (2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)).astype(np.float32)
    x = np.float32(factor / np.sqrt(q.shape[-1])) * (q @ np.swapaxes(k, -1, -2))
    x = x + slopes[:, None, None] * np.arange(m, dtype=np.float32)
    return (_softmax(_causal(x)).astype(np.float32) @ v).astype(np.float32)


def grouped(q, k, v, interleave: bool = True):  # noqa: ANN001, ANN201
    """Grouped-query attention, (batch, heads, n, d): k and v have fewer heads, repeated as
    ``repeat_interleave`` does (or, wrongly, tiled)."""
    r = q.shape[1] // k.shape[1]
    if interleave:
        k, v = np.repeat(k, r, axis=1), np.repeat(v, r, axis=1)
    else:
        k, v = np.tile(k, (1, r, 1, 1)), np.tile(v, (1, r, 1, 1))
    return _softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])) @ v


def heads_last(q, k, v):  # noqa: ANN001, ANN201
    """(batch, heads, n, d) in, (batch, n, heads, d) out, as transformers' attention functions."""
    return np.swapaxes(_softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])) @ v, 1, 2)
