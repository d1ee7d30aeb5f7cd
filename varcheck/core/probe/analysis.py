"""What the weights of softmax attention reveal: the scale, masks, position bias, non-linearity.

For softmax attention with scale ``s``, additive bias ``b`` and mask, every attended weight obeys
``log w_ij = s · x_ij + b_ij − log Z_i`` with ``x_ij = q_i · k_j``. Centring over a row's attended
keys removes ``log Z_i``; regressing the centred log-weights on the centred dot products of one
call gives ``s`` (:func:`call_slopes`). Before any block is drawn a pilot of independent calls
(:func:`pilot_structure`) finds, per head:

* the mask: weights exactly zero at the same places in every call;
* an additive position bias: with the calls' dot products removed, what is left at each place
  is the same in every call (the *within* fit of panel data: the scale from the variation
  across calls at each place, the bias from the places' means). It is then subtracted from
  every block, so that the scale is exact for exact kernels;
* a non-linearity (tanh soft-capping, label smoothing): a quadratic and a cubic term in
  ``x`` that are both significant and of a size beyond rounding; the scale is then the slope at
  ``x = 0``;
* whether the weights are softmax attention of ``q · k`` at all: refused when these terms
  together leave most of the log-weights unexplained (linear attention, random weights).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import VarcheckError

__all__ = [
    "HeadStructure",
    "HeadStack",
    "call_slopes",
    "check_nonnegative",
    "causal_patterns",
    "unexplained",
    "rotary_signature",
    "explained_by",
    "pilot_structure",
    "offset_slope",
    "rough_slope",
    "underflow_edge",
    "BIAS_FLOOR",
    "CURVE_FLOOR",
    "EXPLAINED_MIN",
]

#: A position bias is reported when its RMS exceeds this many unit roundoffs of the format the
#: kernel computes in (the logits have RMS ~1): a smaller one changes no weight by more than
#: rounding does.
BIAS_FLOOR = 1.0
#: A curvature is reported when larger than the rounding level (the larger of the format's
#: unit roundoff and the RMS noise of the log-weights) divided by this: rounding itself curves
#: the log-weights by at most ~1/100 of that level (docs/probe.md, "Thresholds").
CURVE_FLOOR = 8.0
#: Smallest float64 weight read: below it a weight is subnormal and keeps few bits.
TINY = float(np.finfo(np.float64).tiny)
#: Fewest of the log-weights' variation that scale, bias and curvature must explain.
EXPLAINED_MIN = 0.9
#: A structure is reported only beyond this many standard errors (pilot false alarms ~1e-7).
Z_FLAG = 5.0
#: Fit of a bias pattern to a shape (ALiBi, relative) counted as that shape.
SHAPE_FIT = 0.99
#: Nats a zero's predicted log-weight may exceed the rounding floor and still be underflow.
UNDERFLOW_MARGIN = 1.0


@dataclass(frozen=True)
class HeadStructure:
    """What the pilot found for one head.

    Attributes
    ----------
    valid : numpy.ndarray
        (n, m) True where a key is attended (not masked).
    used : numpy.ndarray
        (n, m) True where the weight was at least ``tiny`` in every pilot call: the places
        whose bias is known, the only ones that enter a call's slope.
    tiny : float
        The output format's smallest normal number: a weight below it is subnormal (a few
        bits, or 0) and is not read.
    mask : str
        ``none``, ``causal``, ``causal (bottom-right)`` or ``other``.
    masked : int
        Weights exactly zero in every pilot call.
    underflowed : int
        Of those, the ones past a causal mask (or with no mask) that a steep ALiBi bias drove
        to 0: their log-weights, predicted from the fitted bias and scale, are below the
        formats' rounding floor in every pilot call (the mask is then named ``causal`` or
        ``none``).
    bias : numpy.ndarray or None
        The (n, m) row-centred position bias, in logit units, subtracted from every block.
    bias_size : float
        RMS of that bias over the RMS of the centred logits ``s · x``.
    bias_kind : str
        ``none``, ``alibi`` (linear in the distance), ``relative`` (a function of j − i) or
        ``other``.
    alibi_slope : float
        With ``alibi``: the bias per position of distance (negative: far keys get less).
    curved : bool
        Whether a non-linearity in ``x`` was found.
    curvature : float
        RMS of the quadratic and cubic terms over that of the linear term.
    linearity_residual : float
        RMS residual of the linear model (scale and bias) over the RMS of ``s · x``.
    explained : float
        Fraction of the log-weights' variation that scale, bias and curvature explain.
    scale : float
        The pilot's estimate of the scale (within fit).
    """

    valid: np.ndarray
    used: np.ndarray
    tiny: float
    mask: str
    masked: int
    underflowed: int
    bias: np.ndarray | None
    bias_size: float
    bias_kind: str
    alibi_slope: float
    curved: bool
    curvature: float
    linearity_residual: float
    explained: float
    scale: float


def centre_rows(z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``z`` minus its mean over each row's entries where ``w`` (0/1 weights), zero elsewhere."""
    count = np.maximum(w.sum(-1, keepdims=True), 1.0)
    return (z - (z * w).sum(-1, keepdims=True) / count) * w


def check_nonnegative(w: np.ndarray, tol: float, name: str) -> None:
    """Refuse weights below ``-tol``: the output is then not a convex combination of the values."""
    low = float(w.min())
    if low < -tol:
        h, i, j = np.unravel_index(int(np.argmin(w)), w.shape)
        raise VarcheckError(
            f"kernel {name} is not softmax attention: the weight of query {i}, key {j} "
            f"(head {h}) is {low:.3g} < 0, so its output is not a convex combination of the "
            "values"
        )


def rough_slope(w: np.ndarray, x: np.ndarray) -> float:
    """The scale from one call's positive weights, all heads together (NaN if none varies)."""
    ok = w > 0
    y = np.log(np.where(ok, w, 1.0))
    wt = ok.astype(float)
    xt, yt = centre_rows(x, wt), centre_rows(y, wt)
    den = float((xt * xt).sum())
    return float((xt * yt).sum()) / den if den > 0 else math.nan


def offset_slope(w: np.ndarray, x: np.ndarray, tiny: float, rounds: int = 40) -> float:
    """The scale from one call with each row's and each offset ``j − i``'s level removed.

    A position bias that is a function of ``j − i`` (ALiBi, relative) is absorbed by the
    offsets' levels. It matters when the bias is steep: far keys are then readable (at least
    ``tiny``) only when their ``q · k`` is large, and :func:`rough_slope`, which ignores the
    bias, reads a slope of that selection. Within a row and an offset the log-weight is exact
    in ``q · k``, so selecting on it does not bias this slope. NaN if nothing varies.
    """
    heads, n, m = w.shape
    ok = w >= tiny
    wt = ok.astype(float)
    size = heads * (n + m - 1)
    index = (
        np.arange(heads)[:, None, None] * (n + m - 1)
        + np.arange(m)[None, None, :]
        - np.arange(n)[None, :, None]
        + n
        - 1
    )[ok]
    count = np.maximum(np.bincount(index, minlength=size), 1)
    y = np.log(np.where(ok, w, 1.0))
    pair = [x * wt, y * wt]
    for _ in range(rounds):  # alternating projections onto the row and the offset levels
        pair = [centre_rows(z, wt) for z in pair]
        for z in pair:
            z[ok] -= (np.bincount(index, z[ok], minlength=size) / count)[index]
    xt, yt = pair
    den = float((xt * xt).sum())
    return float((xt * yt).sum()) / den if den > 1e-12 * float((x * x * wt).sum()) else math.nan


def underflow_edge(name: str, tiny: float, where: str) -> str:
    """The error for weights too close to the format's underflow edge to read a slope."""
    return (
        f"kernel {name}: its weights sit at the underflow edge of its format: no query has two "
        f"keys of weight ≥ {tiny:.2g} {where}, so the scale cannot be read; return float32 "
        "weights, or probe fewer keys or a gentler position bias"
    )


def causal_patterns(n: int, m: int) -> list[tuple[str, np.ndarray]]:
    """The causal masks of n queries and m keys, by name: query i sees keys 0..i (top-left) or
    0..i + m − n (bottom-right: the last query sees every key); one ``causal`` when n = m."""
    i, j = np.indices((n, m))
    if n == m:
        return [("causal", j > i)]
    return [("causal (top-left)", j > i), ("causal (bottom-right)", j > i + (m - n))]


def _mask_kind(zero: np.ndarray) -> str:
    if not zero.any():
        return "none"
    for name, pattern in causal_patterns(*zero.shape):
        if np.array_equal(zero, pattern):
            return name
    return "other"


def _underflow_mask(
    zero: np.ndarray, w: np.ndarray, x: np.ndarray, used: np.ndarray, scale: float, log_floor: float
) -> tuple[str, int] | None:
    """A causal mask (or none) whose extra zeros are weights a steep ALiBi bias drove to 0.

    ``w``, ``x``: the pilot's (P, n, m) weights and dot products; ``used``: the places read in
    every call; ``log_floor``: the log of the largest weight the formats may round (or flush)
    to 0. For each
    candidate mask, the bias of the used places is fitted as linear in the distance to the
    query's own position (ALiBi); each call's log-weight at an extra zero is then predicted
    from that slope, the scale times its ``q · k`` and the row's level in that call. The zeros
    are underflow when every prediction, in every call, is below ``log_floor`` (with a margin
    for the fit's error). A mask (a sliding window) zeroes keys whose predicted weight is far
    above the floor, so it stays ``other``. Returns the mask and the extra zeros, or None.
    """
    n, m = zero.shape
    wt = used.astype(float)
    y = np.log(np.where(used, w, 1.0))
    rows = np.any(used, axis=1)
    for name, pattern in [*causal_patterns(n, m), ("none", np.zeros((n, m), dtype=bool))]:
        extra = zero & ~pattern
        if not (pattern <= zero).all() or not extra.any() or not rows[extra.any(axis=1)].all():
            continue
        off = (m - n) * (name == "causal (bottom-right)")
        dist = np.abs(np.arange(n)[:, None] + off - np.arange(m)[None, :]).astype(float)
        dc = centre_rows(-dist, wt)
        level = y - scale * x
        lc = centre_rows(level.mean(axis=0), wt)
        den = float((dc * dc).sum())
        total = float((lc * lc).sum())
        if den <= 0 or total <= 0:
            continue
        slope = float((dc * lc).sum()) / den
        rms = math.sqrt(float(((lc - slope * dc) ** 2).sum()) / max(float(wt.sum()), 1.0))
        # a penalty on distance (far keys get less), and linear in it
        if slope <= 0 or 1.0 - rms * rms * float(wt.sum()) / total < SHAPE_FIT:
            continue
        # each call's level of each row, from its used places with the fitted bias removed
        row_level = ((level + slope * dist) * wt).sum(-1) / np.maximum(wt.sum(-1), 1.0)
        predicted = scale * x - slope * dist + row_level[..., None]
        margin = UNDERFLOW_MARGIN + 4.0 * (rms + rms / math.sqrt(den) * dist)
        if (predicted.max(axis=0) - margin < log_floor)[extra].all():
            return name, int(extra.sum())
    return None


def _fit(design: list[np.ndarray], y: np.ndarray) -> tuple[np.ndarray, float]:
    """Least squares of ``y`` on the columns (arrays of its shape); coefficients and residual SS."""
    g = np.array([[float((a * b).sum()) for b in design] for a in design])
    r = np.array([float((a * y).sum()) for a in design])
    coef = np.linalg.lstsq(g, r, rcond=None)[0]
    res = y - sum(c * a for c, a in zip(coef, design, strict=True))
    return coef, float((res * res).sum())


def _bias_shape(bias: np.ndarray, valid: np.ndarray) -> tuple[str, float]:
    """``alibi`` (with its slope), ``relative`` or ``other`` for a row-centred bias pattern.

    ALiBi is linear in the distance |i − j| of the key to the query's position, counted
    top-left (query i at position i) or bottom-right (at i + m − n, as a causal mask of that
    alignment places it): the better fit of the two is taken.
    """
    n, m = bias.shape
    i, j = np.indices((n, m))
    wt = valid.astype(float)
    total = float((bias * bias).sum())
    for off in dict.fromkeys((0, m - n)):
        dist = centre_rows(-np.abs(i + off - j).astype(float), wt)
        den = float((dist * dist).sum())
        if den > 0:
            slope = float((dist * bias).sum()) / den
            if 1.0 - float(((bias - slope * dist) ** 2).sum()) / total > SHAPE_FIT:
                return "alibi", -slope
    return ("relative" if _toeplitz_fit(bias, valid) > SHAPE_FIT else "other"), math.nan


def _toeplitz_fit(bias: np.ndarray, valid: np.ndarray, rounds: int = 50) -> float:
    """R² of the best f(j − i) + r_i for a bias pattern (backfitting: O(n m) a round)."""
    n, m = bias.shape
    wt = valid.astype(float)
    offset = (np.arange(m)[None, :] - np.arange(n)[:, None] + n - 1)[valid]
    count = np.maximum(np.bincount(offset, minlength=n + m - 1), 1)
    target, fit = bias[valid], np.zeros(int(valid.sum()))
    rows = np.nonzero(valid)[0]
    row_effect = np.zeros(n)
    for _ in range(rounds):
        f = np.bincount(offset, target - row_effect[rows], minlength=n + m - 1) / count
        resid = np.zeros((n, m))
        resid[valid] = target - f[offset]
        row_effect = (resid * wt).sum(-1) / np.maximum(wt.sum(-1), 1.0)
        fit = f[offset] + row_effect[rows]
    total = float((target * target).sum())
    return 1.0 - float(((target - fit) ** 2).sum()) / total if total > 0 else 1.0


def pilot_structure(
    w: np.ndarray,
    x: np.ndarray,
    name: str,
    tiny: float = TINY,
    log_floor: float | None = None,
    *,
    roundoff: float = 2.0**-53,
) -> HeadStructure:
    """Mask, bias and non-linearity of one head from P independent calls.

    ``w`` and ``x`` are (P, n, m): the weights and the dot products of each call; ``tiny`` the
    smallest normal number of the format the kernel returns; ``log_floor`` the log of the largest
    weight its formats may round or flush to 0 (default ``log(tiny)``); ``roundoff`` the unit
    roundoff of the format it computes in (the bias and curvature floors follow it).
    """
    calls = w.shape[0]
    zero = (w == 0).all(axis=0)
    valid = ~zero
    # places that underflowed (or were subnormal, a few bits) in some call are left out
    used = valid & (w >= tiny).all(axis=0)
    if not (used.sum(-1) >= 2).any():
        if (valid.sum(-1) >= 2).any():
            raise VarcheckError(underflow_edge(name, tiny, "in every pilot call"))
        raise VarcheckError(
            f"kernel {name}: no query attends to two keys or more, so the weights say nothing "
            "about the scale"
        )
    wt = used.astype(float)
    y = np.log(np.where(used, w, 1.0))
    unit = 1.0 / max(float(x[:, used].std()), 1e-300)
    u = x * unit
    rc = [centre_rows(z, wt) for z in (y, u, u * u, u * u * u)]
    within = [z - z.mean(axis=0) for z in rc]
    yw, xw, x2w, x3w = within
    (s_u,), ss_lin = _fit([xw], yw)
    bias = rc[0].mean(axis=0) - s_u * rc[1].mean(axis=0)
    logit_ss = max(float(((s_u * rc[1]) ** 2).sum()), 1e-300)
    places = int(used.sum()) - int((used.sum(-1) > 0).sum())
    dof = max((calls - 1) * places - 1, 1)
    noise = ss_lin / dof
    bias_size = math.sqrt(float((bias * bias).sum()) * calls / logit_ss)
    chi = calls * float((bias * bias).sum()) / noise if noise > 0 else math.inf
    biased = (chi - places) / math.sqrt(
        2.0 * max(places, 1)
    ) > Z_FLAG and bias_size > BIAS_FLOOR * roundoff
    coef, ss_cub = _fit([xw, x2w, x3w], yw)
    f_stat = ((ss_lin - ss_cub) / 2.0) / (ss_cub / max(dof - 2, 1)) if ss_cub > 0 else math.inf
    curve = coef[1] * x2w + coef[2] * x3w
    curvature = math.sqrt(
        float((curve * curve).sum()) / max(float(((coef[0] * xw) ** 2).sum()), 1e-300)
    )
    # rounding, deterministic in q·k, curves the log-weights by ~1/100 of its level at most
    level = max(roundoff, math.sqrt(ss_cub / logit_ss))
    curved = f_stat > Z_FLAG**2 and curvature > level / CURVE_FLOOR
    total = float((rc[0] ** 2).sum())
    explained = 1.0 - (ss_cub if curved else ss_lin) / total if total > 0 else 1.0
    kind, slope = _bias_shape(bias, used) if biased else ("none", math.nan)
    mask, underflowed = _mask_kind(zero), 0
    if mask == "other" and biased:
        floor = math.log(tiny) if log_floor is None else log_floor
        found = _underflow_mask(zero, w, x, used, s_u * unit, floor)
        mask, underflowed = found or (mask, 0)
    return HeadStructure(
        valid=valid,
        used=used,
        tiny=tiny,
        mask=mask,
        masked=int(zero.sum()),
        underflowed=underflowed,
        bias=bias if biased else None,
        bias_size=bias_size if biased else 0.0,
        bias_kind=kind,
        alibi_slope=slope,
        curved=curved,
        curvature=curvature,
        linearity_residual=math.sqrt(ss_lin / logit_ss),
        explained=explained,
        scale=s_u * unit,
    )


@dataclass(frozen=True)
class HeadStack:
    """The heads' structures stacked for a call's arrays: ``used`` (heads, n, m), ``tiny``
    (heads, 1, 1) and ``bias`` (heads, n, m; 0 for a head without one)."""

    used: np.ndarray
    tiny: np.ndarray
    bias: np.ndarray

    @classmethod
    def of(cls, heads: list[HeadStructure] | tuple[HeadStructure, ...]) -> HeadStack:
        used = np.stack([h.used for h in heads])
        bias = np.stack([np.zeros(h.used.shape) if h.bias is None else h.bias for h in heads])
        return cls(used, np.array([h.tiny for h in heads])[:, None, None], bias)


def call_slopes(
    w: np.ndarray,
    x: np.ndarray,
    heads: list[HeadStructure] | HeadStack,
    *,
    curved: bool,
    unit: float,
) -> np.ndarray:
    """Each head's scale from one call's (heads, n, m) weights and dot products, twice.

    Returns (2, heads). Linear: both rows are the slope of the row-centred log-weights (bias
    removed) on the row-centred dot products. ``curved``: the slope at 0 of a polynomial in
    ``x`` of degree 5 (row 0) and of degree 3 (row 1): their gap bounds the error of reading
    a slope at 0 off a curve. ``unit`` scales x to about 1.

    Only the places the pilot saw positive in every call enter (``used``: where the bias was
    estimated). A place near the underflow edge is positive only when its ``q·k`` happens to be
    large; entering it then, without its bias, would read a slope of that selection, not ``s``.
    """
    stack = heads if isinstance(heads, HeadStack) else HeadStack.of(heads)
    ok = stack.used & (w >= stack.tiny)
    y = np.log(np.where(ok, w, 1.0)) - stack.bias
    wt = ok.astype(float)
    xt, yt = centre_rows(x, wt), centre_rows(y, wt)
    if not curved:
        den = (xt * xt).sum((-2, -1))
        # NaN for a head with no row of two readable places: the caller refuses the call
        slope = np.divide(
            (xt * yt).sum((-2, -1)), den, out=np.full(den.shape, np.nan), where=den > 0
        )
        return np.stack([slope, slope])
    u = x * unit
    cols = np.stack([centre_rows(u**p, wt) for p in range(1, 6)])
    gram = np.einsum("ahnm,bhnm->hab", cols, cols)
    rhs = np.einsum("ahnm,hnm->ha", cols, yt)
    five = np.linalg.solve(gram, rhs[..., None])[:, 0, 0]
    three = np.linalg.solve(gram[:, :3, :3], rhs[:, :3, None])[:, 0, 0]
    return np.stack([five, three]) * unit


def _pair_r2(y: np.ndarray, x: np.ndarray, ok: np.ndarray, off: int, d: int) -> float | None:
    """R² of y[i, i+off+d] − y[i, i+off] on the same difference of x, over rows and calls."""
    _, n, m = y.shape
    rows = np.arange(n)
    j0 = rows + off
    j = j0 + d
    sel = (j0 >= 0) & (j0 < m) & (j >= 0) & (j < m)
    r, j0, j = rows[sel], j0[sel], j[sel]
    good = ok[:, r, j] & ok[:, r, j0]
    z = (y[:, r, j] - y[:, r, j0])[good]
    u = (x[:, r, j] - x[:, r, j0])[good]
    if z.size < 10:
        return None
    z, u = z - z.mean(), u - u.mean()
    den = float((z * z).sum() * (u * u).sum())
    return float((z * u).sum()) ** 2 / den if den > 0 else None


def rotary_signature(w: np.ndarray, x: np.ndarray) -> tuple[str, float, float] | None:
    """Whether (P, n, m) weights look rotated by position (RoPE): each key's log-weight minus
    that of the query's own position follows q·k closely one position away (R² ≥ 0.8) and ever
    less with distance (R² lower by 0.2 or more beyond 8 positions), for one alignment of the
    positions. Returns the alignment and the two R², or None.

    A rotation by position angle θ·(j − i) leaves q·k unchanged at the query's own position
    and turns it into another bilinear form with distance; plain softmax attention gives R² = 1
    at every distance. Only the words of a refusal depend on this, not a verdict.
    """
    _, n, m = w.shape
    ok = w > 0
    y = np.log(np.where(ok, w, 1.0))
    found = None
    for name, off in dict.fromkeys([("top-left", 0), ("bottom-right", m - n)]):
        near = [r for d in (-1, 1) if (r := _pair_r2(y, x, ok, off, d)) is not None]
        far = [
            r
            for d in range(-40, 41)
            if abs(d) >= 8 and (r := _pair_r2(y, x, ok, off, d)) is not None
        ]
        if not near or not far:
            continue
        a, b = float(np.mean(near)), float(np.mean(far))
        if a >= 0.8 and a - b >= 0.2 and (found is None or a > found[1]):
            found = (name, a, b)
    return found


def explained_by(w: np.ndarray, x: np.ndarray) -> float:
    """R² of one call's row-centred log-weights on row-centred dot products (positive weights)."""
    ok = (w > 0).astype(float)
    y = centre_rows(np.log(np.where(w > 0, w, 1.0)), ok)
    xc = centre_rows(x, ok)
    den = float((xc * xc).sum() * (y * y).sum())
    return float((xc * y).sum()) ** 2 / den if den > 0 else 0.0


def unexplained(name: str, explained: float, hint: str = "") -> str:
    """The refusal of weights that scale, bias and curvature leave mostly unexplained."""
    return (
        f"kernel {name} is not softmax attention of q·k: a scale, a position bias and a "
        f"curvature explain only {explained:.0%} of its log-weights"
        + (
            hint
            or " (linear attention and other normalisations cannot be probed; nor can a "
            "kernel that rotates q and k by position, RoPE, unless it is switched off: "
            "cos = 1, sin = 0)"
        )
    )
