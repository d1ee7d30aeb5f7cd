"""Unit tests of ``varcheck.audit.bert`` that pin what mutation testing found unchecked.

Each test names the bug it guards against. Expected values come from hand arithmetic, closed
formulas (scipy's normal CDF for the erf GELU, the tanh formula written out) or a separate float64
forward pass (``_reference_states``) that shares no code with varcheck: explicit loops over heads,
``np.var`` for the LayerNorm, an explicit softmax.

Tolerance of the forward-pass comparisons: varcheck runs in float32 (unit round-off u = 2⁻²⁴).
A float32 dot product of n terms is off by about √n·u of the product of the norms; the longest
sum here has n = 16 terms (intermediate_size), there are at most 5 stages (embedding, two blocks
of two sub-layers), and every stage ends in a LayerNorm whose output has RMS ≈ 1, so the error
of a hidden state is about √(5·16)·u ≈ 5e-7; ``ATOL`` = 1e-5 is 20 times that. The mutants these
tests separate change the outputs by 1e-2 or more (a wrong activation, a wrong ε).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bert_weights import random_bert_weights
from scipy.stats import norm

from varcheck.audit import bert
from varcheck.errors import VarcheckError

HAVE_MODELS_EXTRA = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers"))
needs_extra = pytest.mark.skipif(
    not HAVE_MODELS_EXTRA,
    reason="safetensors/tokenizers are not installed (pip install 'varcheck[models]')",
)

ATOL = 1e-5  # float32 round-off of the tiny forward pass, derived in the module docstring

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "."]
ID = {w: i for i, w in enumerate(VOCAB)}
CLS, SEP, UNK = ID["[CLS]"], ID["[SEP]"], ID["[UNK]"]
V = len(VOCAB)


# --- building tiny checkpoints --------------------------------------------------------------------


def _weights(rng, *, d=8, inter=16, layers=1, vocab=V, positions=16):
    """Random float64 tensors of a BERT encoder, by name, in PyTorch layout."""
    return random_bert_weights(
        rng, d=d, inter=inter, layers=layers, vocab=vocab, positions=positions
    )


def _config(weights, *, heads=2, drop=(), **changes):
    """A config.json dict matching ``weights``; ``drop`` removes keys, ``changes`` sets them."""
    d = weights["embeddings.LayerNorm.weight"].shape[0]
    layers = sum(1 for k in weights if k.endswith("attention.self.query.weight"))
    inter = weights["encoder.layer.0.intermediate.dense.weight"].shape[0] if layers else 4 * d
    config = {
        "model_type": "bert",
        "hidden_size": d,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "intermediate_size": inter,
        "max_position_embeddings": weights["embeddings.position_embeddings.weight"].shape[0],
        "layer_norm_eps": 1e-12,
        "hidden_act": "gelu",
        **changes,
    }
    for key in drop:
        del config[key]
    return config


def _write(
    folder: Path,
    weights,
    config,
    *,
    prefix="",
    dtype=np.float32,
    extra=None,
    vocab_txt=True,
    tokenizer_config=None,
):
    """Save a checkpoint folder: model.safetensors, config.json, vocab.txt (and options)."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tensors = {prefix + k: np.ascontiguousarray(v, dtype=dtype) for k, v in weights.items()}
    tensors.update(extra or {})
    save_file(tensors, folder / "model.safetensors")
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if vocab_txt:
        (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    if tokenizer_config is not None:
        (folder / "tokenizer_config.json").write_text(
            json.dumps(tokenizer_config), encoding="utf-8"
        )
    return folder


def _direct(weights, *, heads=2, eps=1e-12, activation="gelu", max_positions=None):
    """A BertCheckpoint built in memory (no files, no tokenizer), float32 like a loaded one."""
    d = weights["embeddings.LayerNorm.weight"].shape[0]
    layers = sum(1 for k in weights if k.endswith("attention.self.query.weight"))
    inter = weights["encoder.layer.0.intermediate.dense.weight"].shape[0] if layers else 4 * d
    positions = weights["embeddings.position_embeddings.weight"].shape[0]
    cfg = bert.BertConfig(
        hidden_size=d,
        num_layers=layers,
        num_heads=heads,
        head_dim=d // heads,
        intermediate_size=inter,
        max_positions=positions if max_positions is None else max_positions,
        layer_norm_eps=eps,
        activation=activation,
        name="tiny",
    )
    w32 = {k: v.astype(np.float32) for k, v in weights.items()}
    return bert.BertCheckpoint(Path("tiny"), cfg, w32, None)


# --- an independent float64 forward pass ----------------------------------------------------------


def _ref_layer_norm(x, gain, bias, eps):
    z = (x - x.mean(axis=-1, keepdims=True)) / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    return z * gain + bias


def _ref_activation(x, kind):
    if kind == "relu":
        return np.where(x > 0, x, 0.0)
    if kind == "gelu":
        return x * norm.cdf(x)
    # gelu_new / gelu_pytorch_tanh (Hendrycks & Gimpel 2016, eq. for the tanh approximation)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _reference_states(weights, ids, *, heads=2, eps=1e-12, activation="gelu", layers=None):
    """Hidden states of one unpadded sequence, float64: [embedding, layer 0 output, ...]."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = _ref_layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    states = [x]
    total = sum(1 for k in w if k.endswith("attention.self.query.weight"))
    for i in range(total if layers is None else layers):
        p = f"encoder.layer.{i}."

        def dense(h, name, p=p):
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (dense(x, "attention.self." + s) for s in ("query", "key", "value"))
        dk = q.shape[1] // heads
        context = np.zeros_like(q)
        for head in range(heads):
            cols = slice(head * dk, (head + 1) * dk)
            logits = q[:, cols] @ k[:, cols].T / math.sqrt(dk)
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            context[:, cols] = (e / e.sum(axis=1, keepdims=True)) @ v[:, cols]
        a = _ref_layer_norm(
            dense(context, "attention.output.dense") + x,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
            eps,
        )
        inner = _ref_activation(dense(a, "intermediate.dense"), activation)
        x = _ref_layer_norm(
            dense(inner, "output.dense") + a,
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
            eps,
        )
        states.append(x)
    return states


# --- the activation functions ---------------------------------------------------------------------

POINTS = np.array([-3.0, -1.7, -0.5, 0.0, 0.3, 1.5, 2.5])


def test_relu_is_max_of_x_and_zero():
    """ReLU written with a wrong floor (max(x, 1)), a dropped argument, or not recognised."""
    np.testing.assert_array_equal(
        bert._activation(POINTS, "relu"), [0.0, 0.0, 0.0, 0.0, 0.3, 1.5, 2.5]
    )


def test_erf_gelu_is_x_times_normal_cdf():
    """The exact GELU x·Φ(x) (scipy's normal CDF as reference) replaced by another curve."""
    np.testing.assert_allclose(bert._activation(POINTS, "gelu"), POINTS * norm.cdf(POINTS), 1e-14)


@pytest.mark.parametrize("kind", ["gelu_new", "gelu_pytorch_tanh"])
def test_tanh_gelu_matches_its_formula(kind):
    """Any change to the tanh approximation: √(2/π), 0.044715, the x³ term, ½·x·(1 + tanh).

    Reference: the formula evaluated with ``math.tanh`` point by point, and a hand value
    at x = 1 (0.5·(1 + tanh(√(2/π)·1.044715)) = 0.8411919906082768). Points avoid 0 and ±1,
    where x³ = x⁴ or x·3 = x³ could hide a wrong power.
    """
    c = math.sqrt(2 / math.pi)
    expected = [0.5 * x * (1 + math.tanh(c * (x + 0.044715 * x**3))) for x in POINTS]
    np.testing.assert_allclose(bert._activation(POINTS, kind), expected, rtol=1e-14, atol=0)
    assert bert._activation(np.array([1.0]), kind)[0] == pytest.approx(0.8411919906082768, 1e-15)


def test_tanh_gelu_approximates_the_exact_gelu():
    """A tanh GELU that is not an approximation of x·Φ(x) at all (e.g. 1 − tanh, 3/π).

    The tanh form stays within 5e-4 of x·Φ(x) on the whole real line (its largest gap, about
    4.7e-4 at |x| ≈ 2.7, was located on a dense grid when this test was written); a wrong
    constant such as √(3/π) opens gaps of about 0.047.
    """
    x = np.linspace(-6, 6, 1201)
    gap = np.abs(bert._activation(x, "gelu_new") - x * norm.cdf(x))
    assert gap.max() < 5e-4


# --- config.json ----------------------------------------------------------------------------------


@needs_extra
def test_model_type_defaults_to_bert(tmp_path):
    """A config.json without ``model_type`` (old BERT checkpoints have none) is refused."""
    w = _weights(np.random.default_rng(1))
    ckpt = bert.load_checkpoint(_write(tmp_path, w, _config(w, drop=["model_type"])))
    assert ckpt.config.hidden_size == 8


@needs_extra
@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query"])
def test_relative_position_embeddings_are_refused(tmp_path, kind):
    """``position_embedding_type`` not read, so relative-position models run as absolute ones."""
    w = _weights(np.random.default_rng(2))
    folder = _write(tmp_path, w, _config(w, position_embedding_type=kind))
    with pytest.raises(VarcheckError, match="only absolute position embeddings"):
        bert.load_checkpoint(folder)


@needs_extra
def test_absolute_position_embeddings_are_accepted(tmp_path):
    """An explicit ``position_embedding_type: absolute`` refused."""
    w = _weights(np.random.default_rng(2))
    folder = _write(tmp_path, w, _config(w, position_embedding_type="absolute"))
    assert bert.load_checkpoint(folder).config.max_positions == 16


@needs_extra
def test_a_single_head_is_allowed(tmp_path):
    """``heads < 2`` instead of ``heads < 1``: a one-head model refused as "not a multiple".

    The one-head forward pass is also compared with the float64 reference (d_k = d = 8).
    """
    w = _weights(np.random.default_rng(3))
    ckpt = bert.load_checkpoint(_write(tmp_path, w, _config(w, heads=1)))
    assert (ckpt.config.num_heads, ckpt.config.head_dim) == (1, 8)
    ids = [CLS, ID["the"], ID["cat"], SEP]
    got = bert.forward(ckpt, bert.TokenBatch.from_ids([ids])).hidden_states[-1][0]
    np.testing.assert_allclose(got, _reference_states(w, ids, heads=1)[-1], rtol=0, atol=ATOL)


@needs_extra
def test_zero_heads_are_refused(tmp_path):
    """The lower bound of the head count dropped: 0 heads would divide by zero."""
    w = _weights(np.random.default_rng(3))
    with pytest.raises(VarcheckError, match="num_attention_heads 0 is not accepted"):
        bert.load_checkpoint(_write(tmp_path, w, _config(w, heads=0)))


def _assert_position_limit(ckpt: bert.BertCheckpoint, limit: int) -> None:
    """``limit`` tokens at most: encode's max_length range and the forward pass both end there."""
    assert ckpt.config.max_positions == limit
    expected = rf"max_length \d+ is out of range; accepted: 3 to {limit}"
    with pytest.raises(VarcheckError, match=expected):
        ckpt.encode(["the cat"], max_length=limit + 1)
    with pytest.raises(VarcheckError, match=f"at most {limit}"):
        bert.forward(ckpt, bert.TokenBatch.from_ids([[CLS] + [ID["cat"]] * (limit - 1) + [SEP]]))


@needs_extra
def test_max_position_embeddings_is_read(tmp_path):
    """``max_position_embeddings`` ignored: a model trained on 8 positions used up to its table.

    The table has 16 rows but config.json says 8, so 8 is the limit: longer batches are refused,
    and encode's max_length range ends at 8.
    """
    w = _weights(np.random.default_rng(4))
    ckpt = bert.load_checkpoint(_write(tmp_path, w, _config(w, max_position_embeddings=8)))
    _assert_position_limit(ckpt, 8)


@needs_extra
def test_max_position_embeddings_defaults_to_512(tmp_path):
    """The default of ``max_position_embeddings`` (512, BERT's) changed, e.g. to 513.

    The position table has 600 rows, so only the default limits the model.
    """
    w = _weights(np.random.default_rng(5), positions=600)
    folder = _write(tmp_path, w, _config(w, drop=["max_position_embeddings"]))
    assert bert.load_checkpoint(folder).config.max_positions == 512


@needs_extra
def test_max_positions_is_cut_to_the_position_table(tmp_path):
    """max_positions not cut to the rows of the position table (config says 512, table has 16).

    Without the cut a 17-token sequence would index past the table (a numpy broadcast error)
    instead of the clear "at most 16" error, and encode would accept max_length 17.
    """
    w = _weights(np.random.default_rng(6), positions=16)
    ckpt = bert.load_checkpoint(_write(tmp_path, w, _config(w, max_position_embeddings=512)))
    _assert_position_limit(ckpt, 16)


@needs_extra
def test_missing_position_table_is_a_clear_error(tmp_path):
    """The position-table cut evaluated without a table: AttributeError on None, not an error
    naming the missing tensor."""
    w = _weights(np.random.default_rng(7))
    config = _config(w)
    del w["embeddings.position_embeddings.weight"]
    folder = _write(tmp_path, w, config)
    with pytest.raises(VarcheckError, match="missing tensor 'embeddings.position_embeddings"):
        bert.load_checkpoint(folder)


@needs_extra
@pytest.mark.parametrize("eps", [0.5, 1e-3])
def test_layer_norm_eps_is_read(tmp_path, eps):
    """``layer_norm_eps`` ignored (1e-12 used whatever config.json says).

    With ε = 0.5 the LayerNorm of a unit-variance row divides by √1.5 instead of 1; the
    embedding output is compared with the float64 reference using the same ε.
    """
    w = _weights(np.random.default_rng(8))
    ckpt = bert.load_checkpoint(_write(tmp_path, w, _config(w, layer_norm_eps=eps)))
    assert ckpt.config.layer_norm_eps == eps
    ids = [CLS, ID["the"], ID["mat"], SEP]
    got = bert.forward(ckpt, bert.TokenBatch.from_ids([ids])).hidden_states
    ref = _reference_states(w, ids, eps=eps)
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g[0], r, rtol=0, atol=ATOL)


@needs_extra
def test_layer_norm_eps_defaults_to_bert_value(tmp_path):
    """The default ε (1e-12, BERT's) changed, e.g. to 1.000000000001 (a 1 instead of 1e-12).

    With gain 1 and bias 0 the embedding output must then have per-token variance 1 − ε ≈ 1;
    an ε of 1 would give variance ½ for unit-variance inputs.
    """
    w = _weights(np.random.default_rng(9))
    w["embeddings.LayerNorm.weight"] = np.ones(8)
    w["embeddings.LayerNorm.bias"] = np.zeros(8)
    ckpt = bert.load_checkpoint(_write(tmp_path, w, _config(w, drop=["layer_norm_eps"])))
    assert ckpt.config.layer_norm_eps == 1e-12
    emb = bert.forward(ckpt, bert.TokenBatch.from_ids([[CLS, ID["cat"], SEP]])).hidden_states[0][0]
    np.testing.assert_allclose(emb.astype(np.float64).var(axis=-1), 1.0, rtol=1e-5)


@needs_extra
@pytest.mark.parametrize("activation", ["gelu", "gelu_new", "gelu_pytorch_tanh", "relu"])
def test_forward_uses_the_configured_activation(tmp_path, activation):
    """``hidden_act`` not honoured (e.g. "relu" falling through to the tanh GELU).

    Two layers, two heads, a padded batch: the real tokens of each sequence equal the float64
    reference of that sequence alone, state by state.
    """
    w = _weights(np.random.default_rng(10), layers=2)
    ckpt = bert.load_checkpoint(_write(tmp_path, w, _config(w, hidden_act=activation)))
    seqs = [[CLS, ID["the"], ID["cat"], ID["sat"], ID["."], SEP], [CLS, ID["mat"], SEP]]
    fp = bert.forward(ckpt, bert.TokenBatch.from_ids(seqs))
    assert len(fp.hidden_states) == 3
    for row, ids in enumerate(seqs):
        ref = _reference_states(w, ids, activation=activation)
        for g, r in zip(fp.hidden_states, ref, strict=True):
            assert g.dtype == np.float32
            np.testing.assert_allclose(g[row, : len(ids)], r, rtol=0, atol=ATOL)


# --- where the checkpoint is, and its name --------------------------------------------------------


@needs_extra
def test_snapshots_folder_outside_the_cache_keeps_its_own_name(tmp_path):
    """The Hugging Face cache rule applied when only one of its two conditions holds.

    ``work/snapshots/v1`` is not a cache entry (no ``models--`` grandparent), and
    ``models--org--x/extra/v2`` is not a snapshot: both are named after their folder.
    """
    w = _weights(np.random.default_rng(11))
    one = _write(tmp_path / "work" / "snapshots" / "v1", w, _config(w))
    two = _write(tmp_path / "models--org--x" / "extra" / "v2", w, _config(w))
    assert bert.load_checkpoint(one).config.name == "v1"
    assert bert.load_checkpoint(two).config.name == "v2"


def test_display_name_of_the_root_folder():
    """A folder without a name (the file-system root) named "None" instead of its path."""
    root = Path(Path.cwd().anchor)
    assert bert._display_name(root) == str(root)


@needs_extra
def test_cache_snapshot_named_alike_however_the_path_is_spelled(tmp_path, monkeypatch):
    """The report name of a cache snapshot depends on whether its path is given relatively."""
    w = _weights(np.random.default_rng(12))
    snap = _write(tmp_path / "models--some-org--tiny" / "snapshots" / "abc123", w, _config(w))
    assert bert.load_checkpoint(snap).config.name == "some-org/tiny"
    monkeypatch.chdir(snap)
    assert bert.load_checkpoint(".").config.name == "some-org/tiny"


# --- the tensors ----------------------------------------------------------------------------------


@needs_extra
def test_shortest_prefix_wins_not_the_alphabetically_first(tmp_path):
    """The prefix chosen by string order instead of length.

    A task checkpoint holds the encoder under ``bert.`` and an auxiliary word table under
    ``aux.bert.`` (alphabetically first, but longer): the encoder must be the one loaded.
    """
    w = _weights(np.random.default_rng(13))
    aux = {"aux.bert.embeddings.word_embeddings.weight": np.full((3, 8), 7.0, np.float32)}
    ckpt = bert.load_checkpoint(_write(tmp_path, w, _config(w), prefix="bert.", extra=aux))
    np.testing.assert_array_equal(
        ckpt.tensor("embeddings.word_embeddings.weight"),
        w["embeddings.word_embeddings.weight"].astype(np.float32),
    )
    assert not any(name.startswith(("bert.", "aux.")) for name in ckpt.weights)


@needs_extra
def test_float64_weights_become_float32_and_integer_buffers_stay(tmp_path):
    """The float32 conversion skipped for float tensors or applied to integer buffers.

    Real BERT checkpoints carry an int64 ``embeddings.position_ids`` buffer; the float tensors
    must arrive as float32 (the documented dtype of the weights and of the hidden states).
    """
    w = _weights(np.random.default_rng(14))
    ids = {"embeddings.position_ids": np.arange(16, dtype=np.int64)[None, :]}
    ckpt = bert.load_checkpoint(_write(tmp_path, w, _config(w), dtype=np.float64, extra=ids))
    assert ckpt.weights["embeddings.position_ids"].dtype == np.int64
    np.testing.assert_array_equal(
        ckpt.weights["embeddings.position_ids"], ids["embeddings.position_ids"]
    )
    assert {v.dtype for k, v in ckpt.weights.items() if k != "embeddings.position_ids"} == {
        np.dtype(np.float32)
    }
    np.testing.assert_array_equal(
        ckpt.tensor("encoder.layer.0.intermediate.dense.weight"),
        w["encoder.layer.0.intermediate.dense.weight"].astype(np.float32),
    )
    states = bert.forward(ckpt, bert.TokenBatch.from_ids([[CLS, ID["cat"], SEP]])).hidden_states
    assert all(s.dtype == np.float32 for s in states)


@needs_extra
def test_no_encoder_error_names_the_weights_file(tmp_path):
    """The "not a BERT-style checkpoint" error names "None" instead of the file it read."""
    from safetensors.numpy import save_file

    tmp_path.joinpath("config.json").write_text(
        json.dumps(_config(_weights(np.random.default_rng(15)))), encoding="utf-8"
    )
    save_file({"w": np.zeros((2, 2), np.float32)}, tmp_path / "model.safetensors")
    tmp_path.joinpath("vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    with pytest.raises(VarcheckError) as info:
        bert.load_checkpoint(tmp_path)
    message = str(info.value)
    assert message.startswith(str(tmp_path / "model.safetensors") + ": not a BERT-style checkpoint")


# --- the tokenizer --------------------------------------------------------------------------------


@needs_extra
def test_tokenizer_json_is_used(tmp_path):
    """``tokenizer.json`` looked for under another name: a folder with only it is refused.

    The file is a cased word-piece tokenizer, so "The" is unknown ([UNK]) and "cat" is not.
    """
    from tokenizers.implementations import BertWordPieceTokenizer

    vocab = tmp_path / "vocab" / "vocab.txt"
    vocab.parent.mkdir()
    vocab.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    w = _weights(np.random.default_rng(16))
    folder = _write(tmp_path / "ckpt", w, _config(w), vocab_txt=False)
    BertWordPieceTokenizer(str(vocab), lowercase=False).save(str(folder / "tokenizer.json"))
    ckpt = bert.load_checkpoint(folder)
    assert ckpt.encode(["The cat"]) == [[CLS, UNK, ID["cat"], SEP]]


@needs_extra
@pytest.mark.parametrize(
    ("tokenizer_config", "lower"),
    [
        (None, True),  # no tokenizer_config.json: BERT's default, lower case
        ({}, True),  # the file without the key: the same default
        ({"do_lower_case": True}, True),
        ({"do_lower_case": False}, False),
        ({"do_lower_case": False, "model_max_length": 512}, False),
    ],
)
def test_do_lower_case_from_tokenizer_config(tmp_path, tokenizer_config, lower):
    """vocab.txt tokenizers: ``do_lower_case`` not read, read under another key or file name,
    a wrong default when it is absent, or not passed on to the tokenizer.

    With lower case "The" becomes "the" (id 5), without it "The" is not in the vocabulary.
    """
    w = _weights(np.random.default_rng(17))
    folder = _write(tmp_path, w, _config(w), tokenizer_config=tokenizer_config)
    ckpt = bert.load_checkpoint(folder)
    first = ID["the"] if lower else UNK
    assert ckpt.encode(["The cat"]) == [[CLS, first, ID["cat"], SEP]]


# A user whose locale is not UTF-8 (Windows' cp1252, a POSIX "C" locale without UTF-8 mode)
# must read the same checkpoint: config.json and tokenizer_config.json are UTF-8 by definition.
_LOCALE_SCRIPT = """
import json, locale, sys
from varcheck.audit import bert
from varcheck.errors import VarcheckError
out = {"encoding": locale.getpreferredencoding(False)}
try:
    out["ids"] = bert.load_checkpoint(sys.argv[1]).encode(["The cat"])[0]
except VarcheckError as exc:
    out["error"] = str(exc)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def ascii_locale_load(tmp_path_factory):
    """Load a checkpoint with non-ASCII text in its JSON files from a Python in the C locale."""
    if not HAVE_MODELS_EXTRA:
        pytest.skip("safetensors/tokenizers are not installed")
    folder = tmp_path_factory.mktemp("ascii") / "ckpt"
    w = _weights(np.random.default_rng(18))
    _write(
        folder,
        w,
        _config(w, _name_or_path="Zürich/bért-ä"),
        tokenizer_config={"do_lower_case": False, "name_or_path": "Zürich/bért-ä"},
    )
    # _write's json.dumps escapes non-ASCII (ensure_ascii): rewrite both files as raw UTF-8 bytes
    for name in ("config.json", "tokenizer_config.json"):
        raw = json.loads((folder / name).read_text(encoding="utf-8"))
        (folder / name).write_bytes(json.dumps(raw, ensure_ascii=False).encode("utf-8"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHON"))}
    env.update(LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    env["PYTHONPATH"] = str(Path(bert.__file__).resolve().parents[2])
    proc = subprocess.run(
        [sys.executable, "-c", _LOCALE_SCRIPT, str(folder)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    if out["encoding"].lower().replace("-", "").replace("_", "") in ("utf8", "utf8mb4"):
        pytest.skip("this platform has no non-UTF-8 locale to test with")
    return folder, out


def test_config_json_is_read_as_utf8_in_any_locale(ascii_locale_load):
    """config.json read in the locale's encoding: non-ASCII text breaks loading under "C"."""
    folder, out = ascii_locale_load
    assert "error" not in out, out
    assert bert.load_checkpoint(folder).config.name == "ckpt"  # and in this process's locale


def test_tokenizer_config_is_read_as_utf8_in_any_locale(ascii_locale_load):
    """tokenizer_config.json read in the locale's encoding: the decode error is swallowed and
    ``do_lower_case: false`` silently becomes true (cased text lowercased)."""
    folder, out = ascii_locale_load
    assert out.get("ids") == [CLS, UNK, ID["cat"], SEP], out
    assert bert.load_checkpoint(folder).encode(["The cat"]) == [[CLS, UNK, ID["cat"], SEP]]


# --- encode and max_length ------------------------------------------------------------------------


@pytest.fixture
def tiny(tmp_path):
    """A loaded one-layer checkpoint with a vocab.txt tokenizer, and its float64 weights."""
    if not HAVE_MODELS_EXTRA:
        pytest.skip("safetensors/tokenizers are not installed")
    w = _weights(np.random.default_rng(19))
    return bert.load_checkpoint(_write(tmp_path, w, _config(w))), w


SENTENCE = "the cat sat on the mat ."
SENTENCE_IDS = [CLS] + [ID[t] for t in SENTENCE.split()] + [SEP]


def test_encode_honours_max_length(tiny):
    """``encode`` drops its ``max_length`` (sentences cut at the model's limit instead)."""
    ckpt, _ = tiny
    assert ckpt.encode([SENTENCE]) == [SENTENCE_IDS]
    assert ckpt.encode([SENTENCE], max_length=5) == [SENTENCE_IDS[:4] + [SEP]]


@pytest.mark.parametrize("limit", [3, 4])
def test_shortest_max_length_is_three(tiny, limit):
    """The lower bound of max_length off by one: 3 ([CLS], one token, [SEP]) refused."""
    ckpt, _ = tiny
    ids, cut = ckpt.encode_counted([SENTENCE, "cat"], max_length=limit)
    assert ids == [SENTENCE_IDS[: limit - 1] + [SEP], [CLS, ID["cat"], SEP]]
    assert cut == 1


def test_max_length_two_is_refused(tiny):
    """The lower bound of max_length dropped: room for [CLS] and [SEP] only."""
    ckpt, _ = tiny
    with pytest.raises(VarcheckError, match=r"max_length 2 is out of range; accepted: 3 to 16 "):
        ckpt.encode(["cat"], max_length=2)


def test_embed_sentences_honours_max_length(tiny):
    """``embed_sentences`` drops ``max_length``: the whole sentence pooled instead of its cut.

    Expected: the mean over the 4 tokens [CLS] the cat [SEP] of the float64 reference.
    """
    ckpt, w = tiny
    got = bert.embed_sentences(ckpt, [SENTENCE, "cat"], max_length=4)
    cut = [CLS, ID["the"], ID["cat"], SEP]
    np.testing.assert_allclose(got[0], _reference_states(w, cut)[-1].mean(axis=0), atol=ATOL)
    short = _reference_states(w, [CLS, ID["cat"], SEP])[-1].mean(axis=0)
    np.testing.assert_allclose(got[1], short, rtol=0, atol=ATOL)
    assert got.dtype == np.float64 and got.shape == (2, 8)


# --- the forward pass -----------------------------------------------------------------------------


def test_sequence_of_exactly_max_positions_runs():
    """The length check off by one: a sequence filling every position refused."""
    w = _weights(np.random.default_rng(20), positions=6)
    ids = [CLS, ID["the"], ID["cat"], ID["on"], ID["mat"], SEP]
    fp = bert.forward(_direct(w), bert.TokenBatch.from_ids([ids]))
    np.testing.assert_allclose(fp.hidden_states[-1][0], _reference_states(w, ids)[-1], atol=ATOL)
    with pytest.raises(VarcheckError, match="a sequence has 7 tokens; this model takes at most 6"):
        bert.forward(_direct(w), bert.TokenBatch.from_ids([ids + [SEP]]))


def test_id_equal_to_vocabulary_size_is_refused():
    """The vocabulary check off by one: id V (one past the table) gives an IndexError instead
    of the clear error; V − 1 is accepted."""
    w = _weights(np.random.default_rng(21))
    bert.forward(_direct(w), bert.TokenBatch.from_ids([[CLS, V - 1, SEP]]))
    with pytest.raises(VarcheckError, match="ids beyond the embedding table"):
        bert.forward(_direct(w), bert.TokenBatch.from_ids([[CLS, V, SEP]]))


def test_one_row_vocabulary_accepts_id_zero():
    """The vocabulary check started at 1 instead of 0: a table of one row refuses id 0."""
    w = _weights(np.random.default_rng(22), vocab=1)
    fp = bert.forward(_direct(w), bert.TokenBatch.from_ids([[0, 0, 0]]))
    np.testing.assert_allclose(
        fp.hidden_states[-1][0], _reference_states(w, [0, 0, 0])[-1], atol=ATOL
    )


def test_empty_batch_gives_empty_states():
    """The vocabulary check without an initial value: a batch of no sequences raises
    "zero-size array" instead of giving empty hidden states."""
    w = _weights(np.random.default_rng(23))
    batch = bert.TokenBatch(np.zeros((0, 4), dtype=np.int64), np.zeros((0, 4), dtype=bool))
    fp = bert.forward(_direct(w), batch)
    assert [s.shape for s in fp.hidden_states] == [(0, 4, 8), (0, 4, 8)]


def test_forward_stops_after_num_layers():
    """``num_layers`` ignored: every layer run and returned."""
    w = _weights(np.random.default_rng(24), layers=3)
    ids = [CLS, ID["the"], ID["cat"], SEP]
    fp = bert.forward(_direct(w), bert.TokenBatch.from_ids([ids]), num_layers=1)
    ref = _reference_states(w, ids, layers=1)
    assert len(fp.hidden_states) == 2
    np.testing.assert_allclose(fp.hidden_states[1][0], ref[1], rtol=0, atol=ATOL)
    assert (
        len(bert.forward(_direct(w), bert.TokenBatch.from_ids([ids]), num_layers=0).hidden_states)
        == 1
    )


def test_forward_pass_keeps_the_mask():
    """ForwardPass.mask not the batch's (None): callers select the real tokens with it."""
    w = _weights(np.random.default_rng(25))
    batch = bert.TokenBatch.from_ids([[CLS, ID["cat"], SEP], [CLS, SEP]])
    fp = bert.forward(_direct(w), batch)
    np.testing.assert_array_equal(fp.mask, [[True, True, True], [True, True, False]])


# --- batching and pooling -------------------------------------------------------------------------


def test_token_batch_pads_with_zeros_and_masks_the_real_tokens():
    """Rows as long as the longest sequence; padding is id 0 and False in the mask."""
    batch = bert.TokenBatch.from_ids([[CLS, ID["cat"], SEP], [CLS, SEP]])
    assert batch.ids.dtype == np.int64 and batch.mask.dtype == bool
    np.testing.assert_array_equal(batch.ids, [[CLS, ID["cat"], SEP], [CLS, SEP, 0]])
    np.testing.assert_array_equal(batch.mask, [[True, True, True], [True, True, False]])


def test_default_batch_size_is_32():
    """The default batch size changed (e.g. 33): 33 sequences must come as 32 + 1."""
    seqs = [[CLS, SEP]] * 33
    groups = list(bert.batches(seqs))
    assert [len(idx) for idx, _ in groups] == [32, 1]
    assert [b.ids.shape for _, b in groups] == [(32, 2), (1, 2)]


def test_batches_group_sequences_by_length():
    """Batches formed in input order instead of by length: more padding than needed.

    Lengths 5, 2, 5, 2 in pairs: sorted by length, each batch is unpadded.
    """
    long, short = [CLS, 5, 6, 7, SEP], [CLS, SEP]
    groups = list(bert.batches([long, short, long, short], batch_size=2))
    assert [idx for idx, _ in groups] == [[1, 3], [0, 2]]
    assert all(b.mask.all() for _, b in groups)
    assert [b.ids.shape for _, b in groups] == [(2, 2), (2, 5)]


def test_mean_pool_by_hand():
    """Mean pooling that multiplies by the token count, or divides by the whole batch's count.

    Row 0 keeps tokens 0, 1 of (1, 3, 100): mean 2; row 1 keeps token 0 of (4, 6, 8): mean 4.
    """
    hidden = np.array([[[1.0, 10.0], [3.0, 30.0], [100.0, 1.0]], [[4.0, 2.0], [6.0, 8.0], [8, 9]]])
    mask = np.array([[True, True, False], [True, False, False]])
    np.testing.assert_array_equal(bert.mean_pool(hidden, mask), [[2.0, 20.0], [4.0, 2.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mean_pool_keeps_the_dtype(dtype):
    """Mean pooling that promotes float32 states to float64 (as numpy's own mean does not)."""
    hidden = np.ones((2, 3, 4), dtype=dtype)
    mask = np.array([[True, True, False], [True, True, True]])
    pooled = bert.mean_pool(hidden, mask)
    assert pooled.dtype == dtype
    assert pooled.dtype == np.mean(hidden, axis=1).dtype


# --- errors at load time that should be one clear line ------------------------------------------


@needs_extra
@pytest.mark.parametrize(
    "changes", [{"max_position_embeddings": None}, {"layer_norm_eps": "small"}]
)
def test_bad_optional_config_values_are_varcheck_errors(tmp_path, changes):
    """A malformed optional value in config.json escapes as a bare TypeError/ValueError."""
    w = _weights(np.random.default_rng(26))
    with pytest.raises(VarcheckError, match="config.json"):
        bert.load_checkpoint(_write(tmp_path, w, _config(w, **changes)))
