"""A Hugging Face model directory, checked whole from its small files before any weight is read.

The directory holds ``config.json``, the weights (``model.safetensors``, or the shards a
``model.safetensors.index.json`` names) and usually ``tokenizer.json``. :func:`open_checkpoint`
reads the config into a :class:`~varcheck.audit.families.ModelSpec`, every shard's header
(through :func:`varcheck.audit.safetensors_file.read_header`: regular files only, sizes and
byte ranges checked), and checks that every tensor the forward pass needs is present, a float,
and of the shape the config implies. Only then are tensors read, one at a time, with ``pread``
(:class:`~varcheck.core.files.PinnedFile`), so memory holds the layer being computed, not the
model.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.files import MIB, PinnedFile, path_exists, read_text
from ..core.messages import cut
from ..errors import VarcheckError
from . import families as fam
from .safetensors_file import TensorEntry, read_header, read_tensors
from .tokenizing import native_errors

__all__ = ["HFCheckpoint", "open_checkpoint", "read_json", "MAX_SHARDS", "MAX_INDEX_BYTES"]

MAX_CONFIG_BYTES = MIB
MAX_INDEX_BYTES = 16 * MIB
MAX_TOKENIZER_BYTES = 32 * MIB
#: most shards an index may name (the largest released models have a few hundred)
MAX_SHARDS = 4096
_FLOATS = ("F32", "F16", "BF16", "F64")
#: prefixes accepted before the base model's tensor names, per family
_PREFIXES = {
    "bert": ("", "bert."),
    "roberta": ("", "roberta."),
    "gpt2": ("", "transformer."),
}
_ANCHORS = {"bert": "embeddings.word_embeddings.weight", "gpt2": "wte.weight"}
_ANCHORS["roberta"] = _ANCHORS["bert"]


def read_json(path: Path, what: str, limit: int) -> dict[str, Any]:
    """A JSON object read from a regular file of at most ``limit`` bytes; one line otherwise."""
    text = read_text(path, what, limit)
    try:
        raw = json.loads(text)
    except ValueError as exc:  # also an integer of thousands of digits
        raise VarcheckError(f"{cut(str(path))}: {what} is not JSON ({cut(str(exc))})") from None
    except RecursionError:
        raise VarcheckError(f"{cut(str(path))}: {what} is not JSON (nested too deeply)") from None
    if not isinstance(raw, dict):
        raise VarcheckError(f"{cut(str(path))}: {what} is not a JSON object")
    return raw


@dataclass(frozen=True)
class _Located:
    source: PinnedFile
    entry: TensorEntry
    base: int


@dataclass(frozen=True)
class HFCheckpoint:
    """A checked model directory: its spec, where each tensor lies, and its tokenizer.

    Attributes
    ----------
    path : Path
    spec : ModelSpec
    prefix : str
        What precedes the base model's tensor names (``model.``, ``bert.``, …).
    tokenizer : tokenizers.Tokenizer or None
        From ``tokenizer.json`` (padding off), None when the directory has none.
    """

    path: Path
    spec: fam.ModelSpec
    prefix: str
    tensors: dict[str, _Located]
    tokenizer: Any

    @property
    def name(self) -> str:
        """The directory's name, for reports."""
        return self.path.resolve().name or str(self.path)

    def has(self, name: str) -> bool:
        """Whether the base model's tensor ``name`` (or, with ``raw``, a full name) exists."""
        return self.prefix + name in self.tensors

    def tensor(self, name: str, *, raw: bool = False) -> np.ndarray:
        """The tensor ``name`` (without prefix unless ``raw``) read now, as float32."""
        key = name if raw else self.prefix + name
        found = self.tensors.get(key)
        if found is None:
            raise VarcheckError(f"{cut(str(self.path))}: no tensor {cut(key)!r}")
        return read_tensors(found.source, {key: found.entry}, found.base, lambda _: True)[key]

    def rows(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` of the 2-D tensor ``name`` (an embedding table), reading only the
        distinct rows used: a 128k-token table of a 1B model is 1 GB as float32."""
        found = self.tensors.get(self.prefix + name)
        if found is None:
            raise VarcheckError(f"{cut(str(self.path))}: no tensor {cut(self.prefix + name)!r}")
        entry = found.entry
        unique, inverse = np.unique(ids, return_inverse=True)
        if unique.size and (unique[0] < 0 or unique[-1] >= entry.shape[0]):
            raise VarcheckError(f"{cut(str(self.path))}: a token id is outside {cut(name)!r}")
        width = (entry.end - entry.start) // max(entry.shape[0], 1)
        parts = {
            str(r): TensorEntry(
                entry.dtype,
                entry.shape[1:],
                entry.start + int(r) * width,
                entry.start + (int(r) + 1) * width,
            )
            for r in unique
        }
        read = read_tensors(found.source, parts, found.base, lambda _: True)
        table = np.stack([read[str(r)] for r in unique]) if unique.size else np.zeros((0,))
        return table[inverse.reshape(ids.shape)]

    def output_matrix(self) -> np.ndarray | None:
        """The matrix giving the output logits; None when the checkpoint holds none."""
        if self.spec.family in fam.ENCODERS:
            return None
        if self.spec.family == "gpt2" or self.spec.tied:
            return self.tensor(
                "wte.weight" if self.spec.family == "gpt2" else "embed_tokens.weight"
            )
        return self.tensor("lm_head.weight", raw=True) if "lm_head.weight" in self.tensors else None

    def layer_bytes(self) -> int:
        """Float32 bytes of the largest layer's tensors (what the forward pass holds at once)."""
        sizes = []
        for layer in range(self.spec.layers):
            names = fam.expected_tensors(self.spec, layer)
            sizes.append(sum(self.tensors[self.prefix + n].entry.float32_bytes for n in names))
        return max(sizes)

    def embedding_rows(self) -> int:
        """Rows of the token embedding (ids the tokenizer gives must stay below)."""
        return self.tensors[self.prefix + _anchor(self.spec.family)].entry.shape[0]


def _anchor(family: str) -> str:
    return _ANCHORS.get(family, "embed_tokens.weight")


def _shard_files(folder: Path) -> list[str]:
    """File names of the weights: the one file, or the index's shards (checked plain names)."""
    if path_exists(folder / "model.safetensors"):
        return ["model.safetensors"]
    index = folder / "model.safetensors.index.json"
    if not path_exists(index):
        extra = (
            " (pytorch_model.bin is a pickle, not read)"
            if path_exists(folder / "pytorch_model.bin")
            else ""
        )
        raise VarcheckError(
            f"{cut(str(folder))}: no model.safetensors or model.safetensors.index.json{extra}; "
            "accepted: safetensors weights"
        )
    return _index_map(folder, index)[0]


def _index_map(folder: Path, index: Path) -> tuple[list[str], dict[str, str]]:
    raw = read_json(index, "the shard index", MAX_INDEX_BYTES)
    mapping = raw.get("weight_map")
    if not isinstance(mapping, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        raise VarcheckError(f"{cut(str(index))}: weight_map must map tensor names to file names")
    shards = sorted(set(mapping.values()))
    if len(shards) > MAX_SHARDS:
        raise VarcheckError(
            f"{cut(str(index))}: {len(shards):,} shards; accepted: at most {MAX_SHARDS:,}"
        )
    for name in shards:
        # a plain file name: "../x", "/x" or "a/b" would reach outside the directory; a
        # symbolic link in it is followed, as the Hugging Face cache links every file to a blob
        if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise VarcheckError(
                f"{cut(str(index))}: shard {cut(repr(name))} lies outside the model directory; "
                "accepted: a file name inside it"
            )
    return shards, mapping


def _headers(folder: Path, shards: list[str]) -> dict[str, _Located]:
    """Every tensor of every shard, refused when one appears twice."""
    out: dict[str, _Located] = {}
    for shard in shards:
        source, entries, base = read_header(folder / shard)
        for key, entry in entries.items():
            if key in out:
                raise VarcheckError(f"{cut(str(folder))}: tensor {cut(key)!r} is in two shards")
            out[key] = _Located(source, entry, base)
    index = folder / "model.safetensors.index.json"
    if len(shards) > 1 or shards != ["model.safetensors"]:
        for key, shard in _index_map(folder, index)[1].items():
            found = out.get(key)
            if found is None or Path(found.source.path).name != shard:
                raise VarcheckError(
                    f"{cut(str(index))}: tensor {cut(key)!r} is not in its shard {cut(shard)!r}"
                )
    return out


def _prefix(spec: fam.ModelSpec, tensors: dict[str, _Located], where: str) -> str:
    anchor = _anchor(spec.family)
    found = sorted((k[: -len(anchor)] for k in tensors if k.endswith(anchor)), key=len)
    allowed = _PREFIXES.get(spec.family, ("", "model."))
    if not found:
        raise VarcheckError(f"{where}: no {anchor!r} tensor; not a {spec.family} checkpoint")
    if found[0] not in allowed:
        raise VarcheckError(
            f"{where}: tensors named {cut(found[0] + anchor)!r}; accepted prefixes before "
            f"{anchor!r}: " + ", ".join(repr(p) for p in allowed)
        )
    return found[0]


def _alias_layer_norms(tensors: dict[str, _Located]) -> None:
    """Old BERT files name LayerNorm parameters gamma and beta."""
    for key in list(tensors):
        for old, new in ((".gamma", ".weight"), (".beta", ".bias")):
            if "LayerNorm" in key and key.endswith(old):
                tensors.setdefault(key[: -len(old)] + new, tensors[key])


def _check_tensors(
    spec: fam.ModelSpec, tensors: dict[str, _Located], prefix: str, where: str
) -> None:
    """Every tensor the forward pass reads: present, a float, of the config's shape."""
    wanted = dict(fam.expected_tensors(spec))
    for layer in range(spec.layers):
        wanted.update(fam.expected_tensors(spec, layer))
    for name, shape in wanted.items():
        found = tensors.get(prefix + name)
        if found is None:
            raise VarcheckError(
                f"{where}: missing tensor {cut(prefix + name)!r}, which config.json "
                f"implies ({spec.layers} layers)"
            )
        got = found.entry.shape
        if len(got) != len(shape) or any(
            s is not None and s != g for s, g in zip(shape, got, strict=False)
        ):
            want = tuple("*" if s is None else s for s in shape)
            raise VarcheckError(
                f"{where}: tensor {cut(prefix + name)!r} has shape {got}; "
                f"config.json implies {want}"
            )
        if found.entry.dtype not in _FLOATS:
            raise VarcheckError(
                f"{where}: tensor {cut(prefix + name)!r} is {found.entry.dtype}; "
                "accepted: " + ", ".join(_FLOATS)
            )


def _tokenizer(folder: Path) -> Any:
    file = folder / "tokenizer.json"
    if not path_exists(file):
        return None
    text = read_text(file, "the tokenizer", MAX_TOKENIZER_BYTES)
    try:
        import tokenizers
    except ImportError:
        raise VarcheckError(
            "reading a tokenizer needs the tokenizers package; install varcheck's models extra"
        ) from None
    with native_errors(str(file), "read the tokenizer"):
        tok = tokenizers.Tokenizer.from_str(text)
    tok.no_padding()
    tok.no_truncation()
    return tok


def open_checkpoint(path: str | os.PathLike[str], *, tokenizer: bool = True) -> HFCheckpoint:
    """Check a Hugging Face model directory and locate its tensors; no weight is read.

    Parameters
    ----------
    path : path-like
        The directory (``config.json`` and safetensors weights).
    tokenizer : bool
        Load ``tokenizer.json`` when present.

    Raises
    ------
    VarcheckError
        One line naming the file and value: not a directory, a config the families do not
        accept, a shard outside the directory, a header that does not parse, a tensor missing,
        of the wrong shape or not a float.
    """
    folder = Path(path)
    if not path_exists(folder) or not folder.is_dir():
        raise VarcheckError(
            f"{cut(str(folder))}: not a model directory; accepted: a directory "
            "holding config.json and model.safetensors"
        )
    config = folder / "config.json"
    spec = fam.model_spec(read_json(config, "the config", MAX_CONFIG_BYTES), cut(str(config)))
    tensors = _headers(folder, _shard_files(folder))
    _alias_layer_norms(tensors)
    where = cut(str(folder))
    prefix = _prefix(spec, tensors, where)
    _check_tensors(spec, tensors, prefix, where)
    tok = _tokenizer(folder) if tokenizer else None
    return HFCheckpoint(folder, spec, prefix, tensors, tok)
