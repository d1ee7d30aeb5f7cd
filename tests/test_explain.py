"""`varcheck explain`: the exact law of np.var(A @ B) and the judgement of an observed value."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re

import numpy as np
import pytest

from varcheck.errors import VarcheckError
from varcheck.teaching.explain import (
    FEW_ENTRIES,
    GROWING_SHAPES,
    HEAVY_KURTOSIS,
    SKEW_SD,
    exact_moments,
    explain,
    parse_shape,
    simulate_np_var,
)
from varcheck.teaching.render import explain_account

# With about a dozen statistical comparisons per run, |z| < 4.5 keeps the chance of any false
# alarm below 12 * 7e-6 ~ 1e-4 (two-sided normal tail at 4.5 sd).
Z_TOL = 4.5


def _simulate(shape: str, dist: str, ddof: int, seed: int, reps: int = 60_000) -> np.ndarray:
    return simulate_np_var(shape, reps, ddof=ddof, a_dist=dist, seed=seed)


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("shape", "dist", "ddof"),
    [
        ("2x2x2", "normal", 0),
        ("2x2x2", "normal", 1),
        ("3x2x4", "normal:mean=0.5", 0),
        ("2x3x2", "uniform:mean=1,sd=0.5", 1),
        ("4x1x3", "laplace:mean=-0.3", 1),
        ("2x2x3", "rademacher:mean=0.2", 0),
    ],
)
def test_exact_mean_and_sd_match_simulation(shape: str, dist: str, ddof: int) -> None:
    mom = exact_moments(shape, ddof, dist)
    rng = np.random.default_rng(20240611)
    s = _simulate(shape, dist, ddof, seed=int(rng.integers(2**31)))
    r = s.shape[0]
    # mean: standard error of a sample mean of R independent experiments
    z_mean = (s.mean() - mom.expected) / (s.std(ddof=1) / math.sqrt(r))
    assert abs(z_mean) < Z_TOL, (z_mean, s.mean(), mom.expected)
    # variance: the sample variance has standard error sqrt((mu4 - var^2) / R), with mu4 the
    # fourth central moment of np.var estimated from the same draws
    dev = s - s.mean()
    var_hat = dev.var(ddof=1)
    se_var = math.sqrt(max(np.mean(dev**4) - var_hat**2, 0.0) / r)
    z_var = (var_hat - mom.sd**2) / se_var
    assert abs(z_var) < Z_TOL, (z_var, var_hat, mom.sd**2)


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize(
    ("shape", "a", "b"),
    [
        ("2x2x2", "normal", "normal"),
        ("3x5x2", "normal:mean=0.5,sd=2", "uniform:mean=-1"),
        ("7x3x4", "laplace:mean=0.25", "rademacher:mean=0.5"),
    ],
)
def test_expectation_closed_form(shape: str, a: str, b: str, ddof: int) -> None:
    # E[SS] = (n - 1) v - (M - 1) c_row - (N - 1) c_col, derived in the module docstring
    from varcheck.core.distributions import parse_distribution

    n, d, m = parse_shape(shape)
    da, db = parse_distribution(a), parse_distribution(b)
    v = d * ((da.var + da.mean**2) * (db.var + db.mean**2) - da.mean**2 * db.mean**2)
    c_row = d * da.var * db.mean**2
    c_col = d * da.mean**2 * db.var
    expected = ((n * m - 1) * v - (m - 1) * c_row - (n - 1) * c_col) / (n * m - ddof)
    mom = exact_moments(shape, ddof, a, b)
    assert mom.expected == pytest.approx(expected, rel=1e-12)
    assert mom.entry_var == pytest.approx(v, rel=1e-12)


def test_hand_derived_small_case() -> None:
    # 1x1 times 1x2, normal: np.var = a^2 (b1 - b2)^2 / 4, so E = 1 * 2 / 4 = 0.5 and
    # E[S^2] = E[a^4] E[(b1 - b2)^4] / 16 = 3 * 12 / 16, Var = 2.25 - 0.25 = 2
    mom = exact_moments("1x1x2", 0, "normal")
    assert mom.expected == pytest.approx(0.5, rel=1e-14)
    assert mom.sd == pytest.approx(math.sqrt(2.0), rel=1e-14)


def test_zero_mean_expectation_is_bias_factor_times_d() -> None:
    for shape in GROWING_SHAPES:
        n, d, m = shape
        mom = exact_moments(shape, 0, "normal")
        assert mom.expected == pytest.approx((n * m - 1) / (n * m) * d, rel=1e-12)
        assert math.isfinite(mom.sd) and mom.sd > 0


def test_infinite_moments() -> None:
    assert math.isinf(exact_moments("2x2x2", 0, "t:df=3").sd)
    assert exact_moments("2x2x2", 0, "t:df=3").expected == pytest.approx(1.5)
    assert math.isinf(exact_moments("2x2x2", 0, "t:df=2").expected)


def test_seed_case_is_consistent_and_forty_is_rejected() -> None:
    seed = int(np.random.default_rng(7).integers(2**31))
    res = explain(seed=seed, growing=None)
    assert res.moments.expected == pytest.approx(1.5)
    assert res.raw.verdict == "consistent" and res.scaled.verdict == "consistent"
    assert res.exit_code == 0
    # 1.6 is above the median (~0.76) but well inside the central 95% range
    lo, hi = res.raw.central_range
    assert lo < 1.6 < hi
    assert 50 < res.raw.percentile < 90
    far = explain(observed=40.0, seed=seed, growing=None)
    assert far.raw.verdict == "rejected" and far.scaled.verdict == "rejected"
    assert far.raw.p_value < 0.01
    assert far.exit_code == 1


def test_large_shape_uses_gamma_approximation() -> None:
    res = explain("1111x111x1111", 110.5603610976103, seed=1, growing=None)
    assert res.method == "gamma-approximation" and res.replicates == 0
    assert res.raw.verdict == "consistent"
    assert res.moments.sd == pytest.approx(0.6479, rel=1e-3)
    scaled = explain("1111x111x1111", 0.9960392891676604, seed=1, growing=None)
    assert scaled.scaled.verdict == "consistent"


def test_quantile_intervals_bracket_estimates() -> None:
    res = explain(seed=3, growing=None, replicates=20_000)
    for q in res.raw.quantiles:
        assert q.low <= q.value <= q.high
    assert [q.level for q in res.raw.quantiles] == sorted(q.level for q in res.raw.quantiles)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shape": "2x2"}, "NxDxM"),
        ({"shape": "0x2x2"}, "every side"),
        ({"shape": "1x4x1"}, "at least 2"),
        ({"ddof": 2}, "ddof"),
        ({"observed": -1.0}, "observed"),
        ({"replicates": 5}, "replicates"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(VarcheckError, match=message):
        explain(seed=1, growing=None, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replicates": 99}, "replicates must be a whole number >= 100, got 99"),
        ({"replicates": 500.0}, "replicates must be a whole number >= 100, got 500.0"),
        ({"confidence": 1.0}, "confidence must be in (0, 1), got 1.0"),
        ({"confidence": True}, "confidence must be in (0, 1), got True"),
        ({"confidence": "0.9"}, "confidence must be in (0, 1), got '0.9'"),
        ({"dist": None}, "distribution spec must be a non-empty string like 'normal', got None"),
    ],
)
def test_refusals_say_what_is_accepted(kwargs: dict, message: str) -> None:
    """Guards the messages of the shared option checks (core.options) as explain words them, and
    that ``dist=None`` is refused rather than read as normal."""
    with pytest.raises(VarcheckError) as err:
        explain(seed=1, growing=None, **kwargs)
    assert str(err.value) == message


# --- command line ------------------------------------------------------------------------------

READING_KEYS = {"theory_var", "expected", "sd", "quantiles", "percentile", "p_value", "verdict"}


def test_cli_default_is_the_seed_case(run_cli) -> None:
    res = run_cli("explain", "--seed", "5")
    assert res.exit_code == 0, res.output
    assert "seed 5" in res.output and "observed 1.6" in res.output
    assert "1111x111x1111" in run_cli("explain", "--seed", "5", "--long").output


def test_cli_json_fields_and_reproducible(run_cli) -> None:
    args = ("explain", "--seed", "9", "--format", "json")
    first, second = run_cli(*args), run_cli(*args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    doc = json.loads(first.output)
    assert doc["command"] == "explain" and doc["seed"] == 9 and "version" in doc
    assert doc["shape"] == [2, 2, 2] and doc["ddof"] == 0
    assert READING_KEYS <= set(doc) and READING_KEYS <= set(doc["scaled"])
    assert doc["expected"] == 1.5 and doc["scaled"]["expected"] == 0.75
    assert doc["verdict"] == "consistent"


def test_cli_rejects_forty(run_cli) -> None:
    """Guards against an exit code that does not follow the verdicts, and against p-values and
    percentiles that disagree. 40 is 18 sd above E[np.var] = 1.5 (sd 2.18): both readings are
    rejected, and with k of the R replicates at or above the observed value, the percentile is
    100 (1 - k/R) and the two-sided Monte-Carlo p-value 2 (k + 1) / (R + 1)."""
    args = ("explain", "--observed", "40", "--seed", "2")
    res = run_cli(*args)
    assert res.exit_code == 1, res.output
    doc = json.loads(run_cli(*args, "--format", "json").output)
    r = doc["replicates"]
    assert doc["method"] == "monte-carlo" and r == 100_000
    for reading in (doc, doc["scaled"]):
        assert reading["observed"] == 40.0 and reading["verdict"] == "rejected"
        k = round(r * (1 - reading["percentile"] / 100))
        assert reading["p_value"] == pytest.approx(2 * (k + 1) / (r + 1), rel=1e-12)
        assert reading["p_value"] < 1e-3
    # 40 / 2 = 20 is still beyond every scaled replicate: the smallest p-value R can give
    assert doc["scaled"]["p_value"] == pytest.approx(2 / (r + 1), rel=1e-12)
    # the answer on the first screen says it at once
    assert "(two-sided p < 1e-4: rejected at level 95%)" in " ".join(res.output.split())


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--shape", "2x2"), "'--shape': shape '2x2' is not NxDxM"),
        (("--ddof", "3"), "'--ddof': '3' is not one of '0', '1'"),
        (("--observed", "-1"), "'--observed': '-1' is out of range"),
        (("--observed", "abc"), "'--observed': 'abc' is not a number"),
    ],
)
def test_cli_usage_errors(run_cli, args: tuple[str, ...], fragment: str) -> None:
    """Guards against a usage error that does not name the option, the value and the rule."""
    res = run_cli("explain", *args)
    assert res.exit_code == 2, res.output
    [line] = res.output.strip().splitlines()
    assert line.startswith("varcheck explain: error: Invalid value for ") and fragment in line


def _growing_by_hand(shape: str) -> dict[str, float]:
    """The exact columns of the growing-shapes table for normal entries and ddof = 0.

    One entry of A @ B (n x D times D x m) is a sum of D products of two standard normals:
    variance D, kurtosis 3 + (9 - 3)/D (a product of two normals has kurtosis 9). The N = n m
    entries are uncorrelated with mean 0, so E[np.var] = D (N - 1)/N; the scaled product
    A @ B / √D has entry variance 1.
    """
    n, d, m = (int(x) for x in shape.split("x"))
    entries = n * m
    bias = (entries - 1) / entries
    return {
        "entries": entries,
        "entry_var": d,
        "expected": d * bias,
        "bias_factor": bias,
        "scaled_expected": bias,
        "entry_kurtosis": 3 + 6 / d,
    }


@pytest.mark.parametrize("fmt", ["csv-meta", "markdown"])
def test_cli_tabular_formats(run_cli, fmt: str) -> None:
    """Guards against a format that reports another seed or setting than the run's, numbers
    other than the JSON (the API result) of the same run, or wrong exact values in the table of
    growing shapes (worked out by hand in _growing_by_hand)."""
    args = ("explain", "--seed", "4")
    doc = json.loads(run_cli(*args, "--format", "json").output)
    res = run_cli(*args, "--format", fmt)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    if fmt == "csv-meta":
        meta = dict(item.split("=", 1) for item in lines[0].removeprefix("# ").split())
        assert (meta["seed"], meta["shape"], meta["ddof"]) == ("4", "2x2x2", "0")
        assert float(meta["observed"]) == doc["observed"] == 1.6
        rows = list(csv.DictReader(lines[1:]))
        assert [r["shape"] for r in rows] == [
            "2x2x2",
            "4x4x4",
            "8x8x8",
            "16x16x16",
            "64x64x64",
            "256x256x256",
            "1111x111x1111",
        ]
        for row in rows:
            hand = _growing_by_hand(row["shape"])
            assert {k: float(row[k]) for k in hand} == pytest.approx(hand, rel=1e-12)
            sd = float(row["sd"])
            assert float(row["relative_sd"]) == pytest.approx(sd / hand["expected"], rel=1e-12)
            assert float(row["scaled_sd"]) == pytest.approx(sd / hand["entry_var"], rel=1e-12)
        assert float(rows[0]["sd"]) == doc["sd"]  # the run's own shape is the first row
    else:
        assert "seed `4`" in lines[0] and "shape `2x2x2`" in lines[0]
        table = [[c.strip() for c in line.split("|")[1:-1]] for line in lines if line[:1] == "|"]
        readings = [row for row in table if row[0].startswith("`A @ B")]
        for cells, reading in zip(readings, (doc, doc["scaled"]), strict=True):
            # reading | entry var | E[np.var] | sd | median | central 95% | percentile | p
            median = next(q["value"] for q in reading["quantiles"] if q["level"] == 0.5)
            want = [reading["theory_var"], reading["expected"], reading["sd"], median]
            assert [float(c) for c in cells[1:5]] == pytest.approx(want, rel=5e-4)
            low, high = (float(x) for x in re.findall(r"[-\d.e+]+", cells[5]))
            assert [low, high] == pytest.approx(reading["central_95"], rel=5e-4)
            assert float(cells[6].rstrip("%")) == pytest.approx(reading["percentile"], abs=0.05)
            assert float(cells[7]) == pytest.approx(reading["p_value"], abs=5e-5)
            assert cells[8] == reading["verdict"]
        growing = [row for row in table if re.fullmatch(r"\d+x\d+x\d+", row[0])]
        assert growing[-1][0] == "1111x111x1111"
        for cells in growing:
            hand = _growing_by_hand(cells[0])
            assert float(cells[1]) == hand["entries"]
            assert float(cells[3]) == pytest.approx(hand["expected"], rel=5e-6)
            assert float(cells[9]) == pytest.approx(hand["entry_kurtosis"], rel=5e-6)


def test_cli_plot_writes_png(run_cli, tmp_path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (varcheck[plot])")
    out = tmp_path / "explain.png"
    res = run_cli("explain", "--seed", "1", "--replicates", "5000", "--plot", str(out))
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 1000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_valid_test_without_finite_spread_or_simulation(run_cli) -> None:
    # t with 3 degrees of freedom: the fourth moment, hence the sd of np.var, is infinite, and
    # 300x30x300 is too large to simulate by default, so nothing can judge the value
    res = explain("300x30x300", 30.0, dist="t:df=3", seed=1, growing=None)
    assert res.method == "gamma-approximation"
    assert res.raw.verdict == "unreliable" and res.exit_code == 4
    cli = run_cli(
        "explain", "--shape", "300x30x300", "--observed", "30", "--dist", "t:df=3", "--seed", "1"
    )
    assert cli.exit_code == 4, cli.output


def test_gamma_approximation_has_the_chi_square_limit() -> None:
    # 2x40000x2 is too costly to simulate thousands of times, so the gamma law with the exact
    # mean and sd is used. For zero-mean normal entries and large D the product's entries are
    # close to independent normals with variance D, so np.var (ddof=1) is D chi2(n-1) / (n-1):
    # a gamma law, which the moment-matched one must reproduce up to O(1/D) = 2.5e-5
    from scipy import stats

    res = explain("2x40000x2", None, ddof=1, seed=1, growing=None)
    assert res.method == "gamma-approximation" and res.samples is None
    for q in res.raw.quantiles:
        limit = 40000 / 3 * stats.chi2.ppf(q.level, 3)
        assert q.value == pytest.approx(limit, rel=1e-3), q
        assert q.value > 0  # a variance: a normal approximation would go negative here
    obs = explain("2x40000x2", 40000 / 3 * stats.chi2.ppf(0.99, 3), ddof=1, seed=1, growing=None)
    assert obs.raw.percentile == pytest.approx(99.0, abs=0.05)
    assert obs.raw.p_value == pytest.approx(0.02, abs=1e-3)


def test_replicates_are_refused_when_a_run_cannot_fit() -> None:
    with pytest.raises(VarcheckError, match="GiB"):
        explain("10000x10000x10000", None, replicates=100, seed=1, growing=None)
    slow = r"would take about .* \(limit about .*accepted: 100\.\."
    with pytest.raises(VarcheckError, match=slow):
        explain("300x300x300", None, replicates=100_000, seed=1, growing=None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--shape", "10000x10000x10000", "--replicates", "100"), "GiB"),
        (("--plot", "out.txt"), ".txt"),
        (("--plot", "no/such/folder/x.png"), "does not exist"),
    ],
)
def test_cli_refuses_before_working(run_cli, args: tuple[str, ...], message: str) -> None:
    if args[0] == "--plot":
        pytest.importorskip("matplotlib", reason="matplotlib is not installed (varcheck[plot])")
    res = run_cli("explain", "--seed", "1", *args)
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert "np.var" not in res.output  # nothing computed or printed before the error


def test_account_for_near_normal_entries_speaks_of_few_entries() -> None:
    # one entry of a 2x40000x2 product is a sum of 40000 products: kurtosis 3 + 6/D, no heavy
    # tails to blame; the spread comes from np.var seeing only 4 entries
    text = " ".join(explain_account(explain("2x40000x2", 1.0, seed=1, growing=None)))
    assert "Heavy tails" not in text and "Few entries" in text
    assert "Heavy tails" in " ".join(explain_account(explain(seed=1, growing=None)))


@pytest.mark.parametrize(
    ("entries", "kurtosis", "regime"),
    [
        (4, math.inf, "infinite"),
        (4, math.nan, "infinite"),
        (FEW_ENTRIES, HEAVY_KURTOSIS + 0.01, "heavy"),
        (FEW_ENTRIES, HEAVY_KURTOSIS, "few"),
        (FEW_ENTRIES + 1, 50.0, "many"),
    ],
)
def test_tail_regime_thresholds(entries: int, kurtosis: float, regime: str) -> None:
    """Guards the account's thresholds (now named in teaching/explain.py): at most FEW_ENTRIES
    entries is few, and only a kurtosis above HEAVY_KURTOSIS is heavy."""
    base = explain("2x2x2", None, replicates=100, growing=None, seed=1)
    res = dataclasses.replace(base, shape=parse_shape((entries, 2, 1)), entry_kurtosis=kurtosis)
    assert res.tail_regime == regime


@pytest.mark.parametrize(
    ("kwargs", "regime", "opening"),
    [
        ({}, "heavy", "Heavy tails: each entry is a sum of only 2 products"),
        ({"shape": "2x40000x2", "observed": 1.0}, "few", "Few entries: one entry"),
        ({"shape": "20x20x20", "replicates": 200}, "many", "Tails: one entry"),
        ({"dist": "t:df=3", "replicates": 200}, "infinite", "Heavy tails: the entries' fourth"),
    ],
)
def test_account_follows_the_tail_regime(kwargs: dict, regime: str, opening: str) -> None:
    res = explain(**{"seed": 1, "growing": None, **kwargs})
    assert res.tail_regime == regime
    assert explain_account(res)[1].startswith(opening)


def test_skewed_right_threshold() -> None:
    """Guards the account's skew test: the median more than SKEW_SD sd below the mean."""
    raw = explain(replicates=1000, growing=None, seed=1).raw
    assert raw.median == raw.quantiles[2].value and raw.quantiles[2].level == 0.5
    assert raw.skewed_right  # 2x2x2: np.var of 4 entries has a long right tail
    sd = 1.0
    below = dataclasses.replace(raw, expected=raw.median + 1.5 * SKEW_SD * sd, sd=sd)
    within = dataclasses.replace(raw, expected=raw.median + 0.5 * SKEW_SD * sd, sd=sd)
    assert below.skewed_right and not within.skewed_right
    assert "skewed to the right" in " ".join(explain_account(explain(seed=1, growing=None)))


def test_render_refuses_an_unknown_format() -> None:
    """Guards the one format switch (output.formats.write): no silent fallback to Markdown."""
    from rich.console import Console

    from varcheck.teaching.render import render_explain

    res = explain(replicates=100, growing=None, seed=1)
    with pytest.raises(ValueError, match="unknown format 'yaml'"):
        render_explain(res, "yaml", Console(file=io.StringIO()))
