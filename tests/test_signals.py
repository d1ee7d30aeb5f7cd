"""SIGINT and SIGTERM mid-run (#17): sweep, assert and check keep what they found, in every
format, marked partial, exit 130 (Ctrl-C) or 143 (SIGTERM, as CI cancellation and `timeout`
send), with no traceback, even when a second signal arrives while the results are written. The
estimate under way (a sweep's row, assert's one test, with varcheck's laws or a sampler) keeps
the blocks drawn so far.

Each child announces on stderr when its computation has reached its last row (a hook around
``cli.run.run`` watching the progress callback: the last row, or assert's one test, has drawn
its first blocks), so the signal lands after the quick rows however slowly the machine runs;
the cases run concurrently.
"""

from __future__ import annotations

import csv
import io
import json
import os
import select
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

pytestmark = pytest.mark.signals

STARTED = "varcheck-test: computing"
MARK = "varcheck-test: in the last row"
# the child announces when its computation starts, and when the progress callback reports the
# last row (index n - 1, or the third row when there are more) with blocks drawn: rows are
# estimated in order, so the rows before it are finished. Then the real entry point runs.
ENTRY = f"""
import sys
import varcheck.cli.run as run_module
real = run_module.run
def run(compute, *args, **kwargs):
    def announced(report=None):
        print({STARTED!r}, file=sys.stderr, flush=True)
        if report is None:
            return compute()
        said = []
        def tick(index, total, fraction):
            if not said and index >= min(2, total - 1) and fraction > 0:
                said.append(True)
                print({MARK!r}, file=sys.stderr, flush=True)
            return report(index, total, fraction)
        return compute(tick)
    return real(announced, *args, **kwargs)
run_module.run = run
from varcheck.cli import main
main()
"""
SIGNALS = {"INT": (signal.SIGINT, 130), "TERM": (signal.SIGTERM, 143)}
# a sweep whose first rows finish in well under a second and whose last takes minutes (means
# keep the rows apart: no shared blocks)
SWEEP = ("sweep", "--dk", "2,4,8192", "--dist", "normal:mean=0.5", "--precision", "0.01")
ASSERT = ("assert", "--dk", "8192", "--dist", "normal:mean=0.5", "--claim", "theory")
ASSERT += ("--precision", "0.001")
# a user's sampler, one small layer a call (its first 200 calls take well under a second; the
# whole run, minutes)
SAMPLER = str(Path(__file__).resolve().parents[1] / "examples" / "attention.py") + ":logits"
ASSERT_SAMPLER = ("assert", "--dk", "64", "--sampler", SAMPLER, "--claim", "1")
ASSERT_SAMPLER += ("--sampler-arg", "tokens=8", "--sampler-arg", "heads=1", "--precision", "5e-4")
CLAIMS = """\
[defaults]
precision = 0.01
seed = 5
[[claim]]
name = "quick"
dk = "2,4"
dist = "normal:mean=0.5"
claim = "theory"
[[claim]]
name = "slow"
dk = 8192
dist = "normal:mean=0.5"
claim = "theory"
"""


class Outcome(NamedTuple):
    code: int
    out: str
    err: str


def _default_signals() -> None:
    # a background job of a non-interactive shell starts with SIGINT ignored, and the child
    # would keep it so (see test_robustness._default_sigint)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(
    args: tuple[str, ...],
    signals: list[int],
    *,
    gap: float = 0.0,
    until: str = MARK,
    after: float = 0.5,
) -> Outcome:
    """Run varcheck ARGS, send ``signals`` (``gap`` s apart) ``after`` s after it prints
    ``until``, collect."""
    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRY, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )
    assert proc.stderr is not None
    # a guard against a child that never gets there, not a speed limit (a niced run on a
    # loaded machine gets a few percent of a core)
    err_head, deadline = "", time.monotonic() + 600
    while until not in err_head:
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
        line = proc.stderr.readline() if ready else ""
        if not line:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the child never printed {until!r}: {err_head}{err}"[-2000:])
        err_head += line
    time.sleep(after)  # a few more blocks into the last row
    for i, sig in enumerate(signals):
        if i:
            time.sleep(gap)
        proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the child ran on for 120 s after the signal: {err[-2000:]}")
    for mark in (STARTED, MARK):
        err_head = err_head.replace(mark + "\n", "")
    return Outcome(proc.returncode, out, err_head + err.replace(MARK + "\n", ""))


def _claims_file() -> Path:
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"varcheck-signals-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    path = folder / "claims.toml"
    path.write_text(CLAIMS)
    return path


#: the (format, signal) pairs each command is interrupted with: every format of the command
#: once, both signals for each command, and both for the JSON, which records the exit status
#: (what a format prints does not depend on the signal; the status does, and every case checks
#: it)
RUNS = {
    "sweep": (
        ("json", "INT"),
        ("json", "TERM"),
        ("csv-meta", "INT"),
        ("markdown", "TERM"),
        ("table", "TERM"),
    ),
    "check": (
        ("json", "INT"),
        ("json", "TERM"),
        ("csv-meta", "TERM"),
        ("markdown", "INT"),
        ("table", "INT"),
    ),
    "assert": (("json", "INT"), ("table", "TERM")),
    "assert-sampler": (("json", "TERM"), ("table", "INT")),
}


def _cases() -> dict[str, tuple[tuple[str, ...], list[int], float]]:
    """Every interrupted run, by name: the command line, the signals sent, the gap between."""
    claims = _claims_file()
    commands = {
        "sweep": lambda fmt, name: (*SWEEP, "--seed", "1", "--format", fmt),
        "check": lambda fmt, name: (
            *("check", str(claims), "--format", fmt),
            *("--junit-xml", str(claims.with_name(f"junit-{fmt}-{name}.xml"))),
        ),
        "assert": lambda fmt, name: (*ASSERT, "--seed", "1", "--format", fmt),
        "assert-sampler": lambda fmt, name: (*ASSERT_SAMPLER, "--seed", "1", "--format", fmt),
    }
    cases = {
        f"{command}-{fmt}-{name}": (commands[command](fmt, name), [SIGNALS[name][0]], 0.0)
        for command, runs in RUNS.items()
        for fmt, name in runs
    }
    json_sweep = commands["sweep"]("json", "")
    cases["sweep-three-TERM"] = (json_sweep, [signal.SIGTERM] * 3, 0.02)
    cases["sweep-INT-then-TERM"] = (json_sweep, [signal.SIGINT, signal.SIGTERM], 0.0)
    return cases


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    """Every case, four at a time (each child mostly waits for its signal)."""
    cases = _cases()
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {
            key: pool.submit(_interrupt, args, signals, gap=gap)
            for key, (args, signals, gap) in cases.items()
        }
        return {key: fut.result() for key, fut in futures.items()}


def _check_clean(res: Outcome, expected_code: int) -> None:
    assert res.code == expected_code, res.err[-2000:]
    assert "Traceback" not in res.err, res.err[-2000:]


@pytest.mark.parametrize(("fmt", "name"), RUNS["sweep"])
def test_sweep_keeps_the_finished_rows(outcomes: dict[str, Outcome], fmt: str, name: str) -> None:
    """Guards against SIGTERM (CI cancellation) losing every row, as Ctrl-C once did."""
    res = outcomes[f"sweep-{fmt}-{name}"]
    _check_clean(res, SIGNALS[name][1])
    if fmt == "json":
        doc = json.loads(res.out)
        # the status the process exits with (143 after SIGTERM, not Ctrl-C's 130)
        assert doc["interrupted"] is True and doc["exit_code"] == SIGNALS[name][1]
        _finished_then_partial(doc["rows"])
    elif fmt == "csv-meta":
        header, *body = res.out.splitlines()
        assert "interrupted=True" in header
        _finished_then_partial(list(csv.DictReader(io.StringIO("\n".join(body)))))
    elif fmt == "markdown":
        assert "interrupted" in res.out.lower()
        assert "| 2 |" in res.out
        cut = [line for line in res.out.splitlines() if line.startswith("| 8192 |")]
        assert all("| interrupted |" in line for line in cut), cut
    else:
        assert "Interrupted" in res.out and "partial" in res.out


def _finished_then_partial(rows: list) -> None:
    """d_k 2 and 4 finished; d_k 8192, cut short, with the blocks it had (if two or more)."""
    assert [int(r["dk"]) for r in rows][:2] == [2, 4] and len(rows) <= 3, rows
    assert [r["stop_reason"] for r in rows[:2]] != ["interrupted"] * 2
    if len(rows) == 3:
        assert rows[2]["stop_reason"] == "interrupted", rows[2]
        assert rows[2]["caution"].startswith("interrupted: from the blocks drawn"), rows[2]


@pytest.mark.parametrize(("fmt", "name"), RUNS["check"])
def test_check_keeps_the_finished_claims_and_writes_junit(
    outcomes: dict[str, Outcome], fmt: str, name: str
) -> None:
    """Guards against a cancelled CI gate leaving no report (stdout or JUnit)."""
    res = outcomes[f"check-{fmt}-{name}"]
    _check_clean(res, SIGNALS[name][1])
    if fmt == "json":
        doc = json.loads(res.out)
        assert doc["interrupted"] is True and doc["exit_code"] == SIGNALS[name][1]
        assert [c["name"] for c in doc["claims"]] == ["quick"]
    elif fmt == "csv-meta":
        assert "outcome=interrupted" in res.out.splitlines()[0]
        assert "interrupted=True" in res.out.splitlines()[0]
    elif fmt == "markdown":
        assert "interrupted: `True`" in res.out
    else:
        assert "Interrupted" in res.out and "partial" in res.out
    junit = (_claims_file().parent / f"junit-{fmt}-{name}.xml").read_text()
    assert 'name="interrupted"' in junit and 'name="quick' in junit


@pytest.mark.parametrize(
    ("source", "fmt", "name"),
    [(source, *run) for source in ("assert", "assert-sampler") for run in RUNS[source]],
)
def test_assert_keeps_its_partial_estimate(
    outcomes: dict[str, Outcome], source: str, fmt: str, name: str
) -> None:
    """Guards against an interrupted assert printing only 'interrupted before any result' (#17):
    its one test keeps the estimate from the blocks drawn (or the sampler's calls made) so far,
    with its interval from 200 blocks on, marked partial, exit 130 or 143."""
    res = outcomes[f"{source}-{fmt}-{name}"]
    _check_clean(res, SIGNALS[name][1])
    if fmt == "json":
        doc = json.loads(res.out)
        assert doc["interrupted"] is True and doc["exit_code"] == SIGNALS[name][1]
        assert isinstance(doc["estimate"], float) and doc["samples"] > 0
        if doc["ci_low"] is None:  # fewer than 200 blocks: no interval, and the reason says so
            # (the outcome of an interrupted run is "interrupted", the word its exit code
            # follows; what the blocks drawn decided is in the reason)
            assert doc["outcome"] == "interrupted", doc
            assert doc["reason"].startswith("interrupted: from the blocks drawn so far, unreliable")
        else:
            assert doc["ci_low"] < doc["estimate"] < doc["ci_high"]
    else:
        assert "Interrupted:" in res.out and "(partial)" in res.out
        assert "  estimate " in res.out


def test_a_second_signal_does_not_cut_the_output(outcomes: dict[str, Outcome]) -> None:
    """Guards against a second SIGTERM (a CI runner's) cutting the partial JSON, or a
    traceback from a signal raised while the results are written."""
    res = outcomes["sweep-three-TERM"]
    _check_clean(res, 143)
    assert json.loads(res.out)["interrupted"] is True


def test_sigint_then_sigterm_keeps_the_first_signals_status(outcomes: dict[str, Outcome]) -> None:
    res = outcomes["sweep-INT-then-TERM"]
    _check_clean(res, 130)
    assert json.loads(res.out)["interrupted"] is True


def test_an_ignored_sigint_stays_ignored() -> None:
    """Guards against overriding a shell's choice: a background job ignores Ctrl-C."""
    probe = (
        "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "from varcheck.cli.signals import handling_signals\n"
        "with handling_signals():\n"
        "    print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN,\n"
        "          signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.split() == ["True", "True"]


def test_the_interrupted_exit_code_follows_the_signal() -> None:
    """Guards against JSON saying 130 while the process exits 143 after SIGTERM: the handler
    records the signal in core, and each command line starts again from Ctrl-C's 130."""
    from varcheck.cli.signals import handling_signals
    from varcheck.core.verdicts import exit_code, note_signal

    try:
        note_signal(signal.SIGTERM)
        assert exit_code(["pass"], interrupted=True) == 143
        assert exit_code(["fail"]) == 1
        with handling_signals():
            assert exit_code([], interrupted=True) == 130
            note_signal(signal.SIGTERM)
        assert exit_code([], interrupted=True) == 130  # reset once the command line is done
    finally:
        note_signal(None)


SLOW_SAMPLERS = """\
import time


def slow(rng, dk):
    time.sleep(0.1)
    return rng.standard_normal(100)


def stuck(rng, dk, made=[0]):
    made[0] += 1
    if made[0] > 3 + 20:  # the pilot's three calls and 20 more, then a call that never ends
        while True:
            time.sleep(1)
    return rng.standard_normal(100)
"""


def _samplers() -> str:
    path = _claims_file().with_name("slow_samplers.py")
    path.write_text(SLOW_SAMPLERS)
    return str(path)


@pytest.mark.parametrize("command", ["assert", "sweep"])
def test_a_stuck_sampler_stops_at_the_time_cap(command: str) -> None:
    """Guards against a sampler stuck in a call hanging a CI job despite --max-seconds (#17):
    the cap was checked only between calls. A watchdog stops the call; the calls finished
    before it give the estimate, marked time-limited."""
    args = (command, "--dk", "8", "--claim", "1", "--sampler", f"{_samplers()}:stuck")
    # without the watchdog the child never ends: the timeout is the guard, set far above what a
    # loaded machine needs (a wall-clock bound on a run is no test of a time cap)
    res = subprocess.run(
        [sys.executable, "-m", "varcheck", *args, "--max-seconds", "1", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["time_limited"] is True
    row = doc if command == "assert" else doc["rows"][0]
    assert row["samples"] == 20 * 100, row


def test_a_sampler_stuck_in_its_first_call_is_one_line() -> None:
    """Nothing to report: exit 2 and one line, within the cap and its grace."""
    args = ("assert", "--dk", "8", "--claim", "1", "--sampler", f"{_samplers()}:stuck")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "varcheck",
            *args,
            "--max-seconds",
            "1",
            "--sampler-arg",
            "made=[100]",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and res.stdout == "", res.stderr[-2000:]
    assert "ran past --max-seconds 1" in res.stderr and len(res.stderr.splitlines()) == 1


@pytest.mark.parametrize("name", list(SIGNALS))
def test_an_interrupt_keeps_the_calls_of_a_slow_sampler(name: str) -> None:
    """Guards against a slow sampler's interrupted run keeping nothing (#17): its calls went in
    chunks of up to 200, and the chunk under way was lost with all its finished calls."""
    sig, code = SIGNALS[name]
    args = ("assert", "--dk", "8", "--claim", "1", "--sampler", f"{_samplers()}:slow")
    # the first progress report comes after a chunk of calls (20 s here): the signal follows
    # the start by 2 s, time for about 20 calls of 0.1 s (5 are asked for)
    res = _interrupt((*args, "--seed", "1", "--format", "json"), [sig], until=STARTED, after=2.0)
    _check_clean(res, code)
    doc = json.loads(res.out)
    assert doc["interrupted"] is True and doc["exit_code"] == code
    assert doc["samples"] >= 5 * 100 and doc["ci_low"] is None  # no interval below 200 calls
