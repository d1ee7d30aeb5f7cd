"""Bounded and interruptible: hostile options, claim expressions and files, each with its exit
code, in sweep, assert, check, audit, beta and probe.

Cases that could hang or eat memory if a guard regressed (claim expressions, devices, FIFOs,
huge budgets) run in child processes under a memory limit (RLIMIT_AS) and a CPU limit
(RLIMIT_CPU), several at a time, forked from the server of ``hostile_cases.Runner``; the
option matrix is refused (or runs a tiny budget) in milliseconds and runs in-process.
Files someone hands varcheck (GGUF and safetensors checkpoints, tokenizers, texts, .npz weights,
claim files: ``hostile_cases.py``) each run in a child forked from a server that imported
varcheck once, under 1.5 GiB of address space and 20 s of CPU. Every exit 2 must be one
short line on stderr, with nothing on stdout; no run may print a raw control character.
"""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pytest

if TYPE_CHECKING:
    from hostile_cases import Ran

#: memory and CPU time each subprocess case may use (a run that is refused needs ~200 MB, 2 s
#: of CPU); the CPU limit (RLIMIT_CPU: the kernel stops the child) is what catches a runaway
#: computation, whatever the machine's load; the runner's wall-clock deadline only catches a
#: child blocked for good (on a FIFO, say), and is far above what a loaded machine needs
MEMORY_LIMIT = 2 << 30
CPU_SECONDS = 30
#: the longest error line a refused value may produce
LONGEST_ERROR = 400

HUGE = "9" * 100_000
NESTED_POWER = "((((((9**64)**64)**64)**64)**64)**64)"
CLAIM = '[[claim]]\nname = "a"\ndk = 4\nclaim = "dk"\n'
KERNEL = str(Path(__file__).resolve().parents[1] / "examples" / "attention_kernels.py")
PROBE_CLAIM = f'[[claim]]\nname = "p"\nprobe = "{KERNEL}:attention"\ndk = 16\n'


class Case(NamedTuple):
    args: tuple[str, ...]
    code: int | tuple[int, ...]  # a tuple: any of these (an outcome that depends on speed)
    fragment: str = ""  # in the error line (exit 2) or in stdout (otherwise)


def _files(folder: Path) -> dict[str, str]:
    """The input files the subprocess cases name, made once per run."""
    made = {
        "claims": CLAIM,
        "power": CLAIM.replace('"dk"', repr(NESTED_POWER).replace("'", '"')),
        "nested": CLAIM.replace("dk = 4", "dk = " + "[" * 100_000 + "]" * 100_000),
        "inf": CLAIM.replace('claim = "dk"', "claim = 1e400"),
        "sampler-rho": CLAIM.replace('claim = "dk"', "claim = 1")
        + f'sampler = "{Path(__file__).parent.parent / "examples" / "attention.py"}:logits"\n'
        + "rho = 0\n",
        "dist-twice": CLAIM + 'dist = "uniform"\nq_dist = "normal"\n',
        "fine": "[defaults]\nprecision = 1e-9\n" + CLAIM,
        "probe-fine": "[defaults]\nprecision = 1e-9\nseed = 1\n" + PROBE_CLAIM,
        "probe-big": PROBE_CLAIM + "queries = 4096\nkeys = 4096\n",
    }
    paths = {}
    for name, text in made.items():
        path = folder / f"{name}.toml"
        path.write_text(text)
        paths[name] = str(path)
    bom = folder / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + CLAIM.encode())
    big = folder / "big.toml"
    big.write_text("#" + "x" * (3 << 20) + "\n" + CLAIM)  # a 200 MB file is refused alike
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    return paths | {"bom": str(bom), "big": str(big), "fifo": str(fifo)}


def _subprocess_cases(f: dict[str, str]) -> dict[str, Case]:
    quick = ("--samples", "1000", "--seed", "1")
    return {
        # hangs and unbounded memory
        "assert nested power": Case(
            ("assert", "--dk", "16", "--claim", NESTED_POWER, *quick), 2, "largest float"
        ),
        "sweep nested power": Case(
            ("sweep", "--dk", "16", "--claim", NESTED_POWER, *quick), 2, "largest float"
        ),
        "check nested power": Case(("check", f["power"]), 2, "largest float"),
        "check /dev/zero": Case(("check", "/dev/zero"), 2, "a character device"),
        "check FIFO": Case(("check", f["fifo"]), 2, "a FIFO"),
        "check big file": Case(("check", f["big"]), 2, "above the limit of 1 MiB"),
        "check nested arrays": Case(("check", f["nested"]), 2, "nested too deeply"),
        "sweep samples 1e15": Case(
            ("sweep", "--dk", "4", "--samples", "1e15"), 2, "days even on a fast machine"
        ),
        "sweep samples 1e308": Case(("sweep", "--dk", "4", "--samples", "1e308"), 2, "samples"),
        "check samples 1e15": Case(("check", f["claims"], "--samples", "1e15"), 2, "limit of"),
        "sweep precision 1e-9": Case(("sweep", "--precision", "1e-9"), 2, "limit of 24 h"),
        "check file precision 1e-9": Case(("check", f["fine"]), 2, "precision 1e-09 needs"),
        # feasible with a cap (blocks sized so that 200 fit in half of it): a verdict, or no
        # interval when a loaded machine drew fewer than 200 blocks; never a refusal
        "check file precision capped": Case(
            ("check", f["fine"], "--max-seconds", "1", "--seed", "1"), (0, 1, 4), "time-limited"
        ),
        "junit FIFO": Case(("check", f["claims"], "--junit-xml", f["fifo"]), 2, "FIFO"),
        "scheduler refused": Case(
            ("sweep", "--dk", "4", *quick, "--scheduler", "tcp://127.0.0.1:1"), 2, "cannot reach"
        ),
        # exit 70 on bad input
        "sweep precision 1e-320": Case(("sweep", "--precision", "1e-320"), 2, "precision"),
        "assert precision 1e-320": Case(
            ("assert", "--dk", "4", "--claim", "dk", "--precision", "1e-320"), 2, "precision"
        ),
        "check precision 1e-320": Case(("check", f["claims"], "--precision", "1e-320"), 2, ""),
        "check confidence 1e-320": Case(("check", f["claims"], "--confidence", "1e-320"), 2, ""),
        "sweep confidence 1 - 1e-16": Case(
            ("sweep", "--confidence", "0.9999999999999999"), 2, "confidence must be in"
        ),
        # silently wrong, messages
        "check sampler with rho = 0": Case(("check", f["sampler-rho"]), 2, "rho describes"),
        "check dist and q_dist": Case(("check", f["dist-twice"]), 2, "dist sets both"),
        "check claim 1e400": Case(("check", f["inf"]), 2, "claim inf is not a finite number"),
        "check BOM": Case(("check", f["bom"], "--samples", "1000", "--seed", "1"), 0, "pass"),
        "sweep 120 KB dk": Case(("sweep", "--dk", "2.." + "9" * 120_000), 2, "d_k"),
        "tolerance 1e-320": Case(
            ("assert", "--dk", "4", "--claim", "dk", "--tolerance", "1e-320"), 2, ">= 1e-06"
        ),
        "junit empty": Case(("check", f["claims"], "--junit-xml", ""), 2, "the path is empty"),
        "junit /dev/full": Case(("check", f["claims"], "--junit-xml", "/dev/full"), 2, "regular"),
        "plot empty": Case(("sweep", "--dk", "4", *quick, "--plot", ""), 2, "the path is empty"),
        **_probe_cases(f),
    }


def _probe_cases(f: dict[str, str]) -> dict[str, Case]:
    """varcheck probe (R2's cases): sizes checked before any call, in calls not products."""
    probe = ("probe", f"{KERNEL}:attention")
    return {
        "probe dk 65536 heads 64": Case(
            (*probe, "--dk", "65536", "--layout", "bhnd", "--heads", "64"), 2, "q and k"
        ),
        "probe queries keys 4096": Case(
            (*probe, "--dk", "64", "--queries", "4096", "--keys", "4096"), 2, "2 GiB limit"
        ),
        "probe dv 65536": Case(
            (*probe, "--dk", "64", "--dv", "65536", "--keys", "4096"), 2, "v and the output"
        ),
        "probe samples 1e13": Case((*probe, "--dk", "64", "--samples", "1e13"), 2, "kernel calls"),
        "probe precision 1e-9 in calls": Case(  # an exact kernel: 200 calls reach it
            (*probe, "--dk", "16", "--precision", "1e-9", "--seed", "1"), 0, "PASS"
        ),
        # the cap may stop the probe short of the 200 calls an interval needs (a loaded
        # machine): then unreliable, exit 4
        "check probe precision 1e-9": Case(
            ("check", f["probe-fine"], "--max-seconds", "0.5"), (0, 4), "1 claims: 1 "
        ),
        "check probe memory": Case(("check", f["probe-big"]), 2, "of memory"),
        "probe tiny design": Case(
            (*probe, "--dk", "64", "--queries", "2", "--keys", "2"), 2, "--queries, --keys"
        ),
        "probe expect 5e-324": Case((*probe, "--dk", "64", "--expect", "5e-324"), 2, "1e-100"),
        "probe expect 1e308": Case((*probe, "--dk", "64", "--expect", "1e308"), 2, "1e+100"),
        "probe expect overflow": Case(
            (*probe, "--dk", "64", "--expect", "((9**64)**64)**64"), 2, "out of range"
        ),
        "probe arg": Case((*probe, "--dk", "64", "--arg", "x"), 2, "kernel argument 'x'"),
        "probe dk step 0": Case((*probe, "--dk", "8..512:0"), 2, "the step :0 must be >= 1"),
    }


@pytest.fixture(scope="module")
def ran(runner, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Case, Ran]]:
    """Every subprocess case, four at a time, each in a child of the fork server (the limits of
    a fresh process, without an interpreter's start-up and imports per case) and a folder of
    its own (the child's output goes to files there)."""
    folder = tmp_path_factory.mktemp("robustness")
    cases = _subprocess_cases(_files(folder))

    def run(index: int, args: tuple[str, ...]) -> Ran:
        own = folder / f"case-{index}"
        own.mkdir()
        return runner.run(args, own, hook=None, limit=MEMORY_LIMIT, timeout=CPU_SECONDS)

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            name: pool.submit(run, index, case.args)
            for index, (name, case) in enumerate(cases.items())
        }
        return {name: (cases[name], fut.result()) for name, fut in futures.items()}


def _expect_clean(code: object, expected: int | tuple[int, ...], out: str, err: str) -> None:
    """The exit code; on exit 2 one short line on stderr and nothing on stdout; no traceback."""
    allowed = expected if isinstance(expected, tuple) else (expected,)
    assert code in allowed, err[-1500:] or out[-1500:]
    assert "Traceback" not in err and "internal error" not in err, err[-1500:]
    if expected == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and len(lines[0]) < LONGEST_ERROR, err[:1500]
        assert out == ""  # refused before any work: nothing printed


_FILE_KEYS = ("claims", "power", "nested", "inf", "sampler-rho", "dist-twice", "fine")
_FILE_KEYS += ("probe-fine", "probe-big")
_FILE_KEYS += ("bom", "big", "fifo")


@pytest.mark.parametrize("name", list(_subprocess_cases({k: k for k in _FILE_KEYS})))
def test_issue_case(ran: dict[str, tuple[Case, Ran]], name: str) -> None:
    """Guards against each case of #17 returning: a hang, unbounded memory, exit 70, a
    traceback, a long echo, or output printed before a refusal."""
    case, result = ran[name]
    _expect_clean(result.code, case.code, result.out, result.err)  # -24: past its CPU limit
    assert case.fragment in (result.err if case.code == 2 else result.out)


# --- every option at the edges (in-process) -----------------------------------------------------

VALUES = {
    "0": "0",
    "negative": "-1",
    "nan": "nan",
    "inf": "inf",
    "1e308": "1e308",
    "1e-320": "1e-320",
    "huge": HUGE,
    "empty": "",
}
OPTIONS = {
    "sweep": (
        "--dk",
        "--dist",
        "--q-dist",
        "--k-dist",
        "--rho",
        "--sampler",
        "--sampler-arg",
        "--claim",
        "--confidence",
        "--precision",
        "--samples",
        "--max-seconds",
        "--seed",
        "--workers",
        "--scheduler",
        "--format",
        "--plot",
    ),
    "assert": (
        "--dk",
        "--dist",
        "--q-dist",
        "--k-dist",
        "--rho",
        "--sampler",
        "--claim",
        "--tolerance",
        "--confidence",
        "--precision",
        "--samples",
        "--max-seconds",
        "--seed",
        "--workers",
        "--scheduler",
        "--format",
    ),
    "check": (
        "FILE",
        "--precision",
        "--samples",
        "--max-seconds",
        "--confidence",
        "--seed",
        "--workers",
        "--scheduler",
        "--format",
        "--junit-xml",
    ),
}
#: the values that are valid (everything else exits 2); a file name such as "0" is valid
ACCEPTED = {
    ("--rho", "0"): 0,
    ("--rho", "1e-320"): 0,
    ("--rho", "negative"): 4,  # k = -q: 1000 products give no valid interval
    ("--claim", "1e308"): 1,  # a valid claim, rejected
    ("--claim", "1e-320"): 1,
    ("--max-seconds", "1e308"): 0,
    ("--max-seconds", "1e-320"): 0,  # a cap hit at once: the least the run can do (2 blocks)
    ("--seed", "0"): 0,
    **{("--junit-xml", v): 0 for v in ("0", "negative", "nan", "inf", "1e308", "1e-320")},
    **{("--plot", v): 0 for v in ("0", "negative", "nan", "inf", "1e308", "1e-320")},
}


def _args(command: str, option: str, value: str) -> tuple[str, ...]:
    args: list[str] = [command]
    if command == "check":
        args += [value] if option == "FILE" else ["claims.toml"]
    elif option != "--dk":
        args += ["--dk", "4"]
    if command == "assert" and option != "--claim":
        args += ["--claim", "dk"]
    if option not in ("--precision", "--samples"):
        args += ["--samples", "1000"]
    if option != "--seed":
        args += ["--seed", "1"]
    if option == "--sampler-arg":
        args += ["--sampler", "examples/attention.py:logits", "--claim", "1"]
    return (*args, *(() if option == "FILE" else (option, value)))


MATRIX = [
    pytest.param(command, option, name, id=f"{command} {option} {name}")
    for command, options in OPTIONS.items()
    for option in options
    for name in VALUES
    # a figure per odd file name costs a second of matplotlib each: two suffice
    if option != "--plot" or name in ("empty", "huge", "0")
]


@pytest.mark.parametrize(("command", "option", "name"), MATRIX)
def test_option_edges(
    run_cli, tmp_path: Path, monkeypatch, command: str, option: str, name: str
) -> None:
    """Guards against an edge value of any option answered with exit 70, a traceback, a long
    echo, a hang (a budget no machine finishes) or output before a refusal."""
    (tmp_path / "claims.toml").write_text(CLAIM)
    (tmp_path / "examples").symlink_to(Path(__file__).parent.parent / "examples")
    monkeypatch.chdir(tmp_path)
    start = time.process_time()  # CPU time: a budget no machine finishes, not a loaded core
    res = run_cli(*_args(command, option, VALUES[name]))
    code = ACCEPTED.get((option, name), 2)
    if option == "--format" or (option == "--plot" and name == "huge"):
        code = 2
    _expect_clean(res.exit_code, code, res.stdout, res.stderr)
    assert time.process_time() - start < 10


# --- files someone hands varcheck (forked children, 1.5 GiB, 20 s of CPU) ----------------------

#: the address space and CPU seconds each hostile file may take (hostile_cases.Runner: the
#: kernel stops a child past its CPU time; the wall-clock deadline there only catches a child
#: blocked for good)
HOSTILE_MEMORY = 1536 << 20
HOSTILE_SECONDS = 20.0
#: characters a terminal or an XML parser acts on (tab and newline are text)
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def runner():
    """One fork server per test process."""
    from hostile_cases import Runner

    return Runner()


def _missing(needs: tuple[str, ...]) -> str | None:
    """Why a case cannot run here (an optional package or checkpoint absent), or None."""
    import importlib.util

    for need in needs:
        if need == "minilm":
            from varcheck.audit.bert import bundled_minilm_path

            found = bundled_minilm_path() is not None
        elif need == "smollm2":
            from varcheck.audit.decoder import bundled_smollm2_path

            found = bundled_smollm2_path() is not None
        else:
            found = importlib.util.find_spec(need) is not None
        if not found or not all(importlib.util.find_spec(m) for m in ("tokenizers", "gguf")):
            return f"{need} is not installed (make setup installs it)"
    return None


def _hostile_names() -> list[str]:
    from hostile_cases import CASES

    return list(CASES)


@pytest.mark.parametrize("name", _hostile_names())
def test_hostile_file(runner, tmp_path: Path, name: str) -> None:
    """Guards against a file (or a text, or a name in one) that costs unbounded memory or time,
    kills the process, ends in a traceback or exit 70, or writes markup or control codes to the
    terminal or the CI report: exit 2 in one line, or a normal result."""
    from hostile_cases import CASES

    case = CASES[name]
    reason = _missing(case.needs)
    if reason:
        pytest.skip(reason)
    args = case.write(tmp_path)
    ran = runner.run(args, tmp_path, hook=case.hook, limit=HOSTILE_MEMORY, timeout=HOSTILE_SECONDS)
    _expect_clean(ran.code, case.code, ran.out, ran.err)
    assert case.fragment in (ran.err if case.code == 2 else ran.out), ran.err or ran.out[:2000]
    assert not RAW_CONTROL.search(ran.out + ran.err)
    assert ran.peak is not None and ran.peak < HOSTILE_MEMORY
    if case.after is not None:
        case.after(tmp_path)


def test_sigterm_acts_within_a_chunk_of_tokenising(runner, tmp_path: Path) -> None:
    """Guards against SIGTERM waiting for the tokenizer to finish a 16 MB text (tens of
    seconds): the text is encoded in chunks, and the signal acts between two."""
    from hostile_cases import english
    from hostile_files import tiny_bert

    if _missing(("tokenizers",)):
        pytest.skip("tokenizers is not installed")
    args = ("audit", str(tiny_bert(tmp_path / "bert")), "--text", english(tmp_path))
    hook = "sigterm_while_tokenising"
    ran = runner.run(args, tmp_path, hook=hook, limit=HOSTILE_MEMORY, timeout=HOSTILE_SECONDS)
    assert ran.code == 143, ran.err
    assert ran.err.strip() == "varcheck: terminated before any result"
    # the child's CPU time from the signal to its exit (not wall time, which a loaded machine
    # stretches): a chunk of 256k characters takes a fraction of a CPU second, the whole text
    # tens of seconds
    assert ran.cpu is not None
    assert ran.cpu - float((tmp_path / "killed_at").read_text()) < 5
