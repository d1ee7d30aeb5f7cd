"""The floating-point formats a kernel's weights pass through, and the tolerances they set.

A probe meets up to three formats: the one its inputs are given in (``dtype``), the one the
kernel returns (the array's dtype; a bfloat16 tensor is read as such), and the one it computes
in, which may be coarser than both (a softmax upcast to float32 and cast back to float64, a
16-bit kernel whose output is upcast to float32). The last is read off the returned values: the
coarsest format in which every weight of the pilot is a number (a float64 array holding float32
numbers). Every tolerance of the probe is a multiple of that format's unit roundoff ``u``
(half its ``eps``); the multiples are derived in docs/probe.md ("Thresholds").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ...errors import VarcheckError

__all__ = [
    "Format",
    "FORMATS",
    "ComputeFormat",
    "coarsest",
    "values_format",
    "compute_format",
    "merged",
    "sum_tolerance",
    "NEGATIVE_ROUNDINGS",
    "SUM_EXTRA_ROUNDINGS",
    "FLOOR_ROUNDINGS",
]

#: Roundings beyond the m − 1 of a row's sum that may put a row's weights off 1: each weight's
#: division, an output rounding, an online (blocked) softmax's rescaling and final division,
#: and one for second-order terms: (m + 4) u in all (docs/probe.md, "Thresholds").
SUM_EXTRA_ROUNDINGS = 4
#: Unit roundoffs a weight may lie below 0: one rounding of a weight formed as a difference.
NEGATIVE_ROUNDINGS = 1
#: The interval's floor in unit roundoffs of the compute format: the worst-case slope bias of
#: the roundings of logits, exponentials, sums and outputs (about 4.4 u) with a margin.
FLOOR_ROUNDINGS = 8


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: its name, unit roundoff, smallest normal and subnormal."""

    name: str
    u: float
    tiny: float
    subnormal: float


#: The formats a kernel may compute in, finest first (bfloat16: float32's range, 8 bits).
FORMATS = {
    "float64": Format("float64", 2.0**-53, 2.0**-1022, 2.0**-1074),
    "float32": Format("float32", 2.0**-24, 2.0**-126, 2.0**-149),
    "float16": Format("float16", 2.0**-11, 2.0**-14, 2.0**-24),
    "bfloat16": Format("bfloat16", 2.0**-8, 2.0**-126, 2.0**-133),
}


def coarsest(*names: str) -> str:
    """The format of largest unit roundoff among ``names``."""
    return max(names, key=lambda n: FORMATS[n].u)


def _bfloat16_exact(w: np.ndarray) -> bool:
    """Every value is a bfloat16 number (float32 whose 16 low bits are 0)."""
    f = w.astype(np.float32)
    return bool((f == w).all() and not (f.view(np.uint32) & np.uint32(0xFFFF)).any())


def values_format(w: np.ndarray, returned: str) -> str:
    """The coarsest format in which every value of ``w`` (float64) is a number, no finer than
    ``returned``: bfloat16 (8 significant bits), float16 (11, and its range), float32 (24).

    A kernel that rounds its weights to a format and upcasts them leaves values with that
    format's bits; a kernel computing in the returned format fills its mantissas.
    """
    positive = w[w > 0]
    if positive.size == 0:
        return returned
    candidates = [
        ("bfloat16", _bfloat16_exact),
        ("float16", lambda a: bool((a.astype(np.float16).astype(np.float64) == a).all())),
        ("float32", lambda a: bool((a.astype(np.float32).astype(np.float64) == a).all())),
    ]
    for name, exact in candidates:
        if FORMATS[name].u <= FORMATS[returned].u:
            break
        if exact(positive):
            return name
    return returned


def sum_tolerance(fmt: str, keys: int) -> float:
    """How far from 1 a row of ``keys`` weights computed in ``fmt`` may sum: (m + 4) u."""
    return (keys + SUM_EXTRA_ROUNDINGS) * FORMATS[fmt].u


@dataclass(frozen=True)
class ComputeFormat:
    """The format a kernel's weights are read at, and where that was learnt.

    Attributes
    ----------
    name : str
        The coarsest of the declared ``dtype``, the returned format and the format of the
        returned values.
    returned : str
        The format of the array the kernel returns (``bfloat16`` for a bfloat16 tensor).
    declared : str
        ``dtype`` (``float64`` when none was given).
    source : str
        ``declared``, ``returned`` or ``values`` (read off the returned numbers).
    row_error : float
        The largest |row sum − 1| of the pilot.
    """

    name: str
    returned: str
    declared: str
    source: str
    row_error: float

    @property
    def u(self) -> float:
        return FORMATS[self.name].u

    @property
    def sentence(self) -> str:
        """What the output says about the formats (empty for float64 throughout)."""
        if self.name == "float64" and self.returned == "float64":
            return ""
        why = {
            "declared": "--dtype"
            + ("" if self.returned == self.name else f"; it returns {self.returned}"),
            "returned": "the array it returns",
            "values": f"read off the {self.returned} array it returns: every weight a "
            f"{self.name} number",
        }[self.source]
        return (
            f"format: computes in {self.name} ({why}); rows sum to 1 within "
            f"{self.row_error:.2g}; the interval's half-width is at least {FLOOR_ROUNDINGS} u = "
            f"{FLOOR_ROUNDINGS * self.u:.2g} (relative)"
        )


def compute_format(declared: str, returned: str, w: np.ndarray, label: str) -> ComputeFormat:
    """The format a kernel computes in, from ``dtype``, the returned format and the values.

    ``w``: the pilot's weights (float64, rows along the last axis). Rows that sum to 1 only
    beyond that format's rounding are refused: the output is not a convex combination of the
    values, unless the kernel rounds to a coarser format inside than the numbers it returns
    (the error then says to declare it).
    """
    values = values_format(w, returned)
    name = coarsest(declared, returned, values)
    source = (
        "declared"
        if name == declared and declared != "float64"
        else "values"
        if name == values and values != returned
        else "returned"
    )
    sums = w.sum(-1)
    error = float(np.abs(sums - 1.0).max()) if sums.size else 0.0
    fmt = ComputeFormat(name, returned, declared, source, error)
    tol = sum_tolerance(name, w.shape[-1])
    if not error <= tol:  # NaN refused too
        bad = float(sums.flat[int(np.nanargmax(np.abs(sums - 1.0)))])
        digits = max(4, 2 - math.floor(math.log10(error))) if error > 0 else 4
        shown = f"{bad:.{digits}g}" + (
            f" (1 {'+' if bad > 1 else '−'} {error:.2g})" if digits > 4 else ""
        )
        coarser = [f for f in ("float32", "float16", "bfloat16") if FORMATS[f].u > fmt.u]
        fits = [f for f in coarser if error <= sum_tolerance(f, w.shape[-1])]
        hint = ""
        if fits:
            hint = (
                f"; rows off 1 by this much are the rounding of a kernel that computes in "
                f"{fits[0]} (or coarser): if it does, give --dtype {fits[0]} (dtype= in Python)"
            )
        raise VarcheckError(
            f"kernel {label} is not softmax attention: a row of its weights sums to {shown}, "
            f"not 1 within {name}'s rounding ({tol:.2g} for {w.shape[-1]} keys), so its output "
            f"is not a convex combination of the values{hint}"
        )
    return fmt


def merged(formats: list[ComputeFormat]) -> ComputeFormat:
    """The format of several reads: the coarsest one's, with the largest row error of all."""
    worst = max(formats, key=lambda f: f.u)
    return dataclasses.replace(worst, row_error=max(f.row_error for f in formats))
