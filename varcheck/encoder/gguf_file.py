"""Reading a GGUF file (llama.cpp's format) safely: validate the layout, then hand it to ``gguf``.

A GGUF file is a header (magic ``GGUF``, version, tensor and key/value counts), key/value
metadata, one record per tensor (name, shape, type, offset) and the aligned tensor data. The
``gguf`` package's reader trusts the counts and lengths it reads, so a damaged or hostile file
could make it loop for ever, read past the end or ask for absurd arrays. Here the whole layout is
walked first with bounded reads of a read-only memory map: every count and length is checked
against the bytes that remain, every tensor's data against the end of the file, and only then is
``gguf.GGUFReader`` opened (it maps the file too, so nothing large is read into memory).
Weights are dequantised one tensor (or a few rows of one) at a time with
``gguf.quants.dequantize``.

The optional extra ``varcheck[models]`` (gguf) is imported only when a file is opened.
"""

from __future__ import annotations

import importlib
import importlib.util
import mmap
import os
import stat
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import VarcheckError

__all__ = [
    "GGUFFile",
    "TensorInfo",
    "SUPPORTED_ARCHITECTURES",
    "open_gguf",
    "require_module",
]

#: Architectures (``general.architecture``) whose forward pass varcheck implements.
SUPPORTED_ARCHITECTURES = ("llama",)
_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_MAX_DIMS = 4
_MAX_DEPTH = 2  # arrays of arrays at most
_MODELS_HINT = "pip install safetensors tokenizers gguf (varcheck's models extra)"
# value type codes of the GGUF specification: fixed sizes, 8 = string, 9 = array
_SCALAR = dict(zip((0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12), "BbHhIif?Qqd", strict=True))
_STRING, _ARRAY = 8, 9
_METADATA_END = "GGUF.metadata_end"
_DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's record: name, shape in numpy order (rows first), type, bytes, where its data
    starts in the file."""

    name: str
    shape: tuple[int, ...]
    type_name: str
    nbytes: int
    offset: int = 0


def require_module(module: str, what: str = "reading GGUF files") -> Any:
    """Import an optional dependency, or a one-line error saying how to install it."""
    if importlib.util.find_spec(module) is None:
        raise VarcheckError(
            f"{what} needs the {module} package, which is not installed; install it with "
            f"{_MODELS_HINT}"
        )
    return importlib.import_module(module)


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Walker:
    """Bounded little-endian reads from a buffer; every overrun is a one-line error."""

    def __init__(self, buf: Any, size: int, name: str) -> None:
        self.buf, self.size, self.name, self.pos = buf, size, name, 0

    def fail(self, what: str) -> VarcheckError:
        return VarcheckError(f"{self.name}: {what}")

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(
                f"truncated or corrupt GGUF file: {what} needs {n} bytes at offset {self.pos}, "
                f"the file has {self.size}"
            )

    def scalar(self, code: str, what: str) -> Any:
        width = struct.calcsize("<" + code)
        self.need(width, what)
        (value,) = struct.unpack_from("<" + code, self.buf, self.pos)
        self.pos += width
        return value

    def string(self, what: str) -> str:
        length = self.scalar("Q", what)
        self.need(length, f"{what} ({length} bytes)")
        raw = bytes(self.buf[self.pos : self.pos + length])
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8 text") from None

    def value(self, vtype: int, what: str, depth: int = 0) -> Any:
        """Read one metadata value, checking every length against what remains."""
        if vtype in _SCALAR:
            return self.scalar(_SCALAR[vtype], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype != _ARRAY or depth >= _MAX_DEPTH:
            raise self.fail(f"{what}: unknown or too deeply nested value type {vtype}")
        item = self.scalar("I", what)
        count = self.scalar("Q", what)
        if item not in _SCALAR and item not in (_STRING, _ARRAY):
            raise self.fail(f"{what}: unknown array item type {item}")
        width = struct.calcsize("<" + _SCALAR[item]) if item in _SCALAR else 8
        self.need(count * width, f"{what} (an array of {count} items)")
        if item in _SCALAR:
            code = "<" + _SCALAR[item]
            values = np.frombuffer(self.buf, np.dtype(code), count, self.pos).tolist()
            self.pos += count * width
            return values
        return [self.value(item, what, depth + 1) for _ in range(count)]


def _quant_sizes() -> dict[int, tuple[str, int, int]]:
    gguf = require_module("gguf")
    return {
        int(kind): (kind.name, block, size) for kind, (block, size) in gguf.GGML_QUANT_SIZES.items()
    }


def _walk_metadata(w: _Walker) -> tuple[int, dict[str, Any]]:
    """Header and key/value pairs: the tensor count and the metadata as Python values."""
    w.need(4, "the magic number")
    magic = bytes(w.buf[0:4])
    if magic != _MAGIC:
        raise w.fail(f"not a GGUF file (starts with {magic!r}, expected {_MAGIC!r})")
    w.pos = 4
    version = w.scalar("I", "the version")
    if version not in _VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        kind = "big-endian " if swapped in _VERSIONS else ""
        raise w.fail(
            f"{kind}GGUF version {version if not kind else swapped} is not supported; accepted: "
            "little-endian versions " + ", ".join(map(str, _VERSIONS))
        )
    n_tensors = w.scalar("Q", "the tensor count")
    n_kv = w.scalar("Q", "the metadata count")
    # each pair needs at least a key length, a type and a one-byte value: bound before looping
    w.need(n_kv * 13, f"{n_kv} metadata entries")
    w.need(n_tensors * 32, f"{n_tensors} tensor records")
    metadata: dict[str, Any] = {}
    for index in range(n_kv):
        key = w.string(f"metadata key {index}")
        vtype = w.scalar("I", f"metadata {_cut(key)!r}")
        metadata[key] = w.value(vtype, f"metadata {_cut(key)!r}")
    return n_tensors, metadata


def _walk_tensors(w: _Walker, count: int, alignment: int) -> list[TensorInfo]:
    """Tensor records, each checked for shape, type and data inside the file."""
    sizes = _quant_sizes()
    pending = []
    for index in range(count):
        name = w.string(f"tensor record {index}")
        label = f"tensor {_cut(name)!r}"
        n_dims = w.scalar("I", label)
        if not 1 <= n_dims <= _MAX_DIMS:
            raise w.fail(f"{label} has {n_dims} dimensions; accepted: 1 to {_MAX_DIMS}")
        dims = [w.scalar("Q", label) for _ in range(n_dims)]
        kind = w.scalar("I", label)
        offset = w.scalar("Q", label)
        if kind not in sizes:
            raise w.fail(f"{label} has unknown type {kind}")
        type_name, block, type_size = sizes[kind]
        elements = 1
        for dim in dims:
            elements *= dim
        if min(dims) < 1 or elements > w.size * block or dims[0] % block:
            raise w.fail(
                f"{label} has an impossible shape {tuple(dims)} for type {type_name} in a file "
                f"of {w.size} bytes"
            )
        nbytes = elements // block * type_size
        pending.append((TensorInfo(name, tuple(reversed(dims)), type_name, nbytes), offset))
    start = -(-w.pos // alignment) * alignment
    out = []
    for info, offset in pending:
        end = start + offset + info.nbytes
        if offset % alignment or end > w.size:
            raise w.fail(
                f"truncated or corrupt GGUF file: tensor {_cut(info.name)!r} ends at byte {end}, "
                f"the file has {w.size}"
            )
        out.append(TensorInfo(info.name, info.shape, info.type_name, info.nbytes, start + offset))
    return out


def _regular_file(path: Path) -> int:
    """Size of ``path``; refuses what is not a regular file (a folder, a device, a pipe)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise VarcheckError(f"{str(path)!r}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise VarcheckError(f"{_cut(str(path))!r} is not a regular file; give a .gguf file")
    return st.st_size


def validate_layout(path: Path) -> tuple[dict[str, Any], list[TensorInfo]]:
    """Walk a GGUF file's header, metadata and tensor records without trusting any size.

    Returns
    -------
    metadata : dict of str to object
        Every key/value pair as Python values; ``general.architecture`` is one of
        :data:`SUPPORTED_ARCHITECTURES`.
    tensors : list of TensorInfo
    """
    size = _regular_file(path)
    name = str(path)
    if size < 24:
        raise VarcheckError(f"{name}: truncated GGUF file ({size} bytes, the header alone is 24)")
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        w = _Walker(buf, size, name)
        n_tensors, metadata = _walk_metadata(w)
        arch = metadata.get("general.architecture")
        if arch not in SUPPORTED_ARCHITECTURES:
            shown = "missing" if arch is None else repr(_cut(str(arch)))
            raise w.fail(
                f"architecture {shown} is not supported; accepted: "
                + ", ".join(SUPPORTED_ARCHITECTURES)
            )
        alignment = metadata.get("general.alignment", 32)
        if not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
            raise w.fail(f"general.alignment {alignment} is not a power of two")
        metadata_end = w.pos
        tensors = _walk_tensors(w, n_tensors, alignment)
    # where the tensor records start, for the reader (not a key of the file: no dot-free keys)
    metadata[_METADATA_END] = metadata_end
    return metadata, tensors


@dataclass(frozen=True)
class GGUFFile:
    """An opened, validated GGUF file.

    Attributes
    ----------
    path : Path
    architecture : str
    metadata : dict of str to object
        Every key/value pair, as Python values (arrays as lists), read by the validating walk.
    tensors : dict of str to TensorInfo
    records : dict of str to gguf.ReaderTensor
        The ``gguf`` package's tensors, views of a read-only memory map of the file.
    """

    path: Path
    architecture: str
    metadata: dict[str, Any]
    tensors: dict[str, TensorInfo]
    records: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        """The metadata value ``key``, or ``default``."""
        return self.metadata.get(key, default)

    def tensor(self, name: str, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """The tensor ``name`` dequantised to float32, rows first (PyTorch's ``(out, in)``).

        ``rows`` picks rows of a matrix before dequantising (an embedding lookup reads only
        those rows).
        """
        if name not in self.tensors:
            raise VarcheckError(f"{self.path}: no tensor {name!r} (not a complete model file)")
        from gguf.quants import dequantize

        record = self.records[name]
        data = record.data if rows is None else record.data[np.asarray(rows)]
        return np.ascontiguousarray(dequantize(data, record.tensor_type), dtype=np.float32)


def _open_reader(gguf: Any, file: Path, metadata: dict[str, Any], infos: list[TensorInfo]) -> Any:
    """``gguf.GGUFReader`` over the file, told where the metadata ends when that is safe.

    The reader re-parses every metadata value in Python (about two seconds for a vocabulary of
    50 000 tokens) although the validating walk has read them all; with the default alignment it
    is handed the offset of the tensor records instead, and its tensors are then checked against
    the walk's (names, sizes, data offsets). Any disagreement falls back to the full reader.
    """
    end = metadata.pop(_METADATA_END)
    if metadata.get("general.alignment", _DEFAULT_ALIGNMENT) == _DEFAULT_ALIGNMENT:

        class _TensorsOnly(gguf.GGUFReader):  # type: ignore[misc,name-defined]
            def _build_fields(self, offs: int, count: int) -> int:
                return end

        try:
            reader = _TensorsOnly(str(file), "r")
            got = [(t.name, int(t.n_bytes), int(t.data_offset)) for t in reader.tensors]
            if got == [(t.name, t.nbytes, t.offset) for t in infos]:
                return reader
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            pass
    return gguf.GGUFReader(str(file), "r")


def open_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Validate a GGUF file's layout, then read its metadata with ``gguf.GGUFReader``.

    Raises
    ------
    VarcheckError
        When ``gguf`` is missing, the path is not a regular file, the file is not GGUF, is
        truncated or inconsistent, or holds an architecture other than
        :data:`SUPPORTED_ARCHITECTURES`. All checks run before any large allocation.
    """
    file = Path(path).expanduser()
    gguf = require_module("gguf")
    metadata, infos = validate_layout(file)
    try:
        reader = _open_reader(gguf, file, metadata, infos)
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise VarcheckError(f"{file}: cannot read it as GGUF ({_cut(str(exc))})") from None
    records = {t.name: t for t in reader.tensors}
    arch = metadata["general.architecture"]
    return GGUFFile(file, arch, metadata, {t.name: t for t in infos}, records)
