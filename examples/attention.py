"""A small multi-head self-attention layer in numpy, and samplers of its pre-softmax logits.

The layer: ``n`` tokens of width ``d_model``, each entry standard normal (unit variance, as
after a LayerNorm); ``heads`` heads of width ``d_head = dk``; query and key weights
``W_q, W_k`` of shape ``(d_model, heads * dk)`` drawn fresh for every call with the LeCun
("fan-in") normal initialisation: entries N(0, 1 / d_model). Then every query and key entry
has unit variance, a query-key dot product over ``dk`` entries has variance ``dk``, and the
scaled logits ``Q Kᵀ / √dk`` have variance 1 (exactly ``1 + 2 / (n · d_model)`` on average
over the n × n logits: a token's logit with itself has variance ``dk (1 + 2 / d_model)``).

Each sampler returns the logits of ONE freshly initialised layer on ONE batch of tokens,
shape ``(heads, n, n)``: entries share tokens and weights, so they are dependent; calls are
independent because each draws from its own generator. That is what varcheck needs:

    varcheck assert --dk 64 --sampler examples/attention.py:logits --claim 1 --tolerance 0.02

``logits_unscaled`` forgets the 1/√dk; ``logits_head_fan`` initialises with the head width as
fan-in (N(0, 1/dk) instead of N(0, 1/d_model)). Both are caught by the same tests.
"""

from __future__ import annotations

import numpy as np

D_MODEL = 256
TOKENS = 32
HEADS = 4


def init_weight(rng: np.random.Generator, fan_in: int, shape: tuple[int, int]) -> np.ndarray:
    """LeCun normal initialisation: entries N(0, 1 / fan_in)."""
    return rng.standard_normal(shape) / np.sqrt(fan_in)


class SelfAttention:
    """Multi-head self-attention up to the softmax: the query-key logits of each head."""

    def __init__(
        self,
        rng: np.random.Generator,
        d_model: int,
        d_head: int,
        heads: int,
        *,
        fan_in: int | None = None,
        scale: bool = True,
    ) -> None:
        fan = d_model if fan_in is None else fan_in
        self.d_head, self.heads, self.scale = d_head, heads, scale
        self.w_q = init_weight(rng, fan, (d_model, heads * d_head))
        self.w_k = init_weight(rng, fan, (d_model, heads * d_head))

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Pre-softmax logits, shape ``(heads, n, n)``, for tokens ``x`` of shape (n, d_model)."""
        n = x.shape[0]
        q = (x @ self.w_q).reshape(n, self.heads, self.d_head).transpose(1, 0, 2)
        k = (x @ self.w_k).reshape(n, self.heads, self.d_head).transpose(1, 0, 2)
        out = q @ k.transpose(0, 2, 1)
        return out / np.sqrt(self.d_head) if self.scale else out


def _run(rng: np.random.Generator, dk: int, tokens: int, d_model: int, heads: int, **kw):
    layer = SelfAttention(rng, d_model, dk, heads, **kw)
    x = rng.standard_normal((tokens, d_model))
    return layer.logits(x)


def logits(
    rng: np.random.Generator,
    dk: int,
    tokens: int = TOKENS,
    d_model: int = D_MODEL,
    heads: int = HEADS,
) -> np.ndarray:
    """The scaled logits of one fresh layer on one batch: variance 1."""
    return _run(rng, dk, tokens, d_model, heads)


def logits_unscaled(
    rng: np.random.Generator,
    dk: int,
    tokens: int = TOKENS,
    d_model: int = D_MODEL,
    heads: int = HEADS,
) -> np.ndarray:
    """Wrong: the 1/√dk is forgotten, so the variance is dk."""
    return _run(rng, dk, tokens, d_model, heads, scale=False)


def logits_head_fan(
    rng: np.random.Generator,
    dk: int,
    tokens: int = TOKENS,
    d_model: int = D_MODEL,
    heads: int = HEADS,
) -> np.ndarray:
    """Wrong: weights initialised with the head width as fan-in, so the variance is
    (d_model / dk)²."""
    return _run(rng, dk, tokens, d_model, heads, fan_in=dk)
