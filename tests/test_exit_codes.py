"""Exit codes when outcomes are mixed: every command's outcome -> exit-code ladder.

The expected codes below are written from the documentation, not read from varcheck:

- README "Exit codes" and docs/ci.md "Outcomes and exit codes": pass/consistent 0, fail/rejected
  1, inconclusive 3, no valid test (unreliable or infinite) 4, interrupted 130;
- docs/ci.md: ``varcheck check`` "exits with the worst outcome", and the worst is, in order, fail
  (1), no valid test (4), inconclusive (3), pass (0) (``CheckResult.exit_code``'s docstring, and a
  file with pass, fail, inconclusive and unreliable claims exits 1 in tests/test_check.py);
- sweep: "1 some row rejected", "4 no valid test for some row" (README), with the same order;
- derive (``varcheck derive --help`` and ``DeriveResult.exit_code``): 1 when a check rejects its
  formula or the textbook value breaks with a finite correct value, 4 for a check without a
  valid test, 0 when the derivation holds;
- project (docs/paper.md "Checks and findings"): a rejected *check* exits 1, a rejected
  *finding* does not set the exit status, rows without a valid test exit 4;
- explain (``varcheck explain --help``): "Exit 1 only when both readings reject it"; 0 when the
  value is consistent with a reading or nothing was observed; 4 when there is no valid test.

Two levels: every set of outcomes (empty, single, every pair and more) through each result's
``exit_code``, and real command lines whose runs mix outcomes, where the printed outcome must
agree with the exit status.

Every command's JSON says the run's ``outcome`` and ``exit_code`` at its top level (#18), the
exit code last: the outcome word is the one the exit code follows (the table above; a command
that tests nothing says ``done``, 0), and a run stopped by Ctrl-C says ``interrupted``, 130.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from pathlib import Path

import pytest

import varcheck
from varcheck.checks.claim_file import CheckResult, ClaimOutcome
from varcheck.paper.projection import project
from varcheck.teaching.derive import derive
from varcheck.teaching.explain import explain

# --- the documented rules, written out ---------------------------------------------------------

#: README / docs/ci.md: the exit status of one claim outcome
DOCUMENTED_EXIT = {"pass": 0, "fail": 1, "inconclusive": 3, "unreliable": 4, "infinite": 4}
CLAIM_OUTCOMES = tuple(DOCUMENTED_EXIT)
ROW_VERDICTS = ("consistent", "rejected", "unreliable", "infinite")
NO_VALID_TEST = {"unreliable", "infinite"}
#: the exit status each outcome word in a JSON document stands for: a row's verdict exits like
#: the claim outcome it amounts to, a run that tests nothing is done (0), a stopped one 130
DOCUMENTED_WORD_EXIT = {
    **DOCUMENTED_EXIT,
    "consistent": 0,
    "rejected": 1,
    "done": 0,
    "interrupted": 130,
}


def documented_claims_exit(outcomes: set[str], interrupted: bool = False) -> int:
    """``check``/``assert``: the worst outcome wins; fail > no valid test > inconclusive > pass."""
    if interrupted:
        return 130
    if "fail" in outcomes:
        return 1
    if outcomes & NO_VALID_TEST:
        return 4
    if "inconclusive" in outcomes:
        return 3
    return 0


def documented_worst(outcomes: set[str]) -> set[str]:
    """The outcome(s) ``check`` may report as the file's: the worst present (or pass)."""
    for tier in ({"fail"}, NO_VALID_TEST, {"inconclusive"}):
        if outcomes & tier:
            return outcomes & tier
    return {"pass"}


def documented_sweep_exit(verdicts: set[str], interrupted: bool = False) -> int:
    if interrupted:
        return 130
    if "rejected" in verdicts:
        return 1
    if verdicts & NO_VALID_TEST:
        return 4
    return 0


def documented_derive_exit(verdicts: set[str], broken: bool, correct_var_finite: bool) -> int:
    # a textbook step that breaks is what derive explains, not a failure: only the checks of
    # the exact values decide (``broken`` and ``correct_var_finite`` change nothing)
    if "rejected" in verdicts:
        return 1
    if verdicts & NO_VALID_TEST:
        return 4
    return 0


def documented_project_exit(rows: set[tuple[str, str]]) -> int:
    if ("check", "rejected") in rows:
        return 1
    if {verdict for _, verdict in rows} & NO_VALID_TEST:
        return 4
    return 0


def documented_explain_exit(raw: str, scaled: str) -> int:
    readings = {raw, scaled}
    if readings == {"rejected"}:
        return 1
    if "consistent" in readings or "unreliable" not in readings:
        return 0
    return 4


def documented_verdict_worst(verdicts: set[str]) -> set[str]:
    """The outcome(s) a run with these row verdicts may report: the worst (or consistent)."""
    for tier in ({"rejected"}, NO_VALID_TEST):
        if verdicts & tier:
            return verdicts & tier
    return {"consistent"}


def subsets(items: tuple[str, ...], *, empty: bool = True) -> list[tuple[str, ...]]:
    start = 0 if empty else 1
    return [c for n in range(start, len(items) + 1) for c in itertools.combinations(items, n)]


# --- real results to vary (tiny, seeded) -------------------------------------------------------


@pytest.fixture(scope="module")
def sweep_result():
    return varcheck.sweep("4,8", samples=1000, seed=0)


@pytest.fixture(scope="module")
def verify_result():
    return varcheck.verify(4, claim="dk", samples=1000, seed=0)


@pytest.fixture(scope="module")
def derive_result():
    return derive(4, samples=1000, seed=0)


@pytest.fixture(scope="module")
def project_result():
    return project(8, 4, blocks=64, seed=0, constructed=False)


@pytest.fixture(scope="module")
def explain_result():
    return explain(replicates=200, growing=None, seed=0)


# --- unit level: each ladder against the documented table --------------------------------------


@pytest.mark.parametrize("outcome", CLAIM_OUTCOMES)
def test_single_claim_outcome_exit(verify_result, outcome: str) -> None:
    """Guards against a wrong entry in OUTCOME_EXIT (e.g. inconclusive mapped to 4, unreliable to
    3, or infinite to 0): ``varcheck assert`` exits with its one outcome's documented code."""
    res = dataclasses.replace(verify_result, outcome=outcome)
    assert res.exit_code == DOCUMENTED_EXIT[outcome]


@pytest.mark.parametrize("outcomes", subsets(CLAIM_OUTCOMES, empty=False), ids="+".join)
def test_claim_outcome_is_its_worst_test(verify_result, outcomes: tuple[str, ...]) -> None:
    """Guards against a claim over several d_k reporting a milder outcome than its worst test (a
    rank table that puts inconclusive above unreliable, or pass above anything)."""
    results = tuple(dataclasses.replace(verify_result, outcome=o) for o in outcomes)
    claim = ClaimOutcome(spec=None, results=results)  # type: ignore[arg-type]
    assert claim.outcome in documented_worst(set(outcomes))


@pytest.mark.parametrize("interrupted", [False, True])
@pytest.mark.parametrize("outcomes", subsets(CLAIM_OUTCOMES), ids=lambda o: "+".join(o) or "none")
def test_check_exit_is_the_worst_outcome(
    verify_result, outcomes: tuple[str, ...], interrupted: bool
) -> None:
    """Guards against a ladder that ranks two outcomes the wrong way round (inconclusive above
    unreliable, unreliable above fail, ...): for every set of claim outcomes, ``varcheck check``
    reports the worst and exits with its code; an interrupted run exits 130 whatever it holds."""
    claims = tuple(
        ClaimOutcome(spec=None, results=(dataclasses.replace(verify_result, outcome=o),))  # type: ignore[arg-type]
        for o in outcomes
    )
    res = CheckResult(
        path="claims.toml",
        claims=claims,
        seed=0,
        confidence=0.95,
        family_size=len(claims),
        precision=None,
        samples=1000,
        interrupted=interrupted,
    )
    assert res.exit_code == documented_claims_exit(set(outcomes), interrupted)
    if interrupted:
        assert res.outcome == "interrupted"
    else:
        assert res.outcome in documented_worst(set(outcomes))
        assert DOCUMENTED_EXIT[res.outcome] == res.exit_code


def test_outcome_tables_match_the_docs() -> None:
    """Guards against the shared tables drifting from the README: every outcome's exit status,
    and for every pair of outcomes the one OUTCOME_RANK calls worse exits as the docs say."""
    from varcheck.core.verdicts import OUTCOME_EXIT, OUTCOME_RANK

    assert OUTCOME_EXIT == DOCUMENTED_EXIT
    for a, b in itertools.combinations(CLAIM_OUTCOMES, 2):
        worse = max((a, b), key=OUTCOME_RANK.__getitem__)
        assert OUTCOME_EXIT[worse] == documented_claims_exit({a, b}), (a, b)


@pytest.mark.parametrize("interrupted", [False, True])
@pytest.mark.parametrize("verdicts", subsets(ROW_VERDICTS), ids=lambda v: "+".join(v) or "none")
def test_sweep_exit_ladder(sweep_result, verdicts: tuple[str, ...], interrupted: bool) -> None:
    """Guards against a sweep ladder that lets an unreliable or infinite row hide a rejected one
    (exit 4 instead of 1), ignores an infinite row, or forgets the 130 of an interrupted run."""
    row = sweep_result.rows[0]
    rows = tuple(dataclasses.replace(row, verdict=v) for v in verdicts)
    res = dataclasses.replace(sweep_result, rows=rows, interrupted=interrupted)
    assert res.exit_code == documented_sweep_exit(set(verdicts), interrupted)
    expected = {"interrupted"} if interrupted else documented_verdict_worst(set(verdicts))
    assert res.outcome in expected and DOCUMENTED_WORD_EXIT[res.outcome] == res.exit_code


def _derive_cases() -> list:
    cases = []
    for verdicts in subsets(ROW_VERDICTS):
        for broken in (False, True):
            expected = documented_derive_exit(set(verdicts), broken, True)
            name = ("+".join(verdicts) or "none") + ("-broken" if broken else "")
            cases.append(pytest.param(verdicts, broken, expected, id=name))
    return cases


@pytest.mark.parametrize(("verdicts", "broken", "expected"), _derive_cases())
def test_derive_exit_ladder(derive_result, verdicts, broken: bool, expected: int) -> None:
    """Guards against a derive ladder that fails because a textbook step breaks (what derive
    explains), or lets a check without a valid test hide a rejected one."""
    steps = derive_result.steps
    # every verdict of the set on some step (the last repeated), or no steps for the empty set
    padded = [verdicts[min(i, len(verdicts) - 1)] for i in range(len(steps))] if verdicts else []
    new_steps = tuple(dataclasses.replace(steps[i], verdict=v) for i, v in enumerate(padded))
    res = dataclasses.replace(
        derive_result, steps=new_steps, broken_step=2 if broken else None, correct_var=24.0
    )
    assert {s.verdict for s in res.steps} == set(verdicts)
    assert res.exit_code == expected
    assert res.outcome in documented_verdict_worst(set(verdicts))
    assert DOCUMENTED_WORD_EXIT[res.outcome] == res.exit_code


def test_derive_infinite_correct_value_exits_4(derive_result) -> None:
    """Guards against a broken step with an infinite correct value (t with df <= 2) exiting 1:
    there is no finite value to state, so the documented code is 4."""
    steps = tuple(
        dataclasses.replace(s, verdict="consistent" if s.number == 1 else "infinite")
        for s in derive_result.steps
    )
    res = dataclasses.replace(derive_result, steps=steps, broken_step=2, correct_var=math.inf)
    assert res.exit_code == documented_derive_exit({"consistent", "infinite"}, True, False) == 4
    assert res.outcome == "infinite"


PROJECT_ROWS = tuple((role, v) for role in ("check", "finding") for v in ROW_VERDICTS)


@pytest.mark.parametrize(
    "rows",
    [c for c in subsets(PROJECT_ROWS) if len(c) <= 2] + [PROJECT_ROWS],
    ids=lambda rows: "+".join(f"{r}:{v}" for r, v in rows) or "none",
)
def test_project_exit_ladder(project_result, rows: tuple[tuple[str, str], ...]) -> None:
    """Guards against a project ladder that exits 1 for a rejected *finding* (findings are the
    result, not a failure), misses a rejected check next to an unreliable row, or exits 0 with a
    row that has no valid test."""
    template = project_result.rows[0]
    new_rows = tuple(dataclasses.replace(template, role=r, verdict=v) for r, v in rows)
    res = dataclasses.replace(project_result, rows=new_rows)
    assert res.exit_code == documented_project_exit(set(rows))
    counted = {v for role, v in rows if role == "check" or v != "rejected"}
    assert res.outcome in documented_verdict_worst(counted)
    assert DOCUMENTED_WORD_EXIT[res.outcome] == res.exit_code


EXPLAIN_READINGS = ("consistent", "rejected", "unreliable", "none")


@pytest.mark.parametrize(("raw", "scaled"), list(itertools.product(EXPLAIN_READINGS, repeat=2)))
def test_explain_exit_ladder(explain_result, raw: str, scaled: str) -> None:
    """Guards against an explain ladder that exits 1 when only one reading rejects the value, or
    4 when the other reading is consistent."""
    res = dataclasses.replace(
        explain_result,
        raw=dataclasses.replace(explain_result.raw, verdict=raw),
        scaled=dataclasses.replace(explain_result.scaled, verdict=scaled),
    )
    assert res.exit_code == documented_explain_exit(raw, scaled)
    assert DOCUMENTED_WORD_EXIT[res.outcome] == res.exit_code
    assert res.outcome == (
        "rejected" if res.exit_code == 1 else "unreliable" if res.exit_code == 4 else "consistent"
    )


# --- end to end: real runs with mixed outcomes --------------------------------------------------


def _json(res) -> dict:
    assert res.output.lstrip().startswith("{"), res.output
    return json.loads(res.output)


# 1500 products: below the budget rule's minimum for normal entries at d_k = 1 (2000: q·k has
# excess kurtosis 6 there), so that row is unreliable, and above it at d_k = 2 (1250), where the
# row gets a test
HEAVY = ("--dist", "normal", "--samples", "1500")


@pytest.mark.parametrize(
    ("args", "verdicts"),
    [
        pytest.param(("--dk", "4,16", "--claim", "dk"), ["consistent"] * 2, id="consistent"),
        pytest.param(("--dk", "4,16", "--claim", "4"), ["consistent", "rejected"], id="rejected"),
        pytest.param(
            ("--dk", "1,2", *HEAVY, "--claim", "theory"),
            ["unreliable", "consistent"],
            id="unreliable+consistent",
        ),
        pytest.param(
            ("--dk", "1,2", *HEAVY, "--claim", "2*theory"),
            ["unreliable", "rejected"],
            id="unreliable+rejected",
        ),
        pytest.param(
            ("--dk", "1,2,4", *HEAVY, "--claim", "theory*dk/2"),
            ["unreliable", "consistent", "rejected"],
            id="unreliable+consistent+rejected",
        ),
        pytest.param(("--dk", "4,16", "--dist", "t:df=2"), ["infinite"] * 2, id="infinite"),
    ],
)
def test_cli_sweep_mixed_rows(run_cli, args: tuple[str, ...], verdicts: list[str]) -> None:
    """Guards against a sweep whose exit status disagrees with the verdicts it prints: a rejected
    row next to an unreliable one must exit 1, an unreliable row next to consistent ones 4."""
    common = ("--seed", "1", "--format", "json")
    if "--samples" not in args:
        common += ("--precision", "0.05")
    res = run_cli("sweep", *args, *common)
    printed = [row["verdict"] for row in _json(res)["rows"]]
    assert printed == verdicts, res.output  # the setting still produces the intended mix
    assert res.exit_code == documented_sweep_exit(set(printed)), res.output


ASSERT_RUNS = {
    "pass": ("--dk", "4", "--claim", "dk"),
    "fail": ("--dk", "4", "--dist", "normal:mean=0.5", "--claim", "dk"),
    "inconclusive": ("--dk", "16", "--claim", "1", "--scaled", "--tolerance", "0.02"),
    "unreliable": ("--dk", "4", "--dist", "t:df=3", "--claim", "dk"),
    "infinite": ("--dk", "4", "--dist", "t:df=2", "--claim", "dk"),
}


@pytest.mark.parametrize("outcome", CLAIM_OUTCOMES)
def test_cli_assert_outcomes(run_cli, outcome: str) -> None:
    """Guards against ``varcheck assert`` printing one outcome and exiting with another's code
    (in JSON and in the one-paragraph report)."""
    args = (*ASSERT_RUNS[outcome], "--samples", "20000", "--seed", "2")
    res = run_cli("assert", *args, "--format", "json")
    assert _json(res)["outcome"] == outcome, res.output
    assert res.exit_code == DOCUMENTED_EXIT[outcome], res.output
    table = run_cli("assert", *args, "--format", "table")
    assert table.output.startswith(f"varcheck: {outcome.upper()}:"), table.output
    assert table.exit_code == res.exit_code


CLAIM_BLOCKS = {
    "pass": 'name = "good"\ndk = 4\nclaim = "dk"\n',
    "fail": 'name = "bad"\ndk = 4\ndist = "normal:mean=0.5"\nclaim = "dk"\n',
    "inconclusive": 'name = "undecided"\ndk = 16\nclaim = "1"\nscaled = true\ntolerance = 0.02\n',
    "unreliable": 'name = "heavy"\ndk = 4\ndist = "t:df=3"\nclaim = "dk"\n',
    "infinite": 'name = "no-variance"\ndk = 4\ndist = "t:df=2"\nclaim = "dk"\n',
}


def _claim_file(tmp_path, outcomes: tuple[str, ...]):
    body = "[defaults]\nseed = 1\nsamples = 20000\n"
    body += "".join(f"\n[[claim]]\n{CLAIM_BLOCKS[o]}" for o in outcomes)
    path = tmp_path / "claims.toml"
    path.write_text(body, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "outcomes",
    [*itertools.combinations(CLAIM_OUTCOMES, 1), *itertools.combinations(CLAIM_OUTCOMES, 2)]
    + [CLAIM_OUTCOMES],
    ids="+".join,
)
def test_cli_check_mixed_claims(run_cli, tmp_path, outcomes: tuple[str, ...]) -> None:
    """Guards against a claim file with mixed outcomes (e.g. one inconclusive and one unreliable
    claim) exiting with the wrong code, or printing an overall outcome other than the one its
    exit status stands for."""
    path = _claim_file(tmp_path, outcomes)
    res = run_cli("check", str(path), "--format", "json")
    doc = _json(res)
    printed = [c["outcome"] for c in doc["claims"]]
    assert printed == list(outcomes), res.output
    assert res.exit_code == documented_claims_exit(set(printed)), res.output
    assert doc["outcome"] in documented_worst(set(printed))
    assert DOCUMENTED_EXIT[doc["outcome"]] == res.exit_code
    table = run_cli("check", str(path), "--format", "table")
    assert table.exit_code == res.exit_code
    summary = [line for line in table.output.splitlines() if " claim" in line and "→" in line]
    assert summary and summary[-1].endswith(f"→ {doc['outcome']}"), table.output


@pytest.mark.parametrize(
    ("dist", "broken", "verdicts"),
    [
        pytest.param("normal", None, {"consistent"}, id="holds"),
        pytest.param("normal:mean=0.5", 2, {"consistent"}, id="breaks"),
        pytest.param("t:df=3", None, {"consistent", "unreliable"}, id="unreliable"),
        pytest.param("t:df=2", 2, {"unreliable", "infinite"}, id="infinite"),
        pytest.param(
            "t:df=3,mean=0.5",
            2,
            {"consistent", "unreliable"},
            id="breaks+unreliable",
        ),
    ],
)
def test_cli_derive_mixed_steps(run_cli, dist: str, broken, verdicts: set[str]) -> None:
    """Guards against ``varcheck derive`` failing because a textbook step breaks, or an exit
    status other than its checks' verdicts say."""
    args = ("derive", "--dk", "4", "--dist", dist, "--samples", "20000", "--seed", "1")
    res = run_cli(*args, "--format", "json")
    doc = _json(res)
    printed = {s["verdict"] for s in doc["steps"]}
    assert doc["broken_step"] == broken and printed == verdicts, res.output
    finite = doc["correct_var"] is not None
    assert doc["exit_code"] == res.exit_code
    assert res.exit_code == documented_derive_exit(printed, broken is not None, finite)
    assert DOCUMENTED_WORD_EXIT[doc["outcome"]] == res.exit_code


def _project_rows(doc: dict) -> set[tuple[str, str]]:
    return {(r["role"], r["verdict"]) for r in doc["rows"]}


def test_cli_project_rejected_findings_exit_0(run_cli) -> None:
    """Guards against rejected *findings* (the σ-based value for one fixed W) setting the exit
    status: the default run's findings are rejected and it exits 0."""
    res = run_cli(
        "project", "--dx", "8", "--dk", "4", "--blocks", "400", "--seed", "2", "--format", "json"
    )
    doc = _json(res)
    rows = _project_rows(doc)
    assert ("finding", "rejected") in rows and ("check", "rejected") not in rows, res.output
    assert res.exit_code == documented_project_exit(rows) == 0, res.output
    assert doc["outcome"] == "consistent"  # the word the exit status follows, not the findings


def test_cli_project_unreliable_rows_beside_rejected_findings_exit_4(run_cli) -> None:
    """Guards against rows without a valid test being ignored when the only rejections are
    findings: t inputs with 7 degrees of freedom and 500 blocks leave some rows unreliable (below
    the budget rule)."""
    res = run_cli(
        "project",
        "--dx",
        "8",
        "--dk",
        "4",
        "--blocks",
        "500",
        "--seed",
        "1",
        "--x-dist",
        "t:df=7",
        "--format",
        "json",
    )
    doc = _json(res)
    rows = _project_rows(doc)
    assert ("finding", "rejected") in rows and ("check", "unreliable") in rows, res.output
    assert ("check", "rejected") not in rows, res.output
    assert res.exit_code == documented_project_exit(rows) == 4, res.output
    assert doc["outcome"] == "unreliable"


def test_cli_project_rejected_check_beside_unreliable_rows_exit_1(run_cli) -> None:
    """Guards against an unreliable row hiding a rejected check (exit 4 instead of 1). A rejected
    check is a chance event for a true prediction: at confidence 0.5 the first of a few seeds
    that shows one is taken (the Python API finds it, the command line is then judged)."""
    settings = {"blocks": 500, "x_dist": "t:df=7", "confidence": 0.5, "constructed": False}

    def rejected_check(seed: int) -> bool:
        rows = project(8, 4, seed=seed, **settings).rows
        return any(r.role == "check" and r.verdict == "rejected" for r in rows)

    seed = next(s for s in range(100) if rejected_check(s))
    res = run_cli(
        "project",
        "--dx",
        "8",
        "--dk",
        "4",
        "--blocks",
        "500",
        "--x-dist",
        "t:df=7",
        "--confidence",
        "0.5",
        "--no-constructed",
        "--seed",
        str(seed),
        "--format",
        "json",
    )
    doc = _json(res)
    rows = _project_rows(doc)
    assert ("check", "rejected") in rows and rows & {("check", "unreliable")}, res.output
    assert doc["exit_code"] == res.exit_code == documented_project_exit(rows) == 1, res.output
    assert doc["outcome"] == "rejected"


@pytest.mark.parametrize(
    ("args", "readings"),
    [
        pytest.param((), ("consistent", "consistent"), id="both-consistent"),
        pytest.param(("--observed", "40"), ("rejected", "rejected"), id="both-rejected"),
        pytest.param(
            ("--shape", "2x64x2", "--observed", "40"),
            ("consistent", "rejected"),
            id="one-rejected",
        ),
        pytest.param(
            ("--shape", "1111x111x1111", "--observed", "110", "--dist", "t:df=3"),
            ("unreliable", "unreliable"),
            id="unreliable",
        ),
    ],
)
def test_cli_explain_readings(run_cli, args: tuple[str, ...], readings: tuple[str, str]) -> None:
    """Guards against ``varcheck explain`` exiting 1 when only one reading rejects the value, or
    disagreeing with the verdicts (and the exit_code field) it prints."""
    extra = () if "1111x111x1111" in args else ("--replicates", "2000")
    res = run_cli("explain", *args, *extra, "--seed", "1", "--format", "json")
    doc = _json(res)
    printed = (doc["verdict"], doc["scaled"]["verdict"])
    assert printed == readings, res.output
    assert doc["exit_code"] == res.exit_code == documented_explain_exit(*printed), res.output
    assert DOCUMENTED_WORD_EXIT[doc["outcome"]] == res.exit_code


# --- every JSON document: top-level outcome and exit_code (#18) ----------------------------------

GOLDEN = Path(__file__).resolve().parent / "golden"
GOLDEN_JSON = sorted(GOLDEN.glob("*-json.txt"))
#: documents that say the outcome among their own keys (a claim's record holds it): kept there
OUTCOME_IN_PLACE = {"assert", "check", "probe"}


def _golden(path: Path) -> tuple[int, dict]:
    """The exit status and the JSON document of a golden case."""
    _, status, body = path.read_text(encoding="utf-8").split("\n", 2)
    assert status.startswith("exit "), path
    # a machine-dependent number is masked as a bare <NAME> (audit's seconds)
    return int(status.removeprefix("exit ")), json.loads(re.sub(r"(?<=: )<[A-Z_]+>", "0", body))


def _assert_outcome_and_exit(doc: dict, code: int) -> None:
    """Both keys at the top level, ``exit_code`` last (``outcome`` just before it unless the
    document says it in its own place), and the outcome the word the exit code follows."""
    keys = list(doc)
    assert keys[-1] == "exit_code" and doc["exit_code"] == code, keys[-3:]
    if doc["command"] not in OUTCOME_IN_PLACE:
        assert keys[-2] == "outcome", keys[-3:]
    stopped = {130, 143} if doc["outcome"] == "interrupted" else set()  # Ctrl-C, SIGTERM
    assert code in {DOCUMENTED_WORD_EXIT[doc["outcome"]], *stopped}, (doc["outcome"], code)


@pytest.mark.parametrize("path", GOLDEN_JSON, ids=lambda p: p.name.removesuffix("-json.txt"))
def test_every_golden_json_says_its_outcome_and_exit_code(path: Path) -> None:
    """Guards against a command's JSON without a top-level ``outcome`` or ``exit_code``, with the
    two in another order than the other commands', or with an outcome word that stands for
    another exit status than the run's (tests/test_golden.py checks these documents are what
    the commands print)."""
    code, doc = _golden(path)
    _assert_outcome_and_exit(doc, code)


def test_every_command_has_a_golden_json() -> None:
    """Guards against a command escaping the check above for want of a golden JSON case."""
    from varcheck.cli import COMMANDS

    covered = {_golden(path)[1]["command"] for path in GOLDEN_JSON}
    assert covered == set(COMMANDS)


@pytest.fixture(scope="module")
def check_result(tmp_path_factory):
    path = tmp_path_factory.mktemp("claims") / "claims.toml"
    path.write_text(f"[defaults]\nseed = 1\nsamples = 2000\n\n[[claim]]\n{CLAIM_BLOCKS['pass']}")
    return varcheck.check(str(path))


@pytest.mark.parametrize(
    ("name", "interrupted"),
    [
        (name, cut)
        for name in ("sweep", "check", "derive", "project", "explain", "verify")
        for cut in (0, 1)
    ],
)
def test_to_dict_says_outcome_and_exit_code(request, name: str, interrupted: bool) -> None:
    """Guards against ``to_dict()`` (what ``--format json`` prints) of a tested result lacking
    the outcome, or saying the verdict's word for a run stopped by Ctrl-C (exit 130)."""
    interrupted = bool(interrupted)
    res = dataclasses.replace(request.getfixturevalue(f"{name}_result"), interrupted=interrupted)
    doc = res.to_dict()
    _assert_outcome_and_exit(doc, res.exit_code)
    assert (doc["outcome"] == "interrupted") == interrupted == (res.exit_code in (130, 143))
    if name == "verify" and interrupted:
        # VerifyResult.outcome keeps the partial estimate's decision; its JSON says it in reason
        assert doc["reason"].startswith(f"interrupted: from the blocks drawn so far, {res.outcome}")
    else:
        assert doc["outcome"] == res.outcome


def test_an_interrupted_derive_says_so(monkeypatch) -> None:
    """Guards against a derive cut short by Ctrl-C (steps 3 and 4 unchecked) reporting the
    verdict of the steps it did check: its JSON says interrupted, 130."""
    import varcheck.teaching.derive as derive_module

    def stop(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(derive_module, "estimate_variance", stop)
    res = derive(4, samples=1000, seed=0)
    monkeypatch.undo()
    assert [s.verdict for s in res.steps][2:] == ["interrupted", "interrupted"]
    doc = res.to_dict()
    _assert_outcome_and_exit(doc, res.exit_code)
    assert doc["outcome"] == "interrupted"


def test_exit_4_is_described_with_all_its_causes() -> None:
    """Guards against describing exit 4 as infinite moments only (issue #22, item 5): derive
    exits 4 for Rademacher entries at d_k = 1, where every moment is finite but (q·k)^2 is
    constant, and sweep rows with kurtosis above 10^6 exit 4 too. --help, the README and
    docs/ci.md name every cause."""
    from pathlib import Path

    from varcheck.cli import EXIT_CODES_HELP

    root = Path(__file__).resolve().parents[1]
    readme_row = next(
        line
        for line in (root / "README.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| 4 |")
    )
    ci_row = next(
        line
        for line in (root / "docs" / "ci.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("| unreliable / infinite |")
    )
    for text in (EXIT_CODES_HELP, readme_row, ci_row):
        assert "no valid test" in text and "kurtosis" in text and "constant" in text, text


def test_derive_exits_4_for_a_constant_square(run_cli) -> None:
    res = run_cli("derive", "--dist", "rademacher", "--dk", "1", "--seed", "1")
    assert res.exit_code == 4


def test_an_interrupted_probe_sweep_says_so() -> None:
    """Guards against an interrupted probe over several d_k writing ``"outcome": "pass"`` beside
    exit 130 (its outcome took the worst row's word and ignored the interruption)."""
    from varcheck.kernels.probe import probe_sweep

    res = probe_sweep("examples/attention_kernels.py:attention", [8, 16], samples=2000, seed=1)
    assert res.outcome == "pass" and res.exit_code == 0
    cut = dataclasses.replace(res, interrupted=True)
    assert cut.outcome == "interrupted" and cut.exit_code in (130, 143)
    assert cut.to_dict()["outcome"] == "interrupted"
