"""Logits from projections, q = x W_q and k = x' W_k: the paper's relaxed formula and what is exact.

Setting. Inputs x have i.i.d. entries with mean 0, variance σ_X² and fourth moment μ₄ (kurtosis
κ = μ₄ / σ_X⁴). Weights have independent entries with mean 0 and variances σ_q², σ_k² (the init).
Write A = W_q W_kᵀ (d_x × d_x), so q·k = x A x'ᵀ.

Different tokens (x, x' independent). Given the weights, E[q·k | W] = 0 and

    Var(q·k | W) = σ_X⁴ ‖A‖_F²                                         (exact, any x law).

Averaging over the weights, E‖A‖_F² = d_x² d_k σ_q² σ_k², which is the paper's relaxed formula
(d_x σ_X² σ_q²)(d_x σ_X² σ_k²) d_k -- exact, not an approximation, for random weights.

Same token (x' = x, the diagonal of self-attention). q·k = x A xᵀ is a quadratic form, so

    E[q·k | W]   = σ_X² tr A,
    Var(q·k | W) = (μ₄ − 3σ_X⁴) Σ_a A_aa² + σ_X⁴ (‖A‖_F² + tr(A²)).

Over random weights E Σ A_aa² = E tr(A²) = E (tr A)² = d_x d_k σ_q² σ_k², and the conditional
mean, though zero on average, varies with W, which adds σ_X⁴ Var(tr A). Altogether

    Var(q·k) = σ_q² σ_k² d_k (d_x² σ_X⁴ + d_x (μ₄ − σ_X⁴))
             = relaxed · (1 + (κ − 1) / d_x),

e.g. a factor 1 + 2/d_x for normal inputs, and none for ±1 inputs. For one fixed W the mean
σ_X² tr A is the larger effect: it is of order σ_X² √(d_x d_k) σ_q σ_k for independent
random weights, and σ_X² ‖W_q‖_F² -- as large as the standard deviation times √d_k -- when
W_k = W_q.

Fixed weights, σ-based against exact. The paper's prediction from measured σ_Wq, σ_Wk (the
entries' root mean square, :func:`varcheck.core.logit_variance.weight_sigma`) is the average of
σ_X⁴ ‖A‖_F² over weights *with those entry variances drawn independently*; a particular W can be
far from average. When W_q and W_k share directions ‖A‖_F² grows: for W_k = W_q with i.i.d.
entries of kurtosis κ_w its mean is relaxed · (1 + (d_k + κ_w − 2) / d_x) (:func:`aligned_factor`;
κ_w = 3 for the normal entries drawn here), and for a rank-one W_q = W_k = c u vᵀ it is
relaxed · d_k, the most it can be: ‖A‖_F ≤ ‖W_q‖_F ‖W_k‖_F = d_x d_k σ_Wq σ_Wk. The β each
prediction recommends is 1 / sqrt(prediction).

Monte Carlo. Products computed from the same weights or the same input rows are dependent, so
each interval is built from independent blocks: with random weights, one block is one fresh
draw of (W_q, W_k) and of ``tokens`` input rows; with fixed weights, one block is a fresh draw
of the input rows. A block is reduced to the mean of its products and of their squares, and
the estimator, interval and test of :mod:`varcheck.core.estimation` apply unchanged (as in
``sweep``). Verdicts are Holm-adjusted over all rows.

Budget rule (issue #16). ``sweep``'s rule (:func:`varcheck.core.estimation.minimum_products`)
asks for enough products that the variance estimate's relative variance is small against its
law's tails; here the products of a block are dependent, so the rule is stated in blocks
(:func:`minimum_blocks`, from :func:`block_relative_variance`, derived from the weights and the
input law, exact or an upper bound). A fixed ``blocks`` below it, or a run its time cap stopped
there, gives the estimate with the verdict ``unreliable``, no interval and the blocks it needs
(``min_blocks``); a run chasing a precision draws at least that many.

Checks and findings. Rows whose prediction is derived to be exact in its setting (the relaxed
formula for random weights and different tokens, the derived same-token value, the exact
conditional values) are *checks*: a rejection means the derivation, the sampler or the input
assumptions are wrong, and sets the exit status. Rows that apply the paper's formula where it
is not exact (to the same token; the σ-based prediction to one fixed W) are *findings*: they
are tested the same way, and a rejection there is the result being reported, not a failure,
so they do not set the exit status.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._version import __version__
from ..core.distributions import Distribution, parse_distribution
from ..core.estimation import (
    ENTRY_KURTOSIS_POWER,
    MIN_BLOCKS,
    PRODUCTS_PER_KURTOSIS,
    SLOW_TAIL_FACTOR,
    BlockAccumulator,
    ConfidenceInterval,
    IntervalTest,
    StopRule,
    block_interval,
    draw_rounds,
    normal_quantile,
    relative_half_width,
    t_quantile,
)
from ..core.logit_variance import (
    SIGMA_W_KIND,
    beta_for,
    exact_logit_variance,
    paper_logit_variance,
    weight_sigma,
)
from ..core.messages import shown
from ..core.options import resolve_seed, sampling_effort, valid_count, valid_positive
from ..core.verdicts import CONSISTENT, REJECTED, exit_code, judge, marginal_only, outcome_of
from ..errors import VarcheckError
from ..output.display import Displayable
from . import limits

__all__ = [
    "INITS",
    "init_sd",
    "InputLaw",
    "input_law",
    "same_token_variance",
    "conditional_moments",
    "aligned_weights",
    "aligned_factor",
    "rank_one_weights",
    "MonteCarloVariance",
    "ProjectionSection",
    "ProjectionRow",
    "ProjectionResult",
    "CHECK",
    "FINDING",
    "MAX_BLOCKS",
    "block_relative_variance",
    "minimum_blocks",
    "check_feasible",
    "project",
]

INITS = ("xavier", "kaiming", "lecun", "normal:SD")

#: Row roles: a derived-exact prediction (sets the exit status) or the paper's formula applied
#: where it is not exact (reported only).
CHECK = "check"
FINDING = "finding"

#: Upper bound on the array elements one chunk of blocks holds (8 bytes each).
_CHUNK_ELEMENTS = 1 << 22
#: Upper bound on blocks per section (runs asking for more are refused before any work).
MAX_BLOCKS = 1 << 20
_WEIGHT_STREAM = 1000


# --- inputs and inits --------------------------------------------------------------------------


def init_sd(init: str, dx: int, dk: int) -> float:
    """Standard deviation of the initial weight entries for an init name.

    ``xavier``: σ² = 2 / (d_x + d_k) (Glorot); ``kaiming``: σ² = 2 / d_x (He, fan-in);
    ``lecun``: σ² = 1 / d_x, which makes d_x σ_X² σ_W² = 1 for unit inputs (the paper's
    assumption (ii)); ``normal:SD``: σ = SD. Entries are drawn normal.
    """
    if init == "xavier":
        return math.sqrt(2.0 / (dx + dk))
    if init == "kaiming":
        return math.sqrt(2.0 / dx)
    if init == "lecun":
        return math.sqrt(1.0 / dx)
    if isinstance(init, str) and init.startswith("normal:"):
        try:
            sd = float(init[len("normal:") :])
        except ValueError:
            sd = math.nan
        if math.isfinite(sd) and sd > 0:
            return sd
    raise VarcheckError(
        f"init {shown(init)} is not accepted; use xavier, kaiming, lecun or normal:SD with "
        "SD > 0 (e.g. normal:0.1)"
    )


def _moment_finite(dist: Distribution, order: int) -> bool:
    """E|X|^order < inf (see :attr:`varcheck.Distribution.max_moment`)."""
    return dist.max_moment >= order


@dataclass(frozen=True)
class InputLaw:
    """The input entries: ``dist`` rescaled to standard deviation ``sigma``.

    Attributes
    ----------
    dist : Distribution
        The parsed ``--x-dist`` spec (must have mean 0).
    sigma : float
        σ_X (``inf`` when the variance is infinite).
    mu4 : float
        E[x⁴] after rescaling (``inf`` when it does not exist).
    estimable_different, estimable_same : bool
        Whether the variance estimator has a finite variance: E[x⁴] < ∞ for products of
        different tokens, E[x⁸] < ∞ for the quadratic form of one token.
    """

    dist: Distribution
    sigma: float
    mu4: float
    estimable_different: bool
    estimable_same: bool

    @property
    def kurtosis(self) -> float:
        return self.mu4 / self.sigma**4 if math.isfinite(self.mu4) else math.inf

    @property
    def spec(self) -> str:
        return self.dist.spec

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        out = self.dist.sample(rng, shape)
        if math.isfinite(self.dist.var) and self.dist.sd != self.sigma:
            out *= self.sigma / self.dist.sd
        return out


def input_law(x_dist: str | Distribution = "normal", sigma_x: float | None = None) -> InputLaw:
    """The input law for ``--x-dist`` and ``--sigma-x`` (which rescales it to that sd)."""
    dist = parse_distribution(x_dist)
    if math.isnan(dist.mean) or dist.mean != 0.0:
        has = "no finite mean" if math.isnan(dist.mean) else f"mean {dist.mean!r}"
        raise VarcheckError(
            f"x_dist {dist.spec!r} has {has}; the projection formulas assume "
            "zero-mean inputs (as the paper does), so give a distribution with mean 0"
        )
    if sigma_x is not None:
        sigma_x = valid_positive("sigma_x", sigma_x)
        if not math.isfinite(dist.var):
            raise VarcheckError(
                f"sigma_x cannot rescale x_dist {dist.spec!r}: its variance is infinite"
            )
    sigma = sigma_x if sigma_x is not None else dist.sd
    mu4 = math.inf
    if math.isfinite(dist.var) and math.isfinite(dist.mu4):
        try:
            mu4 = dist.kurtosis * sigma**4
        except OverflowError:
            pass  # σ_X beyond float64's fourth power: refused by the scale check
    return InputLaw(
        dist=dist,
        sigma=sigma,
        mu4=mu4,
        estimable_different=_moment_finite(dist, 4),
        estimable_same=_moment_finite(dist, 8),
    )


# --- theory ------------------------------------------------------------------------------------


def same_token_variance(
    dx: int, dk: int, sigma_x: float, kurtosis_x: float, sigma_wq: float, sigma_wk: float
) -> float:
    """Unconditional Var(x W_q · x W_k) for one token over random weights.

    Equals the relaxed formula times ``1 + (kurtosis_x - 1) / dx`` (see the module notes).
    """
    relaxed = paper_logit_variance(sigma_x, sigma_wq, sigma_wk, dx, dk)
    return relaxed * (1.0 + (kurtosis_x - 1.0) / dx)


def conditional_moments(
    w_q: np.ndarray,
    w_k: np.ndarray,
    sigma_x: float,
    mu4_x: float,
    *,
    same_token: bool,
    frobenius2: float | None = None,
) -> tuple[float, float]:
    """(E, Var) of q·k given the weights, for inputs with i.i.d. zero-mean entries.

    Parameters
    ----------
    w_q, w_k : ndarray, shape (d_x, d_k)
    sigma_x, mu4_x : float
        Standard deviation and fourth moment of the input entries.
    same_token : bool
        q and k from one input row (a quadratic form) instead of two independent rows.
    frobenius2 : float, optional
        ‖W_q W_kᵀ‖_F² if already computed (two d_k × d_k Gram products saved).

    Examples
    --------
    >>> w = np.eye(3)[:, :2]          # A = W Wᵀ = diag(1, 1, 0)
    >>> conditional_moments(w, w, 1.0, 3.0, same_token=False)
    (0.0, 2.0)
    >>> conditional_moments(w, w, 1.0, 3.0, same_token=True)   # 2 Σ A_aa² for normal x
    (2.0, 4.0)
    """
    w_q = np.asarray(w_q, dtype=float)
    w_k = np.asarray(w_k, dtype=float)
    frob2 = exact_logit_variance(w_q, w_k, 1.0) if frobenius2 is None else frobenius2
    if not math.isfinite(sigma_x) or (same_token and not math.isfinite(mu4_x)):
        return (math.nan if not math.isfinite(sigma_x) else 0.0), math.inf
    if not same_token:
        return 0.0, sigma_x**4 * frob2
    diag = np.einsum("aj,aj->a", w_q, w_k)  # A_aa
    m = w_k.T @ w_q  # tr(A²) = tr((W_kᵀ W_q)²), a d_k × d_k product
    tr_a2 = float(np.sum(m * m.T))
    s4 = sigma_x**4
    var = (mu4_x - 3.0 * s4) * float(diag @ diag) + s4 * (frob2 + tr_a2)
    return sigma_x**2 * float(diag.sum()), var


def aligned_weights(w_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The constructed aligned head W_k = W_q (same entry σ, so the σ-based formula cannot tell)."""
    return w_q, w_q.copy()


def aligned_factor(dx: int, dk: int, weight_kurtosis: float = 3.0) -> float:
    """E‖W Wᵀ‖_F² over the relaxed value d_x² d_k σ_W⁴, for W with i.i.d. zero-mean entries.

    ‖W Wᵀ‖_F² = Σ_jl (Σ_a W_aj W_al)²: the d_k (d_k − 1) terms j ≠ l have mean d_x σ⁴ each, and
    the d_k terms j = l have mean d_x μ₄ + d_x (d_x − 1) σ⁴, μ₄ = κ_w σ⁴. Summed, the factor is
    1 + (d_k + κ_w − 2) / d_x: 1 + (d_k + 1)/d_x for normal entries (κ_w = 3), and
    1 + (d_k − 0.2)/d_x for uniform ones (Xavier-uniform, κ_w = 1.8).

    Examples
    --------
    >>> aligned_factor(32, 16), aligned_factor(32, 16, 1.8)
    (1.53125, 1.49375)
    """
    return 1.0 + (dk + weight_kurtosis - 2.0) / dx


def rank_one_weights(
    rng: np.random.Generator, dx: int, dk: int, sd: float
) -> tuple[np.ndarray, np.ndarray]:
    """W_q = W_k = c u vᵀ with the entry RMS scaled to ``sd``: one shared direction."""
    u = rng.standard_normal(dx)
    v = rng.standard_normal(dk)
    w = np.outer(u, v)
    w *= sd / math.sqrt(float(np.mean(w * w)))
    return w, w.copy()


# --- the budget rule ---------------------------------------------------------------------------


def _even_moments(dist: Distribution) -> tuple[float, float]:
    """E[Z^6], E[Z^8] of the standardised input Z = (X - mean) / sd (``inf`` when absent)."""
    if dist.max_moment < 8:
        return math.inf, math.inf
    if dist.family == "t":
        df = dict(dist.params)["df"]
        if df > 1e8:  # the normal law to within 1e-7 (Γ of df/2 would overflow past ~1e305)
            return 15.0, 105.0

        # E[T^2j] = df^j Γ(j + 1/2) Γ(df/2 - j) / (√π Γ(df/2)), over Var T = df / (df - 2)
        def even(j: int) -> float:
            log = math.lgamma(j + 0.5) + math.lgamma(df / 2 - j) - math.lgamma(0.5)
            return math.exp(log - math.lgamma(df / 2)) * (df - 2.0) ** j

        return even(3), even(4)
    known = {
        "normal": (15.0, 105.0),
        "uniform": (27.0 / 7.0, 9.0),
        "rademacher": (1.0, 1.0),
        "laplace": (90.0, 2520.0),
    }
    if dist.family in known:
        return known[dist.family]
    from ..core.distributions import _scipy_frozen

    try:  # standardised central moments do not depend on loc and scale
        frozen = _scipy_frozen(dist.family.removeprefix("scipy."), dist.params)
        raw = [1.0] + [float(frozen.moment(n)) for n in range(1, 9)]
    except Exception:  # noqa: BLE001 - scipy cannot say: no bound, so no rule (see minimum_blocks)
        return math.nan, math.nan
    mu = raw[1]
    central = [
        sum(math.comb(n, i) * raw[i] * (-mu) ** (n - i) for i in range(n + 1)) for n in (2, 6, 8)
    ]
    return central[1] / central[0] ** 3, central[2] / central[0] ** 4


def _fixed_different(wq: np.ndarray, wk: np.ndarray, kx: float, tokens: int) -> float:
    """Relative variance of one block's mean square, different tokens, fixed weights (a bound).

    The block mean of s_ij² over ordered pairs i ≠ j of its T rows is a U-statistic with kernel
    g = (s_ij² + s_ji²)/2, so Var = (4(T-2)ζ₁ + 2ζ₂) / (T(T-1)) (Hoeffding). ζ₁ = Var E[g | x_i]
    = σ⁸((κ-3) Σ M_aa² + 2 tr M²), M = (AAᵀ + AᵀA)/2, exact; ζ₂ = Var g ≤ Var s² = (κ_s - 1) V²
    with κ_s ≤ max(3, κ)(1 + (2 tr B² + (κ-3) Σ B_bb²)/(tr B)²), B = AᵀA (exact for normal x).
    Every trace comes from d_k × d_k Gram matrices (A = W_q W_kᵀ is never formed).
    """
    gq, gk, h = wq.T @ wq, wk.T @ wk, wq.T @ wk
    p = gq @ gk
    tr_b = float(np.trace(p))
    if tr_b <= 0:
        return 0.0
    tr_b2 = float(np.sum(p * p.T))
    b_diag = np.einsum("bj,bj->b", wk @ gq, wk)
    m_diag = (np.einsum("aj,aj->a", wq @ gk, wq) + b_diag) / 2
    tr_m2 = (tr_b2 + float(np.trace(gk @ h @ gq @ h.T))) / 2
    rho1 = ((kx - 3) * float(m_diag @ m_diag) + 2 * tr_m2) / tr_b**2
    kurt = max(3.0, kx) * (1 + (2 * tr_b2 + (kx - 3) * float(b_diag @ b_diag)) / tr_b**2)
    return (4 * (tokens - 2) * max(rho1, 0.0) + 2 * (kurt - 1)) / (tokens * (tokens - 1))


def _fixed_same(wq: np.ndarray, wk: np.ndarray, x: InputLaw, tokens: int) -> float:
    """Relative variance of one block's mean square, one token, fixed weights.

    The block's T rows are independent, so it is (κ_s - 1)/T, κ_s the kurtosis of the quadratic
    form s = x S xᵀ, S = (A + Aᵀ)/2: exactly 3 + 12 tr S⁴ / (tr S²)² for normal x (from the
    2d_k × 2d_k Gram matrix of [W_q W_k]); for other laws the larger of 15 and the kurtosis of
    x² -- the two rank-one extremes (S along a spread direction, whose (u·x)² is nearly
    chi-square with one degree of freedom, and S along one coordinate), a bound that forms of
    higher rank, averaging more independent terms, stay below.
    """
    if x.dist.is_normal:
        u = np.hstack([wq, wk])
        g = u.T @ u
        d = wq.shape[1]
        jg = np.vstack([g[d:], g[:d]]) / 2  # J G with J = [[0, I], [I, 0]] / 2
        jg2 = jg @ jg
        tr2 = float(np.trace(jg2))
        kurt = 3 + 12 * float(np.sum(jg2 * jg2.T)) / tr2**2 if tr2 > 0 else 1.0
    else:
        m6, m8 = _even_moments(x.dist)
        kx = x.kurtosis
        var_y = kx - 1
        kurt_y = (m8 - 4 * m6 + 6 * kx - 3) / var_y**2 if var_y > 0 else 1.0
        kurt = max(15.0, kurt_y)
    return (kurt - 1) / tokens


def _random_weights_parts(dx: int, dk: int, x: InputLaw, case: str) -> tuple[float, float]:
    """(ν_W, κ): the relative variance over normal weights of E[s² | W], and the kurtosis of
    one logit s, for fresh weights in every block (σ_X = σ_W = 1; both are scale-free).

    Given x and x', q = x W_q and k = x' W_k are independent normal vectors, so s = |x||x'|(g·h)
    (different tokens) or |x|²(g·h) (one token) with g, h standard normal in d_k dimensions:
    κ = E|x|⁴E|x'|⁴ or E|x|⁸, times 3(d_k² + 2d_k), over V². ν_W is exact for different tokens
    (E[s² | W] = ‖A‖_F²); for one token E[s² | W] = (κ_x-3) Σ A_aa² + ‖A‖_F² + tr A² + (tr A)²,
    and ν_W adds the four terms' standard deviations (Minkowski: an upper bound).
    """
    kx = x.kurtosis
    m4 = dx * kx + dx * (dx - 1.0)  # E|x|⁴
    var_frob = 4.0 * dk * dx**2 * (dx + 1) + 2.0 * dk * (dk - 1) * dx**2
    g4 = 3.0 * (dk**2 + 2.0 * dk)  # E(g·h)⁴
    if case == "different-tokens":
        return var_frob / (dx**2 * dk) ** 2, m4 * m4 * g4 / (dx * dx * dk) ** 2
    m6, m8 = _even_moments(x.dist)
    pairs = dx * (dx - 1.0)
    m8x = dx * m8 + 4 * pairs * m6 + 3 * pairs * kx**2 + 6 * pairs * (dx - 2) * kx
    m8x += pairs * (dx - 2) * (dx - 3)  # E|x|⁸ = E(Σ x_a²)⁴
    n = dx * dk
    sds = (
        abs(kx - 3) * math.sqrt(dx * (2.0 * dk**2 + 6.0 * dk)),  # Σ A_aa²
        math.sqrt(var_frob),  # ‖A‖_F²
        math.sqrt(dk * (2.0 * dx**2 + 6.0 * dx) + 2.0 * dk * (dk - 1) * dx**2),  # tr A²
        math.sqrt(2.0 * n * n + 6.0 * n),  # (tr A)²
    )
    var = dk * m4
    return (sum(sds) / var) ** 2, m8x * g4 / var**2


def block_relative_variance(
    x: InputLaw,
    tokens: int,
    case: str,
    weights: tuple[np.ndarray, np.ndarray] | None = None,
    dims: tuple[int, int] = (0, 0),
) -> float:
    """Var(one block's mean square) / Var(q·k)²: what the budget rule asks of a block.

    For n independent products it is (κ - 1)/n, κ the kurtosis of q·k, the quantity
    :func:`varcheck.core.estimation.minimum_products` counts. Here the products of a block are
    dependent (they share input rows, and with ``weights=None`` fresh random weights of shape
    ``dims`` = (d_x, d_k)), so it is derived from the weights and the input law, exactly where
    the formulas are closed and as an upper bound where they are not (see :func:`_fixed_different`,
    :func:`_fixed_same`, :func:`_random_weights_parts`): the rule then asks for more blocks,
    never fewer.
    """
    if weights is not None:
        wq, wk = weights
        if case == "different-tokens":
            return _fixed_different(wq, wk, x.kurtosis, tokens)
        return _fixed_same(wq, wk, x, tokens)
    dx, dk = dims
    nu_w, kurt = _random_weights_parts(dx, dk, x, case)
    if case == "same-token":  # given W, a mean of T independent rows; E_W Var(s² | W) ≤ Var s²
        return nu_w + (kurt - 1) / tokens
    # given W a U-statistic (above), averaged over W: E ζ₂ ≤ E Var(s² | W) = (κ - 1 - ν_W) V², and
    # E ζ₁ ≤ Var_{x,W} E[g | x, W] - ν_W V², where E[g | x, W] averages two terms distributed as
    # |x|² χ²_{d_k} χ²_{d_x} (x A Aᵀ xᵀ = |q W_kᵀ|² with q = x W_q ~ N(0, |x|² I)): at most
    # the variance of one, V² ((E|x|⁴ / d_x²)(1 + 2/d_k)(1 + 2/d_x) - 1)
    m4 = (x.kurtosis - 1.0) / dx + 1.0  # E|x|⁴ / d_x²
    zeta1 = m4 * (1 + 2 / dk) * (1 + 2 / dx) - 1 - nu_w
    zeta2 = kurt - 1 - nu_w
    pairs = tokens * (tokens - 1)
    return nu_w + (4 * (tokens - 2) * max(zeta1, 0.0) + 2 * max(zeta2, 0.0)) / pairs


def minimum_blocks(
    x: InputLaw,
    tokens: int,
    case: str,
    weights: tuple[np.ndarray, np.ndarray] | None = None,
    dims: tuple[int, int] = (0, 0),
) -> float:
    """The fewest blocks behind a valid interval: the budget rule of ``sweep`` in blocks.

    :func:`varcheck.core.estimation.minimum_products` asks for n ≥ c (κ - 1) independent
    products, i.e. a relative variance (κ - 1)/n of the variance estimate of at most 1/c, with
    c = 250 (κ_e / 3)^1.5, times 30 when E[(q·k)^6] is infinite (E x⁶ for different tokens,
    E x¹² for one token). With blocks of dependent products the same requirement reads
    blocks ≥ c · :func:`block_relative_variance`. κ_e, the kurtosis of the entries q_j, k_j
    of the dot product: they are linear combinations of the input entries, so at most
    max(3, κ_x) for fixed weights; with fresh normal weights exactly 3 (1 + (κ_x - 1)/d_x).
    ``inf`` when the estimator's variance is infinite, ``nan`` when scipy cannot give the
    input's sixth and eighth moments (no rule is then applied).
    """
    kx = x.kurtosis
    different = case == "different-tokens"
    if not (x.estimable_different if different else x.estimable_same):
        return math.inf
    entry = max(3.0, kx) if weights is not None else 3.0 * (1 + (kx - 1) / dims[0])
    per_unit = PRODUCTS_PER_KURTOSIS * (entry / 3.0) ** ENTRY_KURTOSIS_POWER
    if x.dist.max_moment < (6 if different else 12):
        per_unit *= SLOW_TAIL_FACTOR
    return math.ceil(per_unit * block_relative_variance(x, tokens, case, weights, dims))


# --- Monte Carlo -------------------------------------------------------------------------------


@dataclass(frozen=True)
class MonteCarloVariance(IntervalTest):
    """A Monte-Carlo estimate of Var(q·k) (and E[q·k]) over independent blocks.

    Attributes
    ----------
    var : float
        Unbiased estimate of the variance.
    confidence_interval : ConfidenceInterval
        The interval of :func:`varcheck.core.estimation.block_interval`, as in ``sweep``: Student t
        on ``blocks - 1`` degrees of freedom with Hall's skewness correction, or on the log
        scale when the inputs' twelfth moment is infinite (``interval_method``).
    se : float
        Standard error of ``var`` (delta method over blocks).
    mean : float
        Estimate of E[q·k].
    mean_confidence_interval : ConfidenceInterval
        Interval for the mean.
    samples : int
        Products used.
    blocks : int
        Independent blocks.
    products_per_block : int
    confidence : float
    precision : float
        Relative half-width reached: half the interval's width over ``var``.
    stop_reason : str
        ``precision``, ``blocks`` (fixed count), ``max-seconds``, ``max-blocks`` (the cap of
        :data:`MAX_BLOCKS` blocks came first) or ``interrupted`` (Ctrl-C or SIGTERM).
    """

    var: float
    confidence_interval: ConfidenceInterval
    se: float
    mean: float
    mean_confidence_interval: ConfidenceInterval
    samples: int
    blocks: int
    products_per_block: int
    confidence: float
    precision: float
    stop_reason: str
    skewness: float = 0.0
    interval_method: str = "hall"


def _summarise(
    acc: BlockAccumulator, per_block: int, confidence: float, stop_reason: str, method: str
) -> MonteCarloVariance:
    est, se, mean = acc.variance_and_se()
    tq = t_quantile(confidence, acc.n - 1)
    mean_se = math.sqrt(acc.c_mm / (acc.n - 1) / acc.n)
    interval = block_interval(acc, est, se, confidence, method)
    return MonteCarloVariance(
        var=est,
        confidence_interval=interval,
        se=se,
        mean=mean,
        mean_confidence_interval=ConfidenceInterval(mean - tq * mean_se, mean + tq * mean_se),
        samples=acc.n * per_block,
        blocks=acc.n,
        products_per_block=per_block,
        confidence=confidence,
        precision=relative_half_width(est, interval),
        stop_reason=stop_reason,
        skewness=acc.skewness(),
        interval_method=method,
    )


# draw(rng, n_blocks) -> {case: (block means, block mean squares)}
_Draw = Callable[[np.random.Generator, int], dict[str, tuple[np.ndarray, np.ndarray]]]


def _run_blocks(
    draw: _Draw,
    cases: dict[str, int],
    blocks_per_chunk: int,
    *,
    seed: int,
    stream: int,
    confidence: float,
    precision: float | None,
    blocks: int | None,
    max_seconds: float | None,
    method: str = "hall",
    least: int = 0,
) -> dict[str, MonteCarloVariance]:
    """Draw chunks of blocks until every case reaches ``precision`` (or the fixed ``blocks``),
    and at least ``least`` blocks when chasing the precision (the budget rule)."""
    accs = {c: BlockAccumulator() for c in cases}

    def chunks(tasks: Iterator[tuple[int, int]]) -> Iterator[dict]:
        for chunk, todo in tasks:
            key = np.random.SeedSequence(seed, spawn_key=(stream, chunk))
            yield draw(np.random.default_rng(key), todo)

    def absorb(results: list[dict]) -> None:
        for case, (m, a) in results[0].items():
            if case in accs:
                # merged into a copy and swapped in: a Ctrl-C never leaves one half-merged
                merged = copy.copy(accs[case])
                merged.add(m, a)
                accs[case] = merged

    def widest() -> float:
        return max((acc.relative_width(confidence, method) for acc in accs.values()), default=0.0)

    rule = StopRule(
        precision=precision,
        first_round=blocks if blocks is not None else MIN_BLOCKS,
        fixed=None if blocks is None else "blocks",
        max_seconds=max_seconds,
        max_blocks=MAX_BLOCKS,
        min_blocks=least if blocks is None else 0,
    )
    try:
        stop = draw_rounds(rule, blocks_per_chunk, chunks, absorb, widest).stop_reason
    except KeyboardInterrupt:
        # keep every case with enough blocks for an interval (MIN_BLOCKS, or the fixed count)
        least = min(MIN_BLOCKS, blocks) if blocks is not None else MIN_BLOCKS
        raise _Interrupted(
            {
                c: _summarise(accs[c], cases[c], confidence, "interrupted", method)
                for c in cases
                if accs[c].n >= least
            }
        ) from None
    out = {}
    for c in cases:
        est = _summarise(accs[c], cases[c], confidence, stop, method)
        if stop == "precision" and precision is not None and not est.precision <= precision:
            # the block cap ended the run, not the target
            est = dataclasses.replace(est, stop_reason="max-blocks")
        out[c] = est
    return out


class _Interrupted(Exception):
    """Ctrl-C (or SIGTERM) during a section: the estimates its blocks so far allow."""

    def __init__(self, estimates: dict[str, MonteCarloVariance]) -> None:
        super().__init__("interrupted")
        self.estimates = estimates


def _reduce(s: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-block mean and mean square of the off-diagonal (different tokens) and diagonal
    (same token) entries of a stack of logit matrices ``s`` of shape (blocks, n, n)."""
    n = s.shape[1]
    diag = np.einsum("bii->bi", s)
    sq = s * s
    total, total_sq = s.sum(axis=(1, 2)), sq.sum(axis=(1, 2))
    d_sum, d_sq = diag.sum(axis=1), (diag * diag).sum(axis=1)
    off = n * (n - 1)
    return {
        "different-tokens": ((total - d_sum) / off, (total_sq - d_sq) / off),
        "same-token": (d_sum / n, d_sq / n),
    }


def _random_weights_draw(x: InputLaw, dx: int, dk: int, sd: float, tokens: int) -> _Draw:
    def draw(rng: np.random.Generator, nb: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        w_q = rng.standard_normal((nb, dx, dk))
        w_q *= sd
        w_k = rng.standard_normal((nb, dx, dk))
        w_k *= sd
        xs = x.sample(rng, (nb, tokens, dx))
        return _reduce((xs @ w_q) @ np.swapaxes(xs @ w_k, 1, 2))

    return draw


def _fixed_weights_draw(x: InputLaw, w_q: np.ndarray, w_k: np.ndarray, tokens: int) -> _Draw:
    dx = w_q.shape[0]

    def draw(rng: np.random.Generator, nb: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        xs = x.sample(rng, (nb, tokens, dx))
        return _reduce((xs @ w_q) @ np.swapaxes(xs @ w_k, 1, 2))

    return draw


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectionSection:
    """One weight setting of :func:`project`.

    Attributes
    ----------
    name : str
        ``random-weights`` (fresh weights per block), ``fixed-draw`` (one draw from the init),
        ``aligned`` (W_k = W_q) or ``rank-one`` (W_q = W_k of rank one).
    description : str
    sigma_wq, sigma_wk : float
        The init σ for ``random-weights``; for fixed weights the measured σ_W, the entries'
        root mean square (``weight_sigma``).
    frobenius2 : float
        ‖W_q W_kᵀ‖_F² (``nan`` for random weights).
    trace : float
        tr(W_q W_kᵀ) (``nan`` for random weights).
    """

    name: str
    description: str
    sigma_wq: float
    sigma_wk: float
    frobenius2: float = math.nan
    trace: float = math.nan


@dataclass(frozen=True)
class ProjectionRow:
    """One prediction checked by Monte Carlo.

    Attributes
    ----------
    section : str
        The weight setting (see :class:`ProjectionSection`).
    case : str
        ``different-tokens`` or ``same-token``.
    claim : str
        ``relaxed`` (the paper's formula with the init σ), ``same-token`` (the derived
        unconditional value), ``sigma-based`` (the paper's formula with measured σ_W),
        ``exact`` (the conditional variance given W).
    role : str
        ``check`` (a prediction derived to be exact here; a rejection sets the exit status) or
        ``finding`` (the paper's formula where it is not exact; reported, not counted).
    predicted_var, predicted_mean : float
        The prediction of Var(q·k) and E[q·k].
    beta : float
        The β this prediction recommends, 1 / sqrt(predicted_var).
    estimate : MonteCarloVariance or None
        ``None`` when the variance is infinite.
    p_value, p_adjusted : float
        Two-sided p-value of the predicted variance; Holm-adjusted over all rows.
    verdict : str
    min_blocks : int or None
        When the row's setting drew fewer blocks than a valid interval needs (a fixed
        ``blocks``, or a run stopped by its time cap), the blocks it needs
        (:func:`minimum_blocks`); the verdict is then ``unreliable``. ``None`` otherwise.
    """

    section: str
    case: str
    claim: str
    role: str
    predicted_var: float
    predicted_mean: float
    beta: float
    estimate: MonteCarloVariance | None
    p_value: float
    p_adjusted: float
    verdict: str
    min_blocks: int | None = None

    @property
    def min_samples(self) -> int | None:
        """The products :attr:`min_blocks` blocks hold (``None`` with it)."""
        if self.min_blocks is None or self.estimate is None:
            return None
        return self.min_blocks * self.estimate.products_per_block

    @property
    def ratio(self) -> float:
        """Estimate over prediction."""
        if self.estimate is None or not self.predicted_var or not math.isfinite(self.predicted_var):
            return math.nan
        return self.estimate.var / self.predicted_var

    def marginal_only(self, alpha: float) -> bool:
        """True when the row's own interval excludes its prediction (p < alpha) but Holm, over
        all rows, does not reject it (the tables mark it †, as the sweep's do)."""
        return marginal_only(self.verdict, self.p_value, alpha)

    @property
    def logit_var_at_beta(self) -> float:
        """Monte-Carlo Var(β q·k) with this row's β (1 when the prediction is right)."""
        return math.nan if self.estimate is None else self.estimate.var * self.beta**2


@dataclass(frozen=True, repr=False)
class ProjectionResult(Displayable):
    """The result of :func:`project`.

    Attributes
    ----------
    rows : tuple of ProjectionRow
    sections : tuple of ProjectionSection
    dx, dk : int
    init : str
    init_sd : float
    x : InputLaw
    tokens : int
        Input rows per block.
    confidence : float
    precision : float or None
    blocks : int or None
    max_seconds : float or None
    seed : int
    version : str
    sigma_w_kind : str
        Which σ of fixed weights the σ-based rows take (``rms``).
    interrupted : bool
        Stopped by Ctrl-C or SIGTERM: ``rows`` are those of the settings reached, the last one
        with the blocks drawn so far (stop reason ``interrupted``).
    """

    rows: tuple[ProjectionRow, ...]
    sections: tuple[ProjectionSection, ...]
    dx: int
    dk: int
    init: str
    init_sd: float
    x: InputLaw
    tokens: int
    confidence: float
    precision: float | None
    blocks: int | None
    max_seconds: float | None
    seed: int
    version: str = __version__
    sigma_w_kind: str = SIGMA_W_KIND
    interrupted: bool = False

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def time_limited(self) -> bool:
        """Some setting stopped at ``max_seconds``: the output then depends on machine speed."""
        return any(
            r.estimate is not None and r.estimate.stop_reason == "max-seconds" for r in self.rows
        )

    @property
    def rejected_checks(self) -> list[ProjectionRow]:
        """Rows whose claim is meant to hold here (role ``check``) and was rejected."""
        return [r for r in self.rows if r.role == CHECK and r.verdict == REJECTED]

    @property
    def exit_code(self) -> int:
        """0 every check consistent, 1 a check rejected, 4 a row without a valid test; 130
        interrupted.

        A rejected finding (the paper's formula where it is not exact) is reported but does
        not count: a default run, whose constructed heads are there to make the σ-based value
        miss, exits 0 unless one of varcheck's own derived predictions is contradicted. A
        finding without a valid test (unreliable, infinite) counts like any other row.
        """
        return exit_code(self._verdicts(), interrupted=self.interrupted)

    @property
    def outcome(self) -> str:
        """What the exit code says, in a word: ``rejected`` (a check), ``unreliable`` or
        ``infinite`` (a row without a valid test), ``consistent`` (rejected findings do not
        count), or ``interrupted``."""
        return outcome_of(self._verdicts(), interrupted=self.interrupted, best=CONSISTENT)

    def _verdicts(self) -> list[str]:
        """The rows' verdicts but a rejected finding's: what the exit code and the outcome are
        judged from."""
        return [r.verdict for r in self.rows if r.role == CHECK or r.verdict != REJECTED]

    @property
    def findings(self) -> tuple[ProjectionRow, ...]:
        """The finding rows whose prediction was rejected."""
        return tuple(r for r in self.rows if r.role == FINDING and r.verdict == REJECTED)

    def row(self, section: str, case: str, claim: str) -> ProjectionRow:
        for r in self.rows:
            if (r.section, r.case, r.claim) == (section, case, claim):
                return r
        raise KeyError((section, case, claim))


# --- the experiment ----------------------------------------------------------------------------


class _Options(NamedTuple):
    """A run's cleaned options, named as the fields of :class:`ProjectionResult`."""

    dx: int
    dk: int
    tokens: int
    init: str
    init_sd: float
    x: InputLaw
    confidence: float
    precision: float | None
    blocks: int | None
    max_seconds: float | None
    seed: int


def _project_iv(
    dx: int,
    dk: int,
    tokens: int,
    init: str,
    x_dist: str | Distribution,
    sigma_x: float | None,
    confidence: float,
    precision: float | None,
    blocks: int | None,
    max_seconds: float | None,
    seed: int | None,
) -> _Options:
    """Validate :func:`project`'s options once, in this order, and return them cleaned."""
    dx = valid_count("dx", dx, 1, 4096)
    dk = valid_count("dk", dk, 1, 4096)
    tokens = valid_count("tokens", tokens, 2, 256)
    sd = init_sd(init, dx, dk)
    x = input_law(x_dist, sigma_x)
    _scale_check(dx, dk, init, sd, x)
    confidence, precision, blocks, max_seconds = sampling_effort(
        confidence,
        precision,
        blocks,
        max_seconds,
        name="blocks",
        least=2,
        most=MAX_BLOCKS,
        whole_floats=False,
    )
    seed = resolve_seed(seed)
    return _Options(dx, dk, tokens, init, sd, x, confidence, precision, blocks, max_seconds, seed)


def _scale_check(dx: int, dk: int, init: str, sd: float, x: InputLaw) -> None:
    """Refuse an init and input scale whose logits leave float64's workable range."""
    if not math.isfinite(x.sigma):
        return  # an infinite input variance: the rows say so
    fixed = 2 * math.log10(dx) + math.log10(dk)
    lo, hi = ((math.log10(v) - fixed) / 4 for v in limits.VARIANCE_RANGE)
    limits.check_variance(
        f"init {shown(init, 30)} (σ_W = {sd:.3g}) with sigma_x {x.sigma:.3g}",
        fixed + 4 * (limits.log10(sd) + limits.log10(x.sigma)),
        f"σ_X·σ_W between {10**lo:.2g} and {10**hi:.2g} at d_x = {dx}, d_k = {dk}",
    )


def _block_seconds(o: _Options, random_weights: bool) -> float:
    """Rough time of one block: its random draws and multiply-adds (:mod:`.limits`)."""
    draws = o.tokens * o.dx + (2 * o.dx * o.dk if random_weights else 0)
    macs = 2 * o.tokens * o.dx * o.dk + o.tokens**2 * o.dk + 4 * o.tokens**2
    return draws * limits.DRAW_SECONDS + macs * limits.MAC_SECONDS + 2e-7


def _least_blocks(o: _Options) -> float:
    """Blocks the target precision needs at the least: normal same-token logits, whose mean
    square over a block of ``tokens`` rows has relative variance 2/tokens."""
    if o.precision is None:
        return float(o.blocks or 0)
    z = normal_quantile(o.confidence)
    return (z / o.precision) ** 2 * 2.0 / o.tokens


def check_feasible(o: _Options, constructed: bool) -> None:
    """Refuse, before any work, a run that cannot reach its target or needs too much memory
    or time (:mod:`varcheck.paper.limits`)."""
    n_fixed = 3 if constructed else 1
    least = _least_blocks(o)
    if o.precision is not None and least > MAX_BLOCKS and o.max_seconds is None:
        z = normal_quantile(o.confidence)
        best = z * math.sqrt(2.0 / (o.tokens * MAX_BLOCKS))
        many = f"at least about {least:.3g}" if math.isfinite(least) else "unboundedly many"
        raise VarcheckError(
            f"precision {o.precision:.3g} needs {many} blocks per weight "
            f"setting ({o.tokens} input rows each), above the limit of {MAX_BLOCKS:,}; "
            f"accepted: precision >= {best:.2g} here, --blocks N, or --max-seconds S"
        )
    blocks = min(max(least, MIN_BLOCKS if o.precision is not None else 0), MAX_BLOCKS)
    per_setting = [_block_seconds(o, True)] + [_block_seconds(o, False)] * n_fixed
    seconds = sum(blocks * t for t in per_setting)
    if o.max_seconds is not None:
        seconds = min(seconds, sum(o.max_seconds + t for t in per_setting))
    # the exact predictions of each fixed setting: a few d_k × d_k Gram products
    seconds += n_fixed * 3.0 * o.dx * o.dk**2 * limits.MAC_SECONDS
    what = f"dx={o.dx}, dk={o.dk}, tokens={o.tokens} with " + (
        f"precision {o.precision:.3g}" if o.precision is not None else f"blocks={o.blocks}"
    )
    limits.check_time(
        what,
        seconds,
        "a looser precision, fewer blocks, smaller d_x·d_k, or --max-seconds S (capping each "
        f"of the {1 + n_fixed} weight settings)",
    )
    block = 2 * o.dx * o.dk + o.tokens * (o.dx + 2 * o.dk + 3 * o.tokens)
    elements = 2 * n_fixed * o.dx * o.dk + 2 * o.dk**2 + max(block, _CHUNK_ELEMENTS)
    limits.check_memory(f"dx={o.dx}, dk={o.dk}", 8.0 * elements, "smaller d_x·d_k")


@dataclass(frozen=True)
class _Prediction:
    section: str
    case: str
    claim: str
    var: float
    mean: float
    estimable: bool

    @property
    def role(self) -> str:
        # the paper's formula outside the setting where it is exact
        if self.claim == "sigma-based" or (self.claim == "relaxed" and self.case == "same-token"):
            return FINDING
        return CHECK


def project(
    dx: int = 32,
    dk: int = 16,
    *,
    init: str = "xavier",
    sigma_x: float | None = None,
    x_dist: str | Distribution = "normal",
    constructed: bool = True,
    tokens: int = 16,
    confidence: float = 0.95,
    precision: float | None = 0.02,
    blocks: int | None = None,
    max_seconds: float | None = None,
    seed: int | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> ProjectionResult:
    """Check the relaxed formula for Q = X W_q, K = X W_k, and the exact values, by Monte Carlo.

    Parameters
    ----------
    dx, dk : int
        Input width and head width.
    init : str
        Weight init: ``xavier``, ``kaiming``, ``lecun`` or ``normal:SD`` (normal entries).
    sigma_x : float, optional
        Standard deviation of the input entries (rescales ``x_dist``; default its own sd).
    x_dist : str or Distribution
        Law of the input entries (mean 0), e.g. ``normal``, ``uniform``, ``t:df=10``.
    constructed : bool
        Add the constructed aligned heads (W_k = W_q, and a rank-one shared direction).
    tokens : int
        Input rows per block (``tokens · (tokens - 1)`` different-token products and
        ``tokens`` same-token products per block).
    confidence : float
        Interval level; verdicts control the family-wise error at ``1 - confidence`` (Holm).
    precision : float
        Target relative half-width of every interval (ignored with ``blocks``).
    blocks : int, optional
        Fixed number of independent blocks per section instead of a target precision.
    max_seconds : float, optional
        Wall-time cap per section (default: its share of
        :data:`varcheck.paper.limits.MAX_SECONDS`, a safety net for heavy-tailed inputs, which
        need more blocks than the estimate before the run assumes).
    seed : int, optional
        Root seed (drawn and reported when omitted).
    progress : callable, optional
        ``progress(section_index, n_sections, fraction)``.

    Returns
    -------
    ProjectionResult

    Examples
    --------
    >>> res = project(16, 8, seed=3, precision=0.1)
    >>> res.row("random-weights", "different-tokens", "relaxed").verdict
    'consistent'
    >>> round(res.row("rank-one", "different-tokens", "sigma-based").ratio)   # about d_k
    8
    """
    options = _project_iv(
        dx, dk, tokens, init, x_dist, sigma_x, confidence, precision, blocks, max_seconds, seed
    )
    check_feasible(options, constructed)
    weights = _fixed_weights(options, constructed)
    sections, preds = _predictions(options, weights)
    minima = _minima(options, sections, weights)
    estimates, interrupted = _estimate_sections(options, sections, weights, progress, minima)
    rows = _judge(preds, estimates, options.confidence, minima)
    reached = {r.section for r in rows}
    return ProjectionResult(
        rows=tuple(rows),
        sections=tuple(s for s in sections if s.name in reached),
        interrupted=interrupted,
        **options._asdict(),
    )


#: A fixed weight setting: name, description, W_q, W_k.
_Weights = tuple[str, str, np.ndarray, np.ndarray]


def _fixed_weights(o: _Options, constructed: bool) -> list[_Weights]:
    """One draw of W_q, W_k from the init, and with ``constructed`` the two aligned heads."""
    w_rng = np.random.default_rng(np.random.SeedSequence(o.seed, spawn_key=(_WEIGHT_STREAM,)))
    w_q = w_rng.standard_normal((o.dx, o.dk)) * o.init_sd
    w_k = w_rng.standard_normal((o.dx, o.dk)) * o.init_sd
    weights: list[_Weights] = [("fixed-draw", "one draw of W_q, W_k from the init", w_q, w_k)]
    if constructed:
        weights.append(
            ("aligned", "constructed: W_k = W_q (the draw above)", *aligned_weights(w_q))
        )
        weights.append(
            (
                "rank-one",
                "constructed: W_q = W_k = c·u vᵀ, entry RMS = init σ",
                *rank_one_weights(w_rng, o.dx, o.dk, o.init_sd),
            )
        )
    return weights


def _predictions(
    o: _Options, weights: list[_Weights]
) -> tuple[list[ProjectionSection], list[_Prediction]]:
    """The weight settings (random weights first, then ``weights``) and every prediction."""
    x, s, sd, dx, dk = o.x, o.x.sigma, o.init_sd, o.dx, o.dk
    relaxed = paper_logit_variance(s, sd, sd, dx, dk)
    same = same_token_variance(dx, dk, s, x.kurtosis, sd, sd)
    sections = [
        ProjectionSection("random-weights", "fresh W_q, W_k from the init for every block", sd, sd)
    ]
    preds: list[_Prediction] = [
        _Prediction(
            "random-weights", "different-tokens", "relaxed", relaxed, 0.0, x.estimable_different
        ),
        _Prediction("random-weights", "same-token", "relaxed", relaxed, 0.0, x.estimable_same),
        _Prediction("random-weights", "same-token", "same-token", same, 0.0, x.estimable_same),
    ]
    for name, desc, wq, wk in weights:
        swq, swk = weight_sigma(wq), weight_sigma(wk)
        frob2 = exact_logit_variance(wq, wk, 1.0)
        diff_mean, diff_var = conditional_moments(
            wq, wk, s, x.mu4, same_token=False, frobenius2=frob2
        )
        same_mean, same_var = conditional_moments(
            wq, wk, s, x.mu4, same_token=True, frobenius2=frob2
        )
        sections.append(
            ProjectionSection(
                name,
                desc,
                swq,
                swk,
                frobenius2=frob2,
                trace=float(np.einsum("aj,aj->", wq, wk)),
            )
        )
        preds += [
            _Prediction(
                name,
                "different-tokens",
                "sigma-based",
                paper_logit_variance(s, swq, swk, dx, dk),
                0.0,
                x.estimable_different,
            ),
            _Prediction(
                name, "different-tokens", "exact", diff_var, diff_mean, x.estimable_different
            ),
            _Prediction(name, "same-token", "exact", same_var, same_mean, x.estimable_same),
        ]
    return sections, preds


def _minima(
    o: _Options, sections: list[ProjectionSection], weights: list[_Weights]
) -> dict[tuple[str, str], float]:
    """:func:`minimum_blocks` of every (section, case) whose estimator has a finite variance."""
    out = {}
    for index, sec in enumerate(sections):
        w = None if sec.name == "random-weights" else weights[index - 1][2:]
        for case in _per_block(o.tokens):
            need = minimum_blocks(o.x, o.tokens, case, w, (o.dx, o.dk))
            if math.isfinite(need):
                out[(sec.name, case)] = need
    return out


def _estimate_sections(
    o: _Options,
    sections: list[ProjectionSection],
    weights: list[_Weights],
    progress: Callable[[int, int, float], None] | None,
    minima: dict[tuple[str, str], float],
) -> tuple[dict[tuple[str, str], MonteCarloVariance | None], bool]:
    """Monte Carlo for each weight setting: one estimate per (section, case), None if infinite.

    On Ctrl-C (or SIGTERM) the sections finished so far are kept, and the cases of the
    interrupted one that have enough blocks; the second value is then True.
    """
    x, tokens = o.x, o.tokens
    # Hall's correction needs the skewness of (q·k)^2 to exist: E[x^12] for the same-token
    # quadratic form; otherwise the log-scale interval
    method = "hall" if x.dist.max_moment >= 12 else "log"
    estimates: dict[tuple[str, str], MonteCarloVariance | None] = {}
    # without --max-seconds each setting still stops at its share of the time limit: the
    # estimate before the run assumes normal-like logits, and a heavy-tailed law needs more
    cap = o.max_seconds if o.max_seconds is not None else limits.MAX_SECONDS / len(sections)
    budget: dict[str, Any] = dict(
        confidence=o.confidence, precision=o.precision, blocks=o.blocks, max_seconds=cap
    )
    # cases whose variance is infinite are not estimated (nothing to estimate)
    cases = {c: n for c, n in _per_block(tokens).items() if _finite_case(x, c)}
    n_sections = len(sections)
    for index, sec in enumerate(sections):
        try:
            if progress is not None:
                progress(index, n_sections, 0.0)
            res = {}
            if cases:
                draw, size = _section_draw(o, sec.name, weights, index)
                per_chunk = max(1, min(4096, _CHUNK_ELEMENTS // size))
                least = max((minima.get((sec.name, c), 0) for c in cases), default=0)
                res = _run_blocks(
                    draw,
                    cases,
                    per_chunk,
                    seed=o.seed,
                    stream=index,
                    method=method,
                    least=int(least),
                    **budget,
                )
        except _Interrupted as stopped:
            estimates.update({(sec.name, c): e for c, e in stopped.estimates.items()})
            return estimates, True
        except KeyboardInterrupt:
            return estimates, True
        for c in _per_block(tokens):
            estimates[(sec.name, c)] = res.get(c)
    if progress is not None:
        progress(n_sections - 1, n_sections, 1.0)
    return estimates, False


def _per_block(tokens: int) -> dict[str, int]:
    """Products per block of each case."""
    return {"different-tokens": tokens * (tokens - 1), "same-token": tokens}


def _finite_case(x: InputLaw, case: str) -> bool:
    """Whether the case's variance is finite (σ_X for any logit, μ₄ for the same-token one)."""
    return math.isfinite(x.sigma) and (case == "different-tokens" or math.isfinite(x.mu4))


def _section_draw(o: _Options, name: str, weights: list[_Weights], index: int) -> tuple[_Draw, int]:
    """The block sampler of a weight setting and the array elements one block takes."""
    if name == "random-weights":
        size = 2 * o.dx * o.dk + o.tokens * (o.dx + 2 * o.dk + o.tokens)
        return _random_weights_draw(o.x, o.dx, o.dk, o.init_sd, o.tokens), size
    _, _, wq, wk = weights[index - 1]
    return _fixed_weights_draw(o.x, wq, wk, o.tokens), o.tokens * (o.dx + 2 * o.dk + o.tokens)


def _too_few_blocks(est: MonteCarloVariance | None) -> bool:
    """Stopped by time before :data:`MIN_BLOCKS` blocks (a fixed ``--blocks`` count is the
    user's choice and stands)."""
    return est is not None and est.stop_reason == "max-seconds" and est.blocks < MIN_BLOCKS


def _shortfall(est: MonteCarloVariance | None, need: float | None) -> int | None:
    """The blocks a valid interval needs when ``est`` has fewer (else None)."""
    if est is None or need is None or not est.blocks < need:
        return None
    return int(need)


def _judge(
    preds: list[_Prediction],
    estimates: dict[tuple[str, str], MonteCarloVariance | None],
    confidence: float,
    minima: dict[tuple[str, str], float] | None = None,
) -> list[ProjectionRow]:
    """One row per prediction: its p-value, Holm-adjusted over all rows, and its verdict
    (``unreliable`` below the blocks :func:`minimum_blocks` asks for)."""
    # an interrupted run has no estimate for the cases it did not reach: no row for them
    preds = [pr for pr in preds if (pr.section, pr.case) in estimates]
    ests = [estimates[(pr.section, pr.case)] for pr in preds]
    finite = [
        est is not None and math.isfinite(pr.var) for pr, est in zip(preds, ests, strict=True)
    ]
    minima = minima or {}
    short = [
        _shortfall(est, minima.get((pr.section, pr.case)))
        for pr, est in zip(preds, ests, strict=True)
    ]
    # a time limit may stop a setting after a handful of blocks: too few for a valid interval
    valid = [
        pr.estimable and not _too_few_blocks(est) and need is None
        for pr, est, need in zip(preds, ests, short, strict=True)
    ]
    p_values = [
        est.p_value(pr.var) if f and v else math.nan  # type: ignore[union-attr]
        for pr, est, f, v in zip(preds, ests, finite, valid, strict=True)
    ]
    adjusted, verdicts = judge(p_values, alpha=1.0 - confidence, finite=finite, valid=valid)
    return [
        ProjectionRow(
            section=pr.section,
            case=pr.case,
            claim=pr.claim,
            role=pr.role,
            predicted_var=pr.var,
            predicted_mean=pr.mean,
            beta=beta_for(pr.var),
            estimate=est,
            p_value=p,
            p_adjusted=padj,
            verdict=verdict,
            min_blocks=need,
        )
        for pr, est, p, padj, verdict, need in zip(
            preds, ests, p_values, adjusted, verdicts, short, strict=True
        )
    ]
