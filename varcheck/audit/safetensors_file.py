"""Reading a safetensors checkpoint safely: its header checked whole before any tensor is read.

A safetensors file is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range, and the data. The header is read with the limits below (its size,
the number of tensors, the JSON's nesting and numbers), every tensor's range is checked against
its shape and the file, and the memory the float32 copies will take is known before the first
byte of data is read. Tensors are then read one at a time with ``pread``
(:class:`varcheck.core.files.PinnedFile`), not through a memory map, so a file truncated or
rewritten meanwhile is one line instead of SIGBUS; NaN and infinite weights are refused, as
``beta`` refuses them.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..core.files import MIB, PinnedFile
from ..errors import VarcheckError

__all__ = [
    "MAX_HEADER_BYTES",
    "MAX_TENSORS",
    "DTYPES",
    "TensorEntry",
    "read_header",
    "read_tensors",
]

#: Largest JSON header read (a BERT-large header is about 40 kB).
MAX_HEADER_BYTES = 16 * MIB
#: Most tensors a checkpoint may declare (BERT-large has about 400).
MAX_TENSORS = 1 << 16
#: dtypes read, as numpy types (BF16 is read as its 16 bits and widened to float32)
DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}
_FLOATS = ("F64", "F32", "F16", "BF16")
_MAX_DIMS = 8


class TensorEntry(NamedTuple):
    """One tensor of the header: dtype, shape, and its bytes relative to the data."""

    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int

    @property
    def float32_bytes(self) -> int:
        """Bytes once read: float32 for a float tensor, as stored otherwise."""
        size = int(math.prod(self.shape))
        return 4 * size if self.dtype in _FLOATS else size * np.dtype(DTYPES[self.dtype]).itemsize


def _header_json(source: PinnedFile, name: str) -> tuple[dict[str, Any], int]:
    """The header's JSON object and where the data starts."""
    if source.size < 8:
        raise VarcheckError(f"{name}: not a safetensors file ({source.size} bytes)")
    (length,) = struct.unpack("<Q", source.read(0, 8))
    if length > MAX_HEADER_BYTES or 8 + length > source.size:
        raise VarcheckError(
            f"{name}: the header declares {length:,} bytes in a file of {source.size:,}; "
            f"accepted: at most {MAX_HEADER_BYTES:,} inside the file"
        )
    try:
        header = json.loads(source.read(8, length).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:  # ValueError: bad JSON, 4300+ digits
        raise VarcheckError(f"{name}: the header is not JSON ({str(exc)[:60]})") from None
    except RecursionError:
        raise VarcheckError(f"{name}: the header is not JSON (nested too deeply)") from None
    if not isinstance(header, dict):
        raise VarcheckError(f"{name}: the header is not a JSON object")
    return header, 8 + length


def _entry(name: str, key: str, raw: Any, data_size: int) -> TensorEntry:
    """One tensor's header entry, checked: a known dtype, a shape, a byte range that matches it
    and lies inside the data."""
    where = f"{name}: tensor {key[:60]!r}"
    if not isinstance(raw, dict):
        raise VarcheckError(f"{where} is not described by a JSON object")
    dtype, shape, offsets = raw.get("dtype"), raw.get("shape"), raw.get("data_offsets")
    if dtype not in DTYPES:
        raise VarcheckError(f"{where} has dtype {str(dtype)[:20]!r}; accepted: {', '.join(DTYPES)}")
    if (
        not isinstance(shape, list)
        or not isinstance(offsets, list)
        or not all(_whole(v) for v in [*shape, *offsets])
        or len(shape) > _MAX_DIMS
        or len(offsets) != 2
    ):
        raise VarcheckError(f"{where}: shape and data_offsets must be lists of whole numbers")
    start, end = offsets
    need = math.prod(shape) * np.dtype(DTYPES[dtype]).itemsize
    if not 0 <= start <= end <= data_size or end - start != need:
        raise VarcheckError(
            f"{where}: bytes {start}..{end} do not hold shape {tuple(shape)} of {dtype} inside "
            f"the {data_size:,} bytes of data"
        )
    return TensorEntry(dtype, tuple(shape), start, end)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_header(path: str | os.PathLike[str]) -> tuple[PinnedFile, dict[str, TensorEntry], int]:
    """The file, its tensors' entries by name, and where the data starts; no data is read.

    Raises
    ------
    VarcheckError
        Not a regular file, a header too large or not JSON, more than :data:`MAX_TENSORS`
        tensors, an unknown dtype, a byte range that does not match its shape or lies outside
        the file.
    """
    name = str(path)
    source = PinnedFile(path, "the weights file")
    header, base = _header_json(source, name)
    header.pop("__metadata__", None)
    if len(header) > MAX_TENSORS:
        raise VarcheckError(
            f"{name}: the header lists {len(header):,} tensors; accepted: at most {MAX_TENSORS:,}"
        )
    data_size = source.size - base
    entries = {key: _entry(name, key, raw, data_size) for key, raw in header.items()}
    return source, entries, base


def read_tensors(
    source: PinnedFile, entries: dict[str, TensorEntry], base: int, keep: Callable[[str], bool]
) -> dict[str, np.ndarray]:
    """The tensors ``keep`` accepts, float ones as float32; NaN or infinite weights refused."""
    out = {}
    with source.reading() as read:
        for key, entry in entries.items():
            if not keep(key):
                continue
            data = read(base + entry.start, entry.end - entry.start)
            raw = np.frombuffer(data, np.dtype(DTYPES[entry.dtype]))
            if entry.dtype == "BF16":  # the top half of a float32
                arr = (raw.astype(np.uint32) << 16).view(np.float32)
            elif entry.dtype in _FLOATS:
                arr = raw.astype(np.float32)
            else:
                arr = raw.copy()
            arr = arr.reshape(entry.shape)
            if entry.dtype in _FLOATS and not np.isfinite(arr).all():
                raise VarcheckError(
                    f"{source.path}: tensor {key[:60]!r} contains NaN or infinite entries; "
                    "accepted: finite weights"
                )
            out[key] = arr
    return out
