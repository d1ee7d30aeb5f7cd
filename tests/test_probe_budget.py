"""A probe without a valid interval says so: fewer calls than an interval needs (a fixed budget
below :data:`~varcheck.core.estimation.MIN_BLOCKS`), or a design too small for one
(:mod:`varcheck.core.probe.budget`), give the scale without an interval, a p-value or a verdict
(``unreliable``, exit 4), with what a valid interval needs, in every format, in the Python API
and in a claim file's rows (which then take no part in Holm).

Why: below 200 calls each head's test failed 5.3-5.9% of the time instead of 5%, and designs
whose calls' slopes are heavy-tailed miss more at any number of calls (docs/probe.md, "When
there is no interval"; the rates at 200 calls: tests/test_probe_family.py).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from scipy import stats

import varcheck
from varcheck.checks.render import check_to_junit
from varcheck.core.estimation import MIN_BLOCKS
from varcheck.core.probe import judge
from varcheck.core.probe.budget import MIN_TAIL, tail_exponent
from varcheck.core.probe.measure import measure
from varcheck.core.probe.target import as_kernel

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "examples" / "attention_kernels.py"
sys.path.insert(0, str(ROOT / "examples"))
import attention_kernels as ak  # noqa: E402

SMALL = {"queries": 8, "keys": 8, "seed": 1}
LAYER = f"{KERNELS}:layer_scaled"
SHORT = (
    f"{MIN_BLOCKS // 10} calls are too few for a valid interval: it needs at least "
    f"{MIN_BLOCKS} (--samples {MIN_BLOCKS})"
)
ARGV = (
    "--dk",
    "16",
    "--queries",
    "8",
    "--keys",
    "8",
    "--samples",
    str(MIN_BLOCKS // 10),
    "--seed",
    "1",
)


@pytest.fixture(scope="module")
def short():  # noqa: ANN201
    """A kernel 1/3 off at a tenth of the calls an interval needs."""
    return varcheck.probe(LAYER, 16, samples=MIN_BLOCKS // 10, args={"layer": 2}, **SMALL)


def test_too_few_calls_give_the_scale_without_an_interval(short) -> None:  # noqa: ANN001
    assert (short.outcome, short.exit_code, short.reason) == ("unreliable", 4, SHORT)
    assert short.min_samples == MIN_BLOCKS and short.calls == MIN_BLOCKS // 10
    assert not short.has_interval and math.isnan(short.ratio_interval.low)
    assert all(math.isnan(x) for x in (short.p_value, short.se, short.precision))
    # the reading is the estimate's: the law and the factor are still named
    assert (short.law.law, short.law.factor_label) == ("1/sqrt(dk)", "1/3")
    for h in short.per_head:
        assert h.outcome == "unreliable" and math.isnan(h.confidence_interval.low)
        assert math.isnan(h.p_value) and math.isnan(h.raw_p_value)


def test_the_fewest_calls_an_interval_needs_give_one() -> None:
    few = varcheck.probe(ak.layer_scaled, 16, samples=MIN_BLOCKS - 1, **SMALL)
    enough = varcheck.probe(ak.layer_scaled, 16, samples=MIN_BLOCKS, **SMALL)
    assert (few.outcome, few.min_samples) == ("unreliable", MIN_BLOCKS)
    assert (enough.outcome, enough.min_samples) == ("fail", None) and enough.has_interval


def test_a_tolerance_without_an_interval_has_no_tost() -> None:
    r = varcheck.probe(ak.attention, 16, samples=MIN_BLOCKS // 10, tolerance=0.05, **SMALL)
    assert r.outcome == "unreliable" and r.equivalence_interval is None
    assert math.isnan(r.p_equivalence) and math.isnan(r.p_outside)
    assert math.isnan(r.per_head[0].p_equivalence)


def test_a_sweep_fits_no_exponent_without_intervals() -> None:
    sweep = varcheck.probe_sweep(ak.attention, [8, 32], samples=MIN_BLOCKS // 10, **SMALL)
    assert sweep.exponent is None and sweep.exit_code == 4
    assert [r.outcome for r in sweep.rows] == ["unreliable"] * 2


def test_a_design_too_small_has_no_interval_at_any_calls() -> None:
    """2 queries × 4 keys at d_k = 2 (tail exponent 2): the reason names a design with one."""
    assert tail_exponent(2, 4, 2) < MIN_TAIL <= tail_exponent(6, 7, 2)
    r = varcheck.probe(ak.noisy, 2, queries=2, keys=4, samples=MIN_BLOCKS, seed=1)
    assert (r.outcome, r.min_samples, r.has_interval) == ("unreliable", None, False)
    assert "heavy-tailed (tail exponent 2 < 6)" in r.reason
    assert r.reason.endswith("(--queries 6 --keys 7)")


@pytest.mark.statistical
def test_a_design_too_small_missed_more_than_alpha_at_the_fewest_calls() -> None:
    """Why the design rule: 2 queries × 4 keys at d_k = 2 (tail exponent 2), a noisy correct
    kernel, 1000 replicates (the heads of one measurement) of 200 calls: the raw intervals
    miss 1/√2 more often than 5% (one-sided binomial test, pinned count; 7.7% of 2000 in
    docs/probe.md)."""
    design = judge.design(2, 2, 4, 1000, None, "bhnd", None)
    m = measure(
        as_kernel(ak.noisy, {"noise": 0.1}),
        design,
        expected=1 / math.sqrt(2),
        seed=1,
        confidence=0.95,
        precision=None,
        calls=MIN_BLOCKS,
        max_seconds=None,
    )
    s = 1 / math.sqrt(2)
    missed = sum(not h.confidence_interval.low <= s <= h.confidence_interval.high for h in m.heads)
    assert stats.binomtest(missed, 1000, 0.05, alternative="greater").pvalue < 0.001
    assert missed == 76


# --- every format ------------------------------------------------------------------------------


def test_the_table_says_why_and_fits_80_columns(run_cli) -> None:  # noqa: ANN001
    res = run_cli("probe", LAYER, "--arg", "layer=2", *ARGV)
    assert res.exit_code == 4, res.stdout
    text = " ".join(res.stdout.split())
    assert "UNRELIABLE" in res.stdout and "no valid interval, no p-value" in text
    assert SHORT in text and "nearest law 1/sqrt(dk) × 1/3" in text
    assert "(no verdict: no interval for this scale can be trusted" in text
    long = [ln for ln in res.stdout.splitlines() if len(ln) > 80 and "reproduce:" not in ln]
    assert not long, long


def test_a_sweep_table_shows_no_interval_and_why(run_cli) -> None:  # noqa: ANN001
    res = run_cli("probe", LAYER, "--arg", "layer=2", *ARGV[:1], "8,32", *ARGV[2:])
    assert res.exit_code == 4, res.stdout
    rows = [ln for ln in res.stdout.splitlines() if "(no valid CI)" in ln]
    assert len(rows) == 2 and all("unreliable" in ln for ln in rows), res.stdout
    assert SHORT in " ".join(res.stdout.split()) and "s ∝ d_k^b" not in res.stdout
    long = [ln for ln in res.stdout.splitlines() if len(ln) > 80 and "reproduce:" not in ln]
    assert not long, long


def test_json_csv_and_markdown_name_the_calls_needed(run_cli) -> None:  # noqa: ANN001
    doc = json.loads(run_cli("probe", LAYER, "--arg", "layer=2", *ARGV, "--format", "json").stdout)
    row = doc["rows"][0]
    assert (doc["outcome"], row["outcome"], row["min_samples"]) == ("unreliable",) * 2 + (
        MIN_BLOCKS,
    )
    assert row["reason"] == SHORT
    none = ("ci_low", "ci_high", "ratio_low", "p_value", "se", "precision")
    assert all(row[key] is None for key in none), {k: row[k] for k in none}
    assert row["per_head"][0]["ci_low"] is None and row["per_head"][0]["p_value"] is None
    res = run_cli("probe", LAYER, "--arg", "layer=2", *ARGV, "--format", "csv-meta")
    assert res.exit_code == 4
    (record,) = csv.DictReader(io.StringIO(res.stdout.split("\n", 1)[1]))
    assert (record["outcome"], record["min_samples"]) == ("unreliable", str(MIN_BLOCKS))
    assert record["ci_low"] == record["p_value"] == ""
    md = run_cli("probe", LAYER, "--arg", "layer=2", *ARGV, "--format", "markdown").stdout
    head, rule, line = md.strip().splitlines()[-3:]
    cells = dict(zip(head.strip("| ").split(" | "), line.strip("| ").split(" | "), strict=True))
    assert (cells["min_samples"], cells["ci_low"], cells["outcome"]) == (
        str(MIN_BLOCKS),
        "—",
        "unreliable",
    )


def test_the_help_names_the_calls_an_interval_needs(run_cli) -> None:  # noqa: ANN001
    """The CLI does not import the threshold (it would load numpy): its words are checked."""
    text = " ".join(run_cli("probe", "--help").stdout.split())
    assert f"an interval needs {MIN_BLOCKS})" in text and f"Below {MIN_BLOCKS} calls" in text
    assert f"4 no valid interval for some row (fewer calls than {MIN_BLOCKS}, or" in text


# --- claim files -------------------------------------------------------------------------------

VARIANCE = '[defaults]\nseed = 3\nsamples = 20000\n\n[[claim]]\nname = "v"\ndk = 4\nclaim = "dk"\n'
TINY = f'\n[[claim]]\nname = "tiny"\nprobe = "{KERNELS}:noisy"\ndk = 2\nqueries = 2\nkeys = 4\n'


def test_a_claim_files_probe_row_without_an_interval_takes_no_part_in_holm(tmp_path) -> None:  # noqa: ANN001
    """A probe claim of a design too small for an interval: its row is unreliable (no interval,
    no p-value) in every format, and the variance claim beside it keeps its p-value alone."""
    alone, both = tmp_path / "alone.toml", tmp_path / "both.toml"
    alone.write_text(VARIANCE)
    both.write_text(VARIANCE + TINY)
    res = varcheck.check(both)
    (v,), (p,) = (c.results for c in res.claims)
    assert (p.outcome, res.outcome, res.exit_code) == ("unreliable", "unreliable", 4)
    assert math.isnan(p.p_value) and math.isnan(p.confidence_interval.low), p
    assert "tail exponent 2 < 6" in p.reason and p.min_samples is None
    assert v.p_value == varcheck.check(alone).claims[0].results[0].p_value
    record = res.to_dict()["claims"][1]["tests"][0]
    assert (record["ci_low"], record["p_value"], record["outcome"]) == (None, None, "unreliable")
    junit = ET.fromstring(check_to_junit(res))
    error = junit.find(".//testcase[@name='tiny']/error")
    assert error is not None and error.get("type") == "unreliable", ET.tostring(junit)
