"""Small synthetic GGUF files for the decoder tests, written with the ``gguf`` package's writer.

``tiny_llama`` writes a complete (random, untrained) Llama model: a byte-level BPE vocabulary of
the 256 byte symbols plus a few merges, two blocks, grouped-query attention. The bad-file tests
start from it and damage one thing at a time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

MERGES = ["Ġ t", "h e", "Ġt he", "Ġ a", "i n"]


#: A SentencePiece vocabulary: special tokens, the 256 byte tokens, pieces with their scores.
SPM_PIECES = {"▁": -1.0, "t": -1.5, "h": -1.5, "e": -1.5, "a": -1.5, "c": -1.5}
SPM_PIECES |= {"▁t": -2.0, "he": -3.0, "▁the": -4.0, "at": -5.0, "▁c": -6.0, "▁cat": -7.0}


def _spm_vocab() -> tuple[list[str], list[int], list[float]]:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    tokens += list(SPM_PIECES)
    types += [1] * len(SPM_PIECES)
    scores += list(SPM_PIECES.values())
    return tokens, types, scores


def _vocab() -> tuple[list[str], list[int]]:
    from tokenizers import pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokens = ["<|endoftext|>", "<|im_start|>", *alphabet]
    tokens += ["".join(m.split(" ")) for m in MERGES]
    types = [3, 3] + [1] * (len(tokens) - 2)
    return tokens, types


def tiny_llama(
    path: Path,
    *,
    arch: str = "llama",
    layers: int = 2,
    hidden: int = 32,
    heads: int = 4,
    kv_heads: int = 2,
    ffn: int = 48,
    seed: int = 0,
    block_count: int | None = None,
    pre: str = "smollm",
    scale: float = 0.3,
    sentencepiece: bool = False,
) -> Path:
    """Write a random Llama-architecture GGUF to ``path`` (F32 weights) and return the path."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens, types = _vocab()
    if sentencepiece:
        tokens, types, scores = _spm_vocab()
    dk = hidden // heads
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_name("tiny-llama")
    w.add_block_count(layers if block_count is None else block_count)
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(dk)
    w.add_layer_norm_rms_eps(1e-5)
    if sentencepiece:
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_scores(scores)
        w.add_bos_token_id(1)
        w.add_unk_token_id(0)
    else:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(MERGES)
        w.add_bos_token_id(0)
        w.add_add_bos_token(False)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.normal(size=(rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    w.add_tensor("token_embd.weight", rng.normal(size=(len(tokens), hidden)).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", (1 + 0.1 * rng.normal(size=hidden)).astype(np.float32))
        w.add_tensor(p + "attn_q.weight", mat(heads * dk, hidden) * 4)
        w.add_tensor(p + "attn_k.weight", mat(kv_heads * dk, hidden) * 4)
        w.add_tensor(p + "attn_v.weight", mat(kv_heads * dk, hidden))
        w.add_tensor(p + "attn_output.weight", mat(hidden, heads * dk))
        w.add_tensor(p + "ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", mat(ffn, hidden))
        w.add_tensor(p + "ffn_up.weight", mat(ffn, hidden))
        w.add_tensor(p + "ffn_down.weight", mat(hidden, ffn))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def header_offsets(path: Path) -> dict[str, int]:
    """Byte offsets, for patching: the header counts, each metadata value (by key), each key's
    length (``key:`` + key) and the first tensor record (``tensors``)."""
    import struct

    data = path.read_bytes()
    out = {"tensor_count": 8, "kv_count": 16}
    pos = 24
    (n_kv,) = struct.unpack_from("<Q", data, 16)
    codes = (0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12)
    sizes = dict(zip(codes, (1, 1, 2, 2, 4, 4, 4, 1, 8, 8, 8), strict=True))
    for _ in range(n_kv):
        (klen,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8 : pos + 8 + klen].decode()
        out["key:" + key] = pos  # the key's length
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", data, pos)
        pos += 4
        out[key] = pos
        pos = _skip(data, pos, vtype, sizes)
    out["tensors"] = pos
    return out


def _skip(data: bytes, pos: int, vtype: int, sizes: dict[int, int]) -> int:
    import struct

    if vtype in sizes:
        return pos + sizes[vtype]
    if vtype == 8:
        (n,) = struct.unpack_from("<Q", data, pos)
        return pos + 8 + n
    (item,) = struct.unpack_from("<I", data, pos)
    (count,) = struct.unpack_from("<Q", data, pos + 4)
    pos += 12
    for _ in range(count):
        pos = _skip(data, pos, item, sizes)
    return pos
