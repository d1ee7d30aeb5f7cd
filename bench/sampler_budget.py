"""Coverage of a user sampler's interval with skewed and heavy-tailed values, measured by hand.

    nice .venv/bin/python bench/sampler_budget.py [--seeds 400] [--laws lognormal,t5,...]
        [--factor C ...] [--adaptive] [--check]

Each seed draws ``calls`` independent calls of ``per_call`` i.i.d. values and builds the interval
that :func:`varcheck.core.sampler_blocks.estimate_sampler` builds from them (per-call means m and
mean squares a, the influence values a - 2·mean(m)·m, Hall's skewness-corrected t on calls - 1
degrees of freedom), vectorised over seeds: the sampler path itself costs about a second per seed
at 10^5 values. ``--check`` first compares the vectorised interval with
:class:`~varcheck.core.estimation.BlockAccumulator` and :func:`~varcheck.core.estimation.summarise`
on the same calls.

For each configuration it prints the coverage of the true variance with its Clopper-Pearson 95%
interval, the intervals lying below the truth, and the median sample kurtosis and squared
skewness of the influence values. ``--factor C`` adds, for a candidate budget rule "calls >=
C · (kurtosis + skewness^2) of the influence values", the share of runs it would call unreliable,
the share that cover or are called unreliable, and the coverage of the runs it accepts: the rule
is not applied by varcheck (docs/own-code.md, "Values with heavy tails", says why).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.special import stdtrit
from scipy.stats import beta

#: name -> (draw(rng, shape), exact variance)
LAWS = {
    "lognormal": (lambda r, s: r.lognormal(0.0, 1.0, s), math.exp(2.0) - math.exp(1.0)),
    "t5": (lambda r, s: r.standard_t(5, s), 5.0 / 3.0),
    "laplace": (lambda r, s: r.laplace(0.0, 1.0, s), 2.0),
    "normal": (lambda r, s: r.standard_normal(s), 1.0),
}
BUDGETS = [(1, 50), (1, 200), (1, 1563), (1, 15625), (64, 50), (64, 200), (64, 1563), (64, 15625)]


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    low = float(beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    high = float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return low, high


def intervals(m: np.ndarray, a: np.ndarray) -> dict[str, np.ndarray]:
    """Estimate, 95% interval, skewness and kurtosis of the influence values, per row of calls."""
    calls = m.shape[1]
    mean_m, var_m = m.mean(1), m.var(1, ddof=1)
    est = a.mean(1) - mean_m**2 + var_m / calls
    psi = a - 2.0 * mean_m[:, None] * m
    d = psi - psi.mean(1)[:, None]
    var = (d**2).sum(1) / (calls - 1)
    se = np.sqrt((np.maximum(var, 0.0) + 2.0 * var_m**2 / (calls - 1)) / calls)
    sd = np.sqrt(var)
    skew = np.divide((d**3).mean(1), sd**3, out=np.zeros_like(sd), where=sd > 0)
    kurt = (d**4).mean(1) / np.maximum((d**2).mean(1), 1e-300) ** 2
    tq = float(stdtrit(calls - 1, 0.975))
    c = skew / (3.0 * math.sqrt(calls))  # Hall's a; b = c / 2

    def inverse(y: float) -> np.ndarray:
        safe = np.where(np.abs(c) < 1e-300, 1.0, c)
        return np.where(
            np.abs(c) < 1e-300, y - c / 2, (np.cbrt(1 + 3 * c * (y - c / 2)) - 1) / safe
        )

    return {
        "est": est,
        "low": est - se * inverse(tq),
        "high": est - se * inverse(-tq),
        "skew": skew,
        "kurt": kurt,
    }


def measure(law: str, per_call: int, calls: int, seeds: int) -> dict[str, np.ndarray]:
    draw, _ = LAWS[law]
    rng = np.random.default_rng([per_call, calls, len(law)])
    step = max(1, int(2e7 // (per_call * calls)))
    parts = []
    for start in range(0, seeds, step):
        x = draw(rng, (min(step, seeds - start), calls, per_call))
        parts.append(intervals(x.mean(2), (x * x).mean(2)))
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def adaptive(
    law: str, per_call: int, precision: float, factor: float, seed: int, cap: int = 4_000_000
) -> tuple[bool, int, bool]:
    """One adaptive run as :func:`~varcheck.core.estimation.draw_rounds` draws it: 200 calls,
    then rounds of ``(width / precision)^2`` times the calls so far (+10%, at most 16 times),
    and with ``factor`` > 0 at least the candidate floor ``factor · (kurtosis + skewness^2)``
    calls, re-estimated after each round. Returns (covers, calls, floor reached); ``cap`` values
    stand in for ``--max-seconds``."""
    draw, truth = LAWS[law]
    rng = np.random.default_rng([seed, per_call, len(law)])
    ms: list[np.ndarray] = []
    as_: list[np.ndarray] = []
    target, drawn = 200, 0
    while True:
        x = draw(rng, (target - drawn, per_call))
        ms.append(x.mean(1))
        as_.append((x * x).mean(1))
        drawn = target
        r = intervals(np.concatenate(ms)[None], np.concatenate(as_)[None])
        est, low, high = r["est"][0], r["low"][0], r["high"][0]
        width = (high - low) / (2 * est) if est > 0 else math.inf
        floor = factor * (r["kurt"][0] + r["skew"][0] ** 2)
        reached = width <= precision
        if (reached and drawn >= floor) or drawn * per_call >= cap:
            return bool(low <= truth <= high), drawn, drawn >= floor
        grow = (width / precision) ** 2 * 1.1 if math.isfinite(width) else math.inf
        more = 0 if reached else math.ceil(drawn * min(grow, 16.0))
        target = int(max(more, math.ceil(floor), drawn + 1))


def adaptive_table(laws: list[str], seeds: int, factors: list[float]) -> None:
    print(
        "| law | values/call | precision | C | coverage [95% CI] | capped | calls (median, max) |"
    )
    print("|---|---:|---:|---:|---|---:|---|")
    for law in laws:
        for per_call, precision in [(64, 0.05), (64, 0.02), (1, 0.05), (1, 0.02)]:
            for factor in [0.0, *factors]:
                runs = [adaptive(law, per_call, precision, factor, s) for s in range(seeds)]
                cover = np.array([r[0] for r in runs])
                calls = np.array([r[1] for r in runs])
                capped = 1.0 - np.mean([r[2] for r in runs])
                low, high = clopper_pearson(int(cover.sum()), seeds)
                print(
                    f"| {law} | {per_call} | {precision:g} | {factor:g} | {cover.mean():.1%} "
                    f"[{low:.1%}, {high:.1%}] | {capped:.1%} | {int(np.median(calls)):,}, "
                    f"{calls.max():,} |",
                    flush=True,
                )


def check() -> None:
    """The vectorised interval against the library's accumulator, on the same calls."""
    from varcheck.core.estimation import BlockAccumulator, summarise

    x = np.random.default_rng(1).lognormal(0.0, 1.0, (1, 300, 8))
    m, a = x.mean(2), (x * x).mean(2)
    acc = BlockAccumulator()
    acc.add(m[0], a[0])
    lib = summarise(
        acc,
        confidence=0.95,
        method="hall",
        products_per_block=8,
        block_side=0,
        stop_reason="samples",
    )
    mine = intervals(m, a)
    got = (mine["est"][0], mine["low"][0], mine["high"][0])
    want = (lib.var, *lib.confidence_interval)
    assert np.allclose(got, want, rtol=1e-9), (got, want)
    print("vectorised interval = library interval:", [f"{v:.6g}" for v in want])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=400)
    parser.add_argument("--laws", default=",".join(LAWS))
    parser.add_argument("--factor", type=float, action="append", default=[])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--adaptive", action="store_true", help="adaptive runs instead")
    args = parser.parse_args()
    if args.check:
        check()
    if args.adaptive:
        adaptive_table(args.laws.split(","), args.seeds, args.factor)
        return
    head = "| law | values/call | calls | coverage [95% CI] | below | kurtosis | skew² |"
    extra = "".join(
        f" C={c:g}: unreliable / covered or unreliable / accepted cover |" for c in args.factor
    )
    print(head + extra)
    print("|---" * (head.count("|") - 1 + len(args.factor)) + "|")
    for law in args.laws.split(","):
        for per_call, calls in BUDGETS:
            r = measure(law, per_call, calls, args.seeds)
            truth = LAWS[law][1]
            cover = (r["low"] <= truth) & (truth <= r["high"])
            low, high = clopper_pearson(int(cover.sum()), args.seeds)
            row = (
                f"| {law} | {per_call} | {calls:,} | {cover.mean():.1%} [{low:.1%}, {high:.1%}] "
                f"| {int((r['high'] < truth).sum())} | {np.median(r['kurt']):.0f} "
                f"| {np.median(r['skew'] ** 2):.0f} |"
            )
            for c in args.factor:
                flag = calls < c * (r["kurt"] + r["skew"] ** 2)
                kept = cover[~flag].mean() if (~flag).any() else math.nan
                row += f" {flag.mean():.0%} / {(cover | flag).mean():.1%} / {kept:.1%} |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
