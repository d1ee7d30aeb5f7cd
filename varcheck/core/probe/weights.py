"""Reading a kernel's attention weights: the inputs varcheck gives it and what it must return.

For softmax attention ``O = W V`` with ``W`` the (n, m) weight matrix. With ``d_v >= m`` the
values are one-hot rows (``V = [I_m | 0]``) and ``O`` *is* ``W`` (its first m columns). With
``d_v < m`` one call cannot show ``W``: the same queries and keys are given ``r = ceil(m / d_v)``
times, with the columns of a fixed orthogonal m × m matrix U as values, d_v at a time, and
``W = [O_1 ... O_r] U^-1`` (U rounded to the input precision, condition number ~1).

Queries and keys have independent N(0, sd²) entries; ``dtype`` rounds every input to float32,
float16 or bfloat16 (simulated: float32 arrays holding bfloat16 values, so no framework is
needed) and the dot products the analysis uses are those of the rounded inputs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import VarcheckError
from ..user_code import ReturnedTuple, call_user
from ..watchdog import watched_call

__all__ = ["LAYOUTS", "DTYPES", "Design", "call_kernel", "read_weights", "draw_qk", "rounded"]

LAYOUTS = ("nd", "bhnd", "bnhd")
DTYPES = ("float64", "float32", "float16", "bfloat16")


def rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` as the array the kernel gets in ``dtype`` (bfloat16: float32 with 8-bit mantissa)."""
    if dtype == "float64":
        return np.ascontiguousarray(x, dtype=np.float64)
    if dtype == "bfloat16":
        bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
        # round to nearest even on the 16 dropped bits
        bits = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(
            0xFFFF0000
        )
        return bits.view(np.float32)
    return np.ascontiguousarray(x, dtype=np.dtype(dtype))


def input_eps(dtype: str) -> float:
    """Relative spacing of the input format (bfloat16: 2^-7)."""
    return 2.0**-7 if dtype == "bfloat16" else float(np.finfo(np.dtype(dtype)).eps)


@dataclass(frozen=True)
class Design:
    """The shapes and formats of one probe.

    Attributes
    ----------
    dk, queries, keys, heads, dv : int
        d_k; n queries and m keys per head; heads per call; the width of v.
    layout : str
        ``nd`` (q: (n, d_k)), ``bhnd`` (1, heads, n, d_k) or ``bnhd`` (1, n, heads, d_k).
    dtype : str
        The inputs' format.
    """

    dk: int
    queries: int
    keys: int
    heads: int
    dv: int
    layout: str
    dtype: str

    @property
    def calls_per_block(self) -> int:
        """Kernel calls that read one weight matrix (1 with one-hot values)."""
        return 1 if self.dv >= self.keys else math.ceil(self.keys / self.dv)

    @property
    def reading(self) -> str:
        """How the weights are read, in words."""
        if self.calls_per_block == 1:
            return "one-hot values: the output is the weight matrix"
        return (
            f"d_v={self.dv} < {self.keys} keys: {self.calls_per_block} calls per matrix with "
            "orthogonal values, solved for the weights"
        )

    def shape(self, rows: int, width: int) -> tuple[int, ...]:
        """The array shape the kernel sees for ``rows`` tokens of ``width``."""
        if self.layout == "nd":
            return (rows, width)
        if self.layout == "bhnd":
            return (1, self.heads, rows, width)
        return (1, rows, self.heads, width)

    def to_layout(self, x: np.ndarray) -> np.ndarray:
        """(heads, rows, width) to the kernel's layout."""
        if self.layout == "nd":
            return x[0]
        if self.layout == "bhnd":
            return x[None]
        return x.transpose(1, 0, 2)[None]

    def from_layout(self, out: np.ndarray) -> np.ndarray:
        """The kernel's output in its layout to (heads, rows, width)."""
        if self.layout == "nd":
            return out[None]
        if self.layout == "bhnd":
            return out[0]
        return out[0].transpose(1, 0, 2)

    def values(self) -> list[np.ndarray]:
        """The value matrices of one reading, (heads, m, d_v) each, and their inverse basis."""
        m, dv = self.keys, self.dv
        if dv >= m:
            v = np.zeros((m, dv))
            v[:, :m] = np.eye(m)
            return [np.broadcast_to(v, (self.heads, m, dv))]
        basis = _orthogonal(m)
        cols = np.zeros((m, self.calls_per_block * dv))
        cols[:, :m] = basis
        return [
            np.broadcast_to(cols[:, i * dv : (i + 1) * dv], (self.heads, m, dv))
            for i in range(self.calls_per_block)
        ]


@functools.lru_cache(maxsize=2)
def _orthogonal(m: int) -> np.ndarray:
    """A fixed orthogonal m × m matrix (QR of a seeded normal matrix), read-only and made once
    per m (at m = 4096 the QR takes seconds, and every reading with d_v < m needs it)."""
    q, r = np.linalg.qr(np.random.default_rng(m).standard_normal((m, m)))
    out = q * np.sign(np.diag(r))
    out.flags.writeable = False
    return out


def draw_qk(rng: np.random.Generator, design: Design, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Queries (heads, n, d_k) and keys (heads, m, d_k), N(0, sd²), rounded to the dtype."""
    h, d = design.heads, design.dk
    q = rounded(sd * rng.standard_normal((h, design.queries, d)), design.dtype)
    k = rounded(sd * rng.standard_normal((h, design.keys, d)), design.dtype)
    return q, k


def call_kernel(kernel: Any, q: np.ndarray, k: np.ndarray, v: np.ndarray, design: Design) -> Any:
    """One call in the kernel's layout; its output as a float64 (heads, n, d_v) array."""
    name = kernel.label
    args = [design.to_layout(x) for x in (q, k, rounded(v, design.dtype))]
    shapes = ", ".join(
        f"{n} {'x'.join(map(str, x.shape))}" for n, x in zip("qkv", args, strict=True)
    )
    want = design.shape(design.queries, design.dv)
    only = f"return only the output ({'x'.join(map(str, want))}), not the attention weights too"
    try:
        with watched_call(f"kernel {name}"):  # the time cap's watchdog may stop it
            _, arr = call_user(kernel, *args, what=f"kernel {name}", one_array=only)
    except ReturnedTuple:
        raise
    except VarcheckError as exc:  # often a layout the kernel does not take: say what it got
        raise VarcheckError(
            f"{exc} (called with layout {design.layout}: {shapes}; --layout takes "
            f"{', '.join(LAYOUTS)})"
        ) from exc.__cause__
    if arr.dtype.kind not in "biuf":
        raise VarcheckError(f"kernel {name} returned {arr.dtype} values, not real numbers")
    if arr.shape != want:
        got = "x".join(map(str, arr.shape)) or "a scalar"
        raise VarcheckError(
            f"kernel {name} returned shape {got}; for q {'x'.join(map(str, args[0].shape))}, "
            f"k {'x'.join(map(str, args[1].shape))}, v {'x'.join(map(str, args[2].shape))} "
            f"({design.layout}) it must return {'x'.join(map(str, want))}"
        )
    if not np.isfinite(arr).all():
        bad = "NaN" if np.isnan(arr).any() else "infinite"
        raise VarcheckError(f"kernel {name} returned {bad} values at d_k={design.dk}")
    return design.from_layout(arr.astype(np.float64)), arr.dtype


def read_weights(
    kernel: Any, q: np.ndarray, k: np.ndarray, design: Design
) -> tuple[np.ndarray, np.dtype]:
    """The (heads, n, m) weight matrix of one set of queries and keys, and the output dtype."""
    outs, dtype = [], np.dtype(np.float64)
    values = design.values()
    for v in values:
        out, dtype = call_kernel(kernel, q, k, v, design)
        outs.append(out)
    if len(outs) == 1:
        return outs[0][:, :, : design.keys], dtype
    stacked = np.concatenate(outs, axis=2)[:, :, : design.keys]
    basis = rounded(np.concatenate([v[0] for v in values], axis=1)[:, : design.keys], design.dtype)
    return np.linalg.solve(basis.T.astype(np.float64), stacked.transpose(0, 2, 1)).transpose(
        0, 2, 1
    ), dtype
