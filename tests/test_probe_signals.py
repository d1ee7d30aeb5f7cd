"""varcheck probe under a time cap and interrupts (#17): --max-seconds bounds the run (pilot and
blocks, checked between calls; a call that never returns stopped by the watchdog), a probe cut
by the cap or by Ctrl-C/SIGTERM reports what it has, marked time-limited or interrupted, in
valid JSON; the kernel's prints stay off stdout.

The subprocess cases wait for the kernel to announce, on stderr, that the blocks are under way
before they send a signal, so they do not depend on how fast the machine starts Python.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from processes import default_sigint

import varcheck
from varcheck.core.estimation import MIN_BLOCKS
from varcheck.core.probe import cost
from varcheck.core.probe.weights import Design
from varcheck.errors import VarcheckError
from varcheck.kernels.probe import probe

MARK = "varcheck-test: blocks under way"
KERNELS = f"""
import sys, time
import numpy as np

def attention(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v

def slow(q, k, v, t=0.1, log=""):
    if log:  # one byte a call, for a test that counts the calls
        with open(log, "a") as f:
            f.write("x")
    time.sleep(t)
    return attention(q, k, v)

def hang(q, k, v):
    while True:
        time.sleep(0.5)

CALLS = [0]

def hang_later(q, k, v):
    CALLS[0] += 1
    if CALLS[0] > 30:
        while True:
            time.sleep(0.5)
    return attention(q, k, v)

def announced(q, k, v):
    CALLS[0] += 1
    if CALLS[0] == 30:
        print({MARK!r}, file=sys.stderr, flush=True)
    time.sleep(0.02)
    return attention(q, k, v)

def printing(q, k, v):
    print("hello from the kernel")
    return attention(q, k, v)

print("hello from the import")
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("probe-signals") / "kernels.py"
    path.write_text(KERNELS)
    return str(path)


def _probe(kernels: str, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "varcheck", "probe", f"{kernels}:{name}", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.signals
def test_max_seconds_bounds_a_slow_kernel(kernels: str, tmp_path: Path) -> None:
    """--max-seconds bounds the calls of a slow kernel, the pilot's included (a pilot that never
    looks at the clock and a chunk of 50 calls drawn before the deadline is checked made 68
    calls of 0.3 s under a 2 s cap). Stopped short of the calls a valid interval needs, each
    row has none: unreliable, exit 4."""
    log = tmp_path / "calls"
    ran = _probe(
        kernels,
        "slow",
        "--arg",
        "t=0.2",
        "--arg",
        f"log={str(log)!r}",
        "--dk",
        "16,64",
        "--max-seconds",
        "2",
        "--seed",
        "1",
        "--format",
        "json",
    )
    # counted, not timed: 2 s at 0.2 s a call is 10 calls, the watchdog's 1 s grace 5 more,
    # and one call in flight per row when the deadline passes
    assert len(log.read_text()) <= 10 + 5 + 2
    assert ran.returncode == 4, ran.stderr
    doc = json.loads(ran.stdout)
    assert doc["time_limited"] is True and doc["interrupted"] is False
    assert {r["stop_reason"] for r in doc["rows"]} == {"max-seconds"}
    assert all(2 <= r["calls"] < MIN_BLOCKS for r in doc["rows"])
    for r in doc["rows"]:
        assert (r["outcome"], r["ci_low"], r["p_value"], r["min_samples"]) == (
            "unreliable",
            None,
            None,
            None,
        )
        assert r["reason"].startswith("stopped at --max-seconds after ")
        assert f"an interval needs at least {MIN_BLOCKS}" in r["reason"]
    table = _probe(
        kernels, "slow", "--arg", "t=0.2", "--dk", "64", "--max-seconds", "1", "--seed", "1"
    )
    assert "time-limited:" in table.stdout and "UNRELIABLE" in table.stdout
    assert "--max-seconds 1 --seed 1" in table.stdout  # the reproduce line


@pytest.mark.signals
def test_a_kernel_that_never_returns_is_stopped(kernels: str) -> None:
    # a kernel the watchdog failed to stop would hang until _probe's 60 s timeout fails the test
    ran = _probe(kernels, "hang", "--dk", "64", "--max-seconds", "0.5", "--seed", "1")
    assert ran.returncode == 2 and ran.stdout == ""
    lines = ran.stderr.replace("hello from the import\n", "").strip().splitlines()
    assert len(lines) == 1 and "ran longer than --max-seconds" in lines[0] and "pilot" in lines[0]
    later = _probe(
        kernels,
        "hang_later",
        "--dk",
        "64",
        "--max-seconds",
        "0.5",
        "--seed",
        "1",
        "--format",
        "json",
    )
    assert later.returncode == 4, later.stderr  # fewer calls than an interval needs
    row = json.loads(later.stdout)["rows"][0]
    assert row["stop_reason"] == "max-seconds" and row["calls"] >= 2


@pytest.mark.signals
@pytest.mark.parametrize(
    ("name", "code", "word"), [("INT", 130, "Ctrl-C"), ("TERM", 143, "SIGTERM")]
)
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_an_interrupt_keeps_the_d_k_under_way(
    kernels: str, name: str, code: int, word: str, fmt: str
) -> None:
    """R2: SIGTERM 5 s into a one-d_k probe printed nothing ('terminated before any result')."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "varcheck",
            "probe",
            f"{kernels}:announced",
            "--dk",
            "64",
            "--samples",
            "100000",
            "--seed",
            "1",
            "--format",
            fmt,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    assert proc.stderr is not None
    # guards against a child that hangs, not speed limits: a loaded machine took over a minute
    # to start one (and a child left running on a failure would warn in a later test)
    try:
        deadline = time.monotonic() + 600
        seen = ""
        while MARK not in seen and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                seen += proc.stderr.readline()
        assert MARK in seen, f"the child never started the probe: {seen[-1000:]}"
        proc.send_signal(getattr(signal, f"SIG{name}"))
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err[-1000:]
    assert "Traceback" not in err
    if fmt == "json":
        doc = json.loads(out)
        assert doc["interrupted"] is True and doc["exit_code"] == code
        row = doc["rows"][0]
        assert row["stop_reason"] == "interrupted" and row["calls"] >= 2
        if row["calls"] < MIN_BLOCKS:
            assert row["outcome"] == "unreliable" and row["ci_low"] is None, row
            assert row["reason"].startswith("interrupted after ")
    else:
        assert f"interrupted by {word} (exit {code}): d_k=64 from its" in out
        assert "(partial)" in out


def test_the_kernels_prints_leave_json_valid(kernels: str) -> None:
    ran = _probe(
        kernels,
        "printing",
        "--dk",
        "16",
        "--samples",
        str(MIN_BLOCKS),
        "--seed",
        "1",
        "--format",
        "json",
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["outcome"] == "pass"
    assert "hello from the kernel" in ran.stderr and "hello from the import" in ran.stderr


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def test_the_api_returns_the_partial_probe_on_an_interrupt() -> None:
    """R2: probe() raised KeyboardInterrupt, losing the calls made."""
    calls = [0]

    def kernel(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        calls[0] += 1
        if calls[0] == 40:
            raise KeyboardInterrupt
        return _attention(q, k, v)

    res = probe(kernel, 16, samples=1000, seed=1)
    assert res.interrupted and res.stop_reason == "interrupted"
    assert res.exit_code == 130 and 2 <= res.calls < 40
    assert res.outcome == "unreliable" and not res.has_interval  # fewer calls than it needs
    assert res.reason.startswith(f"interrupted after {res.calls} calls: an interval needs")
    assert res.to_dict()["interrupted"] is True


def _design(**kw: int) -> Design:
    shape = {"dk": 64, "queries": 48, "keys": 80, "heads": 1, "dv": 80} | kw
    return Design(**shape, layout="nd", dtype="float64")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("shape", "part"),
    [
        ({"dk": 65536, "heads": 64}, "q and k"),
        ({"queries": 4096, "keys": 4096}, "pilot"),
        ({"keys": 4096, "dv": 65536}, "v and the output"),
    ],
)
def test_memory_is_checked_by_part(shape: dict[str, int], part: str) -> None:
    with pytest.raises(VarcheckError, match=f"{part}.*above the 2 GiB limit; lower"):
        cost.check_memory(_design(**shape))
    cost.check_memory(_design())  # the defaults: a few MiB


def test_time_is_checked_in_calls() -> None:
    with pytest.raises(VarcheckError, match="kernel calls at d_k=64"):
        cost.check_time([_design()], 10**13, None)
    cost.check_time([_design()], 10**13, 5.0)  # a cap bounds any run
    cost.check_time([_design()], 20_000, None)  # seconds
    with pytest.raises(VarcheckError, match="the first round needs"):
        cost.check_time([_design(dk=65536, heads=16, queries=1024, keys=1024)], None, None)


@pytest.mark.signals
def test_a_probe_claim_stopped_by_the_cap_makes_the_check_time_limited(
    kernels: str, tmp_path: Path
) -> None:
    """check's probe rows carried no stop reason (raw None): a capped run read as not
    time-limited. Stopped short of the calls an interval needs, the row is unreliable (no
    interval, no p-value) and takes no part in Holm: the variance claim beside it keeps the
    p-value it has alone."""
    variance = '[defaults]\nsamples = 20000\n\n[[claim]]\nname = "v"\ndk = 4\nclaim = "dk"\n'
    alone = tmp_path / "alone.toml"
    alone.write_text(variance)
    claims = tmp_path / "claims.toml"
    claims.write_text(
        variance + f'\n[[claim]]\nname = "p"\nprobe = "{kernels}:slow"\n'
        "args = { t = 0.1 }\ndk = 16\n"
    )
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "varcheck",
            "check",
            str(claims),
            "--max-seconds",
            "1",
            "--seed",
            "1",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 4, ran.stderr
    doc = json.loads(ran.stdout)
    assert doc["time_limited"] is True
    (v,), (p,) = (c["tests"] for c in doc["claims"])
    assert (p["outcome"], p["ci_low"], p["p_value"]) == ("unreliable", None, None)
    assert p["reason"].startswith("stopped at --max-seconds after ")
    assert v["p_value"] == varcheck.check(alone, seed=1).claims[0].results[0].p_value


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: probe(_attention, 65536, queries=4096, keys=4096), "of memory"),
        (lambda: probe(_attention, 64, progress=5), "progress must be a callable"),
        (lambda: probe(_attention, 64, expect="5e-324"), "1e-100"),
        (lambda: probe(_attention, 64, expect="1e-20", dtype="float16"), "float16 holds"),
    ],
)
def test_the_api_refuses_by_name_before_any_call(call: object, match: str) -> None:
    """R2: probe(fn, 65536, queries=4096, keys=4096) raised MemoryError; progress=5 TypeError."""
    with pytest.raises(VarcheckError, match=match):
        call()  # type: ignore[operator]


def test_probe_sweep_without_dks_names_them() -> None:
    from varcheck.kernels.probe import probe_sweep

    with pytest.raises(VarcheckError, match="dks must be a d_k"):
        probe_sweep(_attention, None)
