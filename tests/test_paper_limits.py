"""project, beta and train against hostile input (#17): every option at 0, negative, NaN, inf,
1e308, 1e-320, huge and empty; sizes checked against memory and time before any work; weights
files read only when regular and small enough once decompressed.

Each case has its expected exit code and a time bound: 2 with one short line, or a correct
result (0, or 1 for project, whose checks may be rejected by chance at 5%) with no NaN/null in
its rows; never 70. The cases that would need gigabytes run once more in a child process under
an address-space limit, so a refusal that came too late would fail there instead of swapping.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from varcheck.core import messages
from varcheck.errors import VarcheckError
from varcheck.paper import beta as beta_module
from varcheck.paper.beta import beta_report, head_betas, load_weights
from varcheck.paper.projection import project
from varcheck.paper.training import TrainConfig, check_feasible, train

BAD_NUMBERS = ("0", "-1", "nan", "inf", "1e308", "1e-320", "9" * 400, "")

PROJECT_BASE = ("project", "--dx", "8", "--dk", "4", "--tokens", "4", "--no-constructed")
TRAIN_BASE = ("train", "--steps", "4", "--every", "2", "--eval-size", "32", "--batch", "8")

#: (option, value) -> the exit codes accepted (2 unless the value is a valid setting)
PROJECT_VALID = {
    ("--seed", "0"),
    ("--seed", "9" * 400),  # any whole number seeds SeedSequence
    ("--max-seconds", "1e308"),
    ("--max-seconds", "1e-320"),
    ("--precision", "1e-320"),  # with --max-seconds in the base of that case only
}
TRAIN_VALID = {
    ("--seed", "0"),
    ("--seed", "9" * 400),
    ("--lr", "1e-320"),
    ("--max-seconds", "1e308"),
    ("--max-seconds", "1e-320"),  # stops at step 0, which it records
}


def _rows_complete(doc: dict) -> None:
    """No null where a number belongs in a finished row."""
    for row in doc["rows"]:
        for key, value in row.items():
            if key.endswith(("_ci_low", "_ci_high")) or key in ("mean", "var", "ratio"):
                assert value is not None, (key, row)


def _check(run_cli, args: tuple[str, ...], valid: bool, seconds: float) -> None:
    # CPU seconds of this process, not wall time: a loaded machine slows the clock, not the work
    start = time.process_time()
    res = run_cli(*args, "--format", "json")
    spent = time.process_time() - start
    assert spent < seconds, (args, spent)
    if valid:
        # 4: a time limit that left too few blocks for a valid interval (rows say unreliable)
        assert res.exit_code in (0, 1, 4), (args, res.output[-300:])
        _rows_complete(json.loads(res.output))
    else:
        assert res.exit_code == 2, (args, res.exit_code, res.output[-300:])
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and "error" in lines[0] and len(lines[0]) < 600, lines


@pytest.mark.parametrize("value", BAD_NUMBERS)
@pytest.mark.parametrize(
    "option",
    [
        "--dx",
        "--dk",
        "--tokens",
        "--blocks",
        "--precision",
        "--max-seconds",
        "--confidence",
        "--sigma-x",
        "--seed",
    ],
)
def test_project_option_values(run_cli, option: str, value: str) -> None:
    # a precision no machine reaches (1e-320) is accepted and runs until the cap: 1 s shows
    # that as well as more (too few blocks for an interval give exit 4, accepted by _check)
    args = PROJECT_BASE + (("--max-seconds", "1") if option == "--precision" else ())
    _check(run_cli, (*args, "--seed", "1", option, value), (option, value) in PROJECT_VALID, 20)


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_project_init_and_law_values(run_cli, value: str) -> None:
    _check(run_cli, (*PROJECT_BASE, "--init", f"normal:{value}"), False, 10)
    # t with 1e308 degrees of freedom is the normal law: a valid setting
    _check(run_cli, (*PROJECT_BASE, "--x-dist", f"t:df={value}"), value == "1e308", 10)


@pytest.mark.parametrize("value", BAD_NUMBERS)
@pytest.mark.parametrize(
    "option",
    [
        "--steps",
        "--lr",
        "--dx",
        "--dk",
        "--dv",
        "--memory",
        "--keys",
        "--values",
        "--batch",
        "--eval-size",
        "--every",
        "--confidence",
        "--seed",
        "--max-seconds",
    ],
)
def test_train_option_values(run_cli, option: str, value: str) -> None:
    valid = (option, value) in TRAIN_VALID
    _check(run_cli, (*TRAIN_BASE, "--seed", "1", option, value), valid, 20)


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_train_init_and_schemes(run_cli, value: str) -> None:
    _check(run_cli, (*TRAIN_BASE, "--init", f"normal:{value}"), False, 10)
    _check(run_cli, (*TRAIN_BASE, "--beta", value or ","), False, 10)


# --- the issue's cases, with their messages ---------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("project", "--precision", "1e-320"), ["precision 1e-320", "1,048,576", "accepted"]),
        (("project", "--precision", "1e-9"), ["precision 1e-09", "blocks", "limit"]),
        (("project", "--dx", "4096", "--dk", "4096"), ["would take about", "limit"]),
        (("project", "--init", "normal:1e-320"), ["normal:1e-320", "variance", "accepted"]),
        (("project", "--init", "normal:1e308"), ["normal:1e308", "1e+100"]),
        (("project", "--sigma-x", "1e308"), ["sigma_x 1e+308", "accepted"]),
        (("project", "--sigma-x", "1e-320"), ["sigma_x 1e-320", "accepted"]),
        (
            ("train", "--keys", "1000000", "--dx", "4096", "--eval-size", "1000000"),
            ["keys=1000000", "TiB", "2 GiB limit"],
        ),
        (("train", "--keys", "1000000"), ["31.7 GiB", "2 GiB limit"]),
        (("train", "--steps", "100000", "--batch", "100000"), ["would take", "10 min limit"]),
        (("train", "--init", "normal:1e308"), ["normal:1e308", "variance", "accepted"]),
        (("train", "--init", "normal:1e-320"), ["normal:1e-320", "variance"]),
    ],
)
def test_refused_before_any_work(run_cli, args: tuple[str, ...], words: list[str]) -> None:
    start = time.perf_counter()
    res = run_cli(*args)
    assert time.perf_counter() - start < 5
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line
    for word in words:
        assert word in line, (word, line)


def test_project_cap_is_a_stop_reason() -> None:
    """A precision the block cap cannot reach is refused, one it may miss says so per row."""
    with pytest.raises(VarcheckError, match="1,048,576"):
        project(8, 4, tokens=2, precision=1e-3, seed=1)
    res = project(8, 4, tokens=4, precision=1e-3, max_seconds=0.2, seed=1)
    assert {r.estimate.stop_reason for r in res.rows} <= {"max-seconds", "precision"}
    assert res.time_limited


def test_too_few_blocks_under_a_time_limit_give_no_verdict(monkeypatch) -> None:
    """A setting stopped by time after a handful of blocks has no valid interval: no false
    rejection (exit 1) from an interval over 2 blocks, but unreliable (exit 4)."""
    import varcheck.paper.projection as projection_module

    monkeypatch.setattr(projection_module, "_CHUNK_ELEMENTS", 200)  # a few blocks per chunk
    res = project(8, 4, tokens=4, max_seconds=1e-9, seed=1)
    assert all(r.estimate.blocks < 200 for r in res.rows)
    assert {r.verdict for r in res.rows} == {"unreliable"} and res.exit_code == 4
    assert res.time_limited


def test_train_max_seconds_bounds_the_run_and_says_so(run_cli) -> None:
    args = ("train", "--steps", "100000", "--every", "1", "--seed", "1")
    assert run_cli(*args).exit_code == 2  # about half an hour: refused
    start = time.perf_counter()
    res = run_cli(*args, "--max-seconds", "0.5", "--eval-size", "64", "--format", "json")
    assert time.perf_counter() - start < 10 and res.exit_code == 0
    doc = json.loads(res.output)
    assert doc["time_limited"] is True and doc["max_seconds"] == 0.5
    last = {r["scheme"]: r["step"] for r in doc["rows"]}
    assert len(set(last.values())) == 1 and 0 < last["fixed"] < 100_000  # all stop together
    table = run_cli(*args, "--max-seconds", "0.2", "--eval-size", "64").output
    assert "Time-limited: --max-seconds 0.2 stopped the runs at step" in table


def test_train_estimate_accepts_the_long_runs_the_issue_interrupts() -> None:
    check_feasible(TrainConfig(steps=100_000, every=10))
    with pytest.raises(VarcheckError, match="memory"):
        check_feasible(TrainConfig(keys=1_000_000, dx=4096, eval_size=1_000_000))


def test_train_with_large_but_workable_init_has_finite_rows() -> None:
    res = train(TrainConfig(steps=6, every=3, init="normal:1e20", eval_size=32), seed=1)
    for run in res.runs:
        for s in run.steps:
            assert all(
                math.isfinite(v)
                for v in (s.beta, s.measured_var, s.predicted_var_exact, s.loss, s.entropy)
            )


# --- beta's file ------------------------------------------------------------------------------


@pytest.fixture
def npz(tmp_path: Path) -> Path:
    path = tmp_path / "w.npz"
    rng = np.random.default_rng(0)
    np.savez(path, w_q=rng.normal(0, 0.1, (2, 8, 4)), w_k=rng.normal(0, 0.1, (2, 8, 4)))
    return path


def test_beta_refuses_a_fifo_and_devices(tmp_path: Path, run_cli) -> None:
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    for path, word in ((fifo, "FIFO"), ("/dev/zero", "device"), (tmp_path, "directory")):
        start = time.perf_counter()
        res = run_cli("beta", str(path))
        assert time.perf_counter() - start < 5
        assert (
            res.exit_code == 2
            and word in res.output
            and "regular" in res.output
            or (word == "directory" and res.exit_code == 2 and word in res.output)
        ), res.output


def _npz_with_header(path: Path, shape: tuple[int, ...]) -> None:
    """An .npz whose w_q and w_k declare ``shape`` (float64) but hold almost no data."""
    from numpy.lib import format as npy

    header = npy.header_data_from_array_1_0(np.zeros(1))
    header["shape"] = shape
    with zipfile.ZipFile(path, "w") as z:
        for name in ("w_q.npy", "w_k.npy"):
            with z.open(name, "w") as f:
                npy.write_array_header_1_0(f, header)
                f.write(b"\0" * 64)


def test_beta_checks_declared_sizes_before_loading(tmp_path: Path, run_cli) -> None:
    huge = tmp_path / "huge.npz"
    _npz_with_header(huge, (20_000, 20_000))  # 2 × 3.2 GB declared, a few hundred bytes on disk
    res = run_cli("beta", str(huge))
    assert res.exit_code == 2 and "declares arrays" in res.output and "1 GiB" in res.output
    absurd = tmp_path / "absurd.npz"
    _npz_with_header(absurd, (10**12, 10**12, 10**12))
    res = run_cli("beta", str(absurd))
    assert res.exit_code == 2 and "declares arrays" in res.output, res.output


def test_beta_refuses_a_member_that_decompresses_too_far(tmp_path: Path, monkeypatch) -> None:
    """The zip's own declared size counts too (a small file of zeros that expands)."""
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("w_q.npy", b"\0" * 4_000_000)
        z.writestr("w_k.npy", b"\0" * 4_000_000)
    assert path.stat().st_size < 100_000
    monkeypatch.setattr(beta_module, "MAX_FILE_BYTES", 1_000_000)
    with pytest.raises(VarcheckError, match="declares arrays of 7.63 MiB"):
        load_weights(path)


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_beta_sigma_x_values(run_cli, npz: Path, value: str) -> None:
    res = run_cli("beta", str(npz), "--sigma-x", value, "--format", "json")
    if value == "1e-320":
        assert res.exit_code == 2 and "too small" in res.output
    elif value == "1e308":
        assert res.exit_code == 2 and "overflows" in res.output, res.output
    else:
        assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1


def test_beta_refuses_heads_without_a_variance(tmp_path: Path) -> None:
    w = np.zeros((8, 4))
    with pytest.raises(VarcheckError, match="variance is 0"):
        head_betas(w, w)
    w_q, w_k = np.zeros((8, 4)), np.zeros((8, 4))
    w_q[:, :2], w_k[:, 2:] = 1.0, 1.0  # no column in common: W_q W_kᵀ = 0
    with pytest.raises(VarcheckError, match="W_q W_kᵀ = 0"):
        head_betas(w_q, w_k)


def test_beta_output_is_the_same_every_run(run_cli, npz: Path) -> None:
    first = run_cli("beta", str(npz), "--format", "json").output
    assert first == run_cli("beta", str(npz), "--format", "json").output
    assert "seed" not in json.loads(first)
    assert "seed" not in run_cli("beta", str(npz)).output
    assert not hasattr(beta_report(npz), "seed")
    # scripts that pass --seed to every command still run
    assert run_cli("beta", str(npz), "--seed", "3", "--format", "json").output == first


# --- under a memory limit ---------------------------------------------------------------------

_CHILD = """
import contextlib, io, json, sys, time
from varcheck.cli import main
out = []
for args in json.loads(sys.argv[1]):
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as e:
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code
    err = e.getvalue()
    out.append([args, code, round(time.perf_counter() - start, 2), err.count("\\n"), err[:200]])
print(json.dumps(out))
"""


def _limit_memory() -> None:
    import resource

    limit = 3 * 1024**3
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS as on Linux")
def test_big_requests_refused_under_a_memory_limit(tmp_path: Path) -> None:
    huge = tmp_path / "huge.npz"
    _npz_with_header(huge, (20_000, 20_000))
    cases = [
        ["train", "--keys", "1000000", "--dx", "4096", "--eval-size", "1000000"],
        ["train", "--keys", "1000000"],
        ["train", "--batch", "100000", "--keys", "100000"],
        ["train", "--init", "normal:1e308"],
        ["project", "--dx", "4096", "--dk", "4096"],
        ["project", "--precision", "1e-320"],
        ["project", "--init", "normal:1e-320"],
        ["project", "--sigma-x", "1e308"],
        ["beta", str(huge)],
        ["beta", "/dev/zero"],
    ]
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for args, code, seconds, lines, err in json.loads(proc.stdout):
        assert code == 2 and seconds < 5 and lines == 1, (args, code, seconds, err)


def test_limits_texts() -> None:
    assert messages.size_text(30.5 * 1024**3) == "30.5 GiB"
    assert messages.duration_text(1200) == "20 min"
    assert messages.duration_text(math.inf) == "forever"
    assert messages.shown("x" * 500).count("x") < 70
