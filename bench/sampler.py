"""varcheck on a user's sampler: its own overhead, and calls used against calls needed.

Usage::

    .venv/bin/python bench/sampler.py                # about 30-45 s on 2 cores; prints markdown
    .venv/bin/python bench/sampler.py --json out.json
    .venv/bin/python bench/sampler.py --write-docs   # also (re)write its section of
                                                     # docs/performance.md, kept last

For each sampler, at the default precision (1%) and confidence 0.95:

1. **Overhead.** ``varcheck.verify(dk, claim=1, sampler=fn, seed=s)`` runs with ``fn`` wrapped by
   a timer that sums ``perf_counter`` around every call (the pilot call included). The overhead
   is (wall time - time inside fn) / time inside fn, median over a few seeds, in a warm process.
2. **Calls used against calls needed.** A separate pilot of many calls (its own seed) estimates
   what varcheck's interval is built from: per call, m = mean of the values and a = mean of their
   squares; the influence values psi = a - 2 mean(m) m, their sd and skewness, and Var(m). The
   interval at n calls is Hall's skewness-corrected t-interval (``hall_interval``) around V with
   SE(n) = sqrt((sd(psi)^2 + 2 Var(m)^2 / (n - 1)) / n) and Student's t on n - 1 df, exactly as
   ``block_interval`` and ``variance_and_se`` build it; ``n_needed`` is the smallest n whose
   relative half-width is at most the precision (first order: (z sd(psi) / (h V))^2). The target
   is max(200, n_needed), 200 being the minimum number of calls behind any interval.

Nothing here asserts; targets (overhead < 10%, calls / target <= 1.3) are reported as met or
missed. ``OPENBLAS_NUM_THREADS`` is set to 1 unless given, as the CLI does.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import math
import statistics
import sys
import time
import timeit
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from _common import REPO, machine_info, markdown_table

import varcheck
from varcheck.core import estimation as est
from varcheck.core.user_code import UserSampler, as_sampler, load_sampler

SEED = 20240607
PILOT_SEED = 7
PRECISION = 0.01
CONFIDENCE = 0.95
TARGET_OVERHEAD = 0.10
TARGET_RATIO = 1.3
HEADING = "## A user's sampler: overhead and calls (bench/sampler.py)"


def iid_normal(rng: np.random.Generator, dk: int, size: int = 4096) -> np.ndarray:
    """``size`` independent standard normal values (``dk`` is ignored): the cheapest sampler."""
    return rng.standard_normal(size)


@dataclass(frozen=True)
class Case:
    """One sampler to measure: where it is, its arguments, d_k, and how hard to measure it."""

    name: str
    target: str
    args: dict[str, Any] = field(default_factory=dict)
    dk: int = 16
    pilot: int = 5000
    repeats: int = 5


CASES = [
    Case("attention logits, d_k 16", "examples/attention.py:logits", dk=16, pilot=2000, repeats=7),
    Case("attention logits, d_k 64", "examples/attention.py:logits", dk=64, pilot=1000, repeats=3),
    Case("iid normal, 4096 values", "iid_normal", {"size": 4096}, repeats=15),
    Case(
        "big attention (128 tokens, d_model 512), d_k 64",
        "examples/attention.py:logits",
        {"tokens": 128, "d_model": 512},
        dk=64,
        pilot=300,
        repeats=3,
    ),
    Case(
        "small attention (8 tokens, 1 head), d_k 16",
        "examples/attention.py:logits",
        {"tokens": 8, "heads": 1},
        repeats=9,
    ),
    Case("iid normal, 256 values", "iid_normal", {"size": 256}, pilot=20000, repeats=40),
    Case("iid normal, 16 values", "iid_normal", {"size": 16}, pilot=20000, repeats=20),
]


def load(case: Case) -> UserSampler:
    """The case's sampler, loaded as a user's would be (a file path is read from the repo)."""
    if case.target == "iid_normal":
        return as_sampler(iid_normal, case.args)
    return load_sampler(case.target, case.args, base=str(REPO))


def pilot_moments(fn: UserSampler, dk: int, calls: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-call mean of the values and of their squares over ``calls`` independent calls."""
    children = np.random.SeedSequence(PILOT_SEED).spawn(calls)
    m, a = np.empty(calls), np.empty(calls)
    for i, child in enumerate(children):
        x = np.asarray(fn(np.random.default_rng(child), dk), dtype=np.float64).ravel()
        m[i], a[i] = x.mean(), np.dot(x, x) / x.size
    return m, a


def calls_needed(m: np.ndarray, a: np.ndarray) -> dict[str, float]:
    """Calls the block interval needs to reach ``PRECISION`` at ``CONFIDENCE``, from a pilot.

    Plugs the pilot's V, sd(psi), Var(m) and skewness of psi into the interval varcheck builds
    at n calls and finds the smallest n whose relative half-width is at most the precision.
    """
    n_p = m.size
    var_m = float(m.var(ddof=1))
    var = float(a.mean() - m.mean() ** 2 + var_m / n_p)
    psi = a - 2.0 * m.mean() * m
    sd = float(psi.std(ddof=1))
    skew = float(np.mean((psi - psi.mean()) ** 3)) / sd**3

    def width(n: int) -> float:
        se = math.sqrt((sd * sd + 2.0 * var_m * var_m / (n - 1)) / n)
        tq = est.t_quantile(CONFIDENCE, n - 1)
        return est.relative_half_width(var, est.hall_interval(var, se, skew, n, tq))

    lo, hi = 2, 4
    while width(hi) > PRECISION:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # the width falls with n: smallest n at or under the precision
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if width(mid) > PRECISION else (lo, mid)
    z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2.0)
    return {
        "var": var,
        "sd_psi_over_var": sd / var,
        "skew_psi": skew,
        "n_first_order": (z * sd / (PRECISION * var)) ** 2,
        "n_needed": hi,
        "target": max(est.MIN_BLOCKS, hi),
    }


def timed_verify(fn: UserSampler, dk: int, seed: int) -> dict[str, float]:
    """One ``verify`` with the sampler wrapped by a timer: wall and CPU time, inside and out.

    CPU time (this thread's: the sampler runs on it) is not inflated when other processes
    take the core, which on a busy machine can make the wall-time overhead swing by several
    times between runs.
    """
    inside = [0.0, 0.0, 0]

    def timed(rng: np.random.Generator, dk: int) -> Any:
        t0, c0 = time.perf_counter(), time.thread_time()
        out = fn(rng, dk)
        inside[0] += time.perf_counter() - t0
        inside[1] += time.thread_time() - c0
        inside[2] += 1
        return out

    t0, c0 = time.perf_counter(), time.thread_time()
    res = varcheck.verify(dk, claim=1, sampler=timed, seed=seed)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    return {
        "wall": wall,
        "inside": inside[0],
        "cpu": cpu,
        "cpu_inside": inside[1],
        "sampler_calls": inside[2],
        "calls": res.raw.blocks,  # type: ignore[union-attr]
        "overhead": (wall - inside[0]) / inside[0],
        "cpu_overhead": (cpu - inside[1]) / inside[1],
        "overhead_us_per_call": 1e6 * (wall - inside[0]) / inside[2],
        "cpu_overhead_us_per_call": 1e6 * (cpu - inside[1]) / inside[2],
        "precision": res.raw.precision,  # type: ignore[union-attr]
    }


def measure(case: Case) -> dict[str, Any]:
    """Pilot, then ``case.repeats`` timed runs at seeds SEED, SEED + 1, ..."""
    fn = load(case)
    t0 = time.perf_counter()
    need = calls_needed(*pilot_moments(fn, case.dk, case.pilot))
    pilot_seconds = time.perf_counter() - t0
    runs = [timed_verify(fn, case.dk, SEED + r) for r in range(case.repeats)]
    calls = [r["calls"] for r in runs]
    overheads = [r["overhead"] for r in runs]
    cpu_overheads = [r["cpu_overhead"] for r in runs]
    ratios = [c / need["target"] for c in calls]
    return {
        "name": case.name,
        "label": fn.label,
        "dk": case.dk,
        "values_per_call": int(np.asarray(fn(np.random.default_rng(0), case.dk)).size),
        "pilot_calls": case.pilot,
        "pilot_seconds": pilot_seconds,
        **need,
        "runs": runs,
        "ms_per_call": 1e3 * statistics.median(r["inside"] / r["sampler_calls"] for r in runs),
        "overhead_median": statistics.median(overheads),
        "overhead_range": [min(overheads), max(overheads)],
        "overhead_us_per_call": statistics.median(r["overhead_us_per_call"] for r in runs),
        "cpu_overhead_median": statistics.median(cpu_overheads),
        "cpu_overhead_range": [min(cpu_overheads), max(cpu_overheads)],
        "cpu_overhead_us_per_call": statistics.median(r["cpu_overhead_us_per_call"] for r in runs),
        "calls_median": statistics.median(calls),
        "calls_range": [min(calls), max(calls)],
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "runs_over_target": sum(x > TARGET_RATIO for x in ratios),
    }


def unit_costs() -> dict[str, float]:
    """Microseconds of what ``sampler_chunk`` does around each call, for 4096 values."""
    root = np.random.SeedSequence(1)
    child = root.spawn(1)[0]
    x = np.random.default_rng(0).standard_normal(4096)
    reps = 2000

    def checks() -> None:
        y = np.asarray(x).astype(np.float64, copy=False).ravel()
        bool(np.isfinite(y).all())
        y = y - 0.1
        y.mean()
        np.dot(y, y)

    return {
        "spawn": 1e6 * timeit.timeit(lambda: root.spawn(200), number=20) / (20 * 200),
        "default_rng": 1e6
        * timeit.timeit(lambda: np.random.default_rng(child), number=reps)
        / reps,
        "checks_4096": 1e6 * timeit.timeit(checks, number=reps) / reps,
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _range(lo: float, hi: float, fmt: str) -> str:
    return f"{lo:{fmt}}–{hi:{fmt}}"


def tables(results: list[dict[str, Any]]) -> tuple[str, str]:
    """The overhead table and the calls table, in markdown."""
    over = markdown_table(
        [
            "sampler",
            "values / call",
            "time / call",
            "overhead",
            "range",
            "CPU overhead",
            "range",
            "per call",
            "< 10%",
        ],
        [
            [
                r["name"],
                str(r["values_per_call"]),
                f"{r['ms_per_call']:.3f} ms",
                _pct(r["overhead_median"]),
                _range(*(100 * x for x in r["overhead_range"]), ".1f") + "%",
                _pct(r["cpu_overhead_median"]),
                _range(*(100 * x for x in r["cpu_overhead_range"]), ".1f") + "%",
                f"{r['overhead_us_per_call']:.0f} / {r['cpu_overhead_us_per_call']:.0f} µs",
                "met" if r["overhead_median"] < TARGET_OVERHEAD else "**missed**",
            ]
            for r in results
        ],
    )
    calls = markdown_table(
        [
            "sampler",
            "sd(psi)/V",
            "n_needed",
            "target",
            "calls used",
            "range",
            "ratio",
            "range",
            "runs > 1.3×",
            "≤ 1.3×",
        ],
        [
            [
                r["name"],
                f"{r['sd_psi_over_var']:.4f}",
                f"{r['n_needed']} ({r['n_first_order']:.0f})",
                str(r["target"]),
                f"{r['calls_median']:g}",
                _range(*r["calls_range"], "d"),
                f"{r['ratio_median']:.2f}×",
                _range(*r["ratio_range"], ".2f"),
                f"{r['runs_over_target']}/{len(r['runs'])}",
                "met" if r["ratio_median"] <= TARGET_RATIO else "**missed**",
            ]
            for r in results
        ],
    )
    return over, calls


def report(r: dict[str, Any]) -> str:
    """This benchmark's section of docs/performance.md (it starts with ``HEADING``)."""
    m, u = r["machine"], r["unit_costs"]
    over, calls = tables(r["results"])
    runs = ", ".join(f"{x['repeats']}" for x in r["cases"])
    L = [f"{HEADING}\n"]
    L.append(
        "Generated by `.venv/bin/python bench/sampler.py --write-docs` (do not edit by hand); "
        f"{m['date']}, {m['cpu']}, {m['cores']} cores, load {m[_LOAD]} at start, "
        f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, numpy {m['numpy']}; "
        f"{r['seconds']:.0f} s. Each sampler is run by `varcheck.verify(dk, claim=1, "
        f"sampler=fn, seed=s)` at the default precision ({PRECISION:.0%}) and confidence "
        f"{CONFIDENCE}, seeds {SEED}, {SEED} + 1, ... ({runs} runs per sampler, in the order of "
        "the tables), in a warm process.\n"
    )
    L.append("### Overhead over the time inside the sampler\n")
    L.append(
        "fn is wrapped by a timer that sums `perf_counter` around every call (the pilot call "
        "included); overhead = (wall time of `verify` − time inside fn) / time inside fn, median "
        "and range over the runs (the target, < 10%, is judged on it). `CPU overhead` is the "
        "same with this thread's CPU time (`time.thread_time`), which other processes on the "
        "machine do not inflate: on a busy machine the wall-time figure of a short run swings "
        "by several times. `per call` is (wall − inside) / calls and the same in CPU time.\n"
    )
    L.append(over)
    L.append(
        f"\nAround every call `sampler_chunk` spawns a child `SeedSequence` "
        f"(≈{u['spawn']:.0f} µs each), builds a `default_rng` from it (≈{u['default_rng']:.0f} "
        f"µs) and checks and reduces the values (≈{u['checks_4096']:.0f} µs for 4096: "
        "`asarray`, `isfinite`, centring, mean, dot), measured here with `timeit`; the "
        "generator per call is what makes the result independent of how calls are split "
        "between chunks and workers. These 15–30 µs per call for up to a few thousand values "
        "(more for large outputs: the checks and reductions read every value), plus a "
        "fraction of a millisecond per `verify` (arguments, claim, interval), are the whole "
        "overhead: under 10% once a call takes a few hundred microseconds (every sampler above "
        "that initialises a layer of realistic size), over 10% for a tiny layer (8 tokens, one "
        "head: about 0.1 ms a call), and more than the sampler's own time for one that only "
        "draws numbers (a few µs to tens of µs a call).\n"
    )
    L.append("### Calls used against the calls the target width needs\n")
    L.append(
        "A separate pilot of many calls (seed "
        f"{PILOT_SEED}; {', '.join(str(x['pilot']) for x in r['cases'])} calls) gives per call "
        "m (mean of the values) and a (mean of their squares), the influence values "
        "psi = a − 2·mean(m)·m, V, sd(psi), Var(m) and the skewness of psi. `n_needed` is the "
        "smallest n at which the interval varcheck builds from them (Hall's skewness-corrected "
        "t-interval, `block_interval` with SE(n) = √((sd(psi)² + 2 Var(m)²/(n − 1))/n), t on "
        "n − 1 df) has a relative half-width ≤ 1%; in brackets the first-order "
        "(z·sd(psi)/(h·V))². The target is max(200, n_needed): no interval rests on fewer than "
        "200 calls. `calls used` excludes the one pilot call; ratio = calls used / target.\n"
    )
    L.append(calls)
    L.append(f"\n{_ROUNDS_TEXT}\n")
    return "\n".join(L) + "\n"


_LOAD = "load average (1/5/15 min) at start"

_ROUNDS_TEXT = (
    "Why the ratios are what they are (`draw_rounds` and `StopRule` in "
    "`varcheck/core/estimation.py`): the first round is 200 calls. If its half-width w is "
    "already ≤ 1%, the run stops there, so a sampler with n_needed below about 200 uses exactly "
    "200 calls (ratio 1: the four samplers of realistic size here). Otherwise the next round "
    "brings the total to (w / 1%)² × 1.1 times the calls so far, at most 16 times. That is "
    "n_needed as estimated from the calls so far, plus a deliberate 10% margin "
    "(`_OVERSHOOT`) so that noise in the estimate rarely leaves the run just short of the "
    "target. So expect a ratio of about 1.1 when n_needed > 200, spread by the noise of that "
    "estimate: its relative sd is about √((κ − 1)/n) after n calls, κ being psi's kurtosis "
    "(10–12% after 200 calls here). A run whose first estimate came out low stops short, and "
    "the round that follows adds its margin again to an estimate that is then biased high (it "
    "is made only when the width came out wide): those runs land at up to about 1.4×. The "
    "`runs > 1.3×` column counts them; the median is judged against the target. When the "
    "growth is capped (n_needed near or past 16 × 200 = 3200), a capped round of 3200 can end "
    "the run (the small attention sampler's longest runs), or a third round is sized "
    "from 3200 calls, whose estimate is good to ±3%, and lands near 1.1."
)


def write_docs(section: str) -> Path:
    """Put ``section`` at the end of docs/performance.md, replacing an earlier copy of it."""
    path = REPO / "docs" / "performance.md"
    text = path.read_text() if path.exists() else ""
    start = text.find(HEADING)
    if start >= 0:
        end = text.find("\n## ", start + len(HEADING))
        rest = text[end + 1 :] if end >= 0 else ""
        text = text[:start] + rest
    path.write_text(text.rstrip("\n") + "\n\n" + section)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="FILE", help="also write all raw results as JSON")
    ap.add_argument("--write-docs", action="store_true", help="(re)write the docs section")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    r: dict[str, Any] = {"machine": machine_info(), "cases": [vars(c) for c in CASES]}
    varcheck.verify(16, claim=1, sampler=iid_normal, seed=0)  # imports and caches, untimed
    r["unit_costs"] = unit_costs()
    r["results"] = []
    for case in CASES:
        r["results"].append(measure(case))
        x = r["results"][-1]
        print(
            f"{case.name}: overhead {_pct(x['overhead_median'])}, calls {x['calls_median']:g} "
            f"/ target {x['target']} = {x['ratio_median']:.2f}×",
            file=sys.stderr,
            flush=True,
        )
    r["seconds"] = time.perf_counter() - started
    text = report(r)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1, default=str))
    if args.write_docs:
        print(f"wrote {write_docs(text).relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
