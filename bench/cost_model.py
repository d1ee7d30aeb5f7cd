"""Measure the constants of varcheck's block cost model and check the block side it picks.

The model in ``varcheck/core/blocks.py`` prices one block of side n for vectors of length d as

    cost(n) = c_rng · 2 n d  +  c_flop · n² d  +  c_out · n²  +  c_block      (nanoseconds)

with c_flop per multiply-add. This script measures, on this machine:

1. c_rng for each entry family (ns per number drawn through ``Distribution.sample``);
2. c_flop: ns per multiply-add of the batched ``np.matmul`` (B, n, d) @ (B, d, n);
3. c_out: ns per product for the two reductions in ``draw_chunk`` (mean, mean of squares);
4. all four constants at once, fitted (non-negative least squares on relative error) to the
   wall time of ``draw_chunk`` itself over a grid of sides and d_k;
5. for each d_k, the time per unit of information of each block side 1, 2, …, 512 (runs of
   ``estimate_variance`` with the plan forced), against the side varcheck picks.

"Time per unit of information" is t · (se / Var)²: the seconds a run would need for a
relative standard error of 1. Reported as the time to a 1% half-width at 95%, i.e. multiplied
by (1.96 / 0.01)². Each run's se comes from its own blocks, so the figure is noisy (about
±sqrt(2 / blocks)); sides within ~20% of each other are ties.

Run as ``python bench/cost_model.py [--quick] [--json FILE]``; ``bench/run.py`` runs it with
``OPENBLAS_NUM_THREADS=1`` (see docs/performance.md for why).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import DKS, fmt_time, machine_info, markdown_table

FAMILIES = ["normal", "uniform", "rademacher", "laplace", "t:df=5", "scipy.logistic"]
#: d_k sets for the shared-block fit: the default sweep, a short one, and one of large d_k only.
SHARED_DKS = [(2, 4, 8, 16, 32, 64, 128, 256, 512), (4, 8, 16, 32, 64), (64, 128, 256, 512)]
SIDES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
Z95 = 1.959963984540054


def _best(fn: Callable[[], object], repeats: int, *, median: bool = False) -> float:
    """Fastest of ``repeats`` timed calls (the least disturbed by other load on the machine).

    With ``median=True`` the median instead, for effects that come and go with the load (the
    BLAS's own threads stalling when another process holds a core).
    """
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) if median else min(times)


def measure_rng(quick: bool) -> list[dict[str, Any]]:
    """ns per number for each family, in bulk (2^20) and in block-sized calls (2^12).

    Normal numbers are also timed in float32, where ``Distribution.sample`` uses the
    Box-Muller transform, next to numpy's own float32 ziggurat.
    """
    from varcheck.core.distributions import parse_distribution

    rng = np.random.default_rng(1)
    out = []
    reps = 3 if quick else 7
    cases: list[tuple[str, str, Callable[[Any, int], object]]] = [
        (spec, parse_distribution(spec).family, lambda d, n: d.sample(rng, (n,)))
        for spec in FAMILIES
    ]
    cases += [
        (
            "normal, float32 (Box-Muller)",
            "normal32",
            lambda d, n: d.sample(rng, (n,), dtype=np.float32),
        ),
        (
            "normal, float32 (numpy's ziggurat)",
            "ziggurat32",
            lambda d, n: rng.standard_normal(n, dtype=np.float32),
        ),
    ]
    for spec, family, sample in cases:
        dist = parse_distribution(spec.split(",")[0])
        row: dict[str, Any] = {"spec": spec, "family": family}
        for size in (1 << 12, 1 << 20):
            calls = max(1, (1 << 20) // size)

            def draw(dist=dist, size=size, calls=calls, sample=sample) -> None:
                for _ in range(calls):
                    sample(dist, size)

            draw()
            row[f"ns_{size}"] = _best(draw, reps) / (calls * size) * 1e9
        out.append(row)
    return out


def measure_matmul(quick: bool, *, median: bool = False) -> list[dict[str, Any]]:
    """ns per multiply-add of batched matmul, over block sides n and lengths d."""
    rng = np.random.default_rng(2)
    sides = [2, 8, 32, 128, 512] if quick else [2, 4, 8, 16, 32, 64, 128, 256, 512]
    dks = [2, 32, 512] if quick else [2, 8, 32, 128, 512]
    target = (1 << 22) if quick else (1 << 24)  # multiply-adds per timed call
    out = []
    for n in sides:
        for d in dks:
            b = max(1, min(target // (n * n * d), (1 << 22) // (2 * n * d + n * n)))
            qm = rng.standard_normal((b, n, d))
            km = rng.standard_normal((b, d, n))
            np.matmul(qm, km)
            t = _best(lambda qm=qm, km=km: np.matmul(qm, km), 3 if quick else 5, median=median)
            macs = b * n * n * d
            out.append(
                {
                    "side": n,
                    "dk": d,
                    "blocks": b,
                    "ns_per_mac": t / macs * 1e9,
                    "ns_per_block": t / b * 1e9,
                }
            )
    return out


def measure_reduce(quick: bool) -> list[dict[str, Any]]:
    """ns per product of the per-block reductions (mean and mean of squares) in draw_chunk."""
    rng = np.random.default_rng(3)
    out = []
    for n in [4, 16, 64, 256]:
        b = max(1, (1 << 21) // (n * n))
        flat = rng.standard_normal((b, n * n))

        def reduce(flat=flat) -> None:
            flat.mean(axis=1)
            np.einsum("ij,ij->i", flat, flat)

        reduce()
        t = _best(reduce, 3 if quick else 7)
        out.append({"side": n, "blocks": b, "ns_per_output": t / (b * n * n) * 1e9})
    return out


def _plan(side: int, theory: Any, q: Any, k: Any) -> Any:
    """A BlockPlan with the given side, sized like plan_blocks sizes its chunks."""
    from varcheck.core.blocks import MAX_CHUNK_ELEMENTS, BlockPlan, plan_blocks

    d = theory.dk
    r = plan_blocks(q, k, theory).row_correlation
    per_block = 2 * side * d + side * side
    blocks = max(1, MAX_CHUNK_ELEMENTS // (4 * per_block))
    blocks = min(blocks, 1 << 16) if side == 1 else min(blocks, 256)
    return BlockPlan(side=side, paired=False, blocks_per_chunk=int(blocks), row_correlation=r)


def measure_draw_chunk(quick: bool) -> list[dict[str, Any]]:
    """Wall time per block of ``draw_chunk`` (normal entries) over a grid of sides and d_k."""
    from varcheck.core.blocks import draw_chunk
    from varcheck.core.distributions import parse_distribution
    from varcheck.core.theory import dot_product_theory

    normal = parse_distribution("normal")
    sides = [1, 4, 16, 64, 256] if quick else SIDES
    dks = [2, 32, 512] if quick else [2, 8, 32, 128, 512]
    rng = np.random.default_rng(4)
    out = []
    for d in dks:
        th = dot_product_theory(d, normal, normal)
        for side in sides:
            plan = _plan(side, th, normal, normal)
            b = plan.blocks_per_chunk

            def chunk(plan=plan, d=d) -> None:
                draw_chunk(normal, normal, d, plan, rng)

            chunk()
            t = _best(chunk, 3 if quick else 5)
            out.append({"side": side, "dk": d, "blocks": b, "ns_per_block": t / b * 1e9})
    return out


def measure_chunk_overhead(quick: bool) -> float:
    """ns per chunk outside draw_chunk: the chunk's SeedSequence/Generator and accumulator merge."""
    from varcheck.core.estimation import BlockAccumulator

    acc = BlockAccumulator()
    m = np.ones(64)
    n = 200 if quick else 1000

    def overhead() -> None:
        for i in range(n):
            np.random.default_rng(np.random.SeedSequence(7, spawn_key=(64, i)))
            acc.add(m, m)

    return _best(overhead, 3) / n * 1e9


def fit_constants(rows: list[dict[str, Any]]) -> dict[str, float]:
    """NNLS fit of the four-term model to draw_chunk times, weighted to relative error."""
    from scipy.optimize import nnls

    fit_rows = [r for r in rows if r["side"] > 1]
    a = np.array(
        [[2 * r["side"] * r["dk"], r["side"] ** 2 * r["dk"], r["side"] ** 2, 1.0] for r in fit_rows]
    )
    y = np.array([r["ns_per_block"] for r in fit_rows])
    coef, _ = nnls(a / y[:, None], np.ones_like(y))
    pred = a @ coef
    rel = np.abs(pred - y) / y
    return {
        "c_rng": float(coef[0]),
        "c_flop": float(coef[1]),
        "c_out": float(coef[2]),
        "c_block": float(coef[3]),
        "median_rel_error": float(np.median(rel)),
        "max_rel_error": float(np.max(rel)),
    }


def model_cost(side: int, d: int, r: float, c: dict[str, float], c_rng: float) -> float:
    """Modelled ns per unit of information (the planner's objective) for one side."""
    cost = c_rng * 2 * side * d + c["c_flop"] * side * side * d + c["c_out"] * side * side
    cost += c["c_block"]
    return cost * (1 + 2 * (side - 1) * r) / (side * side)


def scan_sides(quick: bool, fitted: dict[str, float], c_rng_normal: float) -> list[dict[str, Any]]:
    """Empirical time to a 1% half-width for each forced side, and the side varcheck picks."""
    from varcheck.core.distributions import parse_distribution
    from varcheck.core.estimation import estimate_variance
    from varcheck.core.theory import dot_product_theory

    normal = parse_distribution("normal")
    dks = [2, 32, 512] if quick else DKS
    sides = [1, 4, 16, 64, 256] if quick else SIDES
    budget = 0.03 if quick else 0.12
    out = []
    for d in dks:
        th = dot_product_theory(d, normal, normal)
        chosen = {}
        for p in (0.01, 0.001):
            est = estimate_variance(normal, normal, th, seed=5, precision=p, max_seconds=1e-9)
            chosen[p] = est.block_side
        per_side = {}
        noise = {}
        for side in sides:
            plan = _plan(side, th, normal, normal)
            ppb = plan.products_per_block
            probe_blocks = max(64, plan.blocks_per_chunk)
            t0 = time.perf_counter()
            estimate_variance(normal, normal, th, seed=6, samples=probe_blocks * ppb, plan=plan)
            t_probe = time.perf_counter() - t0
            blocks = int(max(64, probe_blocks * budget / max(t_probe, 1e-6)))
            t0 = time.perf_counter()
            est = estimate_variance(normal, normal, th, seed=7, samples=blocks * ppb, plan=plan)
            t = time.perf_counter() - t0
            per_side[side] = t * (est.se / th.var) ** 2 * (Z95 / 0.01) ** 2
            noise[side] = math.sqrt(2.0 / max(est.blocks - 1, 1))
        r = _plan(2, th, normal, normal).row_correlation
        modelled = {s: model_cost(s, d, r, fitted, c_rng_normal) for s in sides}
        best = min(per_side, key=per_side.get)
        out.append(
            {
                "dk": d,
                "seconds_to_1pct": {str(s): v for s, v in per_side.items()},
                "noise": {str(s): v for s, v in noise.items()},
                "empirical_best": best,
                "chosen_1pct": chosen[0.01],
                "chosen_0.1pct": chosen[0.001],
                "fitted_model_best": min(modelled, key=modelled.get),
                "loss_chosen_0.1pct": per_side.get(chosen[0.001], math.nan) / per_side[best],
            }
        )
    return out


def measure_shared_chunk(quick: bool) -> list[dict[str, Any]]:
    """Wall time per block of ``draw_shared_chunk`` (normal pools, float32) over a grid of plans.

    Rows per block from 8 to 700, one full Gram matrix or per-d_k sums, all columns or a
    quarter for the Gram levels; chunks as large as ``plan_shared`` would make them.
    """
    from varcheck.core import shared_blocks as shared
    from varcheck.core.distributions import parse_distribution

    normal = parse_distribution("normal")
    rng = np.random.default_rng(8)
    rows_grid = (
        [8, 16, 33, 64, 128, 256, 512]
        if quick
        else [8, 12, 16, 24, 33, 48, 64, 96, 128, 192, 256, 384, 512, 700]
    )
    out = []
    for dks in SHARED_DKS[:2] if quick else SHARED_DKS:
        width = max(dks)
        for rows in rows_grid:
            if rows * width > shared._MAX_BLOCK_ELEMENTS:
                continue
            full_flops, _ = shared._flops(rows, width, dks, pooled=True)
            for full, gram_width in ((True, None), (False, None), (False, width // 4)):
                if full and not math.isfinite(full_flops):
                    continue
                flops = full_flops if full else shared._flops(rows, width, dks, True, gram_width)[1]
                if gram_width is not None and any(rows > d > gram_width for d in dks):
                    continue
                per_block_guess = 4.0 * rows * width + 0.01 * flops + 30_000.0
                blocks = max(1, min(64, int(3e7 // per_block_guess), (1 << 20) // (rows * width)))
                plan = shared.SharedPlan(
                    dks, width, rows, full, blocks, "float32", pooled=True, gram_width=gram_width
                )
                ws = shared._Workspace()

                def chunk(plan=plan, blocks=blocks, ws=ws) -> None:
                    shared.draw_shared_chunk(normal, normal, plan, rng, blocks, ws)

                chunk()
                t = _best(chunk, 3 if quick else 5)
                out.append(
                    {
                        "dks": list(dks),
                        "rows": rows,
                        "full_gram": full,
                        "gram_width": gram_width,
                        "blocks": blocks,
                        "randoms": rows * width,
                        "flops": flops,
                        "ns_per_block": t / blocks * 1e9,
                    }
                )
    return out


def fit_shared(rows: list[dict[str, Any]]) -> dict[str, float]:
    """NNLS fit of the planner's model for shared blocks, weighted to relative error.

    ns per block = c_rng · randoms + c_flop · flops + c_block + c_level · (number of d_k), the
    terms of ``plan_shared`` (float32, normal entries); chunk overhead lands in c_block.
    """
    from scipy.optimize import nnls

    a = np.array([[r["randoms"], r["flops"], 1.0, len(r["dks"])] for r in rows])
    y = np.array([r["ns_per_block"] for r in rows])
    coef, _ = nnls(a / y[:, None], np.ones_like(y))
    rel = np.abs(a @ coef - y) / y
    return {
        "c_rng": float(coef[0]),
        "c_flop": float(coef[1]),
        "c_block": float(coef[2]),
        "c_level": float(coef[3]),
        "median_rel_error": float(np.median(rel)),
        "max_rel_error": float(np.max(rel)),
    }


def run(quick: bool) -> dict[str, Any]:
    from varcheck.core import blocks as sampling
    from varcheck.core import shared_blocks as shared

    result: dict[str, Any] = {"machine": machine_info()}
    result["current"] = {
        "c_rng": dict(sampling._C_RNG),
        "c_rng_scipy": sampling._C_RNG_SCIPY,
        "c_flop": sampling._C_FLOP,
        "c_out": sampling._C_OUT,
        "c_block": sampling._C_BLOCK,
    }
    result["current_shared"] = {
        "c_rng": shared._C_RNG_NORMAL32,
        "c_flop": shared._C_FLOP32,
        "c_block": shared._C_BLOCK,
        "c_level": shared._C_LEVEL,
    }
    result["rng"] = measure_rng(quick)
    result["matmul"] = measure_matmul(quick)
    result["reduce"] = measure_reduce(quick)
    result["draw_chunk"] = measure_draw_chunk(quick)
    result["chunk_overhead_ns"] = measure_chunk_overhead(quick)
    result["fit"] = fit_constants(result["draw_chunk"])
    result["shared_chunk"] = measure_shared_chunk(quick)
    result["shared_fit"] = fit_shared(result["shared_chunk"])
    normal_ns = next(r["ns_1048576"] for r in result["rng"] if r["family"] == "normal")
    side1 = [r for r in result["draw_chunk"] if r["side"] == 1]
    result["pairs_ns_per_product"] = {str(r["dk"]): r["ns_per_block"] for r in side1}
    result["scan"] = scan_sides(quick, result["fit"], normal_ns)
    return result


def _constants_table(
    fitted: dict[str, float],
    current: dict[str, Any],
    source: str,
    names: list[tuple[str, str, str]],
) -> str:
    """Fitted against current constants; ``names`` holds (key, label, format) per row."""
    return markdown_table(
        ["constant", "fitted", f"current in {source}"],
        [[label, format(fitted[key], fmt), f"{current[key]:g}"] for key, label, fmt in names],
    )


def report(res: dict[str, Any]) -> str:
    """Markdown for the "Cost model" section of docs/performance.md."""
    lines = []
    cur = res["current"]
    fit = res["fit"]
    lines.append("### Random numbers (ns per number, through `Distribution.sample`)\n")
    rows = []
    for r in res["rng"]:
        fam = r["family"]
        if fam == "normal32":
            current = f"{res['current_shared']['c_rng']:g} (shared_blocks.py)"
        elif fam == "ziggurat32":
            current = "–"
        else:
            current = f"{cur['c_rng'].get(fam, cur['c_rng_scipy']):g}"
        rows.append([r["spec"], f"{r['ns_1048576']:.2f}", f"{r['ns_4096']:.2f}", current])
    lines.append(
        markdown_table(["family", "bulk (2^20)", "calls of 2^12", "current constant"], rows)
    )
    lines.append("\n### Batched matmul (B, n, d) @ (B, d, n): ns per multiply-add\n")
    mm = res["matmul"]
    dks = sorted({r["dk"] for r in mm})
    sides = sorted({r["side"] for r in mm})
    table = {(r["side"], r["dk"]): r["ns_per_mac"] for r in mm}
    lines.append(
        markdown_table(
            ["side n"] + [f"d={d}" for d in dks],
            [[str(n)] + [f"{table[(n, d)]:.3f}" for d in dks] for n in sides],
        )
    )
    lines.append("\n### Reductions in `draw_chunk` (mean and mean of squares): ns per product\n")
    lines.append(
        markdown_table(
            ["side n", "ns per product"],
            [[str(r["side"]), f"{r['ns_per_output']:.2f}"] for r in res["reduce"]],
        )
    )
    lines.append(
        f"\nOverhead per chunk outside `draw_chunk` (SeedSequence + Generator + accumulator "
        f"merge): {res['chunk_overhead_ns'] / 1e3:.1f} µs.\n"
    )
    lines.append("### Fitted constants (draw_chunk wall time, sides ≥ 2)\n")
    current = {**cur, "c_rng": cur["c_rng"]["normal"]}
    lines.append(
        _constants_table(
            fit,
            current,
            "core/blocks.py",
            [
                ("c_rng", "c_rng (normal, ns/number)", ".2f"),
                ("c_flop", "c_flop (ns/multiply-add)", ".4f"),
                ("c_out", "c_out (ns/product)", ".3f"),
                ("c_block", "c_block (ns/block)", ".0f"),
            ],
        )
    )
    lines.append(
        f"\nFit quality over the grid: median relative error {fit['median_rel_error']:.0%}, "
        f"worst {fit['max_rel_error']:.0%}. Side 1 (independent pairs, a different code path) "
        "costs per product: "
        + ", ".join(f"d={d}: {v:.0f} ns" for d, v in res["pairs_ns_per_product"].items())
        + ".\n"
    )
    sfit, scur, plans = res["shared_fit"], res["current_shared"], res["shared_chunk"]
    lines.append("### Shared blocks (`varcheck/core/shared_blocks.py`): fitted constants\n")
    lines.append(
        "The planner prices a shared block as c_rng · random numbers + c_flop · flops + c_block "
        "+ c_level · (number of d_k). Fitted (NNLS on relative error) to the wall time of "
        f"`draw_shared_chunk` for {len(plans)} plans: normal pools in float32, "
        f"{min(r['rows'] for r in plans)} to {max(r['rows'] for r in plans)} rows, full Gram "
        "matrix or per-d_k sums, for "
        + ", ".join(dict.fromkeys("d_k = " + ",".join(map(str, r["dks"])) for r in plans))
        + ".\n"
    )
    lines.append(
        _constants_table(
            sfit,
            scur,
            "core/shared_blocks.py",
            [
                ("c_rng", "c_rng (normal32, ns/number)", ".2f"),
                ("c_flop", "c_flop (float32, ns/flop)", ".4f"),
                ("c_block", "c_block (ns/block)", ".0f"),
                ("c_level", "c_level (ns/d_k/block)", ".0f"),
            ],
        )
    )
    lines.append(
        f"\nFit quality: median relative error {sfit['median_rel_error']:.0%}, worst "
        f"{sfit['max_rel_error']:.0%}.\n"
    )
    lines.append("### Block side: empirical time to a 1% half-width (95%) by forced side\n")
    scan = res["scan"]
    sides_s = list(scan[0]["seconds_to_1pct"].keys())
    rows = []
    for r in scan:
        best = r["empirical_best"]
        cells = [str(r["dk"])]
        for s in sides_s:
            v = fmt_time(r["seconds_to_1pct"][s])
            if int(s) == best:
                v = f"**{v}**"
            cells.append(v)
        cells += [
            str(best),
            str(r["chosen_1pct"]),
            str(r["chosen_0.1pct"]),
            str(r["fitted_model_best"]),
            f"{r['loss_chosen_0.1pct']:.2f}×",
        ]
        rows.append(cells)
    lines.append(
        markdown_table(
            ["d_k"]
            + [f"n={s}" for s in sides_s]
            + ["best", "chosen 1%", "chosen 0.1%", "fitted model", "chosen/best"],
            rows,
        )
    )
    lines.append(
        "\n`chosen` is the side `estimate_variance` picks at that precision (it caps the side "
        "so that 64 blocks fit in the predicted sample size, hence smaller sides at 1%); "
        "`fitted model` is the planner's objective evaluated with the fitted constants; "
        "`chosen/best` compares the 0.1% choice with the empirical best. Each cell is one run "
        "of about 0.1 s, so its noise is roughly ±sqrt(2/blocks) (10–20%)."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller grids (about 10 s)")
    ap.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    args = ap.parse_args(argv)
    res = run(args.quick)
    print(report(res))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
