"""Coverage of the default sweep over many seeds, measured by hand (not a test: too long for CI).

    .venv/bin/python bench/coverage.py [--seeds 4800] [--dk 2..512] [--precision 0.01]

For each seed, one ``varcheck.sweep`` with zero-mean normal entries (the default): whether each
row's 95% interval covers the exact variance, whether the growth-law interval covers the slope 1,
and whether any row was rejected (the family-wise false alarm, at most 5% by Holm). Prints the
counts, the rates with their binomial 95% intervals (Clopper-Pearson), and the two-sided
binomial p-value against 95%. The README quotes these figures.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from scipy.stats import binomtest


def _rate(k: int, n: int, p0: float) -> str:
    test = binomtest(k, n, p0)
    lo, hi = test.proportion_ci(0.95)
    return f"{k}/{n} = {100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}], p = {test.pvalue:.2g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4800)
    parser.add_argument("--dk", default="2..512")
    parser.add_argument("--precision", type=float, default=0.01)
    args = parser.parse_args(argv)

    import varcheck

    start = time.perf_counter()
    covered, slope, alarms, dks = None, 0, 0, None
    for seed in range(args.seeds):
        res = varcheck.sweep(args.dk, seed=seed, precision=args.precision)
        if covered is None:
            dks = [r.dk for r in res.rows]
            covered = np.zeros(len(dks), dtype=int)
        for i, row in enumerate(res.rows):
            lo, hi = row.estimate.confidence_interval
            covered[i] += lo <= row.theory.var <= hi
        lo, hi = res.fit.confidence_interval
        slope += lo <= 1.0 <= hi
        alarms += any(r.verdict == "rejected" for r in res.rows)
    n = args.seeds
    print(f"default sweep --dk {args.dk} at precision {args.precision}, seeds 0..{n - 1}")
    for dk, k in zip(dks, covered, strict=True):
        print(f"  d_k = {dk:4d}: coverage {_rate(int(k), n, 0.95)}")
    print(f"  all rows pooled: {100 * covered.sum() / (n * len(dks)):.1f}%")
    print(f"  growth slope: coverage {_rate(slope, n, 0.95)}")
    print(f"  some row rejected: {_rate(alarms, n, 0.05)}")
    print(f"  ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
