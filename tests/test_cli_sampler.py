"""A user's sampler on the command line and in claim files (issue #15): bad samplers get exit 2
and one line, outputs name the sampler, runs are reproducible for any --workers.

The CLI runs in process through ``main`` (the ``run_cli`` fixture of conftest.py), except for
``--debug``, whose traceback goes through Python's own handler (a subprocess). The helper
samplers live in tests/data/samplers/. Bugs found are ``xfail(strict=True)``.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "samplers"
TOY = f"{DATA}/toy_samplers.py"
FAST = ("--samples", "2000", "--seed", "1")


def one_error_line(res, command: str) -> str:
    """The single stderr line of a refused run (exit 2, nothing on stdout, no traceback)."""
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"varcheck {command}: error: "), lines[0]
    assert "Traceback" not in res.stderr and res.stdout == ""
    return lines[0]


@pytest.fixture
def bad_files(tmp_path, monkeypatch) -> None:
    """Files that cannot be samplers, in the working directory: a syntax error, a text file,
    a folder (short relative paths: see test_a_long_target_is_named_by_its_end)."""
    (tmp_path / "syntax.py").write_text("def logits(rng, dk)\n    return rng\n")
    (tmp_path / "notes.txt").write_text("def logits(rng, dk): pass\n")
    (tmp_path / "pkg.py").mkdir()
    monkeypatch.chdir(tmp_path)


# (command, its arguments, a fragment of the message, the target the message must name)
BAD = [
    ("assert", ["--sampler", "no_such_module_vc:fn"], "no module named 'no_such_module_vc'", 1),
    ("assert", ["--sampler", f"{DATA}/missing.py:fn"], "missing.py not found", 1),
    ("sweep", ["--sampler", f"{DATA}:fn"], "is not a regular file", 1),
    ("assert", ["--sampler", "pkg.py:fn"], "is not a regular file", 1),
    ("assert", ["--sampler", "./notes.txt:logits"], "notes.txt is not a .py file", 1),
    ("assert", ["--sampler", "not a module:fn"], "is not a module name", 1),
    ("assert", ["--sampler", f"{TOY}"], "has no ':FUNCTION'", 1),
    ("assert", ["--sampler", f"{TOY}:missing"], "has no 'missing'", 1),
    ("sweep", ["--sampler", f"{TOY}:NOT_CALLABLE"], "not a function", 1),
    ("assert", ["--sampler", f"{TOY}:no_dk"], "cannot be called as fn(rng, dk)", 1),
    ("assert", ["--sampler", f"{TOY}:needs_heads"], "missing a required argument: 'heads'", 1),
    (
        "assert",
        ["--sampler", f"{TOY}:normal", "--sampler-arg", "heads=2"],
        "got an unexpected keyword argument 'heads'",
        1,
    ),
    (
        "sweep",
        ["--sampler", f"{TOY}:normal", "--sampler-arg", "dk=2"],
        "'dk' is passed by varcheck on every call",
        1,
    ),
    ("assert", ["--sampler", f"{TOY}:normal", "--sampler-arg", "heads"], "give KEY=VALUE", 0),
    (
        "assert",
        ["--sampler", f"{TOY}:choice", "--sampler-arg", "act=relu"],
        "the value is not a Python literal",
        0,
    ),
    (
        "sweep",
        ["--sampler", f"{TOY}:normal", "--sampler-arg", "scale=1", "--sampler-arg", "scale=2"],
        "--sampler-arg scale is given twice",
        0,
    ),
    ("assert", ["--sampler-arg", "scale=2"], "--sampler-arg binds arguments of --sampler", 0),
    ("sweep", ["--sampler-arg", "scale=2"], "--sampler-arg binds arguments of --sampler", 0),
    (
        "assert",
        ["--dist", "normal", "--sampler", f"{TOY}:normal"],
        "--dist and --sampler cannot be used together",
        0,
    ),
    (
        "sweep",
        ["--q-dist", "uniform", "--sampler", f"{TOY}:normal"],
        "--q_dist and --sampler cannot be used together",
        0,
    ),
    (
        "sweep",
        ["--rho", "0.5", "--sampler", f"{TOY}:normal"],
        "--rho and --sampler cannot be used together",
        0,
    ),
    ("sweep", ["--sampler", f"{TOY}:normal", "--claim", "theory"], "uses theory", 1),
    ("assert", ["--sampler", f"{TOY}:normal", "--claim", "dk*(1+rho**2)"], "uses rho", 1),
    ("sweep", ["--sampler", f"{TOY}:normal", "--claim", "var_q*dk"], "uses var_q", 1),
    ("sweep", ["--sampler", f"{TOY}:normal", "--claim", "dk-4"], "must be > 0", 0),
    (
        "sweep",
        ["--sampler", f"{TOY}:normal", "--scheduler", "local"],
        "a Dask scheduler is not supported with a sampler",
        1,
    ),
    (
        "assert",
        ["--sampler", f"{TOY}:normal", "--scheduler", "tcp://127.0.0.1:1"],
        "a Dask scheduler is not supported with a sampler",
        1,
    ),
    (
        "assert",
        ["--sampler", f"{DATA}/broken_import.py:logits"],
        "raised RuntimeError: weights.pt not found",
        1,
    ),
    ("assert", ["--sampler", "syntax.py:logits"], "has a syntax error at line 1", 1),
    ("assert", ["--sampler", f"{TOY}:raises"], "raised ValueError: shapes (3,4) and (4,4)", 1),
    ("sweep", ["--sampler", f"{TOY}:fails_later"], "raised RuntimeError: CUDA out of memory", 1),
    (
        "sweep",
        ["--sampler", f"{TOY}:fails_later", "--workers", "2"],
        "raised RuntimeError: CUDA out of memory",
        1,
    ),
    ("assert", ["--sampler", f"{TOY}:exits"], "raised SystemExit: stop", 1),
    ("sweep", ["--sampler", f"{TOY}:closes"], "raised GeneratorExit: closed", 1),
    ("assert", ["--sampler", f"{TOY}:returns_huge_view"], "returned 1,000,000,000,000 values", 1),
    ("assert", ["--sampler", f"{TOY}:returns_none"], "returned None (a missing return?)", 1),
    ("assert", ["--sampler", f"{TOY}:returns_string"], "returned a str, not numbers", 1),
    ("assert", ["--sampler", f"{TOY}:returns_objects"], "returned object values", 1),
    ("assert", ["--sampler", f"{TOY}:returns_ragged"], "numpy cannot read as an array", 1),
    ("sweep", ["--sampler", f"{TOY}:returns_empty"], "returned no values (an empty array)", 1),
    ("assert", ["--sampler", f"{TOY}:returns_complex"], "returned complex values", 1),
    ("assert", ["--sampler", f"{TOY}:returns_nan"], "returned NaN values at d_k=4", 1),
    ("sweep", ["--sampler", f"{TOY}:returns_inf"], "returned infinite values at d_k=4", 1),
    ("assert", ["--sampler", f"{TOY}:changing_size"], "every call must return the same number", 1),
]


@pytest.mark.usefixtures("bad_files")
@pytest.mark.parametrize(
    ("command", "args", "says", "names_target"),
    BAD,
    ids=[f"{c}-{'-'.join(a)[-40:]}" for c, a, _, _ in BAD],
)
def test_bad_sampler_is_exit_2_and_one_line(
    run_cli, command: str, args: list[str], says: str, names_target: int
) -> None:
    claim = [] if "--claim" in args else ["--claim", "1"]
    res = run_cli(command, "--dk", "4", *args, *claim, *FAST)
    line = one_error_line(res, command)
    assert says in line
    if names_target:
        target = args[args.index("--sampler") + 1]
        # named whole, or (a long checkout path) by its end: the file and the function
        assert target in line or target[-50:] in line
    assert "second line" not in line  # only the first line of the user's message


@pytest.mark.parametrize(
    ("command", "says"),
    [("assert", "Missing option '--claim'"), ("sweep", "needs a claim: a number or an")],
)
def test_a_sampler_needs_a_claim(run_cli, command: str, says: str) -> None:
    res = run_cli(command, "--dk", "4", "--sampler", f"{TOY}:normal", *FAST)
    assert says in one_error_line(res, command)


# --- --debug ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def debug_run() -> subprocess.CompletedProcess[str]:
    """``varcheck --debug assert`` on a sampler that raises, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "varcheck", "--debug", "assert", "--dk", "4"]
        + ["--sampler", f"{TOY}:raises", "--claim", "1", *FAST],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_debug_shows_the_traceback_of_the_users_exception(debug_run) -> None:
    """--debug prints the traceback, with its cause, the user's own exception, down to the line
    of toy_samplers.py that raised it and its whole message; then the usual one-line error."""
    err = debug_run.stderr
    assert "Traceback (most recent call last)" in err
    assert f'File "{TOY}", line' in err and "in raises" in err
    assert "ValueError: shapes (3,4) and (4,4) not aligned\nsecond line of the message" in err
    assert "The above exception was the direct cause of the following exception" in err
    lines = err.rstrip().splitlines()
    assert lines[-2].startswith("varcheck.errors.VarcheckError: sampler ")
    assert lines[-1].startswith("varcheck assert: error: sampler ")
    assert debug_run.stdout == ""


def test_debug_keeps_the_exit_code_of_bad_input(debug_run) -> None:
    assert debug_run.returncode == 2


# --- outputs name the sampler, and reproduce it -------------------------------------------------


def test_outputs_name_the_sampler_and_its_args(run_cli, monkeypatch) -> None:
    monkeypatch.chdir(DATA)
    source = ("--sampler", "toy_samplers.py:normal", "--sampler-arg", "scale=2.0", "--claim", "4")
    common = ("--dk", "4,16", *source, *FAST)
    label = "toy_samplers.py:normal(scale=2.0)"
    doc = json.loads(run_cli("sweep", *common, "--format", "json").stdout)
    assert doc["sampler"] == {"target": "toy_samplers.py:normal", "args": {"scale": 2.0}}
    assert (doc["q_dist"], doc["k_dist"], doc["claim"]) == (None, None, "4")
    assert all(row["theory_var"] is None for row in doc["rows"])
    assert f"Var of the values of {label}; claim: 4" in run_cli("sweep", *common).stdout
    assert f"sampler={label}" in run_cli("sweep", *common, "--format", "csv-meta").stdout
    one = run_cli("assert", "--dk", "4", *source, *FAST, "--format", "json")
    assert json.loads(one.stdout)["sampler"]["args"] == {"scale": 2.0}


def test_module_target_is_found_in_the_current_directory(run_cli, monkeypatch) -> None:
    monkeypatch.chdir(DATA)
    monkeypatch.delitem(sys.modules, "toy_samplers", raising=False)
    res = run_cli(
        "assert",
        "--dk",
        "8",
        "--sampler",
        "toy_samplers:dot",
        "--claim",
        "dk",
        *FAST,
        "--format",
        "json",
    )
    assert res.exit_code in (0, 1), res.stderr
    assert json.loads(res.stdout)["sampler"] == {"target": "toy_samplers:dot", "args": {}}


REPRODUCE = (
    "--dk",
    "8",
    "--sampler",
    "toy_samplers.py:choice",
    "--sampler-arg",
    "act='gelu'",
    "--claim",
    "2",
    "--samples",
    "3000",
    "--seed",
    "4",
)


def reproduce_command(stdout: str) -> list[str]:
    line = next(s for s in stdout.splitlines() if "reproduce:" in s)
    return shlex.split(line.split("reproduce:", 1)[1])


def test_reproduce_line_reruns_the_same_test(run_cli, monkeypatch) -> None:
    """The failing paragraph's ``reproduce:`` command (a quoted string argument included)
    gives the same JSON as the run it came from."""
    monkeypatch.chdir(DATA)
    table = run_cli("assert", *REPRODUCE)
    assert table.exit_code == 1, table.stdout  # the variance is 1, not 2
    command = reproduce_command(table.stdout)
    assert command[:2] == ["varcheck", "assert"]
    again = run_cli(*command[1:], "--format", "json")
    assert again.stdout == run_cli("assert", *REPRODUCE, "--format", "json").stdout
    assert json.loads(again.stdout)["sampler"]["args"] == {"act": "gelu"}


def test_reproduce_line_with_a_long_path_is_one_line(run_cli) -> None:
    args = (*REPRODUCE[:3], f"{TOY}:choice", "--sampler-arg", "sizes=(3,)", *REPRODUCE[4:])
    command = reproduce_command(run_cli("assert", *args).stdout)
    assert command[-2:] == ["--seed", "4"]


def test_a_long_target_is_named_by_its_end(run_cli, tmp_path) -> None:
    folder = tmp_path / "home" / "runner" / "work" / "my-model" / "my-model" / "tests"
    folder.mkdir(parents=True)
    (folder / "attention.py").write_text("def logits(rng, dk):\n    return rng\n")
    res = run_cli(
        "assert", "--dk", "4", "--sampler", f"{folder}/attention.py:logit", "--claim", "1"
    )
    assert "attention.py:logit" in one_error_line(res, "assert")


# --- determinism --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [("sweep", "--dk", "8,32", "--claim", "dk"), ("assert", "--dk", "32", "--claim", "dk")],
    ids=["sweep", "assert"],
)
def test_same_seed_same_bytes_for_any_worker_count(run_cli, command) -> None:
    """``batch_logits`` returns 4,096 values a call, so the 200 or more calls of a row fall in
    several chunks, which the workers draw in any order."""
    args = (*command, "--sampler", f"{TOY}:batch_logits", "--format", "json")
    outputs = {w: run_cli(*args, "--seed", "5", "--workers", w) for w in ("1", "2", "4")}
    assert {res.exit_code for res in outputs.values()} == {0}
    assert outputs["1"].stdout == outputs["2"].stdout == outputs["4"].stdout
    other = json.loads(run_cli(*args, "--seed", "6", "--workers", "2").stdout)
    first = json.loads(outputs["1"].stdout)

    def numbers(doc: dict) -> list[float]:
        return [row["var"] for row in doc["rows"]] if "rows" in doc else [doc["estimate"]]

    assert all(a != b for a, b in zip(numbers(first), numbers(other), strict=True))


# --- claim files --------------------------------------------------------------------------------

CLAIMS = """\
[defaults]
seed = 3
samples = 2000

[[claim]]
name = "mine"
dk = [4, 8]
sampler = "toy_samplers.py:normal"
args = {{ scale = 2.0 }}
claim = 4
{extra}"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A claim file next to its sampler file, run from another folder."""
    folder = tmp_path / "proj"
    folder.mkdir()
    shutil.copy(DATA / "toy_samplers.py", folder)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return folder


def write_claims(project: Path, extra: str = "") -> str:
    (project / "claims.toml").write_text(CLAIMS.format(extra=extra))
    return "../proj/claims.toml"


def test_claim_file_sampler_is_read_next_to_the_file_and_named(run_cli, project) -> None:
    path = write_claims(project)
    junit = project / "junit.xml"
    res = run_cli("check", path, "--format", "json", "--junit-xml", str(junit))
    assert res.exit_code == 0, res.stderr
    claim = json.loads(res.stdout)["claims"][0]
    assert claim["sampler"] == {"target": "toy_samplers.py:normal", "args": {"scale": 2.0}}
    assert [t["sampler"] for t in claim["tests"]] == ["toy_samplers.py:normal(scale=2.0)"] * 2
    assert [t["q_dist"] for t in claim["tests"]] == [None, None]
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case is not None and case.get("name") == "mine"
    assert "(sampler toy_samplers.py:normal(scale=2.0), 200 calls)" in case.findtext("system-out")


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("args = { scale = 2.0 }\nclaim = 1", "binds arguments of a sampler: add sampler = ..."),
        ('sampler = "toy_samplers.py:normal"\nargs = [2.0]\nclaim = 1', "args must be a table"),
        ('sampler = "toy_samplers.py:normal"\nargs = "scale=2"\nclaim = 1', "args must be a table"),
        ('sampler = "toy_samplers.py:normal"\ndist = "normal"\nclaim = 1', "dist describes"),
        ('sampler = "toy_samplers.py:normal"\nrho = 0.5\nclaim = 1', "rho describes"),
        ('sampler = "toy_samplers.py:normal"\nclaim = "theory"', "uses theory"),
        ("sampler = 3\nclaim = 1", 'sampler must be a string "MODULE:FUNCTION"'),
        ('sampler = "missing.py:f"\nclaim = 1', "file ../proj/missing.py not found"),
        ('sampler = "toy_samplers.py:normal"\nargs = { rng = 1 }\nclaim = 1', "'rng' is passed"),
    ],
)
def test_bad_sampler_claims_are_one_line_naming_the_claim(
    run_cli, project, table: str, says: str
) -> None:
    path = write_claims(project, f'\n[[claim]]\nname = "bad"\ndk = 4\n{table}\n')
    line = one_error_line(run_cli("check", path), "check")
    assert f"{path}:12: claim 'bad': " in line and says in line


def test_a_failing_sampler_in_a_claim_file_is_one_line(run_cli, project) -> None:
    extra = '\n[[claim]]\nname = "bad"\ndk = 4\nsampler = "toy_samplers.py:raises"\nclaim = 1\n'
    line = one_error_line(run_cli("check", write_claims(project, extra)), "check")
    assert "sampler toy_samplers.py:raises raised ValueError: shapes (3,4)" in line


def test_check_table_names_the_sampler(run_cli, project) -> None:
    res = run_cli("check", write_claims(project))
    assert res.exit_code == 0, res.stderr
    assert "q·k" not in res.stdout and "toy_samplers.py:normal" in res.stdout


# --- more bugs ---------------------------------------------------------------------------------


def test_a_sampler_that_ignores_its_rng_is_bad_input(run_cli) -> None:
    res = run_cli(
        "assert",
        "--dk",
        "64",
        "--sampler",
        f"{TOY}:ignores_rng",
        "--claim",
        "1",
        "--tolerance",
        "0.1",
        "--seed",
        "1",
    )
    one_error_line(res, "assert")


@pytest.mark.parametrize("value", ["{1, 2}", "b'ab'", "1j"])
def test_sampler_args_json_cannot_crash(run_cli, value: str) -> None:
    res = run_cli(
        "assert",
        "--dk",
        "4",
        "--sampler",
        f"{TOY}:flexible",
        "--sampler-arg",
        f"x={value}",
        "--claim",
        "1",
        *FAST,
        "--format",
        "json",
    )
    assert res.exit_code == 2 or json.loads(res.stdout)["sampler"]["args"]["x"] is not None


def test_claim_file_args_json_cannot_crash(run_cli, project) -> None:
    extra = (
        '\n[[claim]]\nname = "dated"\ndk = 4\nsampler = "toy_samplers.py:flexible"\n'
        "args = { when = 1979-05-27 }\nclaim = 1\n"
    )
    res = run_cli("check", write_claims(project, extra), "--format", "json")
    assert res.exit_code in (0, 1, 2), res.stderr


def test_sampler_ratio_is_to_the_claim_in_every_format(run_cli) -> None:
    """With no theory the ratio column is estimate / claim, in the table, JSON and CSV alike;
    a one-row sweep says "1 row"; a fixed budget of whole calls says "at least"."""
    common = (
        "--dk",
        "4",
        "--sampler",
        f"{TOY}:normal",
        "--claim",
        "4",
        "--samples",
        "2000",
        "--seed",
        "3",
    )
    doc = json.loads(run_cli("sweep", *common, "--format", "json").stdout)
    row = doc["rows"][0]
    assert row["ratio"] == pytest.approx(row["var"] / 4)
    csv_text = run_cli("sweep", *common, "--format", "csv-meta").stdout
    header, values = [line.split(",") for line in csv_text.splitlines() if line][-2:]
    assert float(values[header.index("ratio")]) == pytest.approx(row["ratio"])
    table = " ".join(run_cli("sweep", *common).stdout.split())
    assert "over 1 row (" in table and "at least 2,000 values per row" in table


def test_the_heavy_tail_caution_is_in_json_too(run_cli) -> None:
    """Guards against the sampler's heavy-tail caution living only under the table: assert's
    JSON has it after reason (null at the default precision), each sampler sweep row has it,
    joined with a row's own caution; varcheck's own laws never get it."""
    source = ("--dk", "4", "--sampler", f"{TOY}:normal", "--claim", "4", "--seed", "3")
    fixed = json.loads(run_cli("assert", *source, "--samples", "2000", "--format", "json").stdout)
    keys = list(fixed)
    assert keys[keys.index("reason") + 1] == "caution"
    assert fixed["caution"].startswith("a sampler has no budget rule for heavy-tailed values")
    table = run_cli("assert", *source, "--samples", "2000").stdout
    assert "caution: a sampler has no budget rule" in " ".join(table.split())
    default = json.loads(run_cli("assert", *source, "--format", "json").stdout)
    assert default["caution"] is None
    rows = json.loads(run_cli("sweep", *source, "--samples", "2000", "--format", "json").stdout)
    assert rows["rows"][0]["caution"] == fixed["caution"]
    own = run_cli("assert", "--dk", "4", "--claim", "dk", "--samples", "2000", "--format", "json")
    assert json.loads(own.stdout)["caution"] is None


def test_a_rows_caution_joins_the_heavy_tail_one() -> None:
    import dataclasses

    from varcheck.checks.sweep import sweep
    from varcheck.checks.verify import SAMPLER_TAILS_CAUTION

    row = sweep(4, sampler=f"{TOY}:normal", claim=4, samples=2000, seed=1).rows[0]
    capped = dataclasses.replace(
        row, estimate=dataclasses.replace(row.estimate, stop_reason="max-seconds")
    )
    assert (
        capped.caution
        == f"stopped at --max-seconds before the target precision; {SAMPLER_TAILS_CAUTION}"
    )
    assert sweep(4, sampler=f"{TOY}:normal", claim=4, precision=0.05, seed=1).rows[0].caution
    assert (
        sweep(4, sampler=f"{TOY}:normal", claim=4, precision=0.01, seed=1).rows[0].caution is None
    )


@pytest.mark.parametrize(
    ("command", "fmt"),
    [("assert", "json"), ("sweep", "json"), ("sweep", "csv-meta"), ("sweep", "markdown")],
)
def test_a_sampler_that_prints_keeps_the_output_valid(
    run_cli, tmp_path: Path, command: str, fmt: str
) -> None:
    """Guards against a sampler's print() landing in JSON or CSV (exit 0 with output no parser
    reads, #17): what the user's code prints goes to stderr."""
    (tmp_path / "chatty.py").write_text(
        "def logits(rng, dk):\n    print('debug: one call')\n    return rng.standard_normal(dk)\n"
    )
    res = run_cli(
        command,
        "--dk",
        "4",
        "--claim",
        "1",
        "--sampler",
        f"{tmp_path}/chatty.py:logits",
        "--format",
        fmt,
        *FAST,
    )
    assert res.exit_code in (0, 1, 3), res.stderr
    assert "debug: one call" not in res.stdout and "debug: one call" in res.stderr
    if fmt == "json":
        assert json.loads(res.stdout)["command"] == command
    elif fmt == "csv-meta":
        assert res.stdout.startswith("# command=sweep")


def test_a_run_cut_by_its_time_cap_gets_the_heavy_tail_caution() -> None:
    """Guards against a sampler run at the default precision but stopped by --max-seconds long
    before it (an interval on a few dozen calls) reading as if the precision had been met: the
    caution applies to it as to a fixed budget."""
    import dataclasses

    from varcheck.checks.verify import SAMPLER_TAILS_CAUTION, verify

    res = verify(4, claim=4, sampler=f"{TOY}:normal", seed=1)
    assert res.caution is None
    capped = dataclasses.replace(res, raw=dataclasses.replace(res.raw, stop_reason="max-seconds"))
    assert capped.caution == SAMPLER_TAILS_CAUTION
