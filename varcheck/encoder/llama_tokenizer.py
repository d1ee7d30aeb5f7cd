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

from ..errors import VarcheckError
from .gguf_file import GGUFFile, require_module

__all__ = ["GGUFTokenizer", "load_tokenizer", "PRE_TOKENIZERS"]

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

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, with the BOS id first when the model uses one."""
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return ids if self.bos_id is None else [self.bos_id, *ids]

    def encode_batch(self, texts: Sequence[str], max_length: int) -> tuple[list[list[int]], int]:
        """Ids of each text cut to ``max_length`` tokens, and how many texts were cut."""
        encoded = [self.encode(t) for t in texts]
        return [ids[:max_length] for ids in encoded], sum(len(ids) > max_length for ids in encoded)

    def decode(self, ids: Sequence[int]) -> str:
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


def _list(file: GGUFFile, key: str, kind: type) -> list[Any]:
    value = file.get(key)
    if not isinstance(value, list) or not all(isinstance(v, kind) for v in value):
        raise VarcheckError(
            f"{file.path}: metadata {key!r} is missing or not a list of {kind.__name__}"
        )
    return value


def load_tokenizer(file: GGUFFile) -> GGUFTokenizer:
    """Build the tokenizer a GGUF file describes (byte-level BPE, ``tokenizer.ggml.model = gpt2``).

    Raises
    ------
    VarcheckError
        When ``tokenizers`` is missing, the tokenizer is of another kind (SentencePiece's
        ``llama``, …) or its metadata is incomplete.
    """
    tokenizers = require_module("tokenizers", "building a GGUF model's tokenizer")
    where = str(file.path)
    kind = file.get("tokenizer.ggml.model")
    if kind == "llama":
        return _sentencepiece(tokenizers, file)
    if kind != "gpt2":
        raise VarcheckError(
            f"{where}: tokenizer.ggml.model {str(kind)[:40]!r} is not supported; accepted: "
            "'gpt2' (byte-level BPE), 'llama' (SentencePiece BPE)"
        )
    tokens = _list(file, "tokenizer.ggml.tokens", str)
    merges = _list(file, "tokenizer.ggml.merges", str)
    types = file.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(token, index)
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    if any(len(p) != 2 for p in pairs):
        raise VarcheckError(f"{where}: a tokenizer.ggml.merges entry is not two tokens")
    try:
        tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=pairs))
    except Exception as exc:  # noqa: BLE001 - tokenizers raises a bare Exception
        raise VarcheckError(f"{where}: cannot build the tokenizer ({str(exc)[:60]})") from None
    tok.pre_tokenizer = _pre_tokenizer(
        tokenizers, str(file.get("tokenizer.ggml.pre", "default")), where
    )
    tok.decoder = tokenizers.decoders.ByteLevel()
    special = [
        tokenizers.AddedToken(t, special=True, normalized=False)
        for t, kind_id in zip(tokens, types, strict=False)
        if kind_id in _SPECIAL_TYPES
    ]
    tok.add_special_tokens(special)
    return GGUFTokenizer(tok, _bos(file, len(tokens)), str(file.get("tokenizer.ggml.pre")))


def _bos(file: GGUFFile, n_tokens: int) -> int | None:
    """The BOS id to put first, or None; llama.cpp adds it unless the file says otherwise."""
    bos = file.get("tokenizer.ggml.bos_token_id")
    add_bos = bool(file.get("tokenizer.ggml.add_bos_token", True)) and isinstance(bos, int)
    if add_bos and not 0 <= bos < n_tokens:
        raise VarcheckError(f"{file.path}: tokenizer.ggml.bos_token_id {bos} is not a token id")
    return bos if add_bos else None


def _sentencepiece(tokenizers: Any, file: GGUFFile) -> GGUFTokenizer:
    """SentencePiece BPE (``tokenizer.ggml.model = llama``) rebuilt for the tokenizers library."""
    tokens = _list(file, "tokenizer.ggml.tokens", str)
    scores = _list(file, "tokenizer.ggml.scores", float)
    types = file.get("tokenizer.ggml.token_type") or [1] * len(tokens)
    if len(scores) != len(tokens) or len(types) != len(tokens):
        raise VarcheckError(f"{file.path}: tokenizer.ggml.scores/token_type do not match tokens")
    vocab: dict[str, int] = {}
    for index, token in enumerate(tokens):
        vocab.setdefault(token, index)
    ranked = []
    for merged, index in vocab.items():
        if types[index] != 1 or len(merged) < 2:
            continue
        for cut in range(1, len(merged)):
            left, right = merged[:cut], merged[cut:]
            if left in vocab and right in vocab:
                ranked.append((-scores[index], vocab[left], vocab[right], (left, right)))
    ranked.sort()
    unk_id = file.get("tokenizer.ggml.unknown_token_id", 0)
    unk = tokens[unk_id] if isinstance(unk_id, int) and 0 <= unk_id < len(tokens) else None
    model = tokenizers.models.BPE(
        vocab=vocab,
        merges=[pair for *_, pair in ranked],
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
    return GGUFTokenizer(tok, _bos(file, len(tokens)), "sentencepiece")
