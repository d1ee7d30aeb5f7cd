"""The simple law nearest to the scale a kernel applies (``1/sqrt(dk)`` × 1/3, ``1/dk``...).

Shared by the kernels family (``varcheck probe``) and the checks family (a probe claim's row
names its nearest law in JUnit); :mod:`varcheck.kernels.laws` re-exports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Reading",
    "nearest_law",
    "LAWS",
    "simplest_factor",
    "law_sentence",
    "growth_law",
    "variance_ratio_law",
]


#: (label, scale at (dk, h), what it means): the simple laws a scale is compared with
LAWS: tuple[tuple[str, Callable[[int, int], float], str], ...] = (
    ("1/sqrt(dk)", lambda d, h: 1 / math.sqrt(d), "the standard 1/√d_k"),
    ("1", lambda d, h: 1.0, "no scale: the 1/√d_k is forgotten"),
    ("1/dk", lambda d, h: 1 / d, "1/d_k: μP's scale, or 1/√d_k applied twice"),
    (
        "1/sqrt(dk*h)",
        lambda d, h: 1 / math.sqrt(d * h),
        "1/√(h·d_k): the model's width in place of one head's d_k",
    ),
    ("1/dk**2", lambda d, h: 1 / d**2, "1/d_k²"),
    ("sqrt(dk)", lambda d, h: math.sqrt(d), "√d_k: multiplied where it should divide"),
)


def _simple_factors() -> list[tuple[str, float, int]]:
    """(label, value, complexity) of factors such as 1/3, 2, 1/√2, 2/3; simplest first."""
    out: list[tuple[str, float, int]] = [("1", 1.0, 0)]
    for n in range(2, 65):
        out += [(f"1/{n}", 1.0 / n, n), (f"{n}", float(n), n)]
        if math.isqrt(n) ** 2 != n:
            out += [(f"1/√{n}", 1.0 / math.sqrt(n), 2 * n), (f"√{n}", math.sqrt(n), 2 * n)]
    for a in range(2, 9):
        for b in range(2, 9):
            if a != b and math.gcd(a, b) == 1:
                out.append((f"{a}/{b}", a / b, 4 * (a + b)))
    return sorted(out, key=lambda f: f[2])


_FACTORS = _simple_factors()


@dataclass(frozen=True)
class Reading:
    """The simple law nearest to a scale.

    Attributes
    ----------
    law : str
        One of :data:`LAWS`' labels.
    factor : float
        scale / law.
    factor_label : str
        The factor as a simple number (``1/3``, ``1/√4``...), or to 4 digits.
    meaning : str
        What the law and factor amount to, in words.
    """

    law: str
    factor: float
    factor_label: str
    meaning: str


def _factor_meaning(label: str) -> str:
    if label.startswith("1/") and label[2:].isdigit():
        n = int(label[2:])
        return (
            f"an extra factor 1/{n} (a 1/(layer+1) at layer {n - 1}, or the width of "
            f"{n * n} heads in place of one head's d_k)"
        )
    if label.startswith("1/√"):
        n = int(label[3:])
        return f"the width of {n} heads in place of one head's d_k"
    return f"an extra factor {label}"


def _token_laws(queries: int | None, keys: int | None) -> list[tuple[str, Any, str]]:
    """The laws of a kernel that divides by the square root of a token count in place of
    d_k's: 1/√n (n queries) and 1/√m (m keys), when the probe knows them."""
    out: list[tuple[str, Any, str]] = []
    if queries:
        meaning = f"1/√n: the number of queries (n = {queries}) in place of d_k"
        out.append(("1/sqrt(n)", lambda d, h, n=queries: 1 / math.sqrt(n), meaning))
    if keys and keys != queries:
        meaning = f"1/√m: the number of keys (m = {keys}) in place of d_k"
        out.append(("1/sqrt(m)", lambda d, h, m=keys: 1 / math.sqrt(m), meaning))
    return out


def nearest_law(
    scale: float,
    low: float,
    high: float,
    dk: int,
    h: int = 1,
    *,
    queries: int | None = None,
    keys: int | None = None,
) -> Reading:
    """The simple law a scale (with interval [low, high]) reads as, and the factor left over.

    A law matched by the interval with factor 1 wins; then 1/√d_k times the simplest number the
    interval holds (1/3 before 3/8); else the law nearest on the log scale. With ``queries``
    and ``keys`` (a probe's token counts), 1/√n and 1/√m are laws too, after the others.
    """
    laws = [law for law in LAWS if h > 1 or law[0] != "1/sqrt(dk*h)"]
    laws += [law for law in _token_laws(queries, keys) if law[1](dk, h) != 1 / math.sqrt(dk)]
    if not (scale > 0 and math.isfinite(scale)):
        sign = "negative" if scale < 0 else "zero"
        return Reading("—", math.nan, "—", f"a {sign} scale: no law applies")
    pad_lo, pad_hi = min(low, scale * (1 - 1e-6)), max(high, scale * (1 + 1e-6))
    best: tuple[int, int, str, float, str] | None = None
    for rank, (label, f, _) in enumerate(laws):
        base = f(dk, h)
        # a factor is read against 1/√d_k only: "1 × 1/10" would name a forgotten scale
        factors = _FACTORS if label == "1/sqrt(dk)" else _FACTORS[:1]
        for flabel, fval, cost in factors:
            if pad_lo <= base * fval <= pad_hi and (best is None or (cost, rank) < best[:2]):
                best = (cost, rank, label, fval, flabel)
                break
    if best is not None:
        _, rank, label, fval, flabel = best
        meaning = laws[rank][2]
        if flabel != "1":
            extra = _factor_meaning(flabel) if label == "1/sqrt(dk)" else f"times {flabel}"
            meaning = f"{meaning}, {extra}"
        return Reading(label, scale / laws[rank][1](dk, h), flabel, meaning)
    label, f, meaning = min(laws, key=lambda law: abs(math.log(scale / law[1](dk, h))))
    factor = scale / f(dk, h)
    return Reading(label, factor, f"{factor:.4g}", f"{meaning}, times {factor:.4g}")


def simplest_factor(value: float, low: float, high: float) -> str:
    """The simplest number (1/2, 3/4, 1/√2...) inside [low, high] (padded by 1e-6 relative
    around ``value``), or ``value`` to 4 digits."""
    pad_lo, pad_hi = min(low, value * (1 - 1e-6)), max(high, value * (1 + 1e-6))
    for label, f, _ in _FACTORS:
        if pad_lo <= f <= pad_hi:
            return label
    return f"{value:.4g}"


def law_sentence(
    scale: float,
    low: float,
    high: float,
    expected: float,
    dk: int,
    h: int = 1,
    **tokens: int | None,
) -> str:
    """``× 1/2 of the expected scale: nearest law 1/sqrt(dk) × 1/2 (what that means)``, or
    ``the expected scale: …`` when the ratio's interval holds 1; ``tokens`` (``queries``,
    ``keys``) as :func:`nearest_law` takes them."""
    ratio = simplest_factor(scale / expected, *sorted((low / expected, high / expected)))
    law = nearest_law(scale, low, high, dk, h, **tokens)
    factor = "" if law.factor_label in ("1", "—") else f" × {law.factor_label}"
    said = "the expected scale" if ratio == "1" else f"× {ratio} of the expected scale"
    return f"{said}: nearest law {law.law}{factor} ({law.meaning})"


def _ratio_exponents() -> list[tuple[float, str, str]]:
    """(e, label, meaning): each of :data:`LAWS` (one head) as the exponent of d_k in the
    variance ratio it gives against the standard 1/√d_k, Var = claim × d_k^e with e = 2β + 1."""
    out: dict[float, tuple[float, str, str]] = {}
    for label, f, meaning in LAWS:
        if label != "1/sqrt(dk*h)":
            e = round(2.0 * math.log(f(4, 1) / f(2, 1)) / math.log(2.0) + 1.0, 9)
            out.setdefault(e, (e, label, meaning))
    return list(out.values())


def growth_law(slope: float, low: float, high: float, expected: float) -> str:
    """The simple law of a sweep's Var/claim: its fitted exponent ``slope - expected`` (interval
    ``[low, high]`` for the slope) read against the exponents of :data:`LAWS`.

    One law inside the interval is named; none, the nearest is named with a note; two or more,
    the rows cannot tell them apart. The meanings hold for a claim about values scaled by
    1/√d_k.
    """
    e, lo, hi = slope - expected, low - expected, high - expected
    laws = _ratio_exponents()
    inside = [law for law in laws if lo <= law[0] <= hi]
    if len(inside) > 1:
        said = " from ".join(f"d_k^{law[0]:g}" for law in inside[:2])
        return f"cannot tell {said} with these rows: widen the d_k range or add samples"
    law = inside[0] if inside else min(laws, key=lambda law: abs(law[0] - e))
    note = "" if inside else f" (b − claim's {expected:g} = {e:.3f}: the interval excludes it)"
    return (
        f"Var ≈ claim × d_k^{law[0]:g}: scale {law[1]}, {law[2]} "
        f"(if the claim is for values scaled by 1/√d_k){note}"
    )


def variance_ratio_law(ratio: float, low: float, high: float, dk: int) -> str:
    """The simple law of one run's Var/claim (``ratio`` in ``[low, high]``) at one d_k, read as
    a scale on values the claim takes to be scaled by 1/√d_k (:func:`nearest_law`)."""
    factor = f"{ratio:.4g} [{low:.4g}, {high:.4g}]"
    if not (ratio > 0 and low > 0):
        return f"Var = claim × {factor}: no law applies to a ratio this close to 0"
    law = nearest_law(math.sqrt(ratio / dk), math.sqrt(low / dk), math.sqrt(high / dk), dk)
    times = "" if law.factor_label in ("1", "—") else f" × {law.factor_label}"
    return (
        f"Var = claim × {factor}: nearest law {law.law}{times} ({law.meaning}), if the claim "
        "is for values scaled by 1/√d_k; one d_k cannot tell a power of d_k from a constant "
        "(sweep --sampler over d_k separates them)"
    )
