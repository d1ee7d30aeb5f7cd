"""varcheck benchmarks: time to a target interval width, against two naive baselines.

Usage::

    .venv/bin/python bench/run.py                # full run, about 3 minutes; prints markdown
    .venv/bin/python bench/run.py --quick        # about 30 s: 1% precision only, small grids
    .venv/bin/python bench/run.py --write-docs   # also rewrite docs/performance.md

Sections (each in child processes, so peak memory is per method):

1. start-up: ``python -X importtime -c "import varcheck.cli"`` and ``varcheck --help``;
2. ``varcheck sweep --dk 2..512`` as a subprocess, start-up included (median of a few runs),
   at the default precision (1%) and at 0.1%, with the BLAS thread count as inherited and with
   ``OPENBLAS_NUM_THREADS=1``;
3. per d_k and precision: varcheck through the Python API (``sweep([d_k])``), baseline (a)
   independent pairs and baseline (b) repeated 1111 × d_k × 1111 products (see baselines.py),
   each run to the same relative half-width of a 95% interval for Var(q·k), normal entries;
4. the cost model (cost_model.py) and thread scaling (threads.py).

Numbers are wall times on whatever else the machine is doing; the load average is recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    BENCH_DIR,
    DKS,
    PYTHON,
    REPO,
    TIMED_OUT,
    VARCHECK,
    fmt_count,
    fmt_ratio,
    fmt_time,
    machine_info,
    markdown_table,
    run_child,
    run_worker,
)

SEED = 20240607
TARGETS = {"sweep_default": 1.0, "sweep_0.1pct": 3.0, "ratio_a": 50.0}
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1"}


def say(text: str = "") -> None:
    print(text, flush=True)


# --- start-up -------------------------------------------------------------------------------


def startup(quick: bool) -> dict[str, Any]:
    proc = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", "import varcheck.cli"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    entries = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = (x.strip() for x in line[len("import time:") :].split("|"))
        entries.append({"module": name.strip(), "self_us": int(self_us), "cum_us": int(cum_us)})
    total = next((e["cum_us"] for e in entries if e["module"] == "varcheck.cli"), math.nan)
    top_cum = sorted(
        (e for e in entries if e["module"].count(".") == 0 or e["module"].startswith("varcheck")),
        key=lambda e: -e["cum_us"],
    )[:10]
    top_self = sorted(entries, key=lambda e: -e["self_us"])[:8]
    reps = 3 if quick else 7
    walls = {}
    for label, args in [
        ("python -c pass", [PYTHON, "-c", "pass"]),
        ("python -c 'import numpy'", [PYTHON, "-c", "import numpy"]),
        ("python -c 'import varcheck.cli'", [PYTHON, "-c", "import varcheck.cli"]),
        ("varcheck --help", [VARCHECK, "--help"]),
    ]:
        walls[label] = statistics.median(run_child(args)[0] for _ in range(reps))
    loaded = subprocess.run(
        [PYTHON, "-c", "import sys, varcheck.cli; print(int('scipy' in sys.modules))"],
        capture_output=True,
        text=True,
        cwd=REPO,
    ).stdout.strip()
    return {
        "import_total_us": total,
        "top_cumulative": top_cum,
        "top_self": top_self,
        "walls": walls,
        "scipy_imported_by_cli": loaded == "1",
    }


# --- the CLI sweep --------------------------------------------------------------------------


def cli_sweep(
    precision: float, env: dict[str, str], repeats: int, budget: float, timeout: float
) -> dict:
    args = [VARCHECK, "sweep", "--dk", "2..512", "--seed", str(SEED), "--format", "json"]
    if precision != 0.01:
        args += ["--precision", str(precision)]
    walls, rss = [], []
    spent = time.perf_counter()
    timed_out = False
    for _ in range(repeats):
        wall, peak_kb, _, code = run_child(args, env=env, timeout=timeout)
        if code == TIMED_OUT:
            timed_out = True
            walls.append(wall)
            rss.append(peak_kb / 1024)
            break
        if code not in (0, 1):
            raise RuntimeError(f"varcheck sweep failed with exit code {code}")
        walls.append(wall)
        rss.append(peak_kb / 1024)
        if time.perf_counter() - spent > budget:
            break
    return {
        "precision": precision,
        "env": env or "inherited",
        "median": statistics.median(walls),
        "min": min(walls),
        "runs": len(walls),
        "peak_rss_mb": max(rss),
        "timed_out": timed_out,
    }


# --- rows: varcheck vs baselines --------------------------------------------------------------


#: Repetitions of the 1% comparison (each about 15 s).
RATIO_REPEATS = 3


def rows_for(precision: float, quick: bool, env: dict[str, str]) -> dict[str, Any]:
    cap_a = 0.2 if quick else (1.5 if precision < 0.01 else 4.0)
    cap_b = 0.2 if quick else (1.5 if precision < 0.01 else 4.0)
    out = {}
    cap_v = 1.0 if quick else 6.0
    # the whole sweep is timed again after the baselines: the machine's speed drifts over the
    # minutes between, and the ratio should not depend on which phase each side ran in
    tasks = (
        ("varcheck", cap_v),
        ("pairs", cap_a),
        ("big-product", cap_b),
        ("varcheck-whole", cap_v),
    )
    for kind, cap in tasks:
        task = {"kind": kind, "precision": precision, "dks": DKS, "seed": SEED, "cap": cap}
        t0 = time.perf_counter()
        # varcheck as its CLI runs it: one BLAS thread per worker thread (else the BLAS's own
        # threads compete with the workers); the baselines keep the BLAS's default
        one = kind.startswith("varcheck")
        out[kind] = run_worker(task, env={**env, **ONE_THREAD} if one else env)
        say(f"  {kind:<14} {precision:.1%}: {time.perf_counter() - t0:5.1f} s")
    late = out.pop("varcheck-whole")["whole"]
    whole = out["varcheck"]["whole"]
    for label in ("one_worker", "all_cores"):
        times = whole.pop(f"{label}_times") + late[f"{label}_times"]
        whole[label] = statistics.median(times)
        whole[f"{label}_min"] = min(times)
    whole["repeats"] += late["repeats"]
    return out


def summarise(res: dict[str, Any]) -> dict[str, Any]:
    rows = {k: v["rows"] for k, v in res.items()}
    total = {k: sum(r["seconds"] for r in v) for k, v in rows.items()}
    whole = res["varcheck"]["whole"]
    # varcheck's time for the whole sweep is one call: its rows share their blocks
    total["varcheck alone"] = total["varcheck"]
    total["varcheck"] = whole["one_worker"]
    total["varcheck all cores"] = whole["all_cores"]
    randoms = {k: sum(r["random_numbers"] for r in v) for k, v in rows.items()}
    flops = {k: sum(r["flops"] for r in v) for k, v in rows.items()}
    randoms["varcheck alone"], flops["varcheck alone"] = randoms["varcheck"], flops["varcheck"]
    for key in ("varcheck", "varcheck all cores"):
        randoms[key], flops[key] = whole["random_numbers"], whole["flops"]
    return {
        "total_seconds": total,
        "ratio_a": total["pairs"] / total["varcheck"],
        "ratio_a_all_cores": total["pairs"] / total["varcheck all cores"],
        "ratio_b": total["big-product"] / total["varcheck"],
        "whole": whole,
        "random_numbers": randoms,
        "flops": flops,
        "peak_rss_mb": {k: v["peak_rss_mb"] for k, v in res.items()},
        "import_rss_mb": {k: v["import_rss_mb"] for k, v in res.items()},
        "any_extrapolated": {k: any(r["extrapolated"] for r in v) for k, v in rows.items()},
    }


def rows_table(res: dict[str, Any]) -> str:
    v, a, b = (res[k]["rows"] for k in ("varcheck", "pairs", "big-product"))
    body = []
    for rv, ra, rb in zip(v, a, b, strict=True):
        ta = fmt_time(ra["seconds"]) + (" (x)" if ra["extrapolated"] else "")
        tb = fmt_time(rb["seconds"]) + (" (x)" if rb["extrapolated"] else "")
        body.append(
            [
                str(rv["dk"]),
                fmt_time(rv["seconds"]) + (" (x)" if rv["extrapolated"] else ""),
                str(rv["side"]),
                fmt_count(rv["samples"]),
                fmt_count(rv["random_numbers"]),
                fmt_count(rv["flops"]),
                ta,
                fmt_count(ra["random_numbers"]),
                fmt_ratio(ra["seconds"] / rv["seconds"]),
                tb,
                f"{rb['samples']:.0f}",
                fmt_count(rb["random_numbers"]),
                fmt_count(rb["flops"]),
                fmt_ratio(rb["seconds"] / rv["seconds"]),
            ]
        )
    return markdown_table(
        [
            "d_k",
            "varcheck",
            "side",
            "products",
            "randoms",
            "flops",
            "(a) pairs",
            "randoms",
            "(a)/vc",
            "(b) big product",
            "reps",
            "randoms",
            "flops",
            "(b)/vc",
        ],
        body,
    )


def totals_table(summaries: dict[float, dict[str, Any]]) -> str:
    body = []
    for p, s in summaries.items():
        for k, label in (
            ("varcheck", "varcheck, whole sweep, 1 worker"),
            ("varcheck all cores", "varcheck, whole sweep, all cores"),
            ("varcheck alone", "varcheck, each d_k alone"),
            ("pairs", "(a) pairs"),
            ("big-product", "(b) big product"),
        ):
            ratio = (
                "1×"
                if k == "varcheck"
                else fmt_ratio(s["total_seconds"][k] / s["total_seconds"]["varcheck"])
            )
            peak = s["peak_rss_mb"][k.split()[0] if k.startswith("varcheck") else k]
            imported = s["import_rss_mb"][k.split()[0] if k.startswith("varcheck") else k]
            body.append(
                [
                    f"{p:.1%}",
                    label,
                    fmt_time(s["total_seconds"][k])
                    + (" (x)" if s["any_extrapolated"].get(k) else ""),
                    ratio,
                    fmt_count(s["random_numbers"][k]),
                    fmt_count(s["flops"][k]),
                    f"{peak:.0f} MB ({peak - imported:+.0f})",
                ]
            )
    return markdown_table(
        [
            "precision",
            "method",
            "time for d_k = 2..512",
            "time / varcheck",
            "random numbers",
            "flops",
            "peak RSS (over import)",
        ],
        body,
    )


# --- cost model and threads -------------------------------------------------------------------


def cost_model(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cm.json"
        args = [PYTHON, str(BENCH_DIR / "cost_model.py"), "--json", str(path)]
        if quick:
            args.append("--quick")
        env = {**os.environ, **ONE_THREAD}
        subprocess.run(args, check=True, cwd=REPO, env=env, stdout=subprocess.DEVNULL)
        res = json.loads(path.read_text())
        # the same matmul grid with the BLAS left to its default thread count
        code = (
            f"import json, sys; sys.path.insert(0, {str(BENCH_DIR)!r}); import cost_model; "
            "print(json.dumps(cost_model.measure_matmul(True, median=True)))"
        )
        env_default = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        out = subprocess.run(
            [PYTHON, "-c", code],
            check=True,
            cwd=REPO,
            env=env_default,
            capture_output=True,
            text=True,
        ).stdout
        res["matmul_default_threads"] = json.loads(out)
    return res


def threads(quick: bool) -> list[dict[str, Any]]:
    env_default = {"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "")}
    out = []
    for env in (ONE_THREAD,) if quick else (ONE_THREAD, env_default):
        env = {k: v for k, v in env.items() if v}
        out.append(run_worker({"kind": "threads", "quick": quick}, env=env))
    return out


def notes(r: dict[str, Any]) -> list[str]:
    """Observations computed from this run's numbers."""
    out = []
    by = {(s["precision"], s["env"] == "inherited"): s["median"] for s in r["cli"]}
    for p in (0.01, 0.001):
        if (p, True) in by and (p, False) in by:
            out.append(
                f"At {p:.1%} the CLI sweep took {fmt_time(by[(p, True)])} with the BLAS's default "
                f"thread count and {fmt_time(by[(p, False)])} with OPENBLAS_NUM_THREADS=1 "
                f"({by[(p, True)] / by[(p, False)]:.1f}×). varcheck's batched matmuls are many "
                "small products; the BLAS's own threads add a synchronisation per product and "
                "stall whenever another process holds a core."
            )
    for p, s in r["summaries"].items():
        t = s["total_seconds"]
        out.append(
            f"At {p:.1%}, d_k = 2..512: varcheck {fmt_time(t['varcheck'])} for the whole sweep "
            f"(1 worker; each d_k alone would take {fmt_time(t['varcheck alone'])}), (a) pairs "
            f"{fmt_time(t['pairs'])} ({s['ratio_a']:.1f}×), (b) big product "
            f"{fmt_time(t['big-product'])} ({s['ratio_b']:.1f}×)."
        )
    cm = r.get("cost_model")
    if cm:
        worse = [x for x in cm["scan"] if x["empirical_best"] != x["chosen_0.1pct"]]
        if worse:
            out.append(
                "Block side chosen at 0.1% differs from the empirical best for d_k = "
                + ", ".join(
                    f"{x['dk']} (chosen {x['chosen_0.1pct']}, best {x['empirical_best']}, "
                    f"{x['loss_chosen_0.1pct']:.2f}× slower)"
                    for x in worse
                )
                + "; differences under ~1.2× are within the noise of one run."
            )
    return out


# --- report -------------------------------------------------------------------------------


def render(r: dict[str, Any]) -> str:
    import cost_model as cm

    L: list[str] = []
    m = r["machine"]
    L.append("# Performance\n")
    L.append(
        "Generated by `bench/run.py` (`make bench`); do not edit by hand. Wall times are from one "
        "run on the machine below, with whatever else it was running at the time (see the load "
        "average); rerun to compare. Precision is the relative half-width of a 95% interval for "
        "Var(q·k), normal entries. `(x)` marks a baseline time extrapolated from a measured rate "
        "because reaching the width would have taken too long (see `bench/baselines.py`).\n"
    )
    L.append("## Machine\n")
    L.append(markdown_table(["", ""], [[k, v] for k, v in m.items()]))
    L.append(
        f"\nMode: {'quick' if r['quick'] else 'full'}; seed {SEED}; total bench time "
        f"{r['bench_seconds']:.0f} s.\n"
    )

    L.append("## Headline\n")
    heads = []
    for s in r["cli"]:
        target = TARGETS["sweep_default"] if s["precision"] == 0.01 else TARGETS["sweep_0.1pct"]
        env = "inherited BLAS threads" if s["env"] == "inherited" else "OPENBLAS_NUM_THREADS=1"
        heads.append(
            [
                f"`varcheck sweep --dk 2..512` at {s['precision']:.1%} ({env})",
                f"> {fmt_time(s['median'])} (stopped)"
                if s["timed_out"]
                else f"{fmt_time(s['median'])} (median of {s['runs']}, min {fmt_time(s['min'])})",
                f"< {target:g} s",
                "met" if s["median"] < target else "**missed**",
            ]
        )
    for p, s in r["summaries"].items():
        for key, who in (("ratio_a", "1 worker"), ("ratio_a_all_cores", "all cores")):
            measured = fmt_ratio(s[key])
            if s.get("repeats", 1) > 1:
                lo, hi = s[f"{key}_range"]
                measured += f" ({fmt_ratio(lo)}–{fmt_ratio(hi)} over {s['repeats']} runs)"
            heads.append(
                [
                    f"(a) pairs / varcheck ({who}) at {p:.1%}, whole sweep",
                    measured,
                    f"≥ {TARGETS['ratio_a']:g}×",
                    "met" if s[key] >= TARGETS["ratio_a"] else "**missed**",
                ]
            )
        heads.append([f"(b) big product / varcheck at {p:.1%}", fmt_ratio(s["ratio_b"]), "–", "–"])
    L.append(markdown_table(["what", "measured", "target", ""], heads))

    L.append("\n## Time to the target width\n")
    L.append(
        "A sweep draws all its d_k from the same shared blocks "
        "(`varcheck/core/shared_blocks.py`): a pool of N rows, 512 wide (q and k have the "
        "same law here, so every two distinct rows make a product), serves d_k = 512 once, "
        "256 twice, ..., 2 256 times, and the products are "
        "summed through Gram matrices without being formed. So the time for the whole sweep "
        "is one call, `varcheck.checks.sweep.sweep([2, ..., 512])` in a warm process (start-up "
        "excluded, OPENBLAS_NUM_THREADS=1 as the CLI sets it), which stops when its slowest "
        "row reaches the width (the others end up narrower); it is the median of several "
        "calls, 1 worker and all cores alternating, half of them before the baselines run and "
        "half after, since the machine's speed drifts. It is compared with the baselines' times "
        "summed over d_k. At 1% the whole sweep is bounded by the rule that every interval "
        "rests on at least 200 independent blocks: d_k = 512 then needs pools of about 34 "
        "rows, about 3.5M random numbers, however the work is arranged.\n"
    )
    for p, s in r["summaries"].items():
        w = s["whole"]
        L.append(
            f"- {p:.1%}: whole sweep {fmt_time(w['one_worker'])} with 1 worker (min "
            f"{fmt_time(w['one_worker_min'])}), {fmt_time(w['all_cores'])} with all cores (min "
            f"{fmt_time(w['all_cores_min'])}), median of {w['repeats']}; {w['blocks']} blocks of "
            f"{w['rows']} rows, {fmt_count(w['random_numbers'])} random numbers, "
            f"{fmt_count(w['flops'])} flops, widest row ±{w['worst_precision']:.3%}."
        )
    L.append(
        "\nPer d_k below, `varcheck` is `sweep([d_k])`, each d_k alone (it then pays for its "
        "own random numbers); `side` the rows N per block; `products` the q·k products; "
        "`randoms` the random numbers drawn and `flops` the floating-point operations of the "
        "Gram matrices or products (2 per multiply-add), counted from the shapes. (a) draws "
        "2·d_k numbers and does 2·d_k flops per pair; (b) draws 2·1111·d_k numbers and does "
        "2·1111²·d_k flops per replicate. Ratios are baseline time / varcheck time, both for "
        "that d_k alone.\n"
    )
    for p, res in r["rows"].items():
        L.append(f"### Precision {p:.1%}\n")
        L.append(rows_table(res))
        L.append("")
    L.append("### Totals over d_k = 2..512\n")
    L.append(totals_table(r["summaries"]))
    L.append(
        "\nPeak RSS is the child process's (`os.wait4`), running all d_k of one method (for "
        "varcheck: the whole sweeps and each d_k alone in one process); the "
        "figure in brackets is above the interpreter + numpy after import.\n"
    )
    L.append("### The CLI sweep, start-up included\n")
    L.append(
        markdown_table(
            ["precision", "environment", "median wall", "min", "runs", "peak RSS"],
            [
                [
                    f"{s['precision']:.1%}",
                    "inherited" if s["env"] == "inherited" else "OPENBLAS_NUM_THREADS=1",
                    ("> " if s["timed_out"] else "") + fmt_time(s["median"]),
                    ("> " if s["timed_out"] else "") + fmt_time(s["min"]),
                    str(s["runs"]),
                    f"{s['peak_rss_mb']:.0f} MB",
                ]
                for s in r["cli"]
            ],
        )
    )

    st = r["startup"]
    L.append("\n## Start-up\n")
    L.append(
        markdown_table(
            ["command", "median wall"], [[f"`{k}`", fmt_time(v)] for k, v in st["walls"].items()]
        )
    )
    L.append(
        f'\n`python -X importtime -c "import varcheck.cli"`: {st["import_total_us"] / 1e3:.0f} ms '
        "cumulative; scipy imported by the CLI at start-up: "
        f"{'yes' if st['scipy_imported_by_cli'] else 'no'}. "
        "Largest cumulative entries (top-level packages and varcheck modules):\n"
    )
    L.append(
        markdown_table(
            ["module", "cumulative", "self"],
            [
                [e["module"], f"{e['cum_us'] / 1e3:.1f} ms", f"{e['self_us'] / 1e3:.1f} ms"]
                for e in st["top_cumulative"]
            ],
        )
    )
    L.append("\nLargest self times:\n")
    L.append(
        markdown_table(
            ["module", "self"],
            [[e["module"], f"{e['self_us'] / 1e3:.1f} ms"] for e in st["top_self"]],
        )
    )

    if r.get("cost_model"):
        c = r["cost_model"]
        L.append("\n## Cost model\n")
        L.append(
            "Measured by `bench/cost_model.py` with `OPENBLAS_NUM_THREADS=1`. The model "
            "(`varcheck/core/blocks.py`) prices a block of side n as "
            "c_rng·2nd + c_flop·n²d + c_out·n² + c_block nanoseconds and credits it with "
            "n²/(1 + 2(n−1)r) independent products.\n"
        )
        L.append(cm.report(c))
        mm_def = {(x["side"], x["dk"]): x["ns_per_mac"] for x in c["matmul_default_threads"]}
        mm_one = {(x["side"], x["dk"]): x["ns_per_mac"] for x in c["matmul"]}
        keys = [k for k in mm_def if k in mm_one]
        L.append(
            "\n### Batched matmul with the BLAS's default thread count (ns per multiply-add)\n"
        )
        L.append(
            "Median of 3 calls with the BLAS's own threads (left column) against the best of "
            "the 1-thread runs above.\n"
        )
        L.append(
            markdown_table(
                ["side n", "d", "default threads", "1 thread", "slow-down"],
                [
                    [
                        str(n),
                        str(d),
                        f"{mm_def[(n, d)]:.3f}",
                        f"{mm_one[(n, d)]:.3f}",
                        fmt_ratio(mm_def[(n, d)] / mm_one[(n, d)]),
                    ]
                    for n, d in keys
                ],
            )
        )

    if r.get("threads"):
        L.append("\n## Threads: what `--workers 2` could give\n")
        L.append(
            "Each chunk gets its own `SeedSequence.spawn` generator; the same chunks run serially "
            "and on a `ThreadPoolExecutor(2)` (best of 3). `CPU/wall` is the process CPU time "
            "over wall time during the pooled run: near 2 means both threads really ran at "
            "once; the wall-time speed-up can only reach it if no other process wants the "
            "cores.\n"
        )
        body = []
        for t in r["threads"]:
            for row in t["rows"]:
                body.append(
                    [
                        t["blas_threads"],
                        row["workload"],
                        fmt_time(row["serial"]),
                        fmt_time(row["pool"]),
                        f"{row['speedup']:.2f}×",
                        f"{row['pool_cpu_per_wall']:.2f}",
                        f"{t['load_1min']:.1f}",
                    ]
                )
        L.append(
            markdown_table(
                [
                    "BLAS threads",
                    "workload",
                    "serial",
                    "2 threads",
                    "speed-up",
                    "CPU/wall",
                    "load (1 min)",
                ],
                body,
            )
        )
    if r.get("notes"):
        L.append("\n## Notes\n")
        L.extend(f"- {n}" for n in r["notes"])
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="varcheck benchmarks (see bench/README.md)")
    ap.add_argument("--quick", action="store_true", help="1%% precision only, small grids (~30 s)")
    ap.add_argument("--write-docs", action="store_true", help="rewrite docs/performance.md")
    ap.add_argument("--json", metavar="FILE", help="also write all raw results as JSON")
    ap.add_argument(
        "--skip", default="", help="comma list of sections to skip: cost-model,threads,rows,cli"
    )
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    quick = args.quick
    started = time.perf_counter()
    r: dict[str, Any] = {"quick": quick, "machine": machine_info()}
    say(
        f"machine: {r['machine']['cpu']}, {r['machine']['cores']} cores, "
        f"load {r['machine']['load average (1/5/15 min) at start']}"
    )

    say("start-up ...")
    r["startup"] = startup(quick)

    r["cli"] = []
    if "cli" not in skip:
        say("CLI sweep ...")
        for precision in (0.01,) if quick else (0.01, 0.001):
            for env in ({}, ONE_THREAD):
                reps, budget = (5, 8.0) if precision == 0.01 else (3, 10.0)
                if quick:
                    reps, budget = 3, 4.0
                r["cli"].append(cli_sweep(precision, env, reps, budget, timeout=20.0))
                s = r["cli"][-1]
                say(f"  {precision:.1%} {str(s['env']):<28} median {fmt_time(s['median'])}")

    r["rows"], r["summaries"] = {}, {}
    if "rows" not in skip:
        say("rows: varcheck and baselines ...")
        for precision in (0.01,) if quick else (0.01, 0.001):
            # at 1% both sides take seconds or less, so the machine's drifting speed moves the
            # ratio by tens of percent: repeat, report the repetition with the median ratio
            # (all cores) and the range over all of them
            tries = 1 if quick or precision < 0.01 else RATIO_REPEATS
            runs = [rows_for(precision, quick, {}) for _ in range(tries)]
            sums = [summarise(res) for res in runs]
            order = sorted(range(tries), key=lambda i: sums[i]["ratio_a_all_cores"])
            pick = order[tries // 2]
            r["rows"][precision] = runs[pick]
            r["summaries"][precision] = sums[pick]
            for key in ("ratio_a", "ratio_a_all_cores"):
                sums[pick][f"{key}_range"] = [min(x[key] for x in sums), max(x[key] for x in sums)]
            sums[pick]["repeats"] = tries

    if "cost-model" not in skip:
        say("cost model ...")
        r["cost_model"] = cost_model(quick)
    if "threads" not in skip:
        say("threads ...")
        r["threads"] = threads(quick)
    r["notes"] = notes(r)
    r["bench_seconds"] = time.perf_counter() - started
    text = render(r)
    say()
    say(text)
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1, default=str))
    if args.write_docs:
        path = REPO / "docs" / "performance.md"
        path.write_text(text)
        say(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
