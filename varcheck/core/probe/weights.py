"""Reading a kernel's attention weights: the inputs varcheck gives it and what it must return.

For softmax attention ``O = W V`` with ``W`` the (n, m) weight matrix. With ``d_v >= m`` the
values are one-hot rows (``V = [I_m | 0]``) and ``O`` *is* ``W`` (its first m columns). With
``d_v < m`` the same queries and keys are given ``r = ceil(m / d_v)`` times, call ``c`` with
one-hot values for keys ``c·d_v .. (c+1)·d_v − 1`` (the others' value rows are 0), so that each
call returns d_v of W's columns as they are: no solve, every weight with its own relative
precision, and a masked weight exactly 0.

Queries and keys have independent N(0, sd²) entries; ``dtype`` rounds every input to float32,
float16 or bfloat16 (simulated: float32 arrays holding bfloat16 values, so no framework is
needed) and the dot products the analysis uses are those of the rounded inputs. With grouped
keys and values (``kv_heads`` < ``heads``), query head ``i`` attends to key/value head
``i // (heads / kv_heads)``, as ``repeat_interleave`` (SDPA's ``enable_gqa``) pairs them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import VarcheckError
from ..arrays import Returned, read_returned
from ..user_code import ReturnedTuple, call_user
from ..watchdog import watched_call

__all__ = [
    "LAYOUTS",
    "DTYPES",
    "Design",
    "call_kernel",
    "read_weights",
    "draw_qk",
    "rounded",
    "dot_products",
]

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


@dataclass(frozen=True)
class Design:
    """The shapes and formats of one probe.

    Attributes
    ----------
    dk, queries, keys, heads, dv : int
        d_k; n queries and m keys per head; query heads per call; the width of v.
    layout : str
        Of the inputs: ``nd`` (q: (n, d_k)), ``bhnd`` (1, heads, n, d_k) or ``bnhd``
        (1, n, heads, d_k).
    dtype : str
        The inputs' format.
    out_layout : str
        Of the output (``""``: the inputs' layout).
    kv_heads : int
        Key and value heads per call (0: as many as the query heads).
    """

    dk: int
    queries: int
    keys: int
    heads: int
    dv: int
    layout: str
    dtype: str
    out_layout: str = ""
    kv_heads: int = 0

    @property
    def output_layout(self) -> str:
        return self.out_layout or self.layout

    @property
    def groups(self) -> int:
        """Key/value heads per call."""
        return self.kv_heads or self.heads

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
            f"d_v={self.dv} < {self.keys} keys: {self.calls_per_block} calls per matrix, each "
            f"with one-hot values for {self.dv} of the keys"
        )

    def shape(
        self, rows: int, width: int, heads: int | None = None, layout: str | None = None
    ) -> tuple[int, ...]:
        """The array shape the kernel sees for ``rows`` tokens of ``width``."""
        h = self.heads if heads is None else heads
        layout = layout or self.layout
        if layout == "nd":
            return (rows, width)
        if layout == "bhnd":
            return (1, h, rows, width)
        return (1, rows, h, width)

    def to_layout(self, x: np.ndarray) -> np.ndarray:
        """(heads, rows, width) to the kernel's input layout."""
        if self.layout == "nd":
            return x[0]
        if self.layout == "bhnd":
            return x[None]
        return x.transpose(1, 0, 2)[None]

    def from_layout(self, out: np.ndarray) -> np.ndarray:
        """The kernel's output in its output layout to (heads, rows, width)."""
        layout = self.output_layout
        if layout == "nd":
            return out[None]
        if layout == "bhnd":
            return out[0]
        return out[0].transpose(1, 0, 2)

    def values(self) -> list[np.ndarray]:
        """The value matrices of one reading, (kv_heads, m, d_v) each: one-hot rows, for the
        keys of one block of d_v at a time when d_v < m."""
        m, dv = self.keys, self.dv
        out = []
        for c in range(self.calls_per_block):
            v = np.zeros((m, dv))
            keys = np.arange(c * dv, min((c + 1) * dv, m))
            v[keys, keys - c * dv] = 1.0
            out.append(np.broadcast_to(v, (self.groups, m, dv)))
        return out


def draw_qk(rng: np.random.Generator, design: Design, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Queries (heads, n, d_k) and keys (kv_heads, m, d_k), N(0, sd²), rounded to the dtype."""
    d = design.dk
    q = rounded(sd * rng.standard_normal((design.heads, design.queries, d)), design.dtype)
    k = rounded(sd * rng.standard_normal((design.groups, design.keys, d)), design.dtype)
    return q, k


def dot_products(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(heads, n, m) q·k in float64, each query head with its key head (grouped when the key
    heads are fewer)."""
    k = np.repeat(k, q.shape[0] // k.shape[0], axis=0)
    return q.astype(np.float64) @ np.ascontiguousarray(k.transpose(0, 2, 1), dtype=np.float64)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) or "a scalar"


def call_kernel(
    kernel: Any, q: np.ndarray, k: np.ndarray, v: np.ndarray, design: Design
) -> tuple[np.ndarray, str]:
    """One call in the kernel's layout; its output as a float64 (heads, n, d_v) array, and the
    format it returned (``bfloat16`` for a bfloat16 tensor)."""
    name = kernel.label
    args = [design.to_layout(x) for x in (q, k, rounded(v, design.dtype))]
    shapes = ", ".join(f"{n} {_shape_text(x.shape)}" for n, x in zip("qkv", args, strict=True))
    want = design.shape(design.queries, design.dv, layout=design.output_layout)
    only = f"return only the output ({_shape_text(want)}), not the attention weights too"
    try:
        with watched_call(f"kernel {name}"):  # the time cap's watchdog may stop it
            out, arr = call_user(_reading(kernel), *args, what=f"kernel {name}", one_array=only)
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
        hint = ""
        if sorted(arr.shape) == sorted(want) and design.layout != "nd":
            other = [
                o
                for o in LAYOUTS[1:]
                if design.shape(design.queries, design.dv, layout=o) == arr.shape
            ]
            if other:
                hint = f" (its output is laid out {other[0]}: give --out-layout {other[0]})"
        raise VarcheckError(
            f"kernel {name} returned shape {_shape_text(arr.shape)}; for {shapes} "
            f"({design.layout}) it must return {_shape_text(want)} "
            f"(--out-layout {design.output_layout}){hint}"
        )
    if not np.isfinite(arr).all():
        bad = "NaN" if np.isnan(arr).any() else "infinite"
        raise VarcheckError(f"kernel {name} returned {bad} values at d_k={design.dk}")
    fmt = out.format if isinstance(out, Returned) else "float64"
    if fmt not in ("float32", "float16", "bfloat16"):
        fmt = "float64"
    return design.from_layout(arr.astype(np.float64)), fmt


def _reading(kernel: Any) -> Any:
    """The kernel, its output read as numpy (bfloat16 included) when it can be."""

    def call(*args: Any) -> Any:
        out = kernel(*args)
        return out if isinstance(out, tuple) else read_returned(out)

    return call


def read_weights(
    kernel: Any, q: np.ndarray, k: np.ndarray, design: Design
) -> tuple[np.ndarray, str]:
    """The (heads, n, m) weight matrix of one set of queries and keys, and the returned format
    (the coarsest of the calls')."""
    outs, fmt = [], "float64"
    for v in design.values():
        out, returned = call_kernel(kernel, q, k, v, design)
        outs.append(out)
        fmt = returned if fmt == "float64" else fmt
    return np.concatenate(outs, axis=2)[:, :, : design.keys], fmt
