"""Do numpy's Generator and batched matmul run in parallel on Python threads?

A ``--workers N`` option would hand chunks (each with its own ``SeedSequence``-spawned
generator) to a thread pool. That only helps if the work releases the GIL and the BLAS does not
already use the cores. ``measure`` times the same chunks serially and on a pool of 2 threads,
for three workloads: bulk normal draws, batched matmul alone, and whole ``draw_chunk`` calls for
the block shapes varcheck uses. ``bench/run.py`` calls it in child processes with the BLAS
thread count set either way (``OPENBLAS_NUM_THREADS`` must be set before numpy is imported).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np


def _time_serial_and_pool(job: Any, n_jobs: int, workers: int) -> dict[str, float]:
    """Best-of-3 wall times, serial and pooled, and the pool's CPU time over its wall time.

    The CPU/wall ratio shows whether the threads really ran at once (2 = both cores busy with
    this process) even when other load on the machine hides the wall-time gain.
    """
    seeds = np.random.SeedSequence(11).spawn(n_jobs)
    job(seeds[0])  # warm-up
    best_serial = best_pool = float("inf")
    busy = 0.0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(job, seeds[:workers]))
        for _ in range(3):
            t0 = time.perf_counter()
            for s in seeds:
                job(s)
            best_serial = min(best_serial, time.perf_counter() - t0)
            t0, c0 = time.perf_counter(), time.process_time()
            list(pool.map(job, seeds))
            wall = time.perf_counter() - t0
            if wall < best_pool:
                best_pool, busy = wall, (time.process_time() - c0) / wall
    return {"serial": best_serial, "pool": best_pool, "pool_cpu_per_wall": busy}


def measure(task: dict[str, Any]) -> dict[str, Any]:
    from varcheck.core.blocks import BlockPlan, draw_chunk
    from varcheck.core.distributions import parse_distribution

    workers = int(task.get("workers", 2))
    quick = bool(task.get("quick", False))
    n_jobs = 4 if quick else 8
    normal = parse_distribution("normal")
    rows = []

    def rng_job(ss: np.random.SeedSequence) -> None:
        np.random.default_rng(ss).standard_normal(1 << 20)

    rows.append(
        {"workload": "standard_normal, 2^20 per chunk"}
        | _time_serial_and_pool(rng_job, n_jobs, workers)
    )

    a = np.random.default_rng(0).standard_normal((64, 128, 512))
    b = np.random.default_rng(1).standard_normal((64, 512, 128))

    def mm_job(ss: np.random.SeedSequence) -> None:
        np.matmul(a, b)

    rows.append(
        {"workload": "matmul (64,128,512)@(64,512,128)"}
        | _time_serial_and_pool(mm_job, n_jobs, workers)
    )

    for dk, side, blocks in [(512, 128, 4), (64, 32, 64), (8, 16, 256), (512, 1, 512)]:
        plan = BlockPlan(side=side, paired=False, blocks_per_chunk=blocks, row_correlation=0.0)

        def chunk_job(ss: np.random.SeedSequence, plan=plan, dk=dk) -> None:
            draw_chunk(normal, normal, dk, plan, np.random.default_rng(ss))

        rows.append(
            {"workload": f"draw_chunk d_k={dk}, side {side}, {blocks} blocks"}
            | _time_serial_and_pool(chunk_job, n_jobs, workers)
        )
    for r in rows:
        r["speedup"] = r["serial"] / r["pool"]
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return {
        "rows": rows,
        "load_1min": load,
        "workers": workers,
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
    }
