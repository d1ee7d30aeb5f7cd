"""Child process for one benchmark task: ``python bench/_worker.py '<json task>'``.

Each method runs in its own process so that its peak memory (measured by the parent with
``os.wait4``) is its own. The last line of stdout is a JSON object with the results.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from typing import Any

from _common import self_rss_mb


def _shared_work(dks: list[int], precision: float, blocks: int) -> tuple[float, float, int]:
    """Random numbers and flops of ``blocks`` shared blocks for these d_k, and the rows N."""
    from varcheck import dot_product_theory, parse_distribution
    from varcheck.core.shared_blocks import _flops, plan_shared

    z = parse_distribution("normal")
    plan = plan_shared(
        z, z, [dot_product_theory(d, z, z) for d in dks], precision=precision, confidence=0.95
    )
    full, per_level = _flops(plan.rows, plan.width, plan.dks, plan.pooled, plan.gram_width)
    flops = full if plan.full_gram else per_level
    sides = 1 if plan.pooled else 2
    return blocks * sides * plan.rows * plan.width, blocks * flops, plan.rows


def _whole_sweep(task: dict[str, Any]) -> dict[str, Any]:
    """All d_k in one call (rows share their blocks), with 1 worker and with all cores.

    A call takes about 0.1 s at 1%, so one timing would be at the mercy of whatever else the
    machine does in that moment: the two settings alternate and the median is reported.
    """
    from varcheck.checks.sweep import sweep

    repeats = 7 if task["precision"] >= 0.01 else 3
    times: dict[str, list[float]] = {"one_worker": [], "all_cores": []}
    for _ in range(repeats):
        for label, workers in (("one_worker", 1), ("all_cores", None)):
            t0 = time.perf_counter()
            res = sweep(
                task["dks"], precision=task["precision"], seed=task["seed"], workers=workers
            )
            times[label].append(time.perf_counter() - t0)
    out: dict[str, Any] = {k: statistics.median(v) for k, v in times.items()}
    out.update({f"{k}_min": min(v) for k, v in times.items()}, repeats=repeats)
    out.update({f"{k}_times": v for k, v in times.items()})
    blocks = res.rows[0].estimate.blocks
    randoms, flops, rows = _shared_work(task["dks"], task["precision"], blocks)
    out.update(
        blocks=blocks,
        rows=rows,
        random_numbers=randoms,
        flops=flops,
        worst_precision=max(r.estimate.precision for r in res.rows),
        samples=sum(r.estimate.samples for r in res.rows),
    )
    return out


def _varcheck_rows(task: dict[str, Any]) -> dict[str, Any]:
    from varcheck.checks.sweep import sweep

    sweep([2], precision=0.2, seed=0)  # warm-up: lazy imports, first-call costs
    whole = _whole_sweep(task)
    rows = []
    for dk in task["dks"]:
        t0 = time.perf_counter()
        res = sweep(
            [dk], precision=task["precision"], seed=task["seed"], max_seconds=task.get("cap")
        )
        measured = time.perf_counter() - t0
        est = res.rows[0].estimate
        # stopped by the cap: the half-width shrinks as 1/sqrt(blocks), so scale time and work
        scale = max(1.0, (est.precision / task["precision"]) ** 2)
        extrapolated = est.stop_reason == "max-seconds" and scale > 1.0
        randoms, flops, side = _shared_work([dk], task["precision"], est.blocks)
        rows.append(
            {
                "method": "varcheck",
                "dk": dk,
                "seconds": measured * scale,
                "measured_seconds": measured,
                "samples": est.samples * scale,
                "blocks": est.blocks * scale,
                "side": side,
                "random_numbers": randoms * scale,
                "flops": flops * scale,
                "estimate": est.var,
                "precision_reached": est.precision,
                "extrapolated": extrapolated,
                "verdict": res.rows[0].verdict,
            }
        )
    return {"rows": rows, "whole": whole}


def _baseline_rows(task: dict[str, Any]) -> dict[str, Any]:
    import baselines

    fn = baselines.pair_loop if task["kind"] == "pairs" else baselines.big_product
    # warm-up (BLAS threads, page faults) outside the timed runs
    fn(8, 0.5, seed=1, time_cap=0.05)
    rows = []
    for dk in task["dks"]:
        cap = task.get("cap") or math.inf
        res = fn(dk, task["precision"], seed=task["seed"] + dk, time_cap=cap)
        rows.append(res.to_dict())
    return {"rows": rows}


def main() -> None:
    task = json.loads(sys.argv[1])
    import numpy  # noqa: F401  (baseline memory: interpreter + numpy)

    base_rss = self_rss_mb()
    kind = task["kind"]
    if kind == "varcheck":
        out = _varcheck_rows(task)
    elif kind == "varcheck-whole":
        from varcheck.checks.sweep import sweep

        sweep([2], precision=0.2, seed=0)  # warm-up, as in _varcheck_rows
        out = {"whole": _whole_sweep(task)}
    elif kind in ("pairs", "big-product"):
        out = _baseline_rows(task)
    elif kind == "threads":
        import threads

        out = threads.measure(task)
    else:
        raise SystemExit(f"unknown task kind {kind!r}")
    out["import_rss_mb"] = base_rss
    print(json.dumps(out))


if __name__ == "__main__":
    main()
