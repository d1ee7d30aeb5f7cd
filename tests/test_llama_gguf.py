"""Reading GGUF files for the decoder audit (#19): bad files refused in one line before any large
allocation, the tokenizer built from the metadata, configuration and shape checks.

Every file here is small and synthetic (``llama_files.tiny_llama``, written with gguf's writer),
so these tests need gguf and tokenizers but not the SmolLM2 checkpoint.
"""

from __future__ import annotations

import importlib.util
import os
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from varcheck.errors import VarcheckError

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("gguf", "tokenizers")),
    reason="gguf/tokenizers are not installed (pip install 'varcheck[models]')",
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llama_files import tiny_llama

    return tiny_llama(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def _patched(src: Path, dst: Path, offset: int, fmt: str, value: int) -> Path:
    data = bytearray(src.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    dst.write_bytes(bytes(data))
    return dst


def _refused(path: Path | str, *needles: str) -> str:
    from varcheck.audit.llama import load_llama

    tracemalloc.start()
    try:
        with pytest.raises(VarcheckError) as info:
            load_llama(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    # refused before anything large was allocated (the file itself is 100 kB)
    assert peak < 8_000_000, peak
    return message


# --- bad files ----------------------------------------------------------------------------------


def test_wrong_magic(tiny: Path, tmp_path: Path) -> None:
    bad = tmp_path / "magic.gguf"
    bad.write_bytes(b"GGML" + tiny.read_bytes()[4:])
    _refused(bad, "not a GGUF file", "b'GGML'")


def test_truncated_files(tiny: Path, tmp_path: Path) -> None:
    data = tiny.read_bytes()
    for size, needle in [(0, "truncated"), (10, "truncated"), (700, "truncated")]:
        bad = tmp_path / f"cut{size}.gguf"
        bad.write_bytes(data[:size])
        _refused(bad, needle)
    # the metadata and tensor records complete, the weights cut
    bad = tmp_path / "cut_data.gguf"
    bad.write_bytes(data[: len(data) - 1000])
    _refused(bad, "truncated or corrupt", "ends at byte")


def test_unsupported_architecture(tmp_path: Path) -> None:
    from llama_files import tiny_llama

    bad = tiny_llama(tmp_path / "gpt2.gguf", arch="gpt2")
    _refused(bad, "architecture 'gpt2' is not supported", "accepted: llama")


def test_unsupported_version(tiny: Path, tmp_path: Path) -> None:
    _refused(_patched(tiny, tmp_path / "v9.gguf", 4, "<I", 9), "version 9 is not supported")
    swapped = _patched(tiny, tmp_path / "be.gguf", 4, ">I", 3)
    _refused(swapped, "big-endian")


@pytest.mark.parametrize(
    ("field", "fmt", "value", "needle"),
    [
        ("tensor_count", "<Q", 1 << 60, "tensor records"),
        ("kv_count", "<Q", 1 << 62, "metadata entries"),
        ("key:general.name", "<Q", 1 << 50, "bytes at offset"),
        ("general.name", "<Q", (1 << 63) - 1, "bytes at offset"),
        ("tokenizer.ggml.tokens", "<Q", 1 << 40, "array of"),  # the count after the item type
    ],
)
def test_absurd_sizes_in_the_layout(
    tiny: Path, tmp_path: Path, field: str, fmt: str, value: int, needle: str
) -> None:
    from llama_files import header_offsets

    offset = header_offsets(tiny)[field]
    if field == "tokenizer.ggml.tokens":
        offset += 4
    _refused(_patched(tiny, tmp_path / "absurd.gguf", offset, fmt, value), needle)


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("llama.block_count", 10**9, "block_count is 1000000000"),
        ("llama.block_count", 0, "block_count is 0"),
        ("llama.embedding_length", 1 << 31, "embedding_length"),
        ("llama.attention.head_count", 0, "head_count is 0"),
        ("llama.attention.head_count_kv", 3, "cannot share"),
        ("llama.block_count", 5, "no tensor 'blk.2"),
        ("llama.feed_forward_length", 50, "has shape"),
    ],
)
def test_absurd_sizes_in_the_metadata(
    tiny: Path, tmp_path: Path, key: str, value: int, needle: str
) -> None:
    from llama_files import header_offsets

    offset = header_offsets(tiny)[key]
    _refused(_patched(tiny, tmp_path / "meta.gguf", offset, "<I", value), needle)


def test_impossible_tensor_shape(tmp_path: Path) -> None:
    from llama_files import header_offsets, tiny_llama

    src = tiny_llama(tmp_path / "ok.gguf")
    start = header_offsets(src)["tensors"]
    (name_len,) = struct.unpack_from("<Q", src.read_bytes(), start)
    dims_at = start + 8 + name_len + 4  # after the name and n_dims
    _refused(_patched(src, tmp_path / "shape.gguf", dims_at, "<Q", 1 << 50), "impossible shape")
    _refused(_patched(src, tmp_path / "ndims.gguf", dims_at - 4, "<I", 7), "7 dimensions")


def test_only_regular_files(tmp_path: Path) -> None:
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    _refused(folder, "a folder, not a regular file")
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.gguf"
        os.mkfifo(fifo)
        _refused(fifo, "a FIFO (named pipe), not a regular file")  # and does not block opening it
    _refused(tmp_path / "missing.gguf", "cannot read the GGUF file")


def test_unsupported_tokenizer(tmp_path: Path) -> None:
    from llama_files import tiny_llama

    bad = tiny_llama(tmp_path / "pre.gguf", pre="qwen2")
    _refused(bad, "tokenizer.ggml.pre 'qwen2' is not supported", "smollm")


# --- a good file ---------------------------------------------------------------------------------


def test_config_and_tensors(tiny: Path) -> None:
    from varcheck.audit.llama import load_llama

    model = load_llama(tiny)
    cfg = model.config
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (
        2,
        32,
        4,
        2,
        8,
    )
    assert [cfg.kv_head(h) for h in range(4)] == [0, 0, 1, 1]
    assert model.file.tensor("blk.1.attn_k.weight").shape == (16, 32)
    assert model.file.tensor("token_embd.weight", [3, 5]).shape == (2, 32)


def test_reader_matches_gguf_reader(tiny: Path) -> None:
    """varcheck's own walk and reads give the very metadata keys, offsets and tensors that the
    gguf package's full reader does."""
    import gguf

    from varcheck.audit.gguf_file import open_gguf

    ours = open_gguf(tiny)
    full = gguf.GGUFReader(str(tiny))
    theirs = {t.name: t for t in full.tensors}
    assert set(ours.tensors) == set(theirs)
    for name, info in ours.tensors.items():
        assert info.offset == theirs[name].data_offset
        np.testing.assert_array_equal(
            ours.raw(name).reshape(-1), np.asarray(theirs[name].data).reshape(-1)
        )
        expected = gguf.quants.dequantize(theirs[name].data, theirs[name].tensor_type)
        np.testing.assert_array_equal(ours.tensor(name), expected.reshape(info.shape))
    assert set(ours.metadata) == {k for k in full.fields if not k.startswith("GGUF.")}


def test_tokenizer_from_metadata(tiny: Path) -> None:
    from varcheck.audit.llama import load_llama

    tok = load_llama(tiny).tokenizer
    ids = tok.encode(" the cat 42")
    assert tok.decode(ids) == " the cat 42"
    pieces = [tok.token(i) for i in ids]
    assert pieces[0] == " the"  # the merges apply
    assert pieces[-2:] == ["4", "2"]  # smollm's pre-tokenizer splits every digit
    assert tok.encode("<|im_start|>")[0] == 1  # control tokens are matched whole
    assert tok.bos_id is None  # add_bos_token is false in the file


def test_sentencepiece_tokenizer(tmp_path: Path) -> None:
    """``tokenizer.ggml.model = llama``: spaces as ▁ with one in front, merges ranked by the
    merged piece's score, bytes outside the vocabulary as <0xXX> tokens, BOS by default."""
    from llama_files import tiny_llama

    from varcheck.audit.llama import load_llama

    tok = load_llama(tiny_llama(tmp_path / "spm.gguf", sentencepiece=True)).tokenizer
    ids = tok.encode("the cat")
    assert ids[0] == 1  # <s>: llama.cpp adds BOS unless the file says otherwise
    assert [tok.tokenizer.id_to_token(i) for i in ids[1:]] == ["▁the", "▁cat"]
    assert tok.decode(ids[1:]) == "the cat"
    accented = tok.encode("é")[1:]
    assert [tok.tokenizer.id_to_token(i) for i in accented] == ["▁", "<0xC3>", "<0xA9>"]
    assert tok.decode(accented) == "é"
