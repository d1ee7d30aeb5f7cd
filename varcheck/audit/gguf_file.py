"""Reading a GGUF file (llama.cpp's format) safely: every count and size checked before use.

A GGUF file is a header (magic ``GGUF``, version, tensor and key/value counts), key/value
metadata, one record per tensor (name, shape, type, offset) and the aligned tensor data. The
``gguf`` package's reader trusts the counts and lengths it reads, parses every metadata value in
Python (a file of two million empty strings took 46 s and 3 GB) and maps the file into memory (a
file truncated while it is read kills the process with SIGBUS). Here the whole layout is walked
by varcheck, reading the file with ``pread`` (:class:`varcheck.core.files.PinnedFile`) a window
at a time: every count is checked against a stated limit and every length against the bytes
that remain before anything grows with it; numeric arrays varcheck has no use for (a 100-million
entry array) are skipped, not read; and the tensors are read the same way, one (or a few rows of
one) at a time, and dequantised with ``gguf.quants.dequantize``. The ``gguf`` package supplies
only the block sizes of the quantised types and the dequantisation.

The optional extra ``varcheck[models]`` (gguf) is imported only when a file is opened.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.files import PinnedFile
from ..errors import VarcheckError

__all__ = [
    "GGUFFile",
    "TensorInfo",
    "Omitted",
    "SUPPORTED_ARCHITECTURES",
    "MAX_TENSORS",
    "MAX_METADATA",
    "MAX_ARRAY_ITEMS",
    "MAX_ITEMS",
    "MAX_STRING_BYTES",
    "open_gguf",
    "require_module",
]

#: Architectures (``general.architecture``) whose forward pass varcheck implements.
SUPPORTED_ARCHITECTURES = ("llama",)
#: Most tensor records and metadata entries a file may declare (a 405B-parameter Llama has about
#: 1,100 tensors and 40 metadata keys).
MAX_TENSORS = 1 << 16
MAX_METADATA = 1 << 16
#: Most items of one metadata array read as Python values (the vocabulary, the merges: 262,144
#: tokens at most in released models), and of all of them together; numeric arrays longer than
#: this are skipped (:class:`Omitted`), string arrays refused.
MAX_ARRAY_ITEMS = 1 << 20
MAX_ITEMS = 1 << 21
#: Longest metadata string (a chat template is tens of kilobytes).
MAX_STRING_BYTES = 1 << 20
_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
_MAX_DIMS = 4
_MAX_DEPTH = 2  # arrays of arrays at most
_MODELS_HINT = "pip install safetensors tokenizers gguf (varcheck's models extra)"
# value type codes of the GGUF specification: fixed sizes, 8 = string, 9 = array
_SCALAR = dict(zip((0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12), "BbHhIif?Qqd", strict=True))
_STRING, _ARRAY = 8, 9
#: bytes read at a time while walking the metadata
_WINDOW = 1 << 20
#: ggml types read as plain numbers (the rest go through gguf.quants.dequantize)
_PLAIN = {0: "<f4", 1: "<f2", 28: "<f8"}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's record: name, shape in numpy order (rows first), type, bytes, where its data
    starts in the file, and the ggml type code."""

    name: str
    shape: tuple[int, ...]
    type_name: str
    nbytes: int
    offset: int = 0
    type_code: int = 0

    def _replace_offset(self, offset: int) -> TensorInfo:
        return TensorInfo(
            self.name, self.shape, self.type_name, self.nbytes, offset, self.type_code
        )

    @property
    def rows(self) -> int:
        """Rows of the tensor seen as a matrix (every axis but the last)."""
        rows = 1
        for dim in self.shape[:-1]:
            rows *= dim
        return rows


@dataclass(frozen=True)
class Omitted:
    """A numeric metadata array longer than :data:`MAX_ARRAY_ITEMS`, skipped unread."""

    count: int
    item_type: int


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
    """Bounded little-endian reads from a file, a window at a time; every overrun, and every
    count above its limit, is a one-line error."""

    def __init__(self, read: Callable[[int, int], bytes], size: int, name: str) -> None:
        self.read, self.size, self.name, self.pos = read, size, name, 0
        self.window, self.window_at = b"", 0
        self.items = 0  # metadata values read as Python objects, against MAX_ITEMS

    def fail(self, what: str) -> VarcheckError:
        return VarcheckError(f"{self.name}: {what}")

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(
                f"truncated or corrupt GGUF file: {what} needs {n} bytes at offset {self.pos}, "
                f"the file has {self.size}"
            )

    def take(self, n: int, what: str) -> bytes:
        """The next ``n`` bytes."""
        self.need(n, what)
        start, end = self.pos - self.window_at, self.pos + n - self.window_at
        if start < 0 or end > len(self.window):
            if n > _WINDOW:
                self.pos += n
                return self.read(self.pos - n, n)
            self.window_at = self.pos
            self.window = self.read(self.pos, min(_WINDOW, self.size - self.pos))
            start, end = 0, n
        self.pos += n
        return self.window[start:end]

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.pos += n

    def scalar(self, code: str, what: str) -> Any:
        width = struct.calcsize("<" + code)
        (value,) = struct.unpack("<" + code, self.take(width, what))
        return value

    def string(self, what: str) -> str:
        length = self.scalar("Q", what)
        if length > MAX_STRING_BYTES:
            self.need(length, f"{what} ({length} bytes)")
            raise self.fail(
                f"{what} is a string of {length:,} bytes; accepted: at most {MAX_STRING_BYTES:,}"
            )
        raw = self.take(length, f"{what} ({length} bytes)")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8 text") from None

    def count_items(self, count: int, what: str) -> None:
        """Count ``count`` more Python values: refused beyond :data:`MAX_ARRAY_ITEMS` in one
        array or :data:`MAX_ITEMS` in all."""
        self.items += count
        if count > MAX_ARRAY_ITEMS or self.items > MAX_ITEMS:
            raise self.fail(
                f"{what} is an array of {count:,} items ({self.items:,} in the metadata so far); "
                f"accepted: at most {MAX_ARRAY_ITEMS:,} in one array and {MAX_ITEMS:,} in all"
            )

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
            if count > MAX_ARRAY_ITEMS:  # nothing varcheck reads is this long: not read
                self.skip(count * width, what)
                return Omitted(count, item)
            self.count_items(count, what)
            data = self.take(count * width, what)
            return np.frombuffer(data, np.dtype("<" + _SCALAR[item]), count)
        self.count_items(count, what)
        return [self.value(item, what, depth + 1) for _ in range(count)]


def _quant_sizes() -> dict[int, tuple[str, int, int]]:
    gguf = require_module("gguf")
    return {
        int(kind): (kind.name, block, size) for kind, (block, size) in gguf.GGML_QUANT_SIZES.items()
    }


def _walk_metadata(w: _Walker) -> tuple[int, dict[str, Any]]:
    """Header and key/value pairs: the tensor count and the metadata as Python values (numeric
    arrays as read-only numpy arrays)."""
    magic = w.take(4, "the magic number")
    if magic != _MAGIC:
        raise w.fail(f"not a GGUF file (starts with {magic!r}, expected {_MAGIC!r})")
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
    limits = ((n_kv, "metadata entries", MAX_METADATA), (n_tensors, "tensor records", MAX_TENSORS))
    for count, what, limit in limits:
        if count > limit:
            raise w.fail(f"the header declares {count:,} {what}; accepted: at most {limit:,}")
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
        shape = tuple(reversed(dims))
        pending.append((TensorInfo(name, shape, type_name, nbytes, 0, kind), offset))
    start = -(-w.pos // alignment) * alignment
    out = []
    for info, offset in pending:
        end = start + offset + info.nbytes
        if offset % alignment or end > w.size:
            raise w.fail(
                f"truncated or corrupt GGUF file: tensor {_cut(info.name)!r} ends at byte {end}, "
                f"the file has {w.size}"
            )
        out.append(replace(info, offset=start + offset))
    if len({t.name for t in out}) < len(out):
        raise w.fail("two tensors have the same name")
    return out


def validate_layout(path: Path) -> tuple[dict[str, Any], list[TensorInfo], PinnedFile]:
    """Walk a GGUF file's header, metadata and tensor records without trusting any size.

    Returns
    -------
    metadata : dict of str to object
        Every key/value pair as Python values; ``general.architecture`` is one of
        :data:`SUPPORTED_ARCHITECTURES`.
    tensors : list of TensorInfo
    source : PinnedFile
        The file, for reading the tensors later (a change meanwhile is refused).
    """
    source = PinnedFile(path, "the GGUF file")
    name = str(path)
    if source.size < 24:
        raise VarcheckError(
            f"{name}: truncated GGUF file ({source.size} bytes, the header alone is 24)"
        )
    with source.reading() as read:
        w = _Walker(read, source.size, name)
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
            raise w.fail(f"general.alignment {_cut(str(alignment))} is not a power of two")
        tensors = _walk_tensors(w, n_tensors, alignment)
    return metadata, tensors, source


@functools.cache
def dequantizable(type_code: int) -> bool:
    """Whether tensors of this ggml type can be read (``gguf.quants.dequantize`` knows it)."""
    if type_code in _PLAIN:
        return True
    gguf = require_module("gguf")
    from gguf.quants import dequantize

    kind = gguf.GGMLQuantizationType(type_code)
    block, size = gguf.GGML_QUANT_SIZES[kind]
    try:
        dequantize(np.zeros((1, size), np.uint8), kind)
    except NotImplementedError:
        return False
    return True


@dataclass(frozen=True)
class GGUFFile:
    """An opened, validated GGUF file.

    Attributes
    ----------
    path : Path
    architecture : str
    metadata : dict of str to object
        Every key/value pair read by the validating walk: numbers, strings, lists (of strings),
        read-only numpy arrays (of numbers), :class:`Omitted` (a numeric array too long to read).
    tensors : dict of str to TensorInfo
    source : PinnedFile
        Where the tensors are read from (with ``pread``; a change of the file is refused).
    """

    path: Path
    architecture: str
    metadata: dict[str, Any]
    tensors: dict[str, TensorInfo]
    source: PinnedFile

    def get(self, key: str, default: Any = None) -> Any:
        """The metadata value ``key``, or ``default``."""
        return self.metadata.get(key, default)

    def info(self, name: str) -> TensorInfo:
        """Tensor ``name``'s record; a clear error when the file lacks it."""
        if name not in self.tensors:
            raise VarcheckError(f"{self.path}: no tensor {name!r} (not a complete model file)")
        return self.tensors[name]

    def raw(self, name: str, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """The stored bytes of tensor ``name`` (or of some of its rows), one row of the matrix
        per row of the result: ``uint8``, or the stored numbers for F32, F16 and F64."""
        info = self.info(name)
        row_bytes = info.nbytes // info.rows
        if rows is None:
            data = self.source.read(info.offset, info.nbytes)
            count = info.rows
        else:
            picked = np.asarray(rows, dtype=np.int64).reshape(-1)
            if picked.size and (picked.min() < 0 or picked.max() >= info.rows):
                raise VarcheckError(f"{self.path}: a row of tensor {name!r} is out of range")
            with self.source.reading() as read:
                data = b"".join(read(info.offset + int(r) * row_bytes, row_bytes) for r in picked)
            count = picked.size
        dtype = _PLAIN.get(info.type_code, "u1")
        return np.frombuffer(data, np.dtype(dtype)).reshape(count, -1)

    def tensor(self, name: str, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """The tensor ``name`` dequantised to float32, rows first (PyTorch's ``(out, in)``).

        ``rows`` picks rows of a matrix before dequantising (an embedding lookup reads only
        those rows). NaN or infinite entries are refused, as ``beta`` refuses them.
        """
        info = self.info(name)
        if not dequantizable(info.type_code):
            raise _type_refused(self.path, info)
        data = self.raw(name, rows)
        if info.type_code in _PLAIN:
            out = data.astype(np.float32)
        else:
            from gguf import GGMLQuantizationType
            from gguf.quants import dequantize

            kind = GGMLQuantizationType(info.type_code)
            out = np.asarray(dequantize(data, kind), dtype=np.float32)
        shape = info.shape if rows is None else (data.shape[0], *info.shape[1:])
        out = out.reshape(shape)
        if not np.isfinite(out).all():
            raise VarcheckError(
                f"{self.path}: tensor {name!r} contains NaN or infinite entries; accepted: "
                "finite weights"
            )
        return out

    def check_types(self, names: Sequence[str]) -> None:
        """Refuse (one line) the first of these tensors stored in a type that cannot be read."""
        for name in names:
            info = self.info(name)
            if not dequantizable(info.type_code):
                raise _type_refused(self.path, info)


def _type_refused(path: Path, info: TensorInfo) -> VarcheckError:
    sizes = _quant_sizes()
    readable = [sizes[code][0] for code in sorted(sizes) if dequantizable(code)]
    return VarcheckError(
        f"{path}: tensor {_cut(info.name)!r} is stored as {info.type_name}, which varcheck "
        f"cannot read; accepted: {_cut(', '.join(readable), 120)}"
    )


def open_gguf(path: str | os.PathLike[str]) -> GGUFFile:
    """Validate a GGUF file's layout and read its metadata.

    Raises
    ------
    VarcheckError
        When ``gguf`` is missing, the path is not a regular file, the file is not GGUF, is
        truncated or inconsistent, declares more than the limits above, or holds an
        architecture other than :data:`SUPPORTED_ARCHITECTURES`. All checks run before any
        large allocation.
    """
    file = Path(path).expanduser()
    require_module("gguf")
    metadata, infos, source = validate_layout(file)
    arch = metadata["general.architecture"]
    return GGUFFile(file, arch, metadata, {t.name: t for t in infos}, source)
