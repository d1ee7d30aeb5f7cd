"""Ctrl-C and SIGTERM during project and train keep what was done, in every format (#17).

The child processes get their signal once they have spent 1.2 s of CPU time, so the imports are
behind them and the work has begun whatever the machine's load. In-process tests stop the
computation at a chosen point to check the partial result itself.
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

import pytest
from rich.console import Console

import varcheck.paper.projection as projection_module
import varcheck.paper.training as training_module
from varcheck.paper.projection import project
from varcheck.paper.render import render_project, render_train
from varcheck.paper.training import TrainConfig, train

#: the issue's long runs: both pass the limits and print partial results within seconds
RUNS = {
    "project": ("project", "--precision", "1e-3", "--seed", "1"),
    "train": ("train", "--steps", "100000", "--every", "10", "--seed", "1"),
}
#: every format of each command once, each signal twice per command (what a format prints does
#: not depend on the signal; the exit status does, and every case checks it)
CASES = [
    (cmd, sig, fmt)
    for cmd in RUNS
    for sig, fmt in (
        (signal.SIGINT, "json"),
        (signal.SIGTERM, "csv-meta"),
        (signal.SIGINT, "markdown"),
        (signal.SIGTERM, "table"),
    )
]


def _child_setup() -> None:
    # a background job inherits SIGINT ignored; the child must get Python's handler
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _interrupt(args: tuple[str, ...], sig: int) -> tuple[int, str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from varcheck.cli import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_child_setup,
    )
    # a guard against a child that never starts, not a speed limit: a niced run on a loaded
    # machine gets a few percent of a core, and its imports alone took over a minute
    deadline = time.monotonic() + 600
    try:
        while proc.poll() is None and _cpu_seconds(proc.pid) < 1.2:
            assert time.monotonic() < deadline, "the child did not start working within 600 s"
            time.sleep(0.05)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def _check_rows(command: str, rows: list[dict]) -> None:
    assert rows, "no partial rows"
    if command == "project":
        reasons = {r["stop_reason"] for r in rows}
        assert reasons <= {"interrupted", "precision", "max-blocks"}
        # the settings not reached have no rows; the one cut short is marked
        assert "interrupted" in reasons or len(rows) < 12
    else:
        steps = [int(r["step"]) for r in rows]
        assert max(steps) < 100_000 and steps[0] == 0


@pytest.mark.signals
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the child's CPU time")
@pytest.mark.parametrize(("command", "sig", "fmt"), CASES)
def test_signal_keeps_partial_results(command: str, sig: int, fmt: str) -> None:
    code, out, err = _interrupt((*RUNS[command], "--format", fmt), sig)
    assert code == (130 if sig == signal.SIGINT else 143), (code, err)
    assert "Traceback" not in err
    if fmt == "json":
        doc = json.loads(out)
        assert doc["interrupted"] is True
        _check_rows(command, doc["rows"])
    elif fmt == "csv-meta":
        lines = out.splitlines()
        assert lines[0].startswith("#") and "interrupted=True" in lines[0]
        _check_rows(command, list(csv.DictReader(io.StringIO("\n".join(lines[1:])))))
    elif fmt == "markdown":
        assert "interrupted: `True`" in out
        assert out.count("\n|") >= 3  # header, rule and at least one row
    else:
        assert "(interrupted: partial)" in out and "Interrupted (partial)" in out


# --- in process: the partial results themselves -----------------------------------------------


def _render_all(result: object, render: object) -> dict[str, str]:
    out = {}
    for fmt in ("json", "csv-meta", "markdown", "table"):
        buf = io.StringIO()
        render(result, fmt, Console(file=buf, width=100, no_color=True))  # type: ignore[operator]
        out[fmt] = buf.getvalue()
    return out


def test_project_interrupted_in_its_third_setting(monkeypatch) -> None:
    real = projection_module._fixed_weights_draw
    calls = {"aligned": 0}

    def draw(x, w_q, w_k, tokens):  # noqa: ANN001, ANN202
        inner = real(x, w_q, w_k, tokens)
        aligned = w_q is not None and (w_q == w_k).all()

        def counted(rng, nb):  # noqa: ANN001, ANN202
            if aligned:
                calls["aligned"] += 1
                if calls["aligned"] > 3:
                    raise KeyboardInterrupt
            return inner(rng, nb)

        return counted

    monkeypatch.setattr(projection_module, "_fixed_weights_draw", draw)
    # 100 blocks per chunk of a fixed setting (8 rows of d_x + 2 d_k + 8 = 24 elements)
    monkeypatch.setattr(projection_module, "_CHUNK_ELEMENTS", 8 * 24 * 100)
    res = project(8, 4, tokens=8, blocks=400, seed=1)
    assert res.interrupted and res.exit_code == 130
    sections = [s.name for s in res.sections]
    assert sections[:2] == ["random-weights", "fixed-draw"] and "rank-one" not in sections
    done = [r for r in res.rows if r.section in ("random-weights", "fixed-draw")]
    assert len(done) == 6 and all(r.estimate.stop_reason == "blocks" for r in done)
    cut = [r for r in res.rows if r.section == "aligned"]
    for row in cut:  # kept only with enough blocks; then marked
        assert row.estimate.stop_reason == "interrupted" and row.estimate.blocks >= 200
    out = _render_all(res, render_project)
    doc = json.loads(out["json"])
    assert doc["interrupted"] is True and doc["exit_code"] == 130
    assert "interrupted=True" in out["csv-meta"].splitlines()[0]
    assert "(interrupted: partial)" in out["table"]


def test_train_interrupted_keeps_recorded_steps(monkeypatch) -> None:
    real = training_module._measure
    seen = []

    def measure(step, *args):  # noqa: ANN001, ANN202
        seen.append(step)
        if len(seen) == 7:  # the first scheme's row at step 4 of the third record
            raise KeyboardInterrupt
        return real(step, *args)

    monkeypatch.setattr(training_module, "_measure", measure)
    res = train(TrainConfig(steps=40, every=2, eval_size=32), seed=1)
    assert res.interrupted and res.exit_code == 130
    assert [[s.step for s in r.steps] for r in res.runs] == [[0, 2], [0, 2], [0, 2]]
    out = _render_all(res, render_train)
    doc = json.loads(out["json"])
    assert doc["interrupted"] is True and len(doc["rows"]) == 6
    assert all(r["measured_var"] is not None for r in doc["rows"])
    assert "stopped at step 2 of 40" in out["table"]


def test_train_interrupted_before_any_step(monkeypatch) -> None:
    def stop(*args):  # noqa: ANN002, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(training_module, "_measure", stop)
    res = train(TrainConfig(steps=4, every=2, eval_size=32), seed=1)
    assert res.interrupted and res.runs == ()
    out = _render_all(res, render_train)
    assert json.loads(out["json"])["rows"] == []
    assert "before any step was recorded" in out["table"]


def test_lockstep_gives_the_numbers_of_separate_runs() -> None:
    """One scheme alone trains exactly as it does beside the others."""
    cfg = TrainConfig(steps=12, every=4, eval_size=32)
    both = train(cfg, schemes=("fixed", "exact"), seed=3)
    alone = train(cfg, schemes=("exact",), seed=3)
    assert both.run("exact").steps == alone.run("exact").steps
