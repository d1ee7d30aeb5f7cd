"""Claim files: `varcheck check`, family-wise error, power, JUnit XML, malformed input."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from scipy.stats import binomtest

from varcheck.checks.claim_file import check, load_check_file

TRUE_CLAIMS = [
    ("normal", 2, "dk"),
    ("normal", 16, "dk"),
    ("normal", 128, "dk"),
    ("uniform", 4, "dk"),
    ("uniform", 33, "dk"),
    ("rademacher", 8, "dk"),
    ("laplace", 12, "dk"),
    ("t:df=9", 6, "dk"),
    ("normal:mean=0.5", 8, "1.5*dk"),
    ("normal:mean=1,sd=2", 5, "dk*((4+1)**2-1)"),
    ("uniform:sd=2", 3, "dk*var_q*var_k"),
    ("laplace:mean=-1", 7, "theory"),
    ("scipy.gamma:a=3", 4, "theory"),
    ("scipy.beta:a=2,b=2", 9, "theory"),
    ("rademacher:mean=0.3", 20, "theory"),
    ("normal:sd=0.1", 64, "dk*1e-4"),
    ("t:df=12,sd=3", 10, "81*dk"),
    ("uniform:mean=2", 2, "dk*(5*5-16)"),
    ("normal", 40, "dk"),
    ("laplace:sd=2", 3, "16*dk"),
]


def _write(tmp_path: Path, body: str, name: str = "claims.toml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def _true_file(tmp_path: Path) -> Path:
    parts = ["[defaults]\nprecision = 0.05\n"]
    for i, (dist, dk, claim) in enumerate(TRUE_CLAIMS):
        parts.append(f'[[claim]]\nname = "c{i}"\ndk = {dk}\ndist = "{dist}"\nclaim = "{claim}"\n')
    parts.append(
        '[[claim]]\nname = "scaled"\ndk = "4..64"\nclaim = "1"\nscaled = true\ntolerance = 0.25\n'
    )
    parts.append('[[claim]]\nname = "rho"\ndk = [3, 30]\nrho = -0.4\nclaim = "dk*(1+rho**2)"\n')
    return _write(tmp_path, "\n".join(parts))


def test_true_claims_file_passes(tmp_path: Path) -> None:
    # A true file fails by chance at most 5% of the time (seed 0 is such a run: one test at
    # p = 0.0006 survives Holm over 27 tests); the rate itself is tested below.
    res = check(_true_file(tmp_path), seed=1)
    assert len(res.claims) == 22 and res.family_size == 27
    assert res.outcome == "pass", [
        (c.spec.name, c.outcome) for c in res.claims if c.outcome != "pass"
    ]


@pytest.mark.statistical
@pytest.mark.parametrize(
    "runs",
    [
        # 30 runs fail the test below at 7 or more failures (exact binomial). A file checked
        # without Holm's correction fails up to 1 - 0.95**27 = 75% of its runs (27 independent
        # tests), a rate 30 runs catch with probability > 0.9999; a rate of 30% they catch
        # with probability 0.84, and 20% with 0.39.
        30,
        # the same check over 100 runs (fails at 14 or more: catches 20% with probability
        # 0.95), at 3.3 times the cost: `make test-long`
        pytest.param(100, marks=pytest.mark.long),
    ],
)
def test_false_alarm_rate_of_a_true_file(tmp_path: Path, runs: int) -> None:
    """22 true claims (27 tests) under many seeds: the file fails at most alpha = 5% of the time.

    Holm controls the family-wise error at alpha for each run, so the number of failing runs is
    at most Binomial(runs, 0.05) in distribution; we require the one-sided binomial p > 0.001,
    so a calibrated check fails this test at most once in a thousand seed sets.
    """
    spec = load_check_file(_true_file(tmp_path))
    failures = sum(check(spec, seed=1000 + s).exit_code != 0 for s in range(runs))
    p = binomtest(failures, runs, 0.05, alternative="greater").pvalue
    assert p > 1e-3, f"{failures}/{runs} runs of a true claim file failed"


@pytest.mark.statistical
def test_false_claims_fail_at_default_precision(tmp_path: Path) -> None:
    body = """
[[claim]]
name = "three-percent-high"
dk = "2..512"
claim = "1.03*dk"

[[claim]]
name = "three-percent-low"
dk = [5, 50, 500]
dist = "uniform"
claim = "0.97*dk"

[[claim]]
name = "zero-mean-formula-with-means"
dk = "4..256"
dist = "normal:mean=0.5"
claim = "dk * var_q * var_k"
"""
    res = check(_write(tmp_path, body), seed=7)
    assert [c.outcome for c in res.claims] == ["fail", "fail", "fail"]
    assert all(r.outcome == "fail" for c in res.claims for r in c.results)
    assert res.exit_code == 1


@pytest.mark.statistical
def test_equivalence(tmp_path: Path) -> None:
    """A true claim within 2% passes at default settings; within 1e-5 it is never a pass.

    At 1% precision the interval fits inside +-2% unless the estimate strays by more than about
    1%, i.e. in about 95% of runs; over 30 seeds, 24 or more passes has probability 0.9994.
    """
    body = """
[[claim]]
name = "within-2-percent"
dk = 64
claim = "dk"
tolerance = 0.02

[[claim]]
name = "within-1e-5"
dk = 64
claim = "dk"
tolerance = 1e-5
"""
    spec = load_check_file(_write(tmp_path, body))
    outcomes = [[c.outcome for c in check(spec, seed=seed).claims] for seed in range(30)]
    assert sum(o[0] == "pass" for o in outcomes) >= 24, outcomes
    assert all(o[1] != "pass" for o in outcomes)
    assert sum(o[1] == "inconclusive" for o in outcomes) >= 24, outcomes


def test_cli_json_and_junit(run_cli, tmp_path: Path) -> None:
    body = """
[defaults]
seed = 5
precision = 0.05

[[claim]]
name = "good"
dk = "2..8"
claim = "dk"

[[claim]]
name = "bad"
dk = 16
dist = "normal:mean=1"
claim = "dk"

[[claim]]
name = "undecided"
dk = 16
claim = "dk"
tolerance = 1e-4

[[claim]]
name = "heavy"
dk = 4
dist = "t:df=3"
claim = "dk"
"""
    path = _write(tmp_path, body)
    xml_path = tmp_path / "report.xml"
    res = run_cli("check", str(path), "--format", "json", "--junit-xml", str(xml_path))
    assert res.exit_code == 1, res.output  # the worst outcome: fail
    doc = json.loads(res.output)
    assert doc["seed"] == 5 and doc["family_size"] == 6
    assert [c["outcome"] for c in doc["claims"]] == ["pass", "fail", "inconclusive", "unreliable"]
    root = ET.parse(xml_path).getroot()
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == ["good", "bad", "undecided", "heavy"]
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    assert cases[1].find("failure").get("type") == "fail"
    assert cases[2].find("failure").get("type") == "inconclusive"
    assert cases[3].find("error").get("type") == "unreliable"
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "2", "1")


def test_cli_table_and_same_seed(run_cli, tmp_path: Path) -> None:
    path = _write(tmp_path, '[[claim]]\nname = "a"\ndk = "2..16"\nclaim = "dk"\n')
    # a true claim: a given seed fails the family with probability <= 5%; this one passes
    first = run_cli("check", str(path), "--seed", "10", "--precision", "0.05", "--format", "json")
    again = run_cli("check", str(path), "--seed", "10", "--precision", "0.05", "--format", "json")
    assert first.exit_code == 0 and first.output == again.output
    table = run_cli("check", str(path), "--seed", "9", "--precision", "0.05")
    assert "seed 9" in table.output and "Holm over 4 tests" in table.output


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ('[[claim]\nname = "x"', ["malformed TOML", "line 1"]),
        (
            '[[claim]]\nname = "typo"\ndk = 4\nclaim = "dk"\ndsit = "normal"\n',
            ["claims.toml:5: claim 'typo'", "unknown key 'dsit' (did you mean 'dist'?)"],
        ),
        (
            '[[claim]]\nname = "ok"\ndk = 4\nclaim = "dk"\n\n[[claim]]\nname = "expr"\ndk = 4\n'
            'claim = "dk +"\n',
            ["claims.toml:6: claim 'expr'", "not a valid expression"],
        ),
        ('[[claim]]\nname = "nodk"\nclaim = "dk"\n', ["claim 'nodk'", "missing dk"]),
        ('[[claim]]\nname = "r"\ndk = "8..2"\nclaim = "dk"\n', ["claim 'r'", "ends below"]),
        (
            '[[claim]]\nname = "d"\ndk = 4\ndist = "gauss"\nclaim = "dk"\n',
            ["claim 'd'", "unknown distribution 'gauss'"],
        ),
        (
            '[[claim]]\nname = "t"\ndk = 4\nclaim = "dk"\ntolerance = 3\n',
            ["claim 't'", "tolerance"],
        ),
        ('[[claim]]\nname = "s"\ndk = 4\nclaim = "dk"\nscaled = "yes"\n', ["claim 's'", "scaled"]),
        (
            '[[claim]]\nname = "a"\ndk = 4\nclaim = "dk"\n'
            '[[claim]]\nname = "a"\ndk = 8\nclaim = "1"\n',
            ["claim 'a'", "used twice"],
        ),
        ('[[claim]]\ndk = 4\nclaim = "dk"\n', ["needs a non-empty name"]),
        (
            '[defaults]\nconfidense = 0.9\n[[claim]]\nname = "a"\ndk = 4\nclaim = "dk"\n',
            ["claims.toml:2: [defaults]", "unknown key 'confidense' (did you mean 'confidence'?)"],
        ),
        (
            '[defaults]\nconfidence = 2\n[[claim]]\nname = "a"\ndk = 4\nclaim = "dk"\n',
            ["confidence must be in (0, 1)"],
        ),
        ("", ["no claims"]),
        ('title = "x"\n', ["unknown top-level key 'title'"]),
    ],
)
def test_malformed_files(run_cli, tmp_path: Path, body: str, fragments: list[str]) -> None:
    path = _write(tmp_path, body)
    res = run_cli("check", str(path))
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    for fragment in fragments:
        assert fragment in res.output


def test_missing_file_and_unwritable_report(run_cli, tmp_path: Path) -> None:
    res = run_cli("check", str(tmp_path / "nope.toml"))
    assert res.exit_code == 2 and "cannot read" in res.output
    path = _write(tmp_path, '[[claim]]\nname = "a"\ndk = 4\nclaim = "dk"\n')
    # like pytest's --junitxml, the report's folder is created
    report = str(tmp_path / "new" / "dir" / "r.xml")
    res = run_cli("check", str(path), "--junit-xml", report, "--seed", "3")  # a passing seed
    assert res.exit_code == 0, res.output
    assert (tmp_path / "new" / "dir" / "r.xml").stat().st_size > 0


def test_example_file_is_valid() -> None:
    spec = load_check_file(Path(__file__).parents[1] / "examples" / "claims.toml")
    assert len(spec.claims) >= 6 and spec.seed == 2024


def test_claim_value_errors_name_the_claim(run_cli, tmp_path: Path) -> None:
    body = '[[claim]]\nname = "neg"\ndk = 4\nclaim = -1\n'
    res = run_cli("check", str(_write(tmp_path, body)))
    assert res.exit_code == 2 and "claims.toml:1: claim 'neg'" in res.output, res.output
    assert "'-1'" in res.output


def test_marginal_rows_are_marked_with_the_sweeps_rule(run_cli, tmp_path: Path) -> None:
    """#22 item 4 in the check table: at seed 4, d_k = 2's own interval [2.001, 2.086] excludes
    the claim 2 while Holm over the six tests keeps it; that row alone gets †, and the shared
    footnote explains it. An equivalence test is never marked (its pass is about the tolerance)."""
    path = _write(tmp_path, '[[claim]]\nname = "textbook"\ndk = "2..64"\nclaim = "dk"\n')
    res = run_cli("check", str(path), "--seed", "4", "--precision", "0.05")
    assert res.exit_code == 0
    marked = [line for line in res.output.splitlines() if "†" in line and "│" in line]
    assert len(marked) == 1 and "│   2 │" in marked[0]
    assert "this row's own interval excludes the claim" in res.output
    tol = _write(
        tmp_path, '[[claim]]\nname = "eq"\ndk = "2..64"\nclaim = "dk"\ntolerance = 0.5\n', "t.toml"
    )
    assert "†" not in run_cli("check", str(tol), "--seed", "4", "--precision", "0.05").output


def test_a_spec_holds_one_template_test_and_check_decides_as_verify(tmp_path: Path) -> None:
    """A claim's fields live once, in its template test (D16), and a row of check is decided
    by the one decision function verify uses (Holm over one p-value is that p-value)."""
    from varcheck.checks.verify import claim_decision

    path = tmp_path / "c.toml"
    path.write_text(
        '[[claim]]\nname = "band"\ndk = 16\ndist = "uniform"\nclaim = "dk"\ntolerance = 0.05\n'
    )
    spec = load_check_file(path).claims[0]
    test = spec.test
    assert (spec.q, spec.k, spec.rho, spec.claim, spec.scaled, spec.tolerance, spec.sampler) == (
        test.q,
        test.k,
        test.rho,
        test.claim,
        test.scaled,
        test.tolerance,
        test.sampler,
    )
    assert spec.q.spec == "uniform" and spec.tolerance == 0.05 and spec.claim.text == "dk"
    row = check(path, seed=4, precision=0.05).claims[0].results[0]
    again = claim_decision(
        row.estimate,
        row.confidence_interval,
        row.equivalence_interval,
        row.claim_value,
        row.p_values,
        alpha=0.05,
        tolerance=0.05,
        samples=row.samples,
    )
    assert (again.outcome, again.reason, again.more_samples) == (
        row.outcome,
        row.reason,
        row.more_samples,
    )


@pytest.mark.parametrize(
    ("fmt", "marker"), [("csv-meta", "interrupted=True"), ("markdown", "interrupted: `True`")]
)
def test_an_interrupted_check_says_so_in_csv_and_markdown(
    tmp_path: Path, fmt: str, marker: str
) -> None:
    """Guards against a cut-short check's CSV or Markdown having no ``interrupted`` key (#17):
    JSON and sweep's CSV have it."""
    import io
    from dataclasses import replace

    from rich.console import Console

    from varcheck.checks.render import render_check

    res = check(
        _write(tmp_path, '[[claim]]\nname = "a"\ndk = 4\nclaim = "dk"\n'), seed=1, precision=0.1
    )
    for result, word in (
        (res, marker.replace("True", "False")),
        (replace(res, interrupted=True), marker),
    ):
        out = io.StringIO()
        render_check(result, fmt, Console(file=out, width=200))
        assert word in out.getvalue().splitlines()[0], out.getvalue()


def test_a_probe_claim_refused_at_its_pilot_throws_away_no_variance_test(
    tmp_path: Path, monkeypatch
) -> None:
    """Guards against a claim file's variance tests running for minutes, then a kernel
    refused at its first call ending the check with exit 2 and no report (#17): the probe
    claims run first."""
    import varcheck.checks.claim_file as claim_file
    from varcheck.errors import VarcheckError

    (tmp_path / "k.py").write_text("def attention(q, k, v):\n    raise RuntimeError('boom')\n")
    body = '[[claim]]\nname = "var"\ndk = [16, 64]\nclaim = "dk"\n'
    body += '[[claim]]\nname = "p"\nprobe = "k.py:attention"\ndk = 16\n'
    ran: list[int] = []

    def recording(tests, **kwargs):  # noqa: ANN001, ANN003, ANN202
        ran.append(len(tests))
        return []

    monkeypatch.setattr(claim_file, "run_claim_tests", recording)
    with pytest.raises(VarcheckError, match="claim 'p': kernel k.py:attention raised RuntimeError"):
        check(_write(tmp_path, body), seed=1, precision=0.05)
    assert ran == []
