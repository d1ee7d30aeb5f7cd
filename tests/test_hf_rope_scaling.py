"""RoPE frequency scaling read from a config: Llama 3.1's ``llama3`` rule against its formula,
and the scalings not implemented refused in one line."""

from __future__ import annotations

import math

import pytest
from hf_checkpoints import CONFIGS

from varcheck.audit.families import model_spec
from varcheck.errors import VarcheckError


def _llama3_formula(theta: float, dim: int, factor: float, low: float, high: float, old: int):
    """Llama 3.1's published rule, frequency by frequency, in float64: wavelengths shorter than
    old/high are kept, longer than old/low divided by ``factor``, blended linearly between."""
    out = []
    for p in range(0, dim, 2):
        freq = theta ** (-p / dim)
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(freq)
        elif wavelen > old / low:
            out.append(freq / factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append((1 - smooth) * freq / factor + smooth * freq)
    return out


@pytest.mark.parametrize(
    ("theta", "dim", "factor", "low", "high", "old"),
    [
        (500000.0, 128, 8.0, 1.0, 4.0, 8192),  # Llama 3.1 8B's config
        (500000.0, 64, 32.0, 1.0, 4.0, 8192),  # Llama 3.2 1B's
        (10000.0, 16, 4.0, 2.0, 8.0, 64),  # a short context: every band is populated
    ],
)
def test_llama3_frequencies_follow_the_formula(theta, dim, factor, low, high, old):
    config = dict(CONFIGS["llama"][0], head_dim=dim)
    config["rope_scaling"] = {
        "rope_type": "llama3",
        "factor": factor,
        "low_freq_factor": low,
        "high_freq_factor": high,
        "original_max_position_embeddings": old,
    }
    config["rope_theta"] = theta
    rope = model_spec(config).rope
    assert rope.kind == "llama3"
    expected = _llama3_formula(theta, dim, factor, low, high, old)
    # the checkpoint's reference computes in float32: agreement to a few float32 ulps
    assert rope.inv_freq == pytest.approx(expected, rel=2e-6)
    kept = [
        f
        for f, e in zip(rope.inv_freq, _llama3_formula(theta, dim, 1, low, high, old), strict=True)
        if f == pytest.approx(e, rel=2e-6)
    ]
    assert 0 < len(kept) < dim // 2  # some frequencies kept, some scaled


@pytest.mark.parametrize("kind", ["yarn", "dynamic", "longrope"])
def test_scalings_not_implemented_are_refused_naming_the_accepted(kind):
    config = dict(CONFIGS["llama"][0], rope_scaling={"rope_type": kind, "factor": 4.0})
    with pytest.raises(VarcheckError) as info:
        model_spec(config)
    message = str(info.value)
    assert kind in message and "default, linear, llama3" in message and "\n" not in message
