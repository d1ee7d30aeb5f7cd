"""The fine sweep and the cost around a user's sampler, each beside its floor or a naive loop.

Usage::

    .venv/bin/python bench/headline.py                # about 4 min on 2 cores; prints markdown
    .venv/bin/python bench/headline.py --quick        # one run of each (about 2 min)
    .venv/bin/python bench/headline.py --write-docs   # also (re)write its section of
                                                      # docs/performance.md

1. **The 0.01% sweep.** ``varcheck sweep --dk 2..512 --precision 0.0001`` as a whole process,
   with ``--workers 1`` and ``--workers 2`` alternating (the machine's speed drifts), wall time,
   CPU time (``os.wait4``) and the load average around each run. Beside it, measured in the same
   run, the floor of the estimator it runs: the blocks the run drew (its JSON) times the time of
   the two things no arrangement of the work avoids, drawing a block's normal numbers
   (Box-Muller, float32) and forming its W × W Gram matrix (one ``syrk``), on one core; on two
   cores, half that.
2. **The 0.1% sweep** with 1 and 2 workers: the speed-up of the second core.
3. **A user's sampler.** ``varcheck.verify(dk, claim=1, sampler=fn)`` with ``fn`` timed from
   inside; varcheck's own time per call is (time of ``verify`` - time in fn) / calls, and its
   share is that over the time in fn. Both are this thread's CPU time (``time.thread_time``),
   which other processes on a shared machine do not inflate (the verify runs on one thread).
   Beside it, in the same run, a naive loop over the same calls doing only
   what any correct loop must (a generator per call from ``SeedSequence.spawn``, the call,
   ``asarray``, the mean and the mean of squares), and, for the cheap sampler, the same sampler
   in vectorised form (``fn(rng, dk, calls)``, docs/own-code.md).

Nothing here asserts. "Today" is the figure measured at HEAD 708d406 (issue #35), quoted, since
that code is not in this tree.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import REPO, VARCHECK, fmt_time, machine_info, markdown_table

HEADING = "## The fine sweep and a sampler's overhead, against their floors (bench/headline.py)"
SEED = 20240607
FINE = ("sweep", "--dk", "2..512", "--precision", "0.0001", "--format", "json")
COARSE = ("sweep", "--dk", "2..512", "--precision", "0.001", "--format", "json")
#: What issue #35 measured at HEAD 708d406 (2 cores, whole processes).
TODAY = {
    "fine-2": "30 s",
    "fine-1": "58 s",
    "slow-share": "14–16% (≈0.3 ms a call)",
    "cheap-share": "50–800% (15–30 µs a call)",
}


def load() -> str:
    """The 1-minute load average: near 2 on this 2-core machine means both cores were taken."""
    return f"{os.getloadavg()[0]:.1f}"


def timed_child(args: list[str]) -> dict[str, Any]:
    """Run varcheck with ``args``: wall and CPU seconds, exit code, stdout, load around it."""
    before = load()
    t0 = time.perf_counter()
    proc = subprocess.Popen([VARCHECK, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "code": os.waitstatus_to_exitcode(status),
        "json": json.loads(out) if out else None,
        "load": f"{before} → {load()}",
    }


def block_floor(rows: int, width: int, repeats: int = 15) -> dict[str, float]:
    """Seconds per pooled block of ``rows`` × ``width`` on one core: its normal numbers and its
    Gram matrix (median of ``repeats``)."""
    from varcheck.core.distributions import standard_normal_float32

    rng = np.random.Generator(np.random.SFC64(1))
    x = np.empty((rows, width), dtype=np.float32)
    draw, gram = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        standard_normal_float32(rng, x)
        t1 = time.perf_counter()
        x.T @ x  # noqa: B018 - numpy uses syrk for a matrix times its own transpose
        t2 = time.perf_counter()
        draw.append(t1 - t0)
        gram.append(t2 - t1)
    return {"draw": statistics.median(draw), "gram": statistics.median(gram)}


def stages(repeats: int = 9) -> dict[str, float]:
    """Seconds per block of each stage of a 0.01% sweep's chunk (one block, as the plan has it),
    and of the whole ``draw_shared_chunk``, on one core (medians): the profile."""
    from varcheck.core import shared_blocks as sb
    from varcheck.core.distributions import parse_distribution
    from varcheck.core.theory import dot_product_theory

    z = parse_distribution("normal")
    dks = (2, 4, 8, 16, 32, 64, 128, 256, 512)
    plan = sb.plan_shared(
        z, z, [dot_product_theory(d, z, z) for d in dks], precision=1e-4, confidence=0.95
    )
    rng = np.random.Generator(np.random.SFC64(2))
    ws = sb._Workspace()
    n, w, f32 = plan.rows, plan.width, np.dtype(np.float32)
    times: dict[str, list[float]] = {}
    for _ in range(repeats):
        lap = _Laps(times)
        qm = z.sample(rng, (1, n, w), f32, ws.get("q", (1, n, w), f32))
        lap("normal numbers (Box-Muller)")
        x2 = _column_sums(qm, ws)
        lap("squares, column sums")
        sb._self_terms(x2, dks, ws)
        lap("each row's squared norms per d_k")
        g = qm[0].T @ qm[0]
        lap("Gram matrix (syrk)")
        h = np.square(g, dtype=np.float64)
        lap("to float64, squared")
        for d in dks:
            sb._diagonal_block_sum(h, w // d, d)
        lap("diagonal-block sums")
        sb.draw_shared_chunk(z, z, plan, rng, 1, ws)
        lap("whole chunk (draw_shared_chunk)")
    return {name: statistics.median(t) for name, t in times.items()}


class _Laps:
    """Seconds since the last lap, appended to ``times[name]``."""

    def __init__(self, times: dict[str, list[float]]) -> None:
        self.times = times
        self.last = time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.times.setdefault(name, []).append(now - self.last)
        self.last = now


def _column_sums(qm: np.ndarray, ws: Any) -> np.ndarray:
    x2 = np.square(qm, out=ws.get("x2", qm.shape, qm.dtype))
    qm.sum(axis=1, dtype=np.float64)
    x2.sum(axis=1, dtype=np.float64)
    return x2


def sweeps(repeats: int) -> dict[str, Any]:
    """The 0.01% and 0.1% sweeps with 1 and 2 workers, alternating, and the fine one's floor."""
    runs: dict[str, list[dict[str, Any]]] = {"fine-1": [], "fine-2": [], "coarse-1": []}
    runs["coarse-2"] = []
    for r in range(repeats):
        for workers in (2, 1):
            seed = ("--seed", str(SEED + r), "--workers", str(workers))
            for name, cmd in (("fine", FINE), ("coarse", COARSE)):
                run = timed_child([*cmd, *seed])
                runs[f"{name}-{workers}"].append(run)
                say(f"{name} sweep, {workers} worker(s): {run['wall']:.2f} s")
    rows0 = runs["fine-2"][0]["json"]["rows"]
    blocks = max(row["blocks"] for row in rows0)
    side = rows0[0]["block_side"]
    floor = block_floor(side, 512)
    return {"runs": runs, "blocks": blocks, "side": side, "floor": floor, "stages": stages()}


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Timed:
    """A sampler wrapped so that the time spent inside it is summed."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.inside = 0.0
        self.calls = 0

    def __call__(self, rng: np.random.Generator, dk: int, **kw: Any) -> Any:
        t0 = time.thread_time()
        out = self.fn(rng, dk, **kw)
        self.inside += time.thread_time() - t0
        self.calls += 1
        return out


def iid(rng: np.random.Generator, dk: int, size: int = 2048) -> np.ndarray:
    """``size`` standard normal values: a sampler of about 20 µs a call."""
    return rng.standard_normal(size)


def iid_runs(rng: np.random.Generator, dk: int, calls: int, size: int = 2048) -> np.ndarray:
    """:func:`iid` vectorised: ``calls`` runs, one per row."""
    return rng.standard_normal((calls, size))


def attention(rng: np.random.Generator, dk: int) -> np.ndarray:
    """examples/attention.py's layer (48 tokens, d_model 256, 4 heads): about 2 ms a call."""
    sys.path.insert(0, str(REPO))
    from examples.attention import logits

    return logits(rng, dk, tokens=48)


def naive(fn: Callable[..., Any], dk: int, calls: int, seed: int) -> float:
    """Seconds outside ``fn`` of a bare loop over ``calls`` calls (see the module docstring)."""
    timed = Timed(fn)
    m, a = np.empty(calls), np.empty(calls)
    t0 = time.thread_time()
    for i, child in enumerate(np.random.SeedSequence(seed).spawn(calls)):
        x = np.asarray(timed(np.random.default_rng(child), dk), dtype=np.float64).ravel()
        m[i], a[i] = x.mean(), np.dot(x, x) / x.size
    return (time.thread_time() - t0 - timed.inside) / calls


def overhead(fn: Callable[..., Any], dk: int, repeats: int, vectorized: bool = False) -> dict:
    """varcheck's own time per run around ``fn``, its share, and a naive loop's per run."""
    import varcheck

    per_run, share, inside, naive_per_run, runs = [], [], [], [], 0
    for r in range(repeats):
        timed = Timed(fn)
        # a plain function of its own, so that verify reads the signature of fn (calls or not)
        sampler = _vectorised(timed) if vectorized else timed
        t0 = time.thread_time()
        res = varcheck.verify(dk, claim=1, sampler=sampler, seed=SEED + r)
        wall = time.thread_time() - t0  # CPU time of this thread: other processes do not add
        runs = res.raw.blocks + (6 if vectorized else 3)  # the pilot's runs too
        per_run.append((wall - timed.inside) / runs)
        inside.append(timed.inside / runs)
        share.append((wall - timed.inside) / timed.inside)
        if not vectorized:
            naive_per_run.append(naive(fn, dk, runs, SEED + r))
    return {
        "per_run": statistics.median(per_run),
        "share": statistics.median(share),
        "share_range": (min(share), max(share)),
        "inside": statistics.median(inside),
        "naive": statistics.median(naive_per_run) if naive_per_run else math.nan,
        "runs": runs,
    }


def _vectorised(timed: Timed) -> Callable[..., Any]:
    def runs(rng: np.random.Generator, dk: int, calls: int) -> Any:
        return timed(rng, dk, calls=calls)

    return runs


def samplers(repeats: int) -> dict[str, Any]:
    import varcheck

    varcheck.verify(64, claim=1, sampler=attention, seed=0)  # imports and caches, untimed
    out = {"slow": overhead(attention, 64, repeats)}
    say(f"2 ms sampler: {out['slow']['per_run'] * 1e6:.0f} µs a call")
    out["cheap"] = overhead(iid, 16, 3 * repeats)
    say(f"20 µs sampler: {out['cheap']['per_run'] * 1e6:.1f} µs a call")
    out["cheap-vectorised"] = overhead(iid_runs, 16, 3 * repeats, vectorized=True)
    return out


def report(r: dict[str, Any]) -> str:
    m = r["machine"]
    s = r["sweeps"]
    runs = s["runs"]

    def med(key: str, what: str = "wall") -> float:
        return statistics.median(x[what] for x in runs[key])

    floor1 = s["blocks"] * (s["floor"]["draw"] + s["floor"]["gram"])
    L = [f"{HEADING}\n"]
    L.append(
        f"Generated by `.venv/bin/python bench/headline.py --write-docs` (do not edit by hand); "
        f"{m['date']}, {m['cpu']}, {m['cores']} cores, OPENBLAS_NUM_THREADS=1, numpy "
        f"{m['numpy']}; {r['seconds']:.0f} s. The machine was shared with other work: the load "
        "average before and after each run is in the last column, and the figures are medians "
        f"of {len(runs['fine-2'])} runs per row. 'Today' is what issue #35 measured at HEAD "
        "708d406.\n"
    )
    L.append("### The sweep at 0.01% and 0.1%, whole processes\n")
    rows = []
    for key, label in (
        ("fine-2", "0.01%, --workers 2"),
        ("fine-1", "0.01%, --workers 1"),
        ("coarse-2", "0.1%, --workers 2"),
        ("coarse-1", "0.1%, --workers 1"),
    ):
        walls = [x["wall"] for x in runs[key]]
        rows.append(
            [
                label,
                TODAY.get(key, "–"),
                fmt_time(med(key)),
                f"{fmt_time(min(walls))}–{fmt_time(max(walls))}",
                fmt_time(med(key, "cpu")),
                f"{med(key, 'cpu') / med(key):.2f}",
                ", ".join(x["load"] for x in runs[key]),
            ]
        )
    header = ["run", "today", "wall", "range", "CPU", "CPU / wall", "load (1 min) before → after"]
    L.append(markdown_table(header, rows))
    L.append("")
    L.append(
        f"Speed-up of the second worker: {med('fine-1') / med('fine-2'):.2f}× at 0.01%, "
        f"{med('coarse-1') / med('coarse-2'):.2f}× at 0.1% (target ≥ 1.7×). Two workers can "
        "only be twice as fast when nothing else wants the second core: `CPU / wall` near 2 "
        "says both cores were had, near 1 that another process held one.\n"
    )
    d, g = s["floor"]["draw"], s["floor"]["gram"]
    L.append(
        f"**The floor.** The 0.01% run drew {s['blocks']:,} pooled blocks of {s['side']:,} rows × "
        f"512 ({s['blocks'] * s['side'] * 512:.3g} normal numbers). On one core of this machine, "
        f"in this run, one block's numbers take {d * 1e3:.2f} ms (Box-Muller, "
        f"{d / (s['side'] * 512) * 1e9:.2f} ns each) and its Gram matrix {g * 1e3:.2f} ms "
        f"(syrk, {s['side'] * 512 * 513 / 2 / g / 1e9:.0f}G multiply-adds a second): "
        f"{fmt_time(floor1)} for the run on one core, {fmt_time(floor1 / 2)} on two. The run "
        f"itself took {fmt_time(med('fine-1', 'cpu'))} of CPU with one worker: "
        f"{med('fine-1', 'cpu') / floor1:.2f}× the floor, of which "
        f"{fmt_time(s['blocks'] * s['stages']['whole chunk (draw_shared_chunk)'])} are the "
        "blocks' chunks as profiled below and the rest start-up, merging, intervals and "
        "output.\n"
    )
    L.append(profile(s))
    sl, ch, vec = r["samplers"]["slow"], r["samplers"]["cheap"], r["samplers"]["cheap-vectorised"]
    L.append("### A user's sampler: varcheck's time around each call\n")
    rows = []
    for x, label, today, target in (
        (sl, "attention layer (48 tokens, d_model 256), d_k 64", "slow-share", "≤ 5%, ≤ 50 µs"),
        (ch, "2,048 normal values", "cheap-share", "≤ 50 µs"),
        (vec, "2,048 normal values, vectorised (calls)", None, "–"),
    ):
        lo, hi = x["share_range"]
        rows.append(
            [
                label,
                f"{x['inside'] * 1e3:.3f} ms",
                TODAY[today] if today else "–",
                f"{x['per_run'] * 1e6:.1f} µs",
                f"{x['share']:.1%} ({lo:.1%}–{hi:.1%})",
                "–" if math.isnan(x["naive"]) else f"{x['naive'] * 1e6:.1f} µs",
                target,
            ]
        )
    header = ["sampler", "time in fn / run", "today", "varcheck / run", "share (range)"]
    L.append(markdown_table([*header, "naive loop / run", "target"], rows))
    L.append(
        "\n`varcheck / run` is (CPU time of `verify` − CPU time inside the sampler) / runs, the "
        "pilot's runs included, so it also carries `verify`'s fixed cost (arguments, claim, "
        "interval) spread over the runs; `naive loop / run` is the same for the bare loop "
        "described at the top of bench/headline.py, over as many runs: what any correct loop "
        "pays for a generator per run and the two reductions.\n"
    )
    return "\n".join(L)


def profile(s: dict[str, Any]) -> str:
    """The 0.01% sweep's time per block by stage, and why its floor is where it is."""
    st = dict(s["stages"])
    whole = st.pop("whole chunk (draw_shared_chunk)")
    rows = [[name, f"{t * 1e3:.2f} ms", f"{t / whole:.0%}"] for name, t in st.items()]
    rows.append(["whole chunk (draw_shared_chunk)", f"{whole * 1e3:.2f} ms", "100%"])
    side, numbers = s["side"], s["side"] * 512
    d, g = s["floor"]["draw"] / numbers, s["floor"]["gram"] / numbers
    # relative variance of one pooled block's estimate at d_k = W = 512, normal entries:
    # 2(2(P-2)ζ_q + ζ₂)/(P(P-1)d²) with ζ_q = 2d, ζ₂ = 2d² + 6d, about 8/(P d) + 4/P²
    target = (1e-4 / 1.959964) ** 2
    needed = (8.0 + 4.0 * 512 / side) / target
    least = 8.0 / target
    floor = s["floor"]["draw"] + s["floor"]["gram"]
    L = ["### Where the fine sweep's time goes\n"]
    L.append(
        f"One block of the 0.01% plan ({side:,} rows × 512, float32, one pool, one full Gram "
        "matrix) on one core, by stage (medians of 9; stages timed apart, so they need not add "
        "up to the whole chunk):\n"
    )
    L.append(markdown_table(["stage", "time", "of the chunk"], rows))
    L.append(
        f"\nTwo stages are the floor, and the rest is {1 - floor / whole:.0%} of a block. "
        f"**Random numbers**: Box-Muller costs {d * 1e9:.2f} ns a number here, about half of "
        "it the bit generator's own uniforms (SFC64, numpy's fastest); it is exact, and a "
        "faster transform would change every float32 run's numbers (golden outputs included). "
        f"**Gram matrix**: a block of P rows × W columns needs P·W²/2 multiply-adds, W/2 = 256 "
        f"per number drawn, {g * 1e9:.2f} ns a number at this machine's single-core rate; "
        "forming the products instead costs P²W/2, more whenever P > W.\n\n"
        "**How many numbers.** Every block is a U-statistic over all pairs of its rows, the "
        "minimum-variance unbiased estimator of E[(q·k)²] for any entry law; its relative "
        "variance at d_k = W is about 8/(P·W) + 4/P² for normal entries. The first term is "
        "the spread of the rows' squared norms, fixed per number drawn: no estimator that "
        "does not assume the law's variance does better. So the run needs about "
        f"(8 + 4W/P)/(h/z)² = {needed:.3g} numbers for h = 0.01% at P = {side:,}, times the "
        f"first round's margin of 1.3 ({needed * 1.3:.3g}), and at least {least:.3g} with no "
        f"margin and P unbounded: {fmt_time(least * (d + g))} on one core, "
        f"{fmt_time(least * (d + g) / 2)} on two perfectly shared cores. A 15 s sweep on two "
        "cores is at that absolute floor; with the calibrated margin it is "
        f"{fmt_time(needed * 1.3 * (d + g) / 2)}. Larger blocks (P capped at 2^20 / W numbers "
        "today) would remove the 4W/P term, at most "
        f"{4 * 512 / side / (8 + 4 * 512 / side):.0%} of the numbers, and cost cache misses; "
        "a first round sized to three standard errors of the width at the actual number of "
        "blocks, instead of 1.3 (three standard errors at 200 blocks), would save about a "
        "sixth, but changes the stopping rule that docs/calibration.md calibrates.\n"
    )
    return "\n".join(L)


def write_docs(section: str) -> Path:
    """Put ``section`` in docs/performance.md before the sampler section, replacing a copy."""
    from sampler import HEADING as SAMPLER_HEADING

    path = REPO / "docs" / "performance.md"
    text = path.read_text()
    start = text.find(HEADING)
    if start >= 0:
        end = text.find("\n## ", start + len(HEADING))
        text = text[:start] + (text[end + 1 :] if end >= 0 else "")
    at = text.find(SAMPLER_HEADING)
    at = len(text) if at < 0 else at
    path.write_text(text[:at].rstrip("\n") + "\n\n" + section + "\n" + text[at:])
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one run of each sweep")
    ap.add_argument("--json", metavar="FILE", help="also write all raw results as JSON")
    ap.add_argument("--write-docs", action="store_true", help="(re)write the docs section")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    r: dict[str, Any] = {"machine": machine_info()}
    r["samplers"] = samplers(3 if args.quick else 5)
    r["sweeps"] = sweeps(1 if args.quick else 2)
    r["seconds"] = time.perf_counter() - started
    text = report(r)
    print(text)
    if args.json:
        for runs in r["sweeps"]["runs"].values():
            for x in runs:
                x.pop("json", None)
        Path(args.json).write_text(json.dumps(r, indent=1, default=str))
    if args.write_docs:
        say(f"wrote {write_docs(text).relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
