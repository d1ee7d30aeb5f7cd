"""`varcheck sweep` through the real entry point."""

from __future__ import annotations

import csv
import io
import json

import pytest

ROW_KEYS = {
    "dk",
    "theory_var",
    "var",
    "ci_low",
    "ci_high",
    "scaled_var",
    "scaled_ci_low",
    "scaled_ci_high",
    "p_value",
    "verdict",
    "samples",
}


def test_json_schema_and_values(run_cli) -> None:
    res = run_cli(
        "sweep", "--dk", "2..16", "--seed", "3", "--precision", "0.05", "--format", "json"
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    for key in (
        "command",
        "seed",
        "confidence",
        "q_dist",
        "k_dist",
        "claim",
        "rows",
        "fit",
        "version",
    ):
        assert key in doc
    assert doc["command"] == "sweep" and doc["seed"] == 3 and doc["claim"] == "theory"
    assert [r["dk"] for r in doc["rows"]] == [2, 4, 8, 16]
    for row in doc["rows"]:
        assert ROW_KEYS <= set(row)
        assert row["ci_low"] <= row["var"] <= row["ci_high"]
        assert row["scaled_var"] == pytest.approx(row["var"] / row["dk"])
        assert row["verdict"] == "consistent"
    assert set(doc["fit"]) >= {"slope", "ci_low", "ci_high", "verdict"}


def test_same_seed_same_bytes(run_cli) -> None:
    args = ("sweep", "--dk", "2,7,64", "--seed", "11", "--precision", "0.03", "--format", "json")
    first, second = run_cli(*args), run_cli(*args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    other = run_cli(
        "sweep", "--dk", "2,7,64", "--seed", "12", "--precision", "0.03", "--format", "json"
    )
    assert other.output != first.output


def test_json_numbers_round_trip(run_cli) -> None:
    res = run_cli("sweep", "--dk", "4", "--seed", "1", "--precision", "0.05", "--format", "json")
    doc = json.loads(res.output)
    assert json.dumps(doc["rows"][0]["var"]) == repr(doc["rows"][0]["var"])


def test_seed_is_drawn_and_shown(run_cli) -> None:
    res = run_cli("sweep", "--dk", "8", "--precision", "0.05", "--format", "json")
    seed = json.loads(res.output)["seed"]
    again = run_cli(
        "sweep", "--dk", "8", "--precision", "0.05", "--format", "json", "--seed", str(seed)
    )
    assert again.output == res.output


def test_the_environment_seed_fixes_every_run_and_is_named(run_cli, monkeypatch) -> None:
    """VARCHECK_SEED stands in for --seed (a rehearsed lecture), says so on stderr, and an
    explicit --seed still wins."""
    args = ("sweep", "--dk", "8", "--precision", "0.05", "--format", "json")
    explicit = run_cli(*args, "--seed", "11")
    monkeypatch.setenv("VARCHECK_SEED", "11")
    from_env = run_cli(*args)
    assert from_env.stdout == explicit.stdout
    assert "seed 11 from VARCHECK_SEED" in from_env.stderr
    overridden = run_cli(*args, "--seed", "12")
    assert json.loads(overridden.stdout)["seed"] == 12 and "VARCHECK_SEED" not in overridden.stderr
    monkeypatch.setenv("VARCHECK_SEED", "eleven")
    bad = run_cli(*args)
    assert bad.exit_code == 2 and "VARCHECK_SEED" in bad.stderr and "'eleven'" in bad.stderr


def test_table_shows_header_seed_and_fit(run_cli) -> None:
    # a true claim is rejected in <= 5% of seeds (tests/test_calibration.py); seed 6 is not one
    res = run_cli("sweep", "--dk", "2..8", "--seed", "6", "--precision", "0.05")
    assert res.exit_code == 0, res.output
    assert "seed 6" in res.output and "claim: theory" in res.output
    assert "growth law" in res.output and "consistent" in res.output


def test_csv_and_markdown(run_cli) -> None:
    res = run_cli(
        "sweep", "--dk", "2,4", "--seed", "5", "--precision", "0.05", "--format", "csv-meta"
    )
    lines = res.output.splitlines()
    assert lines[0].startswith("# ") and "seed=5" in lines[0]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[1:]))))
    assert [r["dk"] for r in rows] == ["2", "4"]
    md = run_cli(
        "sweep", "--dk", "2,4", "--seed", "5", "--precision", "0.05", "--format", "markdown"
    )
    assert "| dk |" in md.output and "seed: `5`" in md.output


def test_claim_dk_with_nonzero_mean_is_rejected(run_cli) -> None:
    # Var = dk * ((1 + .25)^2 - .25^2) = 1.5 dk, so the textbook claim is 33% too low
    res = run_cli(
        "sweep",
        "--dk",
        "16,64",
        "--dist",
        "normal:mean=0.5",
        "--claim",
        "dk",
        "--seed",
        "2",
        "--format",
        "json",
    )
    assert res.exit_code == 1, res.output
    assert {r["verdict"] for r in json.loads(res.output)["rows"]} == {"rejected"}


def test_samples_fixes_the_budget(run_cli) -> None:
    res = run_cli("sweep", "--dk", "32", "--samples", "1e4", "--seed", "1", "--format", "json")
    row = json.loads(res.output)["rows"][0]
    assert 10_000 <= row["samples"] < 10_000 + 32 * 32  # rounded up to whole blocks


def test_precision_and_samples_conflict(run_cli) -> None:
    res = run_cli("sweep", "--dk", "4", "--samples", "1000", "--precision", "0.1")
    assert res.exit_code == 2
    assert "cannot be used together" in res.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--dk", "2..1"), "ends below its start"),
        (("--dist", "normall"), "did you mean 'normal'"),
        (("--confidence", "1.5"), "'1.5' is out of range"),
        (("--precision", "0"), "out of range"),
        (("--rho", "2"), "out of range"),
        (("--rho", "0.5", "--dist", "uniform"), "needs normal entries"),
        (("--claim", "dk +"), "not a valid expression"),
        (("--samples", "12.5"), "whole number"),
        (("--format", "xml"), "'xml' is not one of"),
    ],
)
def test_bad_input_one_line_exit_2(run_cli, args: tuple[str, ...], fragment: str) -> None:
    res = run_cli("sweep", *args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert "Traceback" not in res.output


def test_infinite_and_unreliable_rows(run_cli) -> None:
    res = run_cli("sweep", "--dk", "4", "--dist", "t:df=2", "--seed", "1", "--format", "json")
    assert res.exit_code == 4, res.output
    row = json.loads(res.output)["rows"][0]
    assert row["verdict"] == "infinite" and row["var"] is None and row["theory_var"] is None
    res = run_cli("sweep", "--dk", "4", "--dist", "t:df=3", "--seed", "1", "--precision", "0.05")
    assert res.exit_code == 4
    note = " ".join(res.output.split())
    # the cause the theory establishes, not a list of possible ones
    assert "E[(q·k)^4] is infinite" in note and "or the kurtosis" not in note


@pytest.mark.parametrize(
    ("precision", "says", "not_says"),
    [("0.03", "--precision 0.01 recovers it", "is nominal"), ("0.01", "is nominal", "recovers")],
)
def test_the_heavy_tail_caution_follows_the_precision(
    run_cli, precision: str, says: str, not_says: str
) -> None:
    """At ±1% the measured coverage of t:df=5 is nominal (docs/calibration.md): the caution
    then says so instead of recommending the precision the run already has."""
    res = run_cli("sweep", "--dk", "4", "--dist", "t:df=5", "--seed", "1", "--precision", precision)
    note = " ".join(res.output.split())
    assert "heavy tails" in note and says in note and not_says not in note


def test_help_has_examples_and_exit_codes(run_cli) -> None:
    res = run_cli("sweep", "--help")
    assert res.exit_code == 0
    assert "Examples" in res.output and "Exit codes" in res.output


def test_progress_reporter_draws_on_a_terminal_only_after_the_delay() -> None:
    from varcheck.cli.console import ProgressReporter

    quiet = ProgressReporter("x", enabled=False)
    quiet(0, 2, 0.5)
    assert quiet._progress is None
    with ProgressReporter("x", delay=3600, enabled=True) as slow:
        slow(0, 2, 0.5)  # before the delay: nothing drawn
        assert slow._progress is None
    with ProgressReporter("x", delay=0, enabled=True) as shown:
        shown(0, 2, 0.5)
        shown(1, 2, 1.0)
        assert shown._progress is not None
    assert shown._progress is None  # closed on exit


@pytest.mark.parametrize("command", [("sweep", "--dk", "4"), ("check", "examples/claims.toml")])
def test_cli_minimum_budget_matches_the_api(run_cli, command) -> None:
    """Guards against a command line bound on --samples other than the API's MIN_SAMPLES (it
    was a copied constant in one command and a literal in another): one product fewer is
    refused with exit 2, naming the bound."""
    from varcheck.core.options import MIN_SAMPLES

    res = run_cli(*command, "--samples", str(MIN_SAMPLES - 1))
    assert res.exit_code == 2
    assert str(MIN_SAMPLES) in res.output


def test_unreliable_rows_print_no_interval(run_cli) -> None:
    """With E[(q·k)^4] infinite an interval can be computed but not trusted: none is shown."""
    args = ("sweep", "--dk", "4", "--dist", "t:df=3", "--seed", "1")
    row = json.loads(run_cli(*args, "--format", "json").output)["rows"][0]
    assert row["verdict"] == "unreliable" and row["var"] > 0
    assert row["ci_low"] is None and row["ci_high"] is None and row["scaled_ci_low"] is None
    assert "no valid CI" in run_cli(*args).output


def test_a_sampler_sweep_table_has_no_scaled_column(run_cli) -> None:
    """Guards against dividing a user's own (maybe already scaled) values by d_k in the table:
    a sampler's sweep leaves the scaled column out; JSON keeps scaled_var; varcheck's own laws
    keep the column."""
    from pathlib import Path

    toy = Path(__file__).parent / "data" / "samplers" / "toy_samplers.py"
    common = ("--dk", "4", "--claim", "4", "--samples", "2000", "--seed", "3")
    table = run_cli("sweep", *common, "--sampler", f"{toy}:normal").stdout
    assert "scaled Var" not in table and "claim Var" in table
    doc = json.loads(
        run_cli("sweep", *common, "--sampler", f"{toy}:normal", "--format", "json").stdout
    )
    assert doc["rows"][0]["scaled_var"] == pytest.approx(doc["rows"][0]["var"] / 4)
    assert "scaled Var" in run_cli("sweep", "--dk", "4", "--samples", "2000", "--seed", "3").stdout
