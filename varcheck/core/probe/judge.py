"""A probe's design and verdicts: one shape check, one test of each head's scale.

Each head's scale is tested as ``assert`` tests a variance
(:class:`~varcheck.core.estimation.IntervalTest`, :func:`~varcheck.core.verdicts.decide`):
without a tolerance, a consistency test on the two-sided p-value; with one, the expected scale
is the band expected × [1 − T, 1 + T]: pass when the whole ``1 - 2 alpha`` interval lies inside
it (two one-sided tests, TOST), fail when the whole ``1 - alpha`` interval lies outside it,
otherwise inconclusive. The p-values a fail rests on (``ClaimPValues.p_fail``) are those a
caller Holm-adjusts (over the heads of a probe, or over a claim file).

A measurement without a valid interval (too few calls, or too small a design:
:func:`.budget.no_interval`) gives each head ``unreliable``, with ``nan`` p-values (left out of
any Holm family) and the reason.
"""

from __future__ import annotations

import math
from typing import Any

from ...errors import VarcheckError
from ..options import valid_count
from ..power import Detectable, detectable_of
from ..verdicts import FAIL, OUTCOME_RANK, ClaimPValues, Decision, claim_p_values, decide
from .budget import no_interval
from .measure import HeadEstimate, Measurement
from .weights import DTYPES, LAYOUTS, Design

__all__ = [
    "design",
    "dtype_name",
    "head_detectables",
    "head_p_values",
    "decide_head",
    "decide_heads",
    "worst_head",
    "mask_of",
    "mask_words",
    "causal_failure",
    "CAUSAL_MASKS",
]

CAUSAL_MASKS = ("causal", "causal (top-left)", "causal (bottom-right)")
#: Queries and keys per head and call by default: no power of two and unequal, so that a kernel
#: dividing by √n or √m (the tokens) in place of √d_k cannot pass by coincidence at d_k = 64.
QUERIES, KEYS = 48, 80
#: Fewest log-weight differences per call (queries × (keys − 1)) the per-call fit of a curved
#: kernel (degree 5 in q·k) can be solved from.
MIN_POINTS = 6
_DTYPE_NAMES = {
    "half": "float16",
    "fp16": "float16",
    "bf16": "bfloat16",
    "single": "float32",
    "fp32": "float32",
    "double": "float64",
    "fp64": "float64",
}


def dtype_name(dtype: Any) -> str:
    """The input format's name (``float64`` for None; numpy and torch dtypes and aliases)."""
    if dtype is None:
        return "float64"
    name = getattr(dtype, "name", None) or str(dtype).split(".")[-1].strip("'>")
    name = _DTYPE_NAMES.get(name, name)
    if name not in DTYPES:
        raise VarcheckError(f"dtype {str(dtype)[:60]!r} is not one of {', '.join(DTYPES)}")
    return name


def _layout(name: str, value: Any) -> str:
    if value not in LAYOUTS:
        raise VarcheckError(f"{name} {str(value)[:60]!r} is not one of {', '.join(LAYOUTS)}")
    return value


def design(
    dk: int,
    queries: int,
    keys: int,
    heads: int | None,
    dv: int | None,
    layout: str,
    dtype: Any,
    out_layout: str | None = None,
    kv_heads: int | None = None,
) -> Design:
    """The checked shapes and formats of one probe at ``dk``."""
    layout = _layout("layout", layout)
    out = "" if out_layout is None else _layout("out_layout", out_layout)
    if out and (layout == "nd") != (out == "nd"):
        raise VarcheckError(
            f"out_layout {out} with layout {layout}: a 2-D (nd) kernel returns a 2-D output, a "
            "4-D one (bhnd, bnhd) a 4-D one"
        )
    if heads is not None:
        heads = valid_count("heads", heads, 1, 1024)
    h = 1 if layout == "nd" else (2 if heads is None else heads)
    groups = _kv_heads(kv_heads, h, layout)
    queries = valid_count("queries", queries, 2, 4096)
    keys = valid_count("keys", keys, 2, 4096)
    dv = keys if dv is None else valid_count("dv", dv, 1, 65536)
    if queries * (keys - 1) < MIN_POINTS:
        raise VarcheckError(
            f"queries={queries} and keys={keys} give {queries * (keys - 1)} log-weight "
            f"differences per call (queries × (keys − 1)); the fit of a curved kernel needs at "
            f"least {MIN_POINTS}: raise queries or keys (--queries, --keys)"
        )
    return Design(
        dk,
        queries,
        keys,
        h,
        dv,
        layout,
        dtype_name(dtype),
        "" if out == layout else out,
        0 if groups == h else groups,
    )


def _kv_heads(kv_heads: int | None, heads: int, layout: str) -> int:
    """Key/value heads: as many as the query heads, or a divisor of them (grouped queries)."""
    if kv_heads is None:
        return heads
    kv = valid_count("kv_heads", kv_heads, 1, 1024)
    if layout == "nd" and kv != 1:
        raise VarcheckError(f"kv_heads={kv} needs a 4-D layout (bhnd, bnhd); nd has one head")
    if heads % kv:
        raise VarcheckError(
            f"kv_heads={kv} does not divide heads={heads}: each key/value head serves "
            "heads / kv_heads query heads"
        )
    return kv


def head_p_values(m: Measurement, expected: float, tolerance: float | None) -> list[ClaimPValues]:
    """Each head's p-values of ``expected`` (:func:`~varcheck.core.verdicts.claim_p_values`),
    ``nan`` without a valid interval (:func:`.budget.no_interval`), so that Holm leaves them
    out."""
    if no_interval(m) is not None:
        none = None if tolerance is None else math.nan
        return [ClaimPValues(math.nan, none, none) for _ in m.heads]
    return [claim_p_values(h, h.scale, expected, tolerance) for h in m.heads]


def head_detectables(
    m: Measurement,
    raw: list[ClaimPValues],
    *,
    alpha: float,
    family: int,
    tolerance: float | None,
) -> list[Detectable | None]:
    """What each head's test could have caught in the scale
    (:func:`~varcheck.core.power.detectable_of` at α/``family``, ``family`` the tests Holm
    adjusts over), from its own p-values ``raw``; ``None`` for a head without a valid test."""
    return [
        None
        if math.isnan(p.p_fail) or not h.scale > 0
        else detectable_of(h, alpha=alpha, family=family, tolerance=tolerance)
        for h, p in zip(m.heads, raw, strict=True)
    ]


def decide_head(
    h: HeadEstimate, expected: float, p: ClaimPValues, *, alpha: float, tolerance: float | None
) -> Decision:
    """One head's verdict from its p-values (the one a fail rests on, maybe Holm-adjusted)."""
    inner = h.confidence_interval if tolerance is None else h.interval_at(max(1 - 2 * alpha, 0))
    return decide(
        h.scale,
        inner,
        expected,
        p_value=p.p_value,
        alpha=alpha,
        tolerance=tolerance,
        samples=h.blocks,
        p_equivalence=p.p_equivalence,
        p_outside=p.p_outside,
        fail_interval=h.confidence_interval,
    )


def decide_heads(
    m: Measurement,
    expected: float,
    adjusted: list[ClaimPValues],
    *,
    alpha: float,
    tolerance: float | None,
) -> list[Decision]:
    """Every head's verdict from its (adjusted) p-values, or :func:`.budget.no_interval`'s for
    each."""
    refused = no_interval(m)
    if refused is not None:
        return [refused for _ in m.heads]
    return [
        decide_head(h, expected, p, alpha=alpha, tolerance=tolerance)
        for h, p in zip(m.heads, adjusted, strict=True)
    ]


def worst_head(decisions: list[tuple[Decision, ClaimPValues]]) -> tuple[Decision, ClaimPValues]:
    """The worst of (decision, p-values) pairs: the worst outcome (ranked as
    :func:`varcheck.core.verdicts.worst` ranks them), and among those the smallest p-value a
    fail rests on."""
    return max(decisions, key=lambda dp: (OUTCOME_RANK[dp[0].outcome], -dp[1].p_fail))


def mask_of(m: Measurement) -> str:
    """The heads' mask (``mixed`` when they differ)."""
    masks = {h.mask for h in m.structure}
    return masks.pop() if len(masks) == 1 else "mixed"


def mask_words(mask: str, queries: int, keys: int) -> str:
    """A causal mask and its alignment, for the verdict line (empty for any other mask)."""
    if mask == "causal (top-left)":
        return "causal mask top-left (query i sees keys 0..i)"
    if mask == "causal (bottom-right)":
        return f"causal mask bottom-right (query i sees keys 0..i+{keys - queries})"
    if mask == "causal":
        return "causal mask (n = m: top-left and bottom-right alike)"
    return ""


def causal_failure(m: Measurement, causal: bool) -> Decision | None:
    """A fail when a causal mask was expected and the weights show another (else None)."""
    mask = mask_of(m)
    if causal and mask not in CAUSAL_MASKS:
        return Decision(FAIL, f"a causal mask was expected; the weights show mask {mask}")
    return None
