"""``varcheck probe`` as a whole process: its wall time against the targets of issue #23.

Usage::

    .venv/bin/python bench/probe.py            # about 10 s; prints markdown
    .venv/bin/python bench/probe.py --json out.json

Each case runs ``varcheck probe`` in a fresh process (interpreter start-up, imports and output
included), a few times; the median wall time is reported against its target: a numpy kernel at
d_k = 64 in under 1 s, a d_k sweep 8..512 in under 3 s. Nothing here asserts: a busy machine
misses targets a quiet one meets, so the machine's load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "examples/attention_kernels.py:attention"
CASES = {
    "d_k = 64": (["--dk", "64"], 1.0),
    "d_k = 8..512": (["--dk", "8..512"], 3.0),
}


def _varcheck() -> list[str]:
    script = Path(sys.executable).with_name("varcheck")
    return [str(script)] if script.exists() else [sys.executable, "-m", "varcheck"]


def _time(args: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run(
            [*_varcheck(), "probe", KERNEL, *args, "--seed", "1"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"varcheck probe {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="PATH")
    opts = parser.parse_args()
    rows = []
    for name, (args, target) in CASES.items():
        wall = _time(args, opts.repeats)
        rows.append({"case": name, "wall_s": wall, "target_s": target, "met": wall < target})
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"`varcheck probe {KERNEL}` as a whole process (median of {opts.repeats}; "
          f"load average {load:.2f}, {os.cpu_count()} cores)\n")  # fmt: skip
    print("| case | wall (s) | target (s) | met |\n|---|---:|---:|---|")
    for r in rows:
        print(f"| {r['case']} | {r['wall_s']:.2f} | {r['target_s']:.0f} | {r['met']} |")
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
