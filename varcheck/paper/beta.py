"""Adaptive temperature β per head of projection weights Q = X W_q, K = X W_k (``varcheck beta``).

The formulas are in :mod:`varcheck.core.logit_variance`, shared with the encoder audit.

For q = x W_q and k = x' W_k with x, x' *different* tokens whose entries are independent, mean 0
and variance s_x², the logit q·k = x A x'ᵀ with A = W_q W_kᵀ has

    E[q·k] = 0,   Var(q·k | W) = s_x⁴ ‖W_q W_kᵀ‖_F²            (exact, given the weights)

and, averaging over weights with i.i.d. entries of variance s_q², s_k², the relaxed formula

    Var(q·k) = (d_x s_x² s_q²)(d_x s_x² s_k²) d_k               (σ-based).

Multiplying the logits by β = 1 / sqrt(Var) gives them unit variance; β = 1/√d_k is the special
case d_x s_x² s_q² = d_x s_x² s_k² = 1.

The paper's algorithm re-measures s_q, s_k after every step and sets ``beta_paper``. For given
weights s_q, s_k are the entries' root mean squares (``weight_sigma``): with zero-mean inputs
Var(x·w | w) = s_x² Σ_a w_a² whatever the mean of w, and with the RMS the exact variance is at
most d_k times the σ-based one (docs/paper.md proves it; the mean-removed standard deviation
gives no bound). ``beta_paper`` follows from them; ``beta_exact`` uses the weights themselves
and stays right when W_q and W_k share directions (see :mod:`varcheck.paper.projection`).
:func:`head_betas` applies both to every head of a layer, and :func:`load_weights` reads them
from the ``.npz`` file ``varcheck beta`` takes (:data:`WEIGHTS_FORMAT`).
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from ..core import logit_variance as lv
from ..core.messages import cut, shown, size_text
from ..core.options import valid_positive
from ..core.untested import Untested
from ..errors import VarcheckError
from ..output.display import Displayable
from .limits import MAC_SECONDS, MAX_FILE_BYTES, check_memory, check_time

__all__ = [
    "HeadBeta",
    "head_betas",
    "ProjectionWeights",
    "load_weights",
    "WEIGHTS_FORMAT",
    "BetaReport",
    "beta_report",
]


#: What ``varcheck beta`` reads (shown in its ``--help``).
WEIGHTS_FORMAT = """\
A NumPy .npz archive (np.savez), a regular file of at most 1 GiB, holding
  w_q      query projection, shape (d_x, d_k) for one head, or
           (heads, d_x, d_k);
  w_k      key projection, the same shape as w_q;
  sigma_x  optional scalar: the standard deviation of the input entries
           (default 1, or --sigma-x). q = x @ w_q[h], k = x @ w_k[h] for an
           input row x.
The arrays' sizes declared inside the archive are checked before they are
read: at most 1 GiB as float64."""


@dataclass(frozen=True)
class HeadBeta:
    """β for one head by each method.

    Attributes
    ----------
    head : int
    dx, dk : int
    sigma_wq, sigma_wk : float
        Measured σ_W of each matrix: the root mean square of its entries (``weight_sigma``).
    var_paper, var_exact : float
        Predicted Var(q·k): σ-based, and σ_X⁴ ‖W_q W_kᵀ‖_F².
    beta_paper, beta_exact : float
        The β giving unit-variance logits under each prediction.
    beta_default : float
        1/√d_k.
    """

    head: int
    dx: int
    dk: int
    sigma_wq: float
    sigma_wk: float
    var_paper: float
    var_exact: float
    beta_paper: float
    beta_exact: float
    beta_default: float

    @property
    def exact_over_paper(self) -> float:
        """var_exact / var_paper: 1 when the σ-based formula is right for these weights, and
        never above d_k (equal to d_k for W_q, W_k of rank one with a common row space)."""
        return self.var_exact / self.var_paper if self.var_paper > 0 else math.nan


def _as_heads(w: np.ndarray, name: str) -> np.ndarray:
    w = np.asarray(w)
    if w.ndim == 2:
        w = w[None]
    if w.ndim != 3 or min(w.shape) < 1:
        raise VarcheckError(
            f"{name} must have shape (d_x, d_k) or (heads, d_x, d_k), got {tuple(np.shape(w))}"
        )
    if not np.issubdtype(w.dtype, np.number) or np.iscomplexobj(w):
        raise VarcheckError(f"{name} must hold real numbers, got dtype {w.dtype}")
    w = np.asarray(w, dtype=float)  # no copy of float64 weights: they may be a GiB
    if not np.all(np.isfinite(w)):
        raise VarcheckError(f"{name} contains NaN or infinite entries")
    return w


def head_betas(w_q: np.ndarray, w_k: np.ndarray, sigma_x: float = 1.0) -> tuple[HeadBeta, ...]:
    """Per-head β from the paper's σ-based formula and from the weights themselves.

    Parameters
    ----------
    w_q, w_k : ndarray, shape (d_x, d_k) or (heads, d_x, d_k)
    sigma_x : float
        Standard deviation of the input entries.

    Returns
    -------
    tuple of HeadBeta

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> w = rng.standard_normal((2, 64, 16)) / 8.0          # lecun: σ_W² = 1/d_x
    >>> [round(h.beta_paper * 4, 2) for h in head_betas(w, w[::-1])]   # ≈ 1/√d_k = 1/4
    [1.0, 1.0]
    """
    sigma_x = valid_positive("sigma_x", sigma_x)
    wq, wk = _as_heads(w_q, "w_q"), _as_heads(w_k, "w_k")
    if wq.shape != wk.shape:
        raise VarcheckError(f"w_q and w_k must have one shape, got {wq.shape} and {wk.shape}")
    heads, dx, dk = wq.shape
    what = f"weights of shape {wq.shape}"
    if heads > MAX_HEADS:
        raise VarcheckError(f"{what}: {heads:,} heads; accepted: at most {MAX_HEADS:,}")
    # the exact variance takes two d_k × d_k Gram matrices per head
    check_memory(what, 3 * 8.0 * dk * dk, "d_k up to about 9000")
    seconds = heads * (2.0 * dx * dk * dk * MAC_SECONDS + _HEAD_SECONDS)
    check_time(what, seconds, "fewer heads or a smaller d_k")
    out = []
    for h in range(heads):
        # entries near the float range overflow the squares; say so instead of printing inf
        with np.errstate(over="ignore", invalid="ignore"):
            try:
                pred = lv.head_prediction(wq[h], wk[h], sigma_x)
            except OverflowError:  # a Python float's power beyond float64
                pred = lv.HeadPrediction(math.nan, math.nan, math.inf, math.inf)
        vp, ve = pred.var_paper, pred.var_exact
        if not (math.isfinite(vp) and math.isfinite(ve)):
            big = max(float(np.max(np.abs(wq[h]))), float(np.max(np.abs(wk[h]))))
            raise VarcheckError(
                f"head {h}: the logit variance overflows float64 (largest |weight| {big:.3g}, "
                f"sigma_x {sigma_x:g}); rescale the weights or sigma_x"
            )
        if not (vp > 0 and ve > 0):
            raise VarcheckError(
                f"head {h}: the logit variance is 0 ("
                + (
                    "W_q W_kᵀ = 0, so every logit is 0"
                    if vp > 0
                    else f"all-zero weights, or sigma_x {sigma_x:g} too small for float64"
                )
                + "); no β gives unit-variance logits"
            )
        out.append(
            HeadBeta(
                head=h,
                dx=dx,
                dk=dk,
                **pred._asdict(),
                beta_paper=lv.beta_for(vp),
                beta_exact=lv.beta_for(ve),
                beta_default=1.0 / math.sqrt(dk),
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class ProjectionWeights:
    """Weights read by :func:`load_weights`: ``w_q``, ``w_k`` of shape (heads, d_x, d_k)."""

    w_q: np.ndarray
    w_k: np.ndarray
    sigma_x: float | None
    path: str


def _regular_file(name: str) -> int:
    """The size of ``name`` if it is a regular file ``beta`` may read; refuse anything else."""
    import os
    import stat

    try:
        info = os.stat(name)
    except FileNotFoundError:
        raise VarcheckError(f"weights file {shown(name)} does not exist") from None
    except PermissionError:
        raise VarcheckError(
            f"weights file {shown(name)} cannot be read (permission denied)"
        ) from None
    except (OSError, ValueError) as exc:
        raise VarcheckError(
            f"weights file {shown(name)} cannot be read ({type(exc).__name__})"
        ) from None
    if stat.S_ISDIR(info.st_mode):
        raise VarcheckError(f"weights file {shown(name)} is a directory, expected an .npz file")
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device or socket"
        raise VarcheckError(
            f"weights file {shown(name)} is {kind}, not a regular file; beta reads only "
            "regular .npz files (numpy.savez(path, w_q=..., w_k=...))"
        )
    if info.st_size > MAX_FILE_BYTES:
        raise VarcheckError(
            f"weights file {shown(name)} is {size_text(info.st_size)}, above the "
            f"{size_text(MAX_FILE_BYTES)} limit for a weights file"
        )
    return info.st_size


#: Most members an .npz for beta may hold (w_q, w_k, sigma_x, and a few others) and most bytes
#: of its zip directory: checked in the archive's end record before the directory is read (9
#: million empty members took all the memory while zipfile read their index)
MAX_MEMBERS = 64
_MAX_DIRECTORY = 1 << 20
#: Most heads a weights file may hold: each is one row of every output (a whole model's
#: layers stacked are a few thousand; two million took minutes and gigabytes to print)
MAX_HEADS = 4096
#: Python's time per head beyond the products (its predictions, its row of the table)
_HEAD_SECONDS = 2e-4


def _not_npz(name: str, why: str) -> VarcheckError:
    return VarcheckError(
        f"weights file {shown(name)} is not a readable .npz archive ({why}); write one with "
        "numpy.savez(path, w_q=..., w_k=...)"
    )


def _zip_directory(name: str) -> None:
    """Refuse an archive whose end record declares more members, or a larger directory, than
    a weights file needs: read from its last 64 kB, before zipfile reads the directory."""
    import struct

    from ..core.files import PinnedFile

    pinned = PinnedFile(name, "the weights file", MAX_FILE_BYTES)
    tail_at = max(0, pinned.size - (1 << 16) - 22)
    tail = pinned.read(tail_at, pinned.size - tail_at)
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or len(tail) - end < 22:
        raise _not_npz(name, "no zip end record")
    members, directory = struct.unpack_from("<HI", tail, end + 10)
    locator = end - 20
    if (members == 0xFFFF or directory == 0xFFFFFFFF) and tail[
        locator : locator + 4
    ] == b"PK\x06\x07":
        (record,) = struct.unpack_from("<Q", tail, locator + 8)
        if not 0 <= record <= pinned.size - 56:
            raise _not_npz(name, "its ZIP64 end record lies outside the file")
        members, directory = struct.unpack_from("<QQ", pinned.read(record + 32, 16))
    if members > MAX_MEMBERS or directory > _MAX_DIRECTORY:
        raise VarcheckError(
            f"weights file {shown(name)} declares {members:,} members ({size_text(directory)} of "
            f"zip directory); accepted: at most {MAX_MEMBERS} members (w_q, w_k, sigma_x)"
        )


def _declared_sizes(name: str) -> None:
    """Refuse an archive whose arrays would be too big once decompressed, before reading them.

    Reads only the zip directory (its size checked first, :func:`_zip_directory`), each
    member's declared size and its .npy header (shape and dtype): every member must hold
    exactly the bytes its header declares, unencrypted, stored or deflated as numpy writes it.
    """
    _zip_directory(name)
    try:
        with zipfile.ZipFile(name) as archive:
            members = {i.filename: i for i in archive.infolist()}
            _refuse_above(name, float(sum(i.file_size for i in members.values())))
            headers = {key: _member_header(name, archive, info) for key, info in members.items()}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:
        if isinstance(exc, VarcheckError):
            raise
        raise _not_npz(name, type(exc).__name__) from None
    elements = sum(math.prod(headers[k][0]) for k in ("w_q.npy", "w_k.npy") if k in headers)
    _refuse_above(name, 8.0 * elements)  # the arrays are used as float64
    heads = headers["w_q.npy"][0] if "w_q.npy" in headers else ()
    if len(heads) == 3 and heads[0] > MAX_HEADS:
        raise VarcheckError(
            f"weights file {shown(name)}: w_q declares {heads[0]:,} heads; accepted: at most "
            f"{MAX_HEADS:,} (one row of output each)"
        )
    for key, (shape, dtype, held) in headers.items():
        declared = math.prod(shape) * dtype.itemsize
        if declared != held:
            raise VarcheckError(
                f"weights file {shown(name)}: {shown(key.removesuffix('.npy'))} declares shape "
                f"{cut(str(shape), 40)} of {dtype} ({size_text(declared)}) but holds "
                f"{size_text(held)}"
            )


def _member_header(
    name: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo
) -> tuple[tuple[int, ...], np.dtype, int]:
    """A member's declared shape and dtype and the bytes it holds after its header; refused
    when encrypted, compressed otherwise than numpy does, or holding Python objects."""
    key = shown(info.filename.removesuffix(".npy"))
    if info.flag_bits & 0x1:
        raise VarcheckError(f"weights file {shown(name)}: {key} is encrypted; save it with numpy")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise VarcheckError(
            f"weights file {shown(name)}: {key} is compressed with method "
            f"{info.compress_type}; accepted: stored or deflated (numpy.savez, savez_compressed)"
        )
    with archive.open(info) as f:
        shape, dtype = _npy_header(f)
        header = f.tell()
    if dtype.hasobject:
        raise VarcheckError(
            f"weights file {shown(name)}: {key} holds Python objects, which need pickle; save "
            "plain numbers (numpy.savez)"
        )
    return shape, dtype, info.file_size - header


def _refuse_above(name: str, need: float) -> None:
    if need > MAX_FILE_BYTES:
        raise VarcheckError(
            f"weights file {shown(name)} declares arrays of {size_text(need)} once "
            f"decompressed (as float64), above the {size_text(MAX_FILE_BYTES)} limit"
        )


def _npy_header(f: IO[bytes]) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) from the header of an .npy stream, without reading its data."""
    from numpy.lib import format as npy

    version = npy.read_magic(f)
    read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
    shape, _, dtype = read(f, max_header_size=10_000)
    return tuple(int(n) for n in shape), dtype


def load_weights(path: str | Path) -> ProjectionWeights:
    """Read ``w_q``, ``w_k`` (and optional ``sigma_x``) from an .npz file; see WEIGHTS_FORMAT.

    Only a regular file of at most :data:`~varcheck.paper.limits.MAX_FILE_BYTES` is read, and
    only once the sizes its arrays declare (checked before reading them) fit that limit too.

    Raises
    ------
    VarcheckError
        Unreadable, non-regular, too large or non-.npz file, a missing array, bad shapes or
        non-finite values.
    """
    import zlib

    from ..core.files import PinnedFile

    name = str(path)
    size = _regular_file(name)
    if PinnedFile(name, "the weights file").read(0, min(size, 6)) == b"\x93NUMPY":
        raise VarcheckError(
            f"weights file {shown(name)} holds a single array, expected an .npz archive with "
            "arrays w_q and w_k (numpy.savez(path, w_q=..., w_k=...))"
        )
    _declared_sizes(name)
    unreadable = (OSError, ValueError, EOFError, RuntimeError, zipfile.BadZipFile, zlib.error)
    try:
        archive = np.load(name, allow_pickle=False)
    except unreadable as exc:
        raise VarcheckError(
            f"weights file {shown(name)} is not a readable .npz archive ({type(exc).__name__}); "
            "write one with numpy.savez(path, w_q=..., w_k=...)"
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise VarcheckError(
            f"weights file {shown(name)} holds a single array, expected an .npz archive with "
            "arrays w_q and w_k (numpy.savez(path, w_q=..., w_k=...))"
        )
    with archive:
        present = sorted(archive.files)
        missing = [k for k in ("w_q", "w_k") if k not in present]
        if missing:
            listed = shown(", ".join(present), 60).strip("'") if present else "no arrays"
            raise VarcheckError(
                f"weights file {shown(name)} has no array {missing[0]!r}; it holds "
                f"{listed}; expected w_q and w_k "
                "(shape (d_x, d_k) or (heads, d_x, d_k)) and optionally sigma_x"
            )
        try:
            w_q = _as_heads(archive["w_q"], "w_q")
            w_k = _as_heads(archive["w_k"], "w_k")
            raw_sigma = archive["sigma_x"] if "sigma_x" in present else None
        except unreadable as exc:
            if isinstance(exc, VarcheckError):
                raise
            raise VarcheckError(
                f"weights file {shown(name)}: an array cannot be read ({shown(str(exc), 60)})"
            ) from None
    if w_q.shape != w_k.shape:
        raise VarcheckError(
            f"weights file {shown(name)}: w_q and w_k must have one shape, got {w_q.shape} and "
            f"{w_k.shape}"
        )
    sigma_x = None
    if raw_sigma is not None:
        value = (
            float(raw_sigma.reshape(-1)[0])
            if raw_sigma.size == 1 and raw_sigma.dtype.kind in "fiu"
            else None
        )
        if value is None or not (math.isfinite(value) and value > 0):
            raise VarcheckError(
                f"weights file {shown(name)}: sigma_x must be one finite number > 0, got "
                + (
                    shown(raw_sigma.tolist())
                    if raw_sigma.size == 1
                    else f"an array of shape {raw_sigma.shape}"
                )
            )
        sigma_x = value
    return ProjectionWeights(w_q=w_q, w_k=w_k, sigma_x=sigma_x, path=name)


@dataclass(frozen=True, repr=False)
class BetaReport(Untested, Displayable):
    """What ``varcheck beta`` prints: per-head β for one weights file.

    Attributes
    ----------
    heads : tuple of HeadBeta
    path : str
    sigma_x : float
    sigma_x_source : str
        ``option``, ``file`` or ``default``.
    version : str
    sigma_w_kind : str
        Which σ of the weights the σ-based value takes (``rms``).
    """

    heads: tuple[HeadBeta, ...]
    path: str
    sigma_x: float
    sigma_x_source: str
    version: str
    sigma_w_kind: str = lv.SIGMA_W_KIND


def beta_report(
    path: str | Path, *, sigma_x: float | None = None, seed: int | None = None
) -> BetaReport:
    """Read a weights file and compute per-head β (``sigma_x`` overrides the file's).

    Nothing is drawn: the result depends on the file and ``sigma_x`` only. ``seed`` is
    accepted for scripts that pass one to every command, and ignored.
    """
    from .._version import __version__

    weights = load_weights(path)
    if sigma_x is not None:
        value, source = sigma_x, "option"
    elif weights.sigma_x is not None:
        value, source = weights.sigma_x, "file"
    else:
        value, source = 1.0, "default"
    heads = head_betas(weights.w_q, weights.w_k, value)
    return BetaReport(
        heads=heads,
        path=weights.path,
        sigma_x=float(value),
        sigma_x_source=source,
        version=__version__,
    )
