"""``varcheck probe``: its wall time as a whole process, and (``--part``) the longer runs
behind docs/probe.md's thresholds.

Usage::

    .venv/bin/python bench/probe.py            # about 10 s; prints markdown
    .venv/bin/python bench/probe.py --json out.json
    .venv/bin/python bench/probe.py --part rounding      # curvature and slope bias of rounding
    .venv/bin/python bench/probe.py --part calibration   # the suite's rates over 10x the seeds
    .venv/bin/python bench/probe.py --part budgets       # each head's test at 20..200 calls
    .venv/bin/python bench/probe.py --part designs       # small designs at 200 calls

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


def _curvature(err, logits):  # noqa: ANN001, ANN202
    """Relative size of the quadratic and cubic terms, and the slope's relative bias, of a
    log-weight error ``err`` (a function of the logits) fitted as the probe fits them."""
    import numpy as np

    design = np.stack([np.ones_like(logits), logits, logits**2, logits**3], axis=1)
    coef = np.linalg.lstsq(design, logits + err, rcond=None)[0]
    curve = coef[2] * (logits**2 - (logits**2).mean()) + coef[3] * logits**3
    slope_bias = float((logits * err).sum() / (logits * logits).sum())
    return float(np.sqrt((curve**2).mean() / (coef[1] ** 2 * (logits**2).mean()))), slope_bias


def rounding() -> None:
    """The curvature and slope bias that rounding logits of sd 1 to a format gives, for
    round-to-nearest-even and for truncation, in units of the format's unit roundoff."""
    import numpy as np

    from varcheck.core.probe.formats import FORMATS
    from varcheck.core.probe.weights import rounded

    logits = np.random.default_rng(0).standard_normal(2_000_000)

    def truncate(x: np.ndarray, bits: int) -> np.ndarray:
        keep = np.uint32((0xFFFFFFFF << bits) & 0xFFFFFFFF)
        return (x.astype(np.float32).view(np.uint32) & keep).view(np.float32).astype(float)

    cases = {
        ("float16", "nearest"): lambda x: x.astype(np.float16).astype(float),
        ("float16", "truncated"): lambda x: truncate(x, 13),
        ("bfloat16", "nearest"): lambda x: rounded(x, "bfloat16").astype(float),
        ("bfloat16", "truncated"): lambda x: truncate(x, 16),
        ("float32", "nearest"): lambda x: x.astype(np.float32).astype(float),
    }
    print("| format | rounding | curvature / u | slope bias / u |\n|---|---|---:|---:|")
    for (fmt, mode), fn in cases.items():
        curve, bias = _curvature(fn(logits) - logits, logits)
        u = FORMATS[fmt].u
        print(f"| {fmt} | {mode} | {curve / u:.3g} | {bias / u:.3g} |")


def calibration() -> None:
    """The statistical tests of tests/test_probe_readings.py and test_probe_family.py over ten
    times their seeds (about 2 min on one core)."""
    import dataclasses
    import functools
    import math

    from scipy import stats

    sys.path.insert(0, str(ROOT / "tests" / "data" / "kernels"))
    sys.path.insert(0, str(ROOT / "examples"))
    import attention_kernels as ak
    import reading_kernels as rk

    import varcheck
    from varcheck.core.probe import judge
    from varcheck.core.probe.measure import measure
    from varcheck.core.probe.target import as_kernel
    from varcheck.kernels.probe import judge_rows

    kw = {"layout": "bhnd", "heads": 200, "queries": 8, "keys": 12, "dv": 8, "samples": 200}
    missed = sum(
        sum(
            h.raw_p_value < 0.05
            for h in varcheck.probe(rk.noisy_causal, 16, causal=True, seed=s, **kw).per_head
        )
        for s in range(10)
    )
    ci = stats.binomtest(missed, 2000).proportion_ci()
    print(
        f"causal, d_v < keys: {missed}/2000 missed ({missed / 20:.2f}%, 95% CI "
        f"{100 * ci.low:.2f}..{100 * ci.high:.2f}%)"
    )
    half = {
        "layout": "bnhd",
        "heads": 4,
        "queries": 16,
        "keys": 24,
        "dv": 16,
        "samples": 20,
        "dtype": "float16",
    }
    curved = sum(
        varcheck.probe(rk.multihead_half, 64, seed=s, **half).diagnostics.nonlinear
        for s in range(200)
    )
    capped = functools.partial(rk.multihead_half, cap=50.0)
    named = sum(
        varcheck.probe(capped, 64, seed=s, **half).diagnostics.nonlinear for s in range(200)
    )
    print(f"float16 multi-head: curved in {curved}/200 seeds; cap 50 named in {named}/200")
    kernel, dks, batches, runs = as_kernel(ak.noisy, {"noise": 0.1}), (2, 4, 8, 16), 10, 400
    failing = 0
    for batch in range(batches):
        measured = [
            measure(
                kernel,
                judge.design(dk, 8, 8, 2 * runs, None, "bhnd", None),
                expected=1 / math.sqrt(dk),
                seed=100 + batch,
                confidence=0.95,
                precision=None,
                calls=200,
                max_seconds=None,
            )
            for dk in dks
        ]
        for r in range(runs):
            group = [dataclasses.replace(m, heads=m.heads[2 * r : 2 * r + 2]) for m in measured]
            rows = judge_rows(
                group, [1 / math.sqrt(dk) for dk in dks], confidence=0.95, tolerance=None
            )
            failing += any(d.outcome == "fail" for _, (d, _p) in rows)
    total = batches * runs
    ci = stats.binomtest(failing, total).proportion_ci()
    rate, low, high = (100 * x for x in (failing / total, ci.low, ci.high))
    print(
        f"4 d_k x 2 heads: a failing row in {failing}/{total} runs ({rate:.2f}%, 95% CI "
        f"{low:.2f}..{high:.2f}%)"
    )


def _logits_in_float16(q, k, v):  # noqa: ANN001, ANN202
    """Exact but for its logits, rounded to float16 (nearest) before a float64 softmax: no
    noise, and weights that fill float64's mantissas, so no floor hides the rounding."""
    import numpy as np

    from varcheck.core.probe.weights import rounded

    x = rounded(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), "float16").astype(float)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ v


#: (name, kernel, its arguments, d_k, queries, keys, d_v, heads per measurement, measurements):
#: the configurations of ``--part budgets``; 8 x 8 is the smallest design the suite uses, 48 x 80
#: the default. A pilot that finds one head curved reads every head with the degree-5 model (and
#: its floor), so kernels whose rounding is sometimes read as a curve get one head per
#: measurement: each replicate is then a whole one-head probe.
BUDGET_CASES = (
    ("logit noise 0.1", "noisy", {"noise": 0.1}, 2, 8, 8, None, 200, 10),
    ("logit noise 0.1", "noisy", {"noise": 0.1}, 16, 8, 8, None, 200, 10),
    ("logit noise 0.1", "noisy", {"noise": 0.1}, 64, 48, 80, None, 100, 10),
    ("causal, logit noise 0.1", "noisy_causal", None, 16, 8, 12, 8, 200, 10),
    ("logits rounded to float16", "rounded", None, 2, 8, 8, None, 1, 2000),
    ("logits rounded to float16", "rounded", None, 16, 8, 8, None, 1, 2000),
    ("logits rounded to float16", "rounded", None, 64, 48, 80, None, 1, 1000),
    ("float16 throughout", "half_precision", None, 2, 8, 8, None, 200, 10),
)
#: fixed budgets of ``--part budgets`` (calls), and the relative tolerance of its TOST claims
BUDGETS, TOST = (20, 50, 100, 200), 0.05


def _budget_counts(kernel, design, truth: float, calls: int, seed: int) -> list[int]:  # noqa: ANN001
    """Of one measurement's heads (independent replicates): the intervals missing ``truth``
    below and above it, the TOST passes of a claim whose band has ``truth`` on its lower and on
    its upper edge (each should happen at most alpha = 5% of the time; raw tests), and the
    heads whose pilot found a curve."""
    from varcheck.core.probe import judge
    from varcheck.core.probe.measure import measure
    from varcheck.core.verdicts import claim_p_values

    m = measure(
        kernel,
        design,
        expected=truth,
        seed=seed,
        confidence=0.95,
        precision=None,
        calls=calls,
        max_seconds=None,
    )
    counts = [0, 0, 0, 0, sum(h.curved for h in m.structure)]
    for h in m.heads:
        counts[0] += h.confidence_interval.high < truth
        counts[1] += h.confidence_interval.low > truth
        for i, claim in ((2, truth / (1 - TOST)), (3, truth / (1 + TOST))):
            p = claim_p_values(h, h.scale, claim, TOST)
            d = judge.decide_head(h, claim, p, alpha=0.05, tolerance=TOST)
            counts[i] += d.outcome == "pass"
    return counts


def _budget_line(case: tuple, calls: int, totals: list[int]) -> str:
    """One row of ``--part budgets``' table."""
    from scipy import stats

    name, _, _, dk, n, m, dv, per, runs = case
    replicates, missed = per * runs, totals[0] + totals[1]
    ci = stats.binomtest(missed, replicates).proportion_ci()
    shape = f"{n} × {m}" + ("" if dv is None else f", d_v {dv}")
    return (
        f"| {name} | {dk} | {shape} | {calls} | {replicates} | {missed} ({totals[0]}/{totals[1]})"
        f" | {100 * missed / replicates:.2f}% ({100 * ci.low:.2f}–{100 * ci.high:.2f}%) | "
        f"{totals[2]}/{totals[3]} | {totals[4]} |"
    )


def budgets() -> None:
    """Each head's test at fixed budgets of 20 to 200 calls: the rate at which a correct
    kernel's interval misses its scale (a false fail) and at which a TOST claim whose band has
    the true scale on an edge passes (a false pass), over independent replicates (the heads of
    a probe; measurement b at seed 100 + b)."""
    import math

    sys.path.insert(0, str(ROOT / "tests" / "data" / "kernels"))
    sys.path.insert(0, str(ROOT / "examples"))
    import attention_kernels as ak
    import reading_kernels as rk

    from varcheck.core.probe import judge
    from varcheck.core.probe.target import as_kernel

    kernels = {
        "noisy": ak.noisy,
        "half_precision": ak.half_precision,
        "noisy_causal": rk.noisy_causal,
        "rounded": _logits_in_float16,
    }
    print(
        "| kernel | d_k | n × m | calls | replicates | misses (below/above) | rate (95% CI) "
        f"| TOST ±{TOST:g} passes (lower/upper edge) | read as curved |"
    )
    print("|---|---:|---|---:|---:|---|---|---|---:|")
    for case in BUDGET_CASES:
        _, key, args, dk, n, m, dv, per, runs = case
        kernel, truth = as_kernel(kernels[key], args), 1 / math.sqrt(dk)
        design = judge.design(dk, n, m, per, dv, "bhnd", None)
        for calls in BUDGETS:
            totals = [0] * 5
            for run in range(runs):
                got = _budget_counts(kernel, design, truth, calls, 100 + run)
                totals = [a + b for a, b in zip(totals, got, strict=True)]
            print(_budget_line(case, calls, totals), flush=True)


#: (d_k, queries, keys, calls) of ``--part designs``: small designs around the tail exponent's
#: threshold (varcheck.core.probe.budget), 2000 replicates each
DESIGN_CASES = (
    (2, 8, 2, 200),
    (2, 2, 4, 200),
    (2, 2, 4, 1000),
    (2, 2, 9, 200),
    (2, 3, 4, 200),
    (16, 2, 4, 200),
    (1, 8, 8, 200),
    (2, 4, 4, 200),
    (2, 8, 4, 200),
    (2, 4, 8, 200),
    (2, 5, 5, 200),
    (2, 6, 6, 200),
    (2, 7, 7, 200),
    (16, 2, 7, 200),
    (16, 3, 5, 200),
    (4, 3, 5, 200),
    (1, 13, 13, 200),
    (2, 8, 8, 200),
)


def designs() -> None:
    """Each head's interval at small designs, at 200 calls (and 1000 for one): the rate at which
    a noisy correct kernel's 95% interval misses its scale, against the design's tail exponent
    a (replicates: the heads of two measurements of 1000, seeds 0 and 1)."""
    import math

    from scipy import stats

    sys.path.insert(0, str(ROOT / "examples"))
    import attention_kernels as ak

    from varcheck.core.probe import judge
    from varcheck.core.probe.budget import tail_exponent
    from varcheck.core.probe.target import as_kernel

    kernel = as_kernel(ak.noisy, {"noise": 0.1})
    print(
        "| d_k | n × m | tail exponent a | calls | replicates | misses (below/above) | rate "
        "(95% CI) |\n|---:|---|---:|---:|---:|---|---|"
    )
    for dk, n, m, calls in DESIGN_CASES:
        truth, design = 1 / math.sqrt(dk), judge.design(dk, n, m, 1000, None, "bhnd", None)
        totals = [0] * 5
        for seed in range(2):
            got = _budget_counts(kernel, design, truth, calls, seed)
            totals = [a + b for a, b in zip(totals, got, strict=True)]
        missed = totals[0] + totals[1]
        ci = stats.binomtest(missed, 2000).proportion_ci()
        print(
            f"| {dk} | {n} × {m} | {tail_exponent(n, m, dk):g} | {calls} | 2000 | {missed} "
            f"({totals[0]}/{totals[1]}) | {missed / 20:.2f}% ({100 * ci.low:.2f}–"
            f"{100 * ci.high:.2f}%) |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument(
        "--part",
        choices=("speed", "rounding", "calibration", "budgets", "designs"),
        default="speed",
    )
    opts = parser.parse_args()
    if opts.part != "speed":
        parts = {
            "rounding": rounding,
            "calibration": calibration,
            "budgets": budgets,
            "designs": designs,
        }
        parts[opts.part]()
        return
    rows = []
    for name, (args, target) in CASES.items():
        wall = _time(args, opts.repeats)
        rows.append({"case": name, "wall_s": wall, "target_s": target, "met": wall < target})
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"`varcheck probe {KERNEL}` as a whole process (median of {opts.repeats}; "
        f"load average {load:.2f}, {os.cpu_count()} cores)\n"
    )
    print("| case | wall (s) | target (s) | met |\n|---|---:|---:|---|")
    for r in rows:
        print(f"| {r['case']} | {r['wall_s']:.2f} | {r['target_s']:.0f} | {r['met']} |")
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
