"""Calibration of fixed budgets and of the equivalence test, measured by hand (issue #16).

    nice .venv/bin/python bench/calibration.py [--seeds 1000] [--part budgets|edge|...|fail|all]

``budgets``: for each entry law, d_k and fixed budget (1000 and 10^4 products), ``--seeds``
estimates of Var(q·k) through the fixed-budget path of ``sweep``/``assert``/``check``
(:func:`varcheck.estimate_variance` with ``samples``), and whether the budget rule
(:func:`varcheck.core.estimation.minimum_products`) refuses the budget (verdict ``unreliable``).
Coverage is measured for refused configurations too, to show what the rule prevents; the
false-fail rate of the true claim (``verify``'s two-sided test at alpha = 0.05 rejects exactly when
the 95% interval excludes the truth) is 1 - coverage, tested one-sided against alpha.

``edge``: the same at the smallest budget the rule accepts (at least 1000), d_k = 1, 2 and 16:
the rule's own boundary.

``precision``: ``sweep --dist t:df=5 --precision 0.03`` at d_k = 2 and 16 (adaptive, with the
budget rule's minimum), coverage of each row.

``tost``: the equivalence test (``--tolerance T``) of a claim whose true variance lies on the edge
of the band (size: passes at most alpha) and in its middle (power), against the rule it replaces
(the whole 95% interval inside the band), on the same estimates.

``fail``: the fail rate of the same tolerance claims with the true variance inside the band
(at 1 ± 0.75 T), on its edges and outside it (1 ± 2 T, 1 ± 5 T): the rule of 0.1.0 (fail only
when the whole 95% interval lies outside the band, ``p_outside < alpha``) against the rule it
replaces (fail when the 95% interval excludes the claim itself), on the same estimates.

Prints one Markdown table per part; docs/calibration.md quotes them.
"""

from __future__ import annotations

import argparse
import sys
import time

from scipy.stats import binomtest

LAWS = [
    "normal",
    "uniform",
    "rademacher",
    "laplace",
    "t:df=5",
    "t:df=7",
    "scipy.lognorm:s=0.5",
    "scipy.gamma:a=2",
    "scipy.skewnorm:a=5",
    "scipy.weibull_min:c=1.5",
]
DKS = [2, 16]
BUDGETS = [1000, 10_000]
ALPHA = 0.05


def _pct_ci(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(0.95)
    return f"{100 * k / n:.1f}% [{100 * ci.low:.1f}, {100 * ci.high:.1f}]"


def _false_fail(misses: int, n: int) -> str:
    p = binomtest(misses, n, ALPHA, alternative="greater").pvalue
    return f"{100 * misses / n:.1f}% (p = {p:.2g})"


def budgets(seeds: int) -> None:
    from varcheck import dot_product_theory, estimate_variance, parse_distribution
    from varcheck.core.estimation import budget_shortfall

    print(
        "| law | d_k | budget | seeds | coverage [95% CI] | false fails (one-sided p vs 5%) "
        "| low / high misses | rule |"
    )
    print("|---|---:|---:|---:|---|---|---|---|")
    for law in LAWS:
        q = parse_distribution(law)
        for dk in DKS:
            th = dot_product_theory(dk, q, q)
            for budget in BUDGETS:
                low = high = 0
                samples = budget
                for seed in range(seeds):
                    est = estimate_variance(
                        q, q, th, seed=seed, stream=(dk,), precision=None, samples=budget
                    )
                    lo, hi = est.confidence_interval
                    low += hi < th.var
                    high += lo > th.var
                    samples = est.samples
                need = budget_shortfall(q, q, th, samples)
                rule = "valid" if need is None else f"**refused**: needs {need:,}"
                misses = low + high
                print(
                    f"| {law} | {dk} | {budget:,} | {seeds} | {_pct_ci(seeds - misses, seeds)} "
                    f"| {_false_fail(misses, seeds)} | {low} / {high} | {rule} |",
                    flush=True,
                )


def edge(seeds: int) -> None:
    """Coverage at the smallest budget the rule accepts (at least 1000), d_k = 1, 2 and 16."""
    from varcheck import dot_product_theory, estimate_variance, parse_distribution
    from varcheck.core.estimation import minimum_products

    print(
        "| law | d_k | smallest accepted budget | seeds | coverage [95% CI] "
        "| false fails (one-sided p vs 5%) | low / high misses |"
    )
    print("|---|---:|---:|---:|---|---|---|")
    for law in LAWS:
        q = parse_distribution(law)
        for dk in (1, 2, 16):
            th = dot_product_theory(dk, q, q)
            budget = max(1000, int(minimum_products(q, q, th)))
            low = high = 0
            for seed in range(seeds):
                est = estimate_variance(
                    q, q, th, seed=seed, stream=(dk,), precision=None, samples=budget
                )
                lo, hi = est.confidence_interval
                low += hi < th.var
                high += lo > th.var
            misses = low + high
            print(
                f"| {law} | {dk} | {budget:,} | {seeds} | {_pct_ci(seeds - misses, seeds)} "
                f"| {_false_fail(misses, seeds)} | {low} / {high} |",
                flush=True,
            )


def precision(seeds: int) -> None:
    import varcheck

    print("| sweep | seeds | coverage [95% CI] | false fails | low / high misses | products |")
    print("|---|---:|---|---|---|---:|")
    for dk in (2, 16):
        low = high = 0
        products = 0
        for seed in range(seeds):
            row = varcheck.sweep([dk], dist="t:df=5", precision=0.03, seed=seed).rows[0]
            lo, hi = row.estimate.confidence_interval
            low += hi < row.theory.var
            high += lo > row.theory.var
            products = row.estimate.samples
        misses = low + high
        print(
            f"| --dk {dk} --dist t:df=5 --precision 0.03 | {seeds} "
            f"| {_pct_ci(seeds - misses, seeds)} | {_false_fail(misses, seeds)} | {low} / {high} "
            f"| {products:,} (last seed) |",
            flush=True,
        )


def tost(seeds: int) -> None:
    from varcheck import dot_product_theory, estimate_variance, parse_distribution

    print("| truth | d_k, budget | tolerance | seeds | TOST pass rate | old rule (95% interval) |")
    print("|---|---|---:|---:|---|---|")
    z = parse_distribution("normal")
    for dk, budget, tol in ((16, 20_000, 0.05), (64, 100_000, 0.02)):
        th = dot_product_theory(dk, z, z)
        ests = [
            estimate_variance(z, z, th, seed=s, stream=(dk,), precision=None, samples=budget)
            for s in range(seeds)
        ]
        # truth on the lower edge (claim = var / (1 - T)) and on the upper edge; then in the middle
        for where, claim in (
            ("lower edge", th.var / (1 - tol)),
            ("upper edge", th.var / (1 + tol)),
            ("middle", th.var),
        ):
            band = (claim * (1 - tol), claim * (1 + tol))
            new = sum(e.equivalence_p_value(*band) < ALPHA for e in ests)
            old = sum(
                band[0] <= e.confidence_interval.low and e.confidence_interval.high <= band[1]
                for e in ests
            )
            if where == "middle":
                print(
                    f"| {where} | {dk}, {budget:,} | {tol} | {seeds} | {_pct_ci(new, seeds)} "
                    f"| {_pct_ci(old, seeds)} |",
                    flush=True,
                )
                continue
            p_new = binomtest(new, seeds, ALPHA, alternative="greater").pvalue
            print(
                f"| {where} | {dk}, {budget:,} | {tol} | {seeds} | {_pct_ci(new, seeds)}, "
                f"p(> 5%) = {p_new:.2g} | {_pct_ci(old, seeds)} |",
                flush=True,
            )


def _fail_counts(ests: list, claim: float, tol: float) -> tuple[int, int]:
    """How many estimates fail ``claim`` ± ``tol``: by :func:`decide`, and by the old rule."""
    from varcheck.core.verdicts import FAIL, PASS, claim_p_values, decide

    new = old = 0
    for e in ests:
        p = claim_p_values(e, e.var, claim, tol)
        d = decide(
            e.var,
            e.interval_at(1 - 2 * ALPHA),
            claim,
            p_value=p.p_value,
            alpha=ALPHA,
            tolerance=tol,
            samples=e.samples,
            p_equivalence=p.p_equivalence,
            p_outside=p.p_outside,
            fail_interval=e.confidence_interval,
        )
        new += d.outcome == FAIL
        old += d.outcome != PASS and p.p_value < ALPHA
    return new, old


def fail(seeds: int) -> None:
    from varcheck import dot_product_theory, estimate_variance, parse_distribution

    print("| truth / claim | d_k, budget | tolerance | seeds | fail rate | old rule's |")
    print("|---|---|---:|---:|---|---|")
    z = parse_distribution("normal")
    for dk, budget, tol in ((16, 20_000, 0.05), (64, 100_000, 0.02)):
        th = dot_product_theory(dk, z, z)
        ests = [
            estimate_variance(z, z, th, seed=s, stream=(dk,), precision=None, samples=budget)
            for s in range(seeds)
        ]
        for k in (0.75, -0.75, 1.0, -1.0, 2.0, -2.0, 5.0, -5.0):
            ratio = 1 + k * tol if k > 0 else 1 / (1 - k * tol)  # truth = ratio × claim
            new, old = _fail_counts(ests, th.var / ratio, tol)
            test = ""
            if abs(k) <= 1:  # inside the band or on its edge: at most alpha / 2
                p = binomtest(new, seeds, ALPHA / 2, alternative="greater").pvalue
                test = f", p(> 2.5%) = {p:.2g}"
            print(
                f"| {ratio:.4g} | {dk}, {budget:,} | {tol} | {seeds} | {_pct_ci(new, seeds)}"
                f"{test} | {_pct_ci(old, seeds)} |",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--laws", default=None, help="comma-separated subset of the laws")
    parser.add_argument(
        "--part", choices=["budgets", "edge", "precision", "tost", "fail", "all"], default="all"
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.laws:
        LAWS[:] = args.laws.split(",")
    parts = (
        ("budgets", budgets),
        ("edge", edge),
        ("precision", precision),
        ("tost", tost),
        ("fail", fail),
    )
    for name, part in parts:
        if args.part in (name, "all"):
            print(f"\n## {name} ({args.seeds} seeds per configuration)\n")
            part(args.seeds)
    print(f"\n({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
