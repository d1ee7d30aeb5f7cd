"""Ctrl-C and SIGTERM during explain, softmax and derive keep what was done, in every format.

Child processes get the signal once their work has begun (measured by their CPU time, not by a
fixed sleep, so a slow machine does not interrupt the imports instead); the formats a child does
not cover are checked in this process by interrupting the computation at a chosen point.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from rich.console import Console

import varcheck.teaching.derive as derive_module
import varcheck.teaching.softmax as softmax_module
from varcheck.teaching.derive import derive
from varcheck.teaching.explain import explain
from varcheck.teaching.render import render_derive, render_explain, render_softmax
from varcheck.teaching.softmax import softmax_study

#: long runs, each refused by no limit, that show partial results within a few seconds
RUNS = {
    "explain": ("explain", "--shape", "200x64x200", "--replicates", "50000", "--seed", "1"),
    "softmax": ("softmax", "--dk", "2..4096", "--queries", "100000", "--seed", "1"),
    "derive": ("derive", "--dk", "64", "--samples", "3e8", "--seed", "1"),
}


def _default_sigint() -> None:
    # a background job inherits SIGINT ignored; the child must get Python's handler
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _interrupted_run(args: tuple[str, ...], sig: int, fmt: str) -> tuple[int, str, str]:
    """Run varcheck, send ``sig`` once it has spent 1.2 s of CPU (past the imports), and return
    (exit status, stdout, stderr)."""
    command = [sys.executable, "-c", "from varcheck.cli import main; main()", *args]
    proc = subprocess.Popen(
        [*command, "--format", fmt],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
    )
    # a guard against a child that never starts, not a speed limit: a niced run on a loaded
    # machine gets a few percent of a core, and its imports alone took over a minute
    deadline = time.monotonic() + 600
    try:
        while _cpu_seconds(proc.pid) < 1.2 and proc.poll() is None:
            assert time.monotonic() < deadline, "the child did not start working within 600 s"
            time.sleep(0.05)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def _check_json(command: str, doc: dict) -> None:
    """The partial result is marked and its finished parts are whole."""
    assert doc["interrupted"] is True and doc["seed"] == 1
    if command == "explain":
        assert doc["planned_replicates"] == 50_000
        assert doc["replicates"] < 50_000  # fewer than planned (0: the gamma law stood in)
    elif command == "softmax":
        dks = [r["dk"] for r in doc["rows"]]
        assert dks == [2**i for i in range(1, len(dks) + 1)] and len(dks) < 12
        assert all(r["queries"] <= doc["queries"] for r in doc["rows"])
    else:
        verdicts = [s["verdict"] for s in doc["steps"]]
        assert "interrupted" in verdicts
        assert [s["value"] for s in doc["steps"]] == [0.0, 1.0, 64.0, 1.0]  # exact, all there


skip_without_proc = pytest.mark.skipif(
    not os.path.exists(f"/proc/{os.getpid()}/stat"), reason="needs /proc to see the child work"
)


@skip_without_proc
@pytest.mark.signals
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", list(RUNS))
def test_a_signal_keeps_the_partial_result_as_json(command: str, sig: int) -> None:
    code, out, err = _interrupted_run(RUNS[command], sig, "json")
    assert code == 128 + sig, err
    assert "Traceback" not in err
    _check_json(command, json.loads(out))


@skip_without_proc
@pytest.mark.signals
@pytest.mark.parametrize(
    ("command", "sig", "fmt"),
    [
        ("explain", signal.SIGINT, "table"),
        ("softmax", signal.SIGTERM, "csv-meta"),
        ("derive", signal.SIGTERM, "markdown"),
    ],
)
def test_a_signal_keeps_the_partial_result_in_text_formats(
    command: str, sig: int, fmt: str
) -> None:
    """The other formats from a real child (each is also checked in-process below)."""
    code, out, err = _interrupted_run(RUNS[command], sig, fmt)
    assert code == 128 + sig, err
    assert "Traceback" not in err
    if fmt == "csv-meta":
        head, body = out.split("\n", 1)
        assert "interrupted=True" in head and "seed=1" in head
        rows = list(csv.DictReader(io.StringIO(body)))
        assert all(int(r["queries"]) <= 100_000 for r in rows)
    else:
        assert "interrupted" in out and "partial" in out


# --- every format, interrupted in this process ---------------------------------------------------


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, target: object, name: str, calls: int):
    """Make ``target.name`` raise KeyboardInterrupt on its call number ``calls + 1``."""
    original = getattr(target, name)
    seen = {"n": 0}

    def wrapped(*args, **kwargs):
        seen["n"] += 1
        if seen["n"] > calls:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, wrapped)


def _interrupted(monkeypatch: pytest.MonkeyPatch, command: str):
    if command == "explain":
        # 40 replicates a chunk at 64x16x64: the third chunk is cut
        _interrupt_after(monkeypatch, np, "matmul", 2)
        return explain("64x16x64", 60.0, replicates=2000, seed=1), render_explain
    if command == "softmax":
        # chunks of 10 blocks, 3 per d_k: d_k = 2 whole, d_k = 4 cut after its first chunk
        monkeypatch.setattr(softmax_module, "_CHUNK_ELEMENTS", 45_000)
        _interrupt_after(monkeypatch, np, "matmul", 4)
        return softmax_study("2..64", keys=64, queries=960, seed=1), render_softmax
    _interrupt_after(monkeypatch, derive_module, "estimate_variance", 1)  # step 3 cut
    return derive(16, samples=5000, seed=1), render_derive


def _render(result, render, fmt: str) -> str:
    console = Console(file=io.StringIO(), width=100)
    render(result, fmt, console)
    return console.file.getvalue()


@pytest.mark.parametrize("fmt", ["json", "csv-meta", "markdown", "table"])
@pytest.mark.parametrize("command", list(RUNS))
def test_every_format_of_an_interrupted_result(monkeypatch, command: str, fmt: str) -> None:
    result, render = _interrupted(monkeypatch, command)
    monkeypatch.undo()
    assert result.interrupted and result.exit_code == 130
    text = _render(result, render, fmt)
    if fmt == "json":
        doc = json.loads(text)
        assert doc["interrupted"] is True and doc["exit_code"] == 130
    elif fmt == "csv-meta":
        head, body = text.split("\n", 1)
        assert "interrupted=True" in head
        rows = list(csv.DictReader(io.StringIO(body)))
        assert rows  # the finished rows are there
    else:
        assert "interrupted" in text and "partial" in text
    if command == "explain":
        assert result.method == "monte-carlo" and 0 < result.replicates < 2000
    elif command == "softmax":
        assert [r.dk for r in result.rows] == [2, 4]
        assert result.rows[-1].blocks < result.blocks  # the cut row, marked partial
        if fmt == "table":
            assert "partial" in text.split("interrupted")[0]
    else:
        assert [s.verdict for s in result.steps][2:] == ["interrupted", "interrupted"]
        assert result.steps[1].verdict == "consistent"


def test_derive_keeps_the_draws_of_the_check_under_way(monkeypatch) -> None:
    """Ctrl-C in the middle of step 2 keeps its estimate from the blocks drawn so far, marked
    partial; steps 3 and 4 are not checked."""
    import varcheck.core.estimation as estimation

    _interrupt_after(monkeypatch, estimation, "run_chunk", 3)
    result = derive(16, samples=10**7, seed=1)
    monkeypatch.undo()
    steps = result.steps
    assert steps[0].stop_reason == "" and steps[0].samples == 10**7
    assert steps[1].stop_reason == "interrupted" and 0 < steps[1].samples < 10**7
    assert steps[1].verdict == "consistent"
    low, high = steps[1].confidence_interval
    assert low < 1.0 < high
    assert [s.verdict for s in steps[2:]] == ["interrupted", "interrupted"]
    text = " ".join(_render(result, render_derive, "table").split())
    assert "(partial)" in text
    assert "step 1 checked in full; step 2 checked on the draws made before" in text
    assert "steps 3, 4 not checked" in text
