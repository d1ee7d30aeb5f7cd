"""Workers, Dask and bounded memory: same numbers however the work is split."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from varcheck import dot_product_theory, estimate_variance, parse_distribution, sweep
from varcheck.core.parallel import SerialRunner, open_runner, ordered_map


@pytest.mark.parametrize("dist", ["normal", "uniform:mean=1", "t:df=8"])
@pytest.mark.parametrize("dk", [2, 64, 512])
def test_estimate_identical_for_any_worker_count(dist: str, dk: int) -> None:
    q = parse_distribution(dist)
    th = dot_product_theory(dk, q, q)
    results = []
    for workers in (1, 2, 4):
        with open_runner(workers) as runner:
            est = estimate_variance(q, q, th, seed=11, stream=(dk,), precision=0.01, runner=runner)
        results.append(est)
    assert results[0] == results[1] == results[2]


def test_sweep_identical_for_any_worker_count() -> None:
    runs = [sweep("2..128", seed=4, precision=0.02, workers=w) for w in (1, 2, 4)]
    assert runs[0] == runs[1] == runs[2]


def test_ordered_map_keeps_order_and_bounds_the_window() -> None:
    submitted = []

    def task(i: int) -> int:
        submitted.append(i)
        return i * i

    with open_runner(2) as runner:
        it = ordered_map(runner, task, ((i,) for i in range(10_000)))
        first = [next(it) for _ in range(5)]
        it.close()
    assert first == [0, 1, 4, 9, 16]
    assert len(submitted) < 20  # never the whole task list at once
    assert list(ordered_map(SerialRunner(), task, [(3,), (4,)])) == [9, 16]


@pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="dask.distributed is not installed (pip install 'varcheck[dask]')",
)
@pytest.mark.skipif(
    bool(os.environ.get("MUTANT_UNDER_TEST")),
    reason="a Dask cluster's worker processes hang inside mutmut's forked test runs (make mutate)",
)
def test_dask_local_cluster_gives_the_same_numbers() -> None:
    local = sweep("2..32", seed=9, precision=0.03, workers=1)
    on_dask = sweep("2..32", seed=9, precision=0.03, workers=2, scheduler="local")
    assert on_dask == local


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for VmHWM")
@pytest.mark.parametrize(
    "args",
    [
        # 10^10 products, row by row
        ("--dk", "64", "--samples", "1e10", "--max-seconds", "4"),
        # shared blocks 1024 wide in float64, a precision that would take hours; 11 rows share
        # a cap of 11 x 0.35 s
        ("--dk", "2..1024", "--precision", "0.00002", "--max-seconds", "0.35"),
    ],
    ids=["samples", "shared"],
)
def test_long_streaming_run_has_bounded_memory(args: tuple[str, ...]) -> None:
    """A run far beyond its time cap: resident memory stays small, whatever was asked."""
    code = (
        "import sys\n"
        "from varcheck.cli import main\n"
        "try:\n"
        f"    main(['sweep', *{list(args)!r},\n"
        "          '--seed', '1', '--format', 'json', '--workers', '2'])\n"
        "except SystemExit:\n"
        "    pass\n"
        # VmHWM is this process's own peak; ru_maxrss would include the forking parent's
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
        "print(hwm.split()[1], file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    row = json.loads(proc.stdout)["rows"][0]
    peak_mb = int(proc.stderr.strip().splitlines()[-1]) / 1024  # VmHWM is in KiB
    assert row["stop_reason"] == "max-seconds" and row["samples"] > 10**6
    assert peak_mb < 300, f"peak resident memory {peak_mb:.0f} MB"
