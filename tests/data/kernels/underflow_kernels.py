"""Kernels at the underflow edge of their output format (tests/test_probe_underflow.py).

Weights are computed in float64 and returned in ``dtype``: a causal mask with an ALiBi bias
whose far keys round (or, with ``ftz``, flush) to 0, and sliding windows that mask keys whose
weights are far from 0.
"""

from __future__ import annotations

import numpy as np


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _positions(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(q.shape[-2])[:, None], np.arange(k.shape[-2])[None, :]


def causal_alibi(q, k, v, slope=1.0, f=1.0, dtype="float16", ftz=False):  # noqa: ANN001, ANN201
    """softmax(f q·k/sqrt(d_k) − slope (i − j)), causal; weights below the smallest normal of
    ``dtype`` flushed to 0 with ``ftz`` (fast-math GPU code); f ≠ 1 is a wrong scale."""
    i, j = _positions(q, k)
    x = f * (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1]) - slope * (i - j)
    w = _softmax(np.where(j > i, -np.inf, x))
    if ftz:
        w = np.where(w < np.finfo(np.dtype(dtype)).tiny, 0.0, w)
    return (w.astype(dtype) @ np.asarray(v, dtype=dtype)).astype(dtype)


def window(q, k, v, width=16, slope=0.0, dtype="float16"):  # noqa: ANN001, ANN201
    """Causal sliding window: keys ``width`` or more positions back are masked; ALiBi ``slope``."""
    i, j = _positions(q, k)
    x = (q @ np.swapaxes(k, -1, -2)) / np.sqrt(q.shape[-1]) - slope * (i - j)
    w = _softmax(np.where((j > i) | (i - j >= width), -np.inf, x))
    return (w.astype(dtype) @ np.asarray(v, dtype=dtype)).astype(dtype)
