"""Variance of attention logits from projections Q = X W_q, K = X W_k, and the β that scales it.

For q = x W_q and k = x' W_k with x, x' different tokens whose entries are independent, mean 0
and variance s_x², the logit q·k = x A x'ᵀ with A = W_q W_kᵀ has Var(q·k | W) = s_x⁴ ‖W_q W_kᵀ‖_F²
(exact, given the weights); averaged over weights with i.i.d. entries of variance s_q², s_k²,
Var(q·k) = (d_x s_x² s_q²)(d_x s_x² s_k²) d_k (the σ-based formula). β = 1 / sqrt(Var) gives the
logits unit variance. The paper family and the encoder audit both use these formulas.

For given weights the σ_W the σ-based formula takes is the root mean square of the entries
(:func:`weight_sigma`, :data:`SIGMA_W_KIND`): for zero-mean inputs Var(x·w | w) = s_x² Σ_a w_a²
whatever the mean of w, so the RMS is what makes d_x s_x² σ_W² the average variance of a
coordinate of q. With it the exact variance is at most d_k times the σ-based one, since
‖W_q W_kᵀ‖_F ≤ ‖W_q‖_F ‖W_k‖_F = d_x d_k σ_Wq σ_Wk; with the mean-removed standard deviation
no bound holds (docs/paper.md).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..errors import VarcheckError

__all__ = [
    "paper_logit_variance",
    "exact_logit_variance",
    "beta_paper",
    "beta_exact",
    "beta_for",
    "weight_sigma",
    "SIGMA_W_KIND",
    "HeadPrediction",
    "head_prediction",
]

#: Which σ of a weight matrix :func:`weight_sigma` measures (shown in tables and JSON).
SIGMA_W_KIND = "rms"


def paper_logit_variance(
    sigma_x: float, sigma_wq: float, sigma_wk: float, dx: int, dk: int
) -> float:
    """The σ-based prediction (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k."""
    return (dx * sigma_x**2 * sigma_wq**2) * (dx * sigma_x**2 * sigma_wk**2) * dk


def exact_logit_variance(w_q: np.ndarray, w_k: np.ndarray, sigma_x: float = 1.0) -> float:
    """Var(q·k | W) = σ_X⁴ ‖W_q W_kᵀ‖_F² for different tokens with i.i.d. zero-mean entries.

    Parameters
    ----------
    w_q, w_k : ndarray, shape (d_x, d_k)
        Projection matrices (columns are the head's query/key directions).
    sigma_x : float
        Standard deviation of the input entries.
    """
    w_q = np.asarray(w_q, dtype=float)
    w_k = np.asarray(w_k, dtype=float)
    if w_q.ndim != 2 or w_q.shape != w_k.shape:
        raise VarcheckError(
            f"W_q and W_k must be matrices of one shape (d_x, d_k), got {w_q.shape} and {w_k.shape}"
        )
    # ‖W_q W_kᵀ‖_F² = trace((W_qᵀ W_q)(W_kᵀ W_k)): d_k × d_k products instead of d_x × d_x
    gram = (w_q.T @ w_q) * (w_k.T @ w_k)
    return float(sigma_x**4 * gram.sum())


def beta_for(variance: float) -> float:
    """The β that gives logits of this variance unit variance (``nan`` if it is not > 0)."""
    return 1.0 / math.sqrt(variance) if variance > 0 and math.isfinite(variance) else math.nan


def beta_paper(sigma_x: float, sigma_wq: float, sigma_wk: float, dx: int, dk: int) -> float:
    """β from measured standard deviations (the paper's algorithm)."""
    return beta_for(paper_logit_variance(sigma_x, sigma_wq, sigma_wk, dx, dk))


def beta_exact(w_q: np.ndarray, w_k: np.ndarray, sigma_x: float = 1.0) -> float:
    """β from the weights themselves: 1 / (σ_X² ‖W_q W_kᵀ‖_F)."""
    return beta_for(exact_logit_variance(w_q, w_k, sigma_x))


def weight_sigma(w: np.ndarray) -> float:
    """The measured σ_W of a weight matrix: the root mean square of its entries, √(mean w²).

    Equal to the standard deviation for zero-mean entries (the paper's setting); for weights
    with a mean it is the σ that keeps ``exact ≤ d_k · σ-based`` (see the module notes).

    Examples
    --------
    >>> weight_sigma(np.array([[0.3, 0.4], [0.3, 0.4]]))   # mean 0.35, sd 0.05
    0.3535533905932738
    """
    w = np.asarray(w, dtype=float)
    return float(np.sqrt(np.mean(w * w)))


class HeadPrediction(NamedTuple):
    """One head's measured σ_W and the two predictions of Var(q·k) from its weights.

    Attributes
    ----------
    sigma_wq, sigma_wk : float
        :func:`weight_sigma` of W_q and W_k.
    var_paper : float
        :func:`paper_logit_variance` with those σ_W.
    var_exact : float
        :func:`exact_logit_variance` of the weights themselves.
    """

    sigma_wq: float
    sigma_wk: float
    var_paper: float
    var_exact: float


def head_prediction(w_q: np.ndarray, w_k: np.ndarray, sigma_x: float) -> HeadPrediction:
    """σ_W of each matrix and both predictions for one head, W_q and W_k of shape (d_x, d_k).

    What the paper family (``beta``) and the encoder audits report per head, in one place.
    """
    w_q = np.asarray(w_q, dtype=float)
    w_k = np.asarray(w_k, dtype=float)
    dx, dk = w_q.shape
    sq, sk = weight_sigma(w_q), weight_sigma(w_k)
    return HeadPrediction(
        sq,
        sk,
        paper_logit_variance(sigma_x, sq, sk, dx, dk),
        exact_logit_variance(w_q, w_k, sigma_x),
    )
