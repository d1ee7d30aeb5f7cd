"""The trend across a run's checkpoints recovers a known growth of chosen heads' logits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from hf_checkpoints import CONFIGS, random_tensors, sentences, write_checkpoint  # noqa: E402

from varcheck.audit.trend import audit_run  # noqa: E402
from varcheck.errors import VarcheckError  # noqa: E402

#: (layer, query head) -> factor per checkpoint step; the last layer only, so that the layers
#: below (and so the heads' inputs) stay unchanged and the logits scale exactly
GROWTH = {(1, 0): 1.3, (1, 2): 1.1}
STEPS = 4


def _run(root: Path) -> list[Path]:
    """Checkpoints of one Qwen2 run (q biases: rows and bias scaled alike)."""
    config, prefix, _ = CONFIGS["qwen2"]
    base = random_tensors(config, prefix)
    dk = config["hidden_size"] // config["num_attention_heads"]
    paths = []
    for step in range(STEPS):
        tensors = {k: v.copy() for k, v in base.items()}
        for (layer, head), factor in GROWTH.items():
            rows = slice(head * dk, (head + 1) * dk)
            for part in ("weight", "bias"):
                tensors[f"{prefix}layers.{layer}.self_attn.q_proj.{part}"][rows] *= factor**step
        paths.append(write_checkpoint(root / f"ckpt-{step}", "qwen2", tensors=tensors))
    return paths


def test_trend_recovers_the_growth_factor_and_names_the_heads(tmp_path: Path) -> None:
    result = audit_run(_run(tmp_path), sentences=sentences(40))
    by_head = {(g.layer, g.head): g for g in result.growth}
    for key, g in by_head.items():
        truth = GROWTH.get(key, 1.0) if key[0] == 1 else 1.0
        # float32 weights and logits: the per-sequence slopes agree with log f to ~1e-6
        assert g.factor == pytest.approx(truth, rel=1e-5)
        assert g.factor_ci.low <= truth * (1 + 1e-5) and g.factor_ci.high >= truth * (1 - 1e-5)
    assert [(g.layer, g.head) for g in result.fastest[:2]] == [(1, 0), (1, 2)]
    layer1 = result.layers[1]
    assert np.all(np.diff(layer1.max_logit) > 0)
    head0 = [next(h for h in a.heads if (h.layer, h.head) == (1, 0)) for a in result.checkpoints]
    ratios = [b.scaled_var / a.scaled_var for a, b in zip(head0, head0[1:], strict=False)]
    assert ratios == pytest.approx([1.3**2] * (STEPS - 1), rel=1e-5)


def test_checkpoints_of_different_shapes_are_refused(tmp_path: Path) -> None:
    a = write_checkpoint(tmp_path / "a", "qwen2")
    b = write_checkpoint(tmp_path / "b", "llama")
    with pytest.raises(VarcheckError, match="accepted: checkpoints of one run"):
        audit_run([a, b], sentences=sentences(5))
