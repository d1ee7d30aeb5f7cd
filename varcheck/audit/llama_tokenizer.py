"""The tokenizer of a GGUF model, built from its metadata with the ``tokenizers`` library.

A GGUF file carries its tokenizer as metadata: ``tokenizer.ggml.model`` (``gpt2`` for byte-level
BPE, ``llama`` for SentencePiece BPE), ``tokens`` (the vocabulary, ids in order), ``merges``
(``"a b"`` pairs by priority; byte-level BPE), ``scores`` (SentencePiece), ``token_type``
(1 normal, 3 control, 4 user-defined, 6 byte, …), ``pre`` (the pre-tokenizer's name as
llama.cpp knows it) and ``add_bos_token``. The BPE itself is the library's. For byte-level BPE
the pre-tokenizer is chosen from ``pre``, as llama.cpp does: the GPT-2 pattern, with every digit
split off first for the StarCoder family (SmolLM's ``smollm``), or Llama 3's pattern. For
SentencePiece (Llama 1/2, Mistral, TinyLlama) spaces become ``▁`` with one put in front, the
merges are every split of a token into two tokens ranked by the merged token's score, and bytes
missing from the vocabulary fall back to its ``<0xXX>`` tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import VarcheckError
from .gguf_file import GGUFFile, require_module
from .tokenizing import CHARS_PER_TOKEN, cut_lines, encode_in_chunks, native_errors

__all__ = ["GGUFTokenizer", "load_tokenizer", "PRE_TOKENIZERS", "MAX_MERGE_STEPS"]

_GPT2 = ("default", "gpt2", "gpt-2", "mpt", "olmo", "jais")
_DIGITS_FIRST = ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva")
_LLAMA3 = ("llama-bpe", "llama3", "llama-v3")
#: The ``tokenizer.ggml.pre`` values understood (byte-level BPE only).
PRE_TOKENIZERS = _GPT2 + _DIGITS_FIRST + _LLAMA3
_LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SPECIAL_TYPES = (3, 4)  # control and user-defined tokens are matched whole, never split
#: Most characters compared while a SentencePiece vocabulary's merges are rebuilt (every split
#: of a token into two tokens): real vocabularies need a few million; one 1 MB token asked for
#: 10^12 before the splits were limited to lengths that tokens have.
MAX_MERGE_STEPS = 200_000_000


@dataclass(frozen=True)
class GGUFTokenizer:
    """A ``tokenizers.Tokenizer`` and the model's BOS convention.

    Attributes
    ----------
    tokenizer : tokenizers.Tokenizer
    bos_id : int or None
        Id put before every sequence, or None when the model adds none.
    pre : str
        The pre-tokenizer's name (``tokenizer.ggml.pre``).
    """

    tokenizer: Any
    bos_id: int | None
    pre: str
    where: str = "the GGUF file"
    longest: int = 1

    def fewest_tokens(self, texts: Sequence[str], max_length: int) -> list[int]:
        """The fewest tokens each text can give (cut as :meth:`encode_batch` cuts it): no token
        covers more bytes than the vocabulary's longest holds, so the plan can be checked
        before the tokenizer runs."""
        chars = CHARS_PER_TOKEN * max_length
        bos = self.bos_id is not None
        return [
            min(max_length, bos + -(-len(t[:chars].encode("utf-8", "replace")) // self.longest))
            for t in texts
        ]

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, with the BOS id first when the model uses one."""
        return self._with_bos(encode_in_chunks(self._encode, [text], self.where))[0]

    def _encode(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def _with_bos(self, encoded: list[list[int]]) -> list[list[int]]:
        return encoded if self.bos_id is None else [[self.bos_id, *ids] for ids in encoded]

    def encode_batch(self, texts: Sequence[str], max_length: int) -> tuple[list[list[int]], int]:
        """Ids of each text cut to ``max_length`` tokens, and how many texts were cut.

        A text is first cut to :data:`~varcheck.audit.tokenizing.CHARS_PER_TOKEN` characters
        per token kept (counted as cut), then encoded in bounded chunks.
        """
        lines, cut = cut_lines(texts, max_length)
        encoded = self._with_bos(encode_in_chunks(self._encode, lines, self.where))
        longer = [c or len(ids) > max_length for c, ids in zip(cut, encoded, strict=True)]
        return [ids[:max_length] for ids in encoded], sum(longer)

    def decode(self, ids: Sequence[int]) -> str:
        with native_errors(self.where, "decode tokens"):
            return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def token(self, index: int) -> str:
        """One token as text (``' Paris'``)."""
        return self.decode([index])


def _pre_tokenizer(tokenizers: Any, pre: str, where: str) -> Any:
    pt = tokenizers.pre_tokenizers
    if pre in _GPT2:
        return pt.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in _DIGITS_FIRST:
        return pt.Sequence(
            [
                pt.Digits(individual_digits=True),
                pt.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
    if pre in _LLAMA3:
        return pt.Sequence(
            [
                pt.Split(tokenizers.Regex(_LLAMA3_PATTERN), behavior="isolated"),
                pt.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    raise VarcheckError(
        f"{where}: tokenizer.ggml.pre {pre[:40]!r} is not supported; accepted: "
        + ", ".join(PRE_TOKENIZERS)
    )


def _list(file: GGUFFile, key: str, kind: type, count: int | None = None) -> list[Any]:
    """Metadata ``key``: a list of ``kind`` (str, float or int; numbers from a numeric array),
    of ``count`` items when given."""
    value = file.get(key)
    if isinstance(value, np.ndarray) and kind in (float, int):
        numbers = value.dtype.kind in ("fiu" if kind is float else "iu")
        value = value.tolist() if numbers else None
    if not isinstance(value, list) or not all(isinstance(v, kind) for v in value):
        raise VarcheckError(
            f"{file.path}: metadata {key!r} is missing or not a list of {kind.__name__}"
        )
    if count is not None and len(value) != count:
        raise VarcheckError(
            f"{file.path}: metadata {key!r} has {len(value):,} items for {count:,} tokens"
        )
    return value


def _token_types(file: GGUFFile, count: int) -> list[int]:
    """``tokenizer.ggml.token_type``: one whole number per token (all normal when absent)."""
    if file.get("tokenizer.ggml.token_type") is None:
        return [1] * count
    return _list(file, "tokenizer.ggml.token_type", int, count)


def load_tokenizer(file: GGUFFile) -> GGUFTokenizer:
    """Build the tokenizer a GGUF file describes (byte-level BPE, ``tokenizer.ggml.model = gpt2``,
    or SentencePiece BPE, ``llama``).

    Raises
    ------
    VarcheckError
        When ``tokenizers`` is missing, the tokenizer is of another kind or its metadata is
        incomplete or inconsistent; the library's own failures (a panic included) are one line.
    """
    tokenizers = require_module("tokenizers", "building a GGUF model's tokenizer")
    where = str(file.path)
    kind = file.get("tokenizer.ggml.model")
    if kind not in ("llama", "gpt2"):
        raise VarcheckError(
            f"{where}: tokenizer.ggml.model {str(kind)[:40]!r} is not supported; accepted: "
            "'gpt2' (byte-level BPE), 'llama' (SentencePiece BPE)"
        )
    with native_errors(where, "build the tokenizer"):
        if kind == "llama":
            return _sentencepiece(tokenizers, file)
        return _byte_level(tokenizers, file)


def _byte_level(tokenizers: Any, file: GGUFFile) -> GGUFTokenizer:
    """Byte-level BPE (``tokenizer.ggml.model = gpt2``)."""
    where = str(file.path)
    tokens = _list(file, "tokenizer.ggml.tokens", str)
    merges = _list(file, "tokenizer.ggml.merges", str)
    types = _token_types(file, len(tokens))
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(token, index)
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    if any(len(p) != 2 for p in pairs):
        raise VarcheckError(f"{where}: a tokenizer.ggml.merges entry is not two tokens")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=pairs))
    tok.pre_tokenizer = _pre_tokenizer(
        tokenizers, str(file.get("tokenizer.ggml.pre", "default")), where
    )
    tok.decoder = tokenizers.decoders.ByteLevel()
    special = [
        tokenizers.AddedToken(t, special=True, normalized=False)
        for t, kind_id in zip(tokens, types, strict=True)
        if kind_id in _SPECIAL_TYPES
    ]
    tok.add_special_tokens(special)
    pre = str(file.get("tokenizer.ggml.pre"))
    return GGUFTokenizer(tok, _bos(file, len(tokens)), pre, where, _longest(tokens))


def _longest(tokens: list[str]) -> int:
    """Bytes of the longest token: at least the bytes of text any token covers."""
    return max((len(t.encode("utf-8")) for t in tokens), default=1) or 1


def _bos(file: GGUFFile, n_tokens: int) -> int | None:
    """The BOS id to put first, or None; llama.cpp adds it unless the file says otherwise."""
    bos = file.get("tokenizer.ggml.bos_token_id")
    add_bos = bool(file.get("tokenizer.ggml.add_bos_token", True)) and isinstance(bos, int)
    if add_bos and not 0 <= bos < n_tokens:
        raise VarcheckError(f"{file.path}: tokenizer.ggml.bos_token_id {bos} is not a token id")
    return bos if add_bos else None


def _ranked_merges(
    file: GGUFFile, vocab: dict[str, int], types: list[int], scores: list[float]
) -> list[tuple[str, str]]:
    """Every split of a normal token into two tokens, ranked by the merged token's score.

    Only cuts where both halves have a length some token has can find two tokens, so those
    alone are tried; their cost (characters compared) is bounded by :data:`MAX_MERGE_STEPS`
    before any is made.
    """
    lengths = {len(t) for t in vocab}
    cuts: dict[int, list[int]] = {}
    steps = 0
    for merged, index in vocab.items():
        if types[index] == 1 and len(merged) >= 2:
            size = len(merged)
            if size not in cuts:
                cuts[size] = [c for c in range(1, size) if c in lengths and size - c in lengths]
            steps += size * len(cuts[size])
    if steps > MAX_MERGE_STEPS:
        raise VarcheckError(
            f"{file.path}: rebuilding the SentencePiece merges would compare about {steps:.2g} "
            f"characters; accepted: at most {MAX_MERGE_STEPS:.0e} (tokens this long are not text)"
        )
    ranked = []
    for merged, index in vocab.items():
        if types[index] != 1 or len(merged) < 2:
            continue
        for cut in cuts[len(merged)]:
            left, right = merged[:cut], merged[cut:]
            if left in vocab and right in vocab:
                ranked.append((-scores[index], vocab[left], vocab[right], (left, right)))
    ranked.sort()
    return [pair for *_, pair in ranked]


def _sentencepiece(tokenizers: Any, file: GGUFFile) -> GGUFTokenizer:
    """SentencePiece BPE (``tokenizer.ggml.model = llama``) rebuilt for the tokenizers library."""
    tokens = _list(file, "tokenizer.ggml.tokens", str)
    scores = _list(file, "tokenizer.ggml.scores", float, len(tokens))
    types = _token_types(file, len(tokens))
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(token, index)
    unk_id = file.get("tokenizer.ggml.unknown_token_id", 0)
    unk = tokens[unk_id] if isinstance(unk_id, int) and 0 <= unk_id < len(tokens) else None
    model = tokenizers.models.BPE(
        vocab=vocab,
        merges=_ranked_merges(file, vocab, types, scores),
        unk_token=unk,
        fuse_unk=True,
        byte_fallback=True,
    )
    tok = tokenizers.Tokenizer(model)
    norm, dec = tokenizers.normalizers, tokenizers.decoders
    tok.normalizer = norm.Sequence([norm.Prepend("▁"), norm.Replace(" ", "▁")])
    tok.decoder = dec.Sequence(
        [dec.Replace("▁", " "), dec.ByteFallback(), dec.Fuse(), dec.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens(
        [
            tokenizers.AddedToken(t, special=True, normalized=False)
            for t, kind in zip(tokens, types, strict=True)
            if kind in _SPECIAL_TYPES
        ]
    )
    return GGUFTokenizer(
        tok, _bos(file, len(tokens)), "sentencepiece", str(file.path), _longest(tokens)
    )
