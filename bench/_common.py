"""Shared helpers for the benchmarks: timing, child processes, machine facts, markdown tables."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
PYTHON = sys.executable
VARCHECK = str(Path(PYTHON).with_name("varcheck"))

DKS = [2, 4, 8, 16, 32, 64, 128, 256, 512]
TIMED_OUT = -999


def median_time(fn: Callable[[], object], *, repeats: int = 5, budget: float = 1.0) -> float:
    """Median wall time of ``fn()`` over up to ``repeats`` calls, stopping early past ``budget``."""
    times: list[float] = []
    spent = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - spent > budget and len(times) >= 1:
            break
    return statistics.median(times)


def run_child(
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    capture: bool = False,
    timeout: float | None = None,
) -> tuple[float, int, str, int]:
    """Run a child process; return (wall seconds, peak RSS in kB, stdout, exit code).

    ``os.wait4`` gives the resource usage of that one child, so its peak RSS is not mixed with
    other children's (``RUSAGE_CHILDREN`` only keeps the maximum over all of them). Past
    ``timeout`` seconds the child is killed and the exit code is ``TIMED_OUT``.
    """
    full_env = {**os.environ, **(env or {})}
    out_path = None
    if capture:
        import tempfile

        fd, out_path = tempfile.mkstemp(prefix="varcheck-bench-")
        stdout: Any = os.fdopen(fd, "w")
    else:
        stdout = subprocess.DEVNULL
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(args), stdout=stdout, stderr=subprocess.DEVNULL, env=full_env, cwd=REPO
    )
    timed_out = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG if timeout else 0)
        if pid:
            break
        if time.perf_counter() - t0 > timeout:  # type: ignore[operator]
            proc.kill()
            timed_out = True
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    proc.returncode = TIMED_OUT if timed_out else os.waitstatus_to_exitcode(status)
    text = ""
    if out_path is not None:
        stdout.close()
        text = Path(out_path).read_text()
        os.unlink(out_path)
    return wall, int(usage.ru_maxrss), text, proc.returncode


def run_worker(task: dict[str, Any], *, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``bench/_worker.py`` on one task (JSON in argv, JSON out), adding its peak RSS."""
    wall, rss_kb, text, code = run_child(
        [PYTHON, str(BENCH_DIR / "_worker.py"), json.dumps(task)], env=env, capture=True
    )
    if code != 0:
        raise RuntimeError(f"worker failed ({code}) on {task}: {text[-2000:]}")
    result = json.loads(text.strip().splitlines()[-1])
    result["peak_rss_mb"] = rss_kb / 1024.0
    result["wall"] = wall
    return result


def self_rss_mb() -> float:
    """Peak RSS of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def blas_info() -> str:
    import numpy as np

    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '?')}"
    except Exception:  # older numpy: no dict mode
        return "unknown"


def machine_info() -> dict[str, str]:
    import numpy as np
    import scipy

    try:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    threads = {
        k: os.environ[k] for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if k in os.environ
    }
    return {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "cores": str(os.cpu_count()),
        "usable cores": str(len(os.sched_getaffinity(0))),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "blas": blas_info(),
        "blas threads env": ", ".join(f"{k}={v}" for k, v in threads.items()) or "not set",
        "load average (1/5/15 min) at start": load,
        "os": platform.platform(),
    }


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; numbers should already be formatted as strings."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        lines.append("| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |")
    return "\n".join(lines)


def fmt_time(seconds: float) -> str:
    if seconds != seconds:  # nan
        return "–"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_count(x: float) -> str:
    """Engineering notation: 1.2e9 -> '1.2G'."""
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def fmt_ratio(x: float) -> str:
    if x != x:
        return "–"
    return f"{x:.0f}×" if x >= 10 else f"{x:.1f}×"
