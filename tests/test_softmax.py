"""`varcheck softmax`: saturation without 1/√d_k, a narrow band with it."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re

import numpy as np
import pytest

from varcheck.core.estimation import normal_quantile
from varcheck.errors import VarcheckError
from varcheck.teaching.softmax import softmax_metrics, softmax_study


@pytest.mark.parametrize("scale", [0.1, 1.0, 5.0, 40.0])
def test_metrics_match_direct_formulas(scale: float) -> None:
    rng = np.random.default_rng(31)
    logits = rng.standard_normal((6, 9)) * scale
    h, m, j = softmax_metrics(logits)
    shifted = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        h_direct = -np.nansum(p * np.log(p), axis=1)
    j_direct = [np.linalg.norm(np.diag(row) - np.outer(row, row)) for row in p]
    np.testing.assert_allclose(h, h_direct, atol=1e-12)
    np.testing.assert_allclose(m, p.max(axis=1), rtol=1e-14)
    np.testing.assert_allclose(j, j_direct, atol=1e-12)


def test_metrics_of_uniform_and_one_hot() -> None:
    h, m, j = softmax_metrics(np.zeros((1, 8)))
    assert h[0] == pytest.approx(math.log(8)) and m[0] == pytest.approx(1 / 8)
    h, m, j = softmax_metrics(np.array([[1000.0, 0.0, 0.0]]))
    assert h[0] == pytest.approx(0.0, abs=1e-300) and m[0] == 1.0 and j[0] < 1e-200


@pytest.mark.statistical
def test_raw_saturates_scaled_stays_in_band() -> None:
    seed = int(np.random.default_rng(2024).integers(2**31))
    res = softmax_study([4, 32, 256], keys=32, queries=2048, seed=seed)
    raw = [r.raw for r in res.rows]
    sc = [r.scaled for r in res.rows]
    # each step of d_k multiplies the logit sd by 2.8: the change is many standard errors wide,
    # so a strict decrease/increase is required, with a 4-se margin
    for a, b in zip(raw, raw[1:], strict=False):
        assert b.entropy + 4 * math.hypot(a.entropy_se, b.entropy_se) < a.entropy
        assert b.max_weight - 4 * math.hypot(a.max_weight_se, b.max_weight_se) > a.max_weight
    assert raw[-1].max_weight > 0.85 and raw[-1].entropy_fraction < 0.1
    # scaled logits have unit variance at every d_k; the law of q·k/√d_k converges to a normal
    # quickly, so the means differ by little more than their standard errors: allow 4.5 se plus
    # 0.02 for the remaining dependence on d_k
    for s in sc:
        assert abs(s.entropy_fraction - sc[-1].entropy_fraction) < 0.02 + 4.5 * math.hypot(
            s.entropy_fraction_se, sc[-1].entropy_fraction_se
        )
        assert abs(s.max_weight - sc[-1].max_weight) < 0.02 + 4.5 * math.hypot(
            s.max_weight_se, sc[-1].max_weight_se
        )
        assert 0.8 < s.entropy_fraction < 0.95
    # the gradient through a saturated softmax vanishes
    assert raw[-1].jacobian_norm < 0.6 * sc[-1].jacobian_norm


def test_same_seed_same_numbers_and_seed_reported() -> None:
    a = softmax_study([8], keys=16, queries=960, seed=5)
    b = softmax_study([8], keys=16, queries=960, seed=5)
    assert a == b and a.seed == 5
    assert softmax_study([8], keys=16, queries=960).seed >= 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"keys": 1}, "keys"), ({"queries": 10}, "queries"), ({"dk": "0..4"}, "d_k")],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(VarcheckError, match=message):
        softmax_study(**{"dk": [4], "seed": 1, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keys": 1}, "keys must be a whole number in 2..100000, got 1"),
        ({"keys": 8.0}, "keys must be a whole number in 2..100000, got 8.0"),
        ({"keys": True}, "keys must be a whole number in 2..100000, got True"),
        ({"queries": 959}, "queries must be a whole number >= 960 (30 blocks of 32), got 959"),
        ({"queries": 1e4}, "queries must be a whole number >= 960 (30 blocks of 32), got 10000.0"),
        ({"dist": None}, "distribution spec must be a non-empty string like 'normal', got None"),
    ],
)
def test_refusals_say_what_is_accepted(kwargs: dict, message: str) -> None:
    """Guards the messages of the shared whole-number check as softmax words them (queries
    also names its blocks), and that ``dist=None`` is refused rather than read as normal."""
    with pytest.raises(VarcheckError) as err:
        softmax_study(**{"dk": [4], "keys": 8, "queries": 960, "seed": 1, **kwargs})
    assert str(err.value) == message


def test_cli_json(run_cli) -> None:
    res = run_cli(
        "softmax",
        "--dk",
        "4,64",
        "--keys",
        "16",
        "--queries",
        "960",
        "--seed",
        "3",
        "--format",
        "json",
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["command"] == "softmax" and doc["seed"] == 3 and "version" in doc
    assert [r["dk"] for r in doc["rows"]] == [4, 64]
    for row in doc["rows"]:
        for tag in ("raw", "scaled"):
            assert {"entropy", "entropy_se", "max_weight", "jacobian_norm_se"} <= set(row[tag])


# the table's columns after d_k and the logits' label, and the metric each shows
TABLE_COLUMNS = ("logit_sd", "entropy", "entropy_fraction", "max_weight", "jacobian_norm")


def _flat_rows(doc: dict) -> list[dict[str, float]]:
    """JSON rows in the flat layout of the csv and markdown formats (``entropy_raw``, ...)."""
    flat = []
    for row in doc["rows"]:
        out = {"dk": row["dk"], "queries": row["queries"], "logit_sd_raw": row["logit_sd_raw"]}
        out["logit_sd_scaled"] = row["logit_sd_scaled"]
        for tag in ("raw", "scaled"):
            out |= {f"{key}_{tag}": value for key, value in row[tag].items()}
        flat.append(out)
    return flat


@pytest.mark.parametrize("fmt", ["table", "csv-meta", "markdown"])
def test_cli_formats_show_the_seed_and_the_same_numbers(run_cli, fmt: str) -> None:
    """Guards against a format that reports another seed or setting than the run's, or numbers
    other than the JSON (the API result) of the same run, and against wrong logit scales: for
    standard normal entries Var(q·k) = d_k, so raw logits have sd √d_k (2 and 4), scaled 1."""
    args = ("softmax", "--dk", "4,16", "--queries", "960", "--seed", "8")
    doc = json.loads(run_cli(*args, "--format", "json").output)
    assert (doc["seed"], doc["keys"], doc["queries"]) == (8, 64, 960)
    flat = _flat_rows(doc)
    assert [(r["dk"], r["logit_sd_raw"], r["logit_sd_scaled"]) for r in flat] == [
        (4, 2.0, 1.0),
        (16, 4.0, 1.0),
    ]
    res = run_cli(*args, "--format", fmt)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    if fmt == "csv-meta":
        meta = dict(item.split("=", 1) for item in lines[0].removeprefix("# ").split())
        assert (meta["seed"], meta["keys"], meta["queries"]) == ("8", "64", "960")
        rows = list(csv.DictReader(lines[1:]))
        assert [{k: float(v) for k, v in row.items()} for row in rows] == flat  # repr: exact
    elif fmt == "markdown":
        assert "seed `8`" in lines[0] and "L = 64 keys" in lines[0] and "960 queries" in lines[0]
        table = [[c.strip() for c in line.split("|")[1:-1]] for line in lines if line[:1] == "|"]
        header, body = table[0], table[2:]
        assert header[:3] == ["d_k", "logits", "sd"]
        _check_cells(body, flat)
    else:
        assert re.search(r"seed\s+8\s+·", res.output), res.output
        rows = []
        for want in flat:
            i = next(i for i, line in enumerate(lines) if re.match(rf"│\s+{want['dk']} │", line))
            rows += [[c.strip() for c in line.split("│")[1:-1]] for line in lines[i : i + 2]]
        _check_cells(rows, flat)


def _check_cells(rows: list[list[str]], flat: list[dict]) -> None:
    """Each d_k's raw and scaled rows: the logits' sd, then each statistic ± the half-width of
    its 95% interval, 1.96 standard errors (4 significant digits for the value, 2 for it)."""
    z = normal_quantile(0.95)
    for k, want in enumerate(flat):
        for tag, cells in (("raw", rows[2 * k]), ("scaled", rows[2 * k + 1])):
            cells = cells[2:]  # after d_k and the logits' name
            assert float(cells[0]) == pytest.approx(want[f"logit_sd_{tag}"], rel=5e-4)
            for cell, key in zip(cells[1:], TABLE_COLUMNS[1:], strict=True):
                value, half = (float(x) for x in cell.split(" ± "))
                assert value == pytest.approx(want[f"{key}_{tag}"], rel=5e-4), key
                assert half == pytest.approx(z * want[f"{key}_se_{tag}"], rel=5e-2), key


def test_cli_bad_keys(run_cli) -> None:
    """Guards against --keys 1 (no softmax over one key) failing without naming the option
    and its range."""
    res = run_cli("softmax", "--keys", "1")
    assert res.exit_code == 2, res.output
    [line] = res.output.strip().splitlines()
    assert line.startswith("varcheck softmax: error: Invalid value for '--keys': 1 "), line
    assert "2<=x<=100000" in line


def test_cli_plot_writes_png(run_cli, tmp_path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (varcheck[plot])")
    out = tmp_path / "softmax.png"
    res = run_cli("softmax", "--dk", "4,16", "--queries", "960", "--seed", "1", "--plot", str(out))
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 1000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"varcheck: wrote {out}" in res.stderr and "wrote" not in res.stdout


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"dk": [1_000_000], "keys": 100_000}, "GiB"), ({"dk": [4096], "keys": 4096}, "about")],
)
def test_sizes_that_cannot_run_are_refused(kwargs: dict, message: str) -> None:
    # memory (one block of keys) and time (the whole study) are checked before drawing anything
    with pytest.raises(VarcheckError, match=message):
        softmax_study(seed=1, queries=40_000, **kwargs)


def test_cli_refuses_unwritable_plot_before_working(run_cli) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (varcheck[plot])")
    res = run_cli("softmax", "--dk", "4", "--seed", "1", "--plot", "figure.txt")
    assert res.exit_code == 2, res.output
    assert ".txt" in res.output and "d_k" not in res.output


def test_render_refuses_an_unknown_format() -> None:
    """Guards the one format switch (output.formats.write): no silent fallback to Markdown."""
    from rich.console import Console

    from varcheck.teaching.render import render_softmax

    res = softmax_study([4], keys=8, queries=960, seed=1)
    with pytest.raises(ValueError, match="unknown format 'yaml'"):
        render_softmax(res, "yaml", Console(file=io.StringIO()))


def test_softmax_outcome_is_done_or_interrupted(run_cli) -> None:
    """A study has no verdict (#18): its JSON's outcome says only whether it went to its end."""
    res = softmax_study([4], keys=16, queries=960, seed=5)
    assert (res.outcome, res.exit_code) == ("done", 0)
    stopped = dataclasses.replace(res, interrupted=True)
    assert (stopped.outcome, stopped.exit_code) == ("interrupted", 130)
    out = run_cli("softmax", "--dk", "4", "--keys", "16", "--queries", "960", "--format", "json")
    doc = json.loads(out.output)
    assert (doc["outcome"], doc["exit_code"]) == ("done", out.exit_code) == ("done", 0)
