"""Child process for one benchmark task: ``python bench/_worker.py '<json task>'``.

Each method runs in its own process so that its peak memory (measured by the parent with
``os.wait4``) is its own. The last line of stdout is a JSON object with the results.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

from _common import self_rss_mb


def _varcheck_rows(task: dict[str, Any]) -> dict[str, Any]:
    from varcheck.api import sweep

    sweep([2], precision=0.2, seed=0)  # warm-up: lazy imports, first-call costs
    rows = []
    for dk in task["dks"]:
        t0 = time.perf_counter()
        res = sweep(
            [dk], precision=task["precision"], seed=task["seed"], max_seconds=task.get("cap")
        )
        measured = time.perf_counter() - t0
        est = res.rows[0].estimate
        side = est.block_side
        # stopped by the cap: the half-width shrinks as 1/sqrt(blocks), so scale time and work
        scale = max(1.0, (est.precision / task["precision"]) ** 2)
        extrapolated = est.stop_reason == "max-seconds" and scale > 1.0
        rows.append(
            {
                "method": "varcheck",
                "dk": dk,
                "seconds": measured * scale,
                "measured_seconds": measured,
                "samples": est.samples * scale,
                "blocks": est.blocks * scale,
                "side": side,
                # side 1: a block is one pair (2 d_k numbers); else side×d_k of Q and of K
                "random_numbers": est.blocks * scale * 2.0 * side * dk,
                "flops": est.blocks * scale * 2.0 * side * side * dk,
                "estimate": est.var,
                "precision_reached": est.precision,
                "extrapolated": extrapolated,
                "verdict": res.rows[0].verdict,
            }
        )
    return {"rows": rows}


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
