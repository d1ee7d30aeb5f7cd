"""Writers of hostile input files, one per kind of file varcheck reads (a test helper).

Each writes small real bytes: where a case is about a large *declared* size (an array of 100
million entries, a zip of 9 million members), the bytes that are never read are a hole of a
sparse file, which costs no disk and no time. The cases themselves are in ``hostile_cases.py``.
"""

from __future__ import annotations

import json
import os
import struct
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

# --- GGUF --------------------------------------------------------------------------------------

#: value type codes of the GGUF specification
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
_PACK = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?"}
_PACK |= {U64: "Q", I64: "q", F64: "d"}
#: ggml tensor type codes used here
GGML_F32, GGML_F16 = 0, 1
GGML = {"I8": 24, "I16": 25, "I32": 26, "I64": 27, "F64": 28, "Q8_1": 9, "Q8_K": 15, "Q1_0": 41}
#: bytes per block and elements per block of those types
GGML_BLOCKS = {24: (1, 1), 25: (2, 1), 26: (4, 1), 27: (8, 1), 28: (8, 1), 9: (36, 32)}
GGML_BLOCKS |= {15: (292, 256), 41: (18, 128)}


class Hole(NamedTuple):
    """An array of ``count`` items of type ``item`` whose bytes are left as a hole (zeros: for
    strings, empty ones)."""

    item: int
    count: int


def _value(kind: int, value: Any) -> bytes:
    if kind == STR:
        raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
        return struct.pack("<Q", len(raw)) + raw
    if kind == ARR:
        item, items = value
        return struct.pack("<IQ", item, len(items)) + b"".join(_value(item, v) for v in items)
    return struct.pack("<" + _PACK[kind], value)


def write_gguf(
    path: Path,
    metadata: Sequence[tuple[str, int, Any]],
    tensors: Sequence[tuple[str, tuple[int, ...], int, bytes]],
    *,
    alignment: int = 32,
) -> Path:
    """A GGUF v3 file: ``metadata`` as (key, type, value) (a :class:`Hole` for an array left as
    a hole), ``tensors`` as (name, shape rows first, ggml type, data)."""
    with open(path, "wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
        for key, kind, value in metadata:
            out.write(_value(STR, key) + struct.pack("<I", kind))
            if isinstance(value, Hole):
                out.write(struct.pack("<IQ", value.item, value.count))
                width = 8 if value.item == STR else struct.calcsize("<" + _PACK[value.item])
                out.seek(value.count * width, os.SEEK_CUR)
            else:
                out.write(_value(kind, value))
        offset = 0
        for name, shape, kind, data in tensors:
            dims = tuple(reversed(shape))
            record = struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, kind, offset)
            out.write(_value(STR, name) + record)
            offset += -(-len(data) // alignment) * alignment
        out.seek(-(-out.tell() // alignment) * alignment)
        for _, _, _, data in tensors:
            out.write(data + b"\0" * (-len(data) % alignment))
        out.truncate()
    return path


def byte_alphabet() -> list[str]:
    """The 256 symbols of byte-level BPE (GPT-2's mapping of bytes to characters)."""
    visible = [*range(33, 127), *range(161, 173), *range(174, 256)]
    extra = iter(range(256, 512))
    return sorted(chr(b) if b in visible else chr(next(extra)) for b in range(256))


def tiny_gguf(
    path: Path,
    *,
    hidden: int = 8,
    heads: int = 2,
    kv_heads: int = 1,
    head_dim: int | None = None,
    ffn: int = 8,
    changes: dict[str, tuple[int, Any] | None] | None = None,
    types: dict[str, tuple[int, bytes]] | None = None,
    poison: float | None = None,
    alignment: int = 32,
) -> Path:
    """A one-block Llama GGUF (F32 weights, byte-level BPE of the 256 byte symbols) with
    ``changes`` to its metadata (a key to ``(type, value)``, or to None to drop it), ``types``
    replacing a tensor's (ggml type, data), ``poison`` written into the first entry of W_q."""
    rng = np.random.default_rng(0)
    dk = head_dim or hidden // heads
    tokens = byte_alphabet()
    meta: dict[str, tuple[int, Any]] = {
        "general.architecture": (STR, "llama"),
        "general.name": (STR, "tiny"),
        "general.alignment": (U32, alignment),
        "llama.block_count": (U32, 1),
        "llama.context_length": (U32, 256),
        "llama.embedding_length": (U32, hidden),
        "llama.feed_forward_length": (U32, ffn),
        "llama.attention.head_count": (U32, heads),
        "llama.attention.head_count_kv": (U32, kv_heads),
        "llama.attention.key_length": (U32, dk),
        "llama.rope.dimension_count": (U32, dk),
        "tokenizer.ggml.model": (STR, "gpt2"),
        "tokenizer.ggml.pre": (STR, "gpt2"),
        "tokenizer.ggml.tokens": (ARR, (STR, tokens)),
        "tokenizer.ggml.token_type": (ARR, (I32, [1] * len(tokens))),
        "tokenizer.ggml.merges": (ARR, (STR, [])),
        "tokenizer.ggml.add_bos_token": (BOOL, False),
    }
    for key, change in (changes or {}).items():
        if change is None:
            meta.pop(key, None)
        else:
            meta[key] = change

    def mat(rows: int, cols: int) -> np.ndarray:
        return rng.normal(0, 1 / np.sqrt(cols), (rows, cols)).astype(np.float32)

    weights = {
        "token_embd.weight": mat(len(tokens), hidden),
        "output_norm.weight": np.ones(hidden, np.float32),
        "blk.0.attn_norm.weight": np.ones(hidden, np.float32),
        "blk.0.attn_q.weight": mat(heads * dk, hidden),
        "blk.0.attn_k.weight": mat(kv_heads * dk, hidden),
        "blk.0.attn_v.weight": mat(kv_heads * dk, hidden),
        "blk.0.attn_output.weight": mat(hidden, heads * dk),
        "blk.0.ffn_norm.weight": np.ones(hidden, np.float32),
        "blk.0.ffn_gate.weight": mat(ffn, hidden),
        "blk.0.ffn_up.weight": mat(ffn, hidden),
        "blk.0.ffn_down.weight": mat(hidden, ffn),
    }
    if poison is not None:
        weights["blk.0.attn_q.weight"][0, 0] = poison
    tensors = []
    for name, w in weights.items():
        kind, data = (types or {}).get(name, (GGML_F32, w.tobytes()))
        tensors.append((name, w.shape, kind, data))
    entries = [(k, t, v) for k, (t, v) in meta.items()]
    return write_gguf(path, entries, tensors, alignment=alignment)


def typed_tensor(type_name: str, shape: tuple[int, int]) -> tuple[int, bytes]:
    """(ggml type, zero bytes) of a tensor of ``shape`` stored as ``type_name``."""
    code = GGML[type_name]
    size, block = GGML_BLOCKS[code]
    return code, bytes(shape[0] * shape[1] // block * size)


def sentencepiece_changes(tokens: list[str]) -> dict[str, tuple[int, Any] | None]:
    """Metadata of a SentencePiece (``llama``) vocabulary of ``tokens``, all of type normal."""
    return {
        "tokenizer.ggml.model": (STR, "llama"),
        "tokenizer.ggml.pre": None,
        "tokenizer.ggml.merges": None,
        "tokenizer.ggml.tokens": (ARR, (STR, tokens)),
        "tokenizer.ggml.scores": (ARR, (F32, [-1.0] * len(tokens))),
        "tokenizer.ggml.token_type": (ARR, (I32, [1] * len(tokens))),
    }


# --- a BERT checkpoint -------------------------------------------------------------------------

BERT_WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "."]
BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *BERT_WORDS]


def tiny_bert(
    folder: Path,
    *,
    config: dict[str, Any] | None = None,
    tokenizer: dict[str, Any] | None = None,
    poison: float | None = None,
) -> Path:
    """A random one-layer BERT (2 heads of 4) in ``folder``: config.json (with ``config``'s
    changes), model.safetensors (``poison`` in the first query weight), and tokenizer.json
    (a WordPiece tokenizer; ``tokenizer`` replaces top-level parts of it)."""
    from bert_weights import random_bert_weights, write_safetensors

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20240611)
    t = random_bert_weights(rng, d=8, inter=16, layers=1, vocab=len(BERT_VOCAB), positions=16)
    t = {k: v.astype(np.float32) for k, v in t.items()}
    if poison is not None:
        t["encoder.layer.0.attention.self.query.weight"][0, 0] = poison
    write_safetensors(folder / "model.safetensors", t)
    cfg = {
        "model_type": "bert",
        "hidden_size": 8,
        "num_attention_heads": 2,
        "num_hidden_layers": 1,
        "intermediate_size": 16,
        "max_position_embeddings": 16,
    }
    (folder / "config.json").write_text(_config_text(cfg, config))
    tok = bert_tokenizer_json() | (tokenizer or {})
    (folder / "tokenizer.json").write_text(json.dumps(tok))
    return folder


def _config_text(cfg: dict[str, Any], changes: dict[str, Any] | None) -> str:
    text = json.dumps(cfg | {k: v for k, v in (changes or {}).items() if not isinstance(v, Raw)})
    for key, value in (changes or {}).items():
        if isinstance(value, Raw):
            text = text[:-1] + f', "{key}": {value.text}}}'
    return text


class Raw(NamedTuple):
    """A JSON value written as it is (a number too long for Python's int())."""

    text: str


def bert_tokenizer_json() -> dict[str, Any]:
    """A WordPiece tokenizer.json over :data:`BERT_VOCAB`, as the tokenizers library writes it."""
    vocab = {t: i for i, t in enumerate(BERT_VOCAB)}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": True,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            ],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]},
            },
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": vocab,
        },
    }


# --- .npz weights for beta ---------------------------------------------------------------------


def npy_bytes(shape: tuple[int, ...], dtype: str = "<f8", data: bytes | None = None) -> bytes:
    """An .npy file declaring ``shape`` and ``dtype``, followed by ``data`` (zeros for the whole
    array by default)."""
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {tuple(shape)}, }}"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    if data is None:
        data = bytes(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def zip_declaring_members(path: Path, count: int, size: int) -> Path:
    """A sparse file of ``size`` bytes ending in a ZIP64 end record that declares ``count``
    members (the central directory itself is never read by a careful reader)."""
    cd_size = count * 46
    with open(path, "wb") as out:
        out.truncate(size - 98)
        out.seek(size - 98)
        z64_at = out.tell()
        z64 = (0x06064B50, 44, 45, 45, 0, 0, count, count, cd_size, z64_at - cd_size)
        out.write(struct.pack("<IQHHIIQQQQ", *z64))
        out.write(struct.pack("<IIQI", 0x07064B50, 0, z64_at, 1))
        end = (0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
        out.write(struct.pack("<IHHHHIIH", *end))
    return path


def encrypted_npz(path: Path) -> Path:
    """An .npz whose members carry the zip "encrypted" flag."""
    write_npz(path, {"w_q.npy": npy_bytes((2, 2)), "w_k.npy": npy_bytes((2, 2))})
    data = bytearray(path.read_bytes())
    for signature, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            data[start + flag_at] |= 1
            start += 4
    path.write_bytes(bytes(data))
    return path


def write_npz(path: Path, members: dict[str, bytes], *, method: int = zipfile.ZIP_STORED) -> Path:
    """A zip of ``members`` (an .npz when they are .npy files), compressed with ``method``."""
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path
