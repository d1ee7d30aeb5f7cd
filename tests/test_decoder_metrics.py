"""The bundled decoder audit's per-head metrics are the checkpoint audit's, on the same GGUF file,
at the scale the file declares."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
from hf_checkpoints import sentences

from varcheck.audit import llama
from varcheck.audit.decoder import audit_decoder
from varcheck.audit.hf_audit import audit_hf

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("gguf", "tokenizers")),
    reason="needs varcheck[models] (gguf, tokenizers)",
)

_FIGURES = ("scaled_var", "max_logit", "mean_max", "q999", "entropy", "sink")


@pytest.mark.parametrize("declared", [None, 0.2])
def test_bundled_decoder_metrics_equal_the_checkpoint_audit(tmp_path: Path, monkeypatch, declared):
    from llama_files import tiny_llama

    path = tiny_llama(tmp_path / "tiny.gguf")
    if declared is not None:  # as if the file said attention.scale = 0.2 (1/√d_k is 0.354)
        read = llama._read_config
        monkeypatch.setattr(
            llama,
            "_read_config",
            lambda file: dataclasses.replace(read(file), attention_scale=declared),
        )
    text = sentences(30)  # the fewest with intervals
    bundled = audit_decoder(path, sentences=text)
    checkpoint = audit_hf(path, sentences=text)
    assert bundled.scale_rule == checkpoint.scale_rule
    assert len(bundled.metrics) == len(checkpoint.heads) == 8
    for ours, theirs in zip(bundled.metrics, checkpoint.heads, strict=True):
        assert (ours.layer, ours.head, ours.pairs) == (theirs.layer, theirs.head, theirs.pairs)
        assert ours.scale == pytest.approx(theirs.scale, rel=1e-7)
        # two float32 forward passes (adjacent-pair RoPE on the file's rows in one, rotate-half
        # on rows put back in the other) through two layers: float32 rounding (6e-8 a step,
        # 1.3e-7 seen) stays far inside 1e-5
        for name in _FIGURES:
            assert getattr(ours, name) == pytest.approx(getattr(theirs, name), rel=1e-5), name
        for name in ("mean_max_ci", "entropy_ci", "sink_ci"):
            assert tuple(getattr(ours, name)) == pytest.approx(
                tuple(getattr(theirs, name)), rel=1e-5
            )
    if declared is not None:
        assert bundled.scale_rule == "attention.scale" and bundled.metrics[0].scale == declared
