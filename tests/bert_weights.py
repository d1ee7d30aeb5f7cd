"""Random BERT encoder weights shared by the audit tests (a test helper, not a test module)."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np


def random_bert_weights(
    rng: np.random.Generator, *, d: int, inter: int, layers: int, vocab: int, positions: int
) -> dict[str, np.ndarray]:
    """Random float64 tensors of a BERT encoder, by name, in PyTorch layout."""
    t = {
        "embeddings.word_embeddings.weight": rng.normal(0, 0.5, (vocab, d)),
        "embeddings.position_embeddings.weight": rng.normal(0, 0.1, (positions, d)),
        "embeddings.token_type_embeddings.weight": rng.normal(0, 0.1, (2, d)),
        "embeddings.LayerNorm.weight": 1 + rng.normal(0, 0.1, d),
        "embeddings.LayerNorm.bias": rng.normal(0, 0.1, d),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name, shape in [
            ("attention.self.query", (d, d)),
            ("attention.self.key", (d, d)),
            ("attention.self.value", (d, d)),
            ("attention.output.dense", (d, d)),
            ("intermediate.dense", (inter, d)),
            ("output.dense", (d, inter)),
        ]:
            t[p + name + ".weight"] = rng.normal(0, 1 / math.sqrt(shape[1]), shape)
            t[p + name + ".bias"] = rng.normal(0, 0.1, shape[0])
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + ln + ".weight"] = 1 + rng.normal(0, 0.1, d)
            t[p + ln + ".bias"] = rng.normal(0, 0.1, d)
    return t


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], header: Any = None) -> Path:
    """A safetensors file (8-byte header length, JSON header, data), written without the
    safetensors package; ``header`` replaces the header written."""
    entries: dict[str, Any] = {}
    data = b""
    codes = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.float16): "F16"}
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        entries[name] = {
            "dtype": codes[arr.dtype],
            "shape": list(arr.shape),
            "data_offsets": [len(data), len(data) + len(raw)],
        }
        data += raw
    text = json.dumps(entries if header is None else header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path
