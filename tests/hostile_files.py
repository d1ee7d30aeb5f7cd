"""Hostile input files, written on demand, one generator per kind of file varcheck reads.

Each generator writes small real bytes: where a case is about a large *declared* size (an array
of 100 million entries, a zip of 9 million members), the bytes that are never read are a hole
of a sparse file, which costs no disk and no time. ``tests/test_robustness_table.py`` runs every
case through the command line under a memory limit; the cases are data here so that a new
reader gets its own generator beside the others.
"""

from __future__ import annotations

import json
import os
import struct
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

# --- GGUF ------------------------------------------------------------------------------------------

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
            out.write(_value(STR, name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, kind,
                                                      offset))  # fmt: skip
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
    return write_gguf(path, [(k, t, v) for k, (t, v) in meta.items()], tensors,
                      alignment=alignment)  # fmt: skip


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


# --- a BERT checkpoint -----------------------------------------------------------------------------

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
    cfg = {"model_type": "bert", "hidden_size": 8, "num_attention_heads": 2,
           "num_hidden_layers": 1, "intermediate_size": 16, "max_position_embeddings": 16}  # fmt: skip
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
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},  # fmt: skip
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],  # fmt: skip
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]},
            },
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},  # fmt: skip
    }


# --- .npz weights for beta --------------------------------------------------------------------------


def npy_bytes(shape: tuple[int, ...], dtype: str = "<f8", data: bytes | None = None) -> bytes:
    """An .npy file declaring ``shape`` and ``dtype``, followed by ``data`` (zeros for the whole
    array by default)."""
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {tuple(shape)}, }}"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    if data is None:
        data = bytes(int(np.prod(shape)) * np.dtype(dtype).itemsize)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def write_npz(path: Path, members: dict[str, bytes], *, compress: bool = False) -> Path:
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def zip_declaring_members(path: Path, count: int, size: int) -> Path:
    """A sparse file of ``size`` bytes ending in a ZIP64 end record that declares ``count``
    members (the central directory itself is never read by a careful reader)."""
    cd_size = count * 46
    with open(path, "wb") as out:
        out.truncate(size - 98)
        out.seek(size - 98)
        z64_at = out.tell()
        out.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, cd_size,
                              z64_at - cd_size))  # fmt: skip
        out.write(struct.pack("<IIQI", 0x07064B50, 0, z64_at, 1))
        out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                              0xFFFFFFFF, 0))  # fmt: skip
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


# --- the cases ---------------------------------------------------------------------------------------


class Case(NamedTuple):
    """One hostile input: ``write(folder)`` makes its files and returns the command line's
    arguments; the run must end with ``code`` and ``fragment`` in its one-line error (exit 2) or
    in its output."""

    write: Callable[[Path], tuple[str, ...]]
    code: int | tuple[int, ...]
    fragment: str
    needs: tuple[str, ...] = ()  # optional modules, or "minilm" / "smollm2" checkpoints


def _audit(folder: Path, name: str, *args: str, **gguf: Any) -> tuple[str, ...]:
    """``audit`` of a tiny GGUF written with ``gguf``'s options."""
    return ("audit", str(tiny_gguf(folder / f"{name}.gguf", **gguf)), *args)


def _bert(folder: Path, *args: str, **kwargs: Any) -> tuple[str, ...]:
    return ("audit", str(tiny_bert(folder / "bert", **kwargs)), *args)


def _text(folder: Path, name: str, lines: Sequence[str], repeat: int) -> str:
    path = folder / name
    with open(path, "w", encoding="utf-8") as out:
        block = "\n".join(lines) + "\n"
        for _ in range(repeat):
            out.write(block)
    return str(path)


def _english(folder: Path) -> str:
    """About 16 MB of ordinary sentences, inside --text's 16 MiB limit."""
    source = Path(__file__).resolve().parents[1] / "varcheck" / "data" / "default_text.txt"
    lines = source.read_text(encoding="utf-8").splitlines()
    return _text(folder, "english.txt", lines, (16_000_000 // (len("\n".join(lines)) + 1)))


def _spm_long_token(folder: Path) -> tuple[str, ...]:
    tokens = byte_alphabet()[:255] + ["x" * 1_000_000]
    return _audit(folder, "spm", changes=sentencepiece_changes(tokens))


def _type_case(type_name: str) -> Case:
    def write(folder: Path) -> tuple[str, ...]:
        kind = typed_tensor(type_name, (256, 256))
        return _audit(folder, type_name, hidden=256, types={"blk.0.attn_q.weight": kind})

    return Case(write, 2, type_name, ("gguf",))


def _template(folder: Path) -> tuple[str, ...]:
    post = bert_tokenizer_json()["post_processor"]
    post["single"][0] = {"SpecialToken": {"id": "[BOS]", "type_id": 0}}
    return _bert(folder, tokenizer={"post_processor": post})


def _regex(folder: Path) -> tuple[str, ...]:
    normalizer = {"type": "Replace", "pattern": {"Regex": "(a+)+b"}, "content": "x"}
    text = _text(folder, "a.txt", ["the cat " + "a" * 3000 + "c"], 1)
    return _bert(folder, "--text", text, tokenizer={"normalizer": normalizer})


def _npz_heads(folder: Path) -> tuple[str, ...]:
    ones = np.ones((2_000_000, 1, 2))
    path = folder / "heads.npz"
    np.savez_compressed(path, w_q=ones, w_k=ones)
    return ("beta", str(path))


def _npz_sigma(folder: Path) -> tuple[str, ...]:
    members = {"w_q.npy": npy_bytes((2, 2)), "w_k.npy": npy_bytes((2, 2)),
               "sigma_x.npy": npy_bytes((2**45,), data=bytes(8))}  # fmt: skip
    return ("beta", str(write_npz(folder / "sigma.npz", members)))


def _npz_short(folder: Path) -> tuple[str, ...]:
    members = {"w_q.npy": npy_bytes((2000, 2000), data=bytes(8)), "w_k.npy": npy_bytes((2, 2))}
    return ("beta", str(write_npz(folder / "short.npz", members)))


CLAIM = '[[claim]]\nname = "a"\ndk = 4\nclaim = "dk"\n'
HEX = "0x" + "f" * 300


def _claims(folder: Path, text: str, *args: str, name: str = "claims.toml") -> tuple[str, ...]:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return ("check", str(path), *args)


def _hex_case(key: str) -> Case:
    def write(folder: Path) -> tuple[str, ...]:
        if key in ("precision", "max_seconds"):
            return _claims(folder, f"[defaults]\n{key} = {HEX}\n" + CLAIM)
        if key == "expect":
            kernel = Path(__file__).resolve().parents[1] / "examples" / "attention_kernels.py"
            probe = f'[[claim]]\nname = "p"\nprobe = "{kernel}:attention"\ndk = 16\n'
            return _claims(folder, probe + f"expect = {HEX}\n")
        body = CLAIM.replace('claim = "dk"', f"claim = {HEX}") if key == "claim" else CLAIM
        return _claims(folder, body + ("" if key == "claim" else f"{key} = {HEX}\n"))

    return Case(write, 2, key)


#: names from a file carrying markup, terminal escapes (clear screen, an OSC 52 clipboard write,
#: a hyperlink), bidi overrides, a NUL, a newline and XML-illegal characters
EVIL = "[red]x[/blue] \x1b[2J\x1b]52;c;aGk=\x07\x1b]8;;http://e.vil\x1b\\ln\x1b]8;;\x1b\\ \u202e\0\n\x01z"
TOML_EVIL = EVIL.encode("unicode_escape").decode().replace("\\x", "\\u00")


def _evil_gguf(fmt: str) -> Case:
    def write(folder: Path) -> tuple[str, ...]:
        return _audit(folder, "evil", "--format", fmt, changes={"general.name": (STR, EVIL)})

    return Case(write, 0, "x[/blue]", ("gguf",))


def _evil_claims(fmt: str) -> Case:
    def write(folder: Path) -> tuple[str, ...]:
        text = CLAIM.replace('"a"', f'"{TOML_EVIL}"') + f'description = "{TOML_EVIL}"\n'
        xml = str(folder / "report.xml")
        return _claims(folder, text, "--format", fmt, "--samples", "1000", "--seed", "1",
                       "--junit-xml", xml)  # fmt: skip

    return Case(write, 0, "x[/blue]")


CASES: dict[str, Case] = {
    # --- GGUF: resource exhaustion before any check
    "gguf d_k 4096, 8 heads": Case(
        lambda f: _audit(f, "dk", heads=8, kv_heads=8, head_dim=4096), 2, "key_length", ("gguf",)
    ),
    "gguf d_k 8192": Case(
        lambda f: _audit(f, "dk", heads=8, kv_heads=8, head_dim=8192), 2, "key_length", ("gguf",)
    ),
    "gguf 1 MB SentencePiece token": Case(_spm_long_token, (0, 2), "", ("gguf",)),
    "gguf alignment 64, 2M empty strings": Case(
        lambda f: _audit(f, "strings", alignment=64,
                         changes={"x.junk": (ARR, Hole(STR, 2_000_000))}),  # fmt: skip
        2, "x.junk", ("gguf",),
    ),
    "gguf 100M-entry uint16 array": Case(
        lambda f: _audit(f, "array", changes={"x.big": (ARR, Hole(U16, 100_000_000))}),
        0, "Attention logit scale", ("gguf",),
    ),
    # --- GGUF: exit 70, tracebacks, signal deaths
    "gguf token_type scalar": Case(
        lambda f: _audit(f, "ttype", changes={"tokenizer.ggml.token_type": (I32, 1)}),
        2, "token_type", ("gguf",),
    ),
    **{f"gguf tensor type {t}": _type_case(t) for t in GGML},
    "gguf NaN weights": Case(lambda f: _audit(f, "nan", poison=float("nan")), 2, "NaN", ("gguf",)),
    "gguf inf weights": Case(lambda f: _audit(f, "inf", poison=float("inf")), 2, "inf", ("gguf",)),
    "gguf path of 300 characters": Case(
        lambda f: ("audit", str(f / ("x" * 300 + ".gguf"))), 2, "xxx", ("gguf",)
    ),
    "model path of 300 characters": Case(lambda f: ("audit", str(f / ("x" * 300))), 2, "xxx"),
    # --- --text
    "text 16 MB, MiniLM": Case(
        lambda f: ("audit", "all-MiniLM-L6-v2", "--text", _english(f)), 2, "", ("minilm",)
    ),
    "text 16 MB, SmolLM2": Case(
        lambda f: ("audit", "smollm2-135m", "--text", _english(f)), 2, "", ("smollm2",)
    ),
    "text 4M short lines, MiniLM": Case(
        lambda f: ("audit", "all-MiniLM-L6-v2", "--text", _text(f, "a.txt", ["a"], 4_000_000)),
        2, "", ("minilm",),
    ),
    "text one 16 MB line, MiniLM": Case(
        lambda f: ("audit", "all-MiniLM-L6-v2", "--text",
                   _text(f, "w.txt", ["word " * 3_200_000], 1)),  # fmt: skip
        0, "too few sequences", ("minilm",),
    ),
    # --- BERT checkpoints
    "config.json integer of 5000 digits": Case(
        lambda f: _bert(f, config={"hidden_size": Raw("9" * 5000)}), 2, "hidden_size", ("tokenizers",)
    ),
    "tokenizer.json undeclared special token": Case(_template, 2, "tokenizer", ("tokenizers",)),
    "tokenizer.json backtracking regex": Case(_regex, 2, "tokenizer", ("tokenizers",)),
    "BERT NaN weights": Case(lambda f: _bert(f, poison=float("nan")), 2, "NaN", ("tokenizers",)),
    # --- beta's .npz
    "npz 2M heads": Case(_npz_heads, 2, "heads"),
    "npz 9M members": Case(
        lambda f: ("beta", str(zip_declaring_members(f / "many.npz", 9_000_000, 467_000_000))),
        2, "members",
    ),
    "npz sigma_x declaring 2^45 entries": Case(_npz_sigma, 2, "sigma_x"),
    "npz member declaring more than it holds": Case(_npz_short, 2, "w_q"),
    "npz encrypted": Case(lambda f: ("beta", str(encrypted_npz(f / "enc.npz"))), 2, "encrypt"),
    # --- claim files
    "toml dotted key of 200k parts": Case(
        lambda f: _claims(f, "a" + ".a" * 200_000 + " = 1\n" + CLAIM), 2, "dotted key"
    ),
    "toml integer of 5000 digits": Case(
        lambda f: _claims(f, f"[defaults]\nseed = {'9' * 5000}\n" + CLAIM), 2, "seed"
    ),
    **{f"toml {HEX[:6]}… as {k}": _hex_case(k) for k in
       ("claim", "rho", "tolerance", "precision", "max_seconds", "expect")},  # fmt: skip
    "claim named [/]": Case(
        lambda f: _claims(f, CLAIM.replace('"a"', '"[/]"'), "--samples", "1000", "--seed", "1",
                          "--junit-xml", str(f / "r.xml")),  # fmt: skip
        0, "[/]",
    ),
    # --- injection into the terminal and the CI report
    **{f"gguf name with escapes, {fmt}": _evil_gguf(fmt) for fmt in
       ("table", "markdown", "csv", "json")},  # fmt: skip
    **{f"claim name with escapes, {fmt}": _evil_claims(fmt) for fmt in
       ("table", "markdown", "csv", "json")},  # fmt: skip
}
