"""Regenerate the tables and figures of docs/theory.md, docs/anomaly.md and docs/softmax.md.

Every number in those pages comes from varcheck itself, with fixed seeds, so the pages can be
rebuilt byte for byte. Prose stays hand-written; generated parts sit between markers

    <!-- generated:NAME -->
    ...
    <!-- /generated:NAME -->

and are replaced in place. Usage::

    python docs/_generate/teaching.py           # rewrite the pages and docs/figures/*.png
    python docs/_generate/teaching.py --check   # exit 1 if a page's generated text is stale
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FIGURES = DOCS / "figures"
sys.path.insert(0, str(ROOT))

from varcheck.output.formats import fmt  # noqa: E402

SEED = 2020


def _render(fn: Callable[[Any, str, Any], None], result: Any, fmt_name: str) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=100, color_system=None)
    fn(result, fmt_name, console)
    return console.file.getvalue().rstrip() + "\n"


def _projection_table(result: Any) -> str:
    """theory.md's counter-example: Var q_i · Var k_i (the σ-based value over d_k) against the
    exact variance of the scaled score for the fixed heads of ``varcheck project``."""
    from varcheck.output.formats import interval

    dk = result.dk
    lines = [
        f"`varcheck project --seed {result.seed}` (d_x = {result.dx}, d_k = {dk}, init "
        f"{result.init}, normal inputs, varcheck `{result.version}`): the scaled score "
        "q·k/√d_k of two different tokens, for three fixed heads.",
        "",
        "| weights | σ_Wq (RMS) | σ_Wk (RMS) | Var q_i · Var k_i | exact | exact / σ-based "
        "| Monte Carlo [95% CI] |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for sec in result.sections[1:]:
        sigma_based = result.row(sec.name, "different-tokens", "sigma-based").predicted_var
        exact = result.row(sec.name, "different-tokens", "exact")
        est = exact.estimate
        lines.append(
            f"| {sec.name} | {fmt(sec.sigma_wq)} | {fmt(sec.sigma_wk)} | "
            f"{fmt(sigma_based / dk)} | {fmt(exact.predicted_var / dk)} | "
            f"{fmt(exact.predicted_var / sigma_based, 3)} | {fmt(est.var / dk)} "
            f"{interval(*(v / dk for v in est.confidence_interval))} |"
        )
    return "\n".join(lines) + "\n"


def build(write_figures: bool) -> dict[str, dict[str, str]]:
    """Compute every generated block: {page: {block name: markdown}}."""
    from varcheck.checks.sweep import sweep
    from varcheck.teaching.derive import derive
    from varcheck.teaching.explain import explain
    from varcheck.teaching.render import render_derive, render_explain, render_softmax
    from varcheck.teaching.softmax import softmax_study

    blocks: dict[str, dict[str, str]] = {"theory.md": {}, "anomaly.md": {}, "softmax.md": {}}

    # theory.md: the derivation, checked, for the textbook case and three broken ones
    for name, kwargs in (
        ("derive-normal", {}),
        ("derive-mean", {"dist": "normal:mean=0.5"}),
        ("derive-rho", {"rho": 0.5}),
        ("derive-t2", {"dist": "t:df=2"}),
    ):
        res = derive(64, seed=SEED, precision=0.01, **kwargs)
        blocks["theory.md"][name] = _render(render_derive, res, "markdown")
        if write_figures and name == "derive-mean":
            from varcheck.teaching.figures import plot_derive

            plot_derive(res, str(FIGURES / "derive_mean.png"))
    # the σ-based value against the exact one for given weights: the issue #22 numbers
    from varcheck.paper.projection import project

    blocks["theory.md"]["project-sigma"] = _projection_table(project(seed=1))
    sw = sweep("2..512", seed=SEED, precision=0.02)
    if write_figures:
        from varcheck.checks.figures import plot_sweep

        plot_sweep(sw, str(FIGURES / "sweep_normal.png"))

    # anomaly.md: the seed's 2x2 case, an extreme value, and the large experiment
    seed_case = explain(seed=SEED)
    blocks["anomaly.md"]["explain-seed"] = _render(render_explain, seed_case, "markdown")
    blocks["anomaly.md"]["explain-ddof1"] = _render(
        render_explain, explain(seed=SEED, ddof=1, growing=None), "markdown"
    )
    blocks["anomaly.md"]["explain-forty"] = _render(
        render_explain, explain(observed=40.0, seed=SEED, growing=None), "markdown"
    )
    blocks["anomaly.md"]["explain-large"] = _render(
        render_explain,
        explain("1111x111x1111", 110.5603610976103, seed=SEED, growing=None),
        "markdown",
    )
    blocks["anomaly.md"]["explain-large-scaled"] = _render(
        render_explain,
        explain("1111x111x1111", 0.9960392891676604, seed=SEED, growing=None),
        "markdown",
    )
    if write_figures:
        from varcheck.teaching.figures import plot_explain

        plot_explain(seed_case, str(FIGURES / "explain_2x2.png"))

    # softmax.md
    sm = softmax_study("2..512", keys=64, queries=8192, seed=SEED)
    blocks["softmax.md"]["softmax-table"] = _render(render_softmax, sm, "markdown")
    if write_figures:
        from varcheck.teaching.figures import plot_softmax

        plot_softmax(sm, str(FIGURES / "softmax.png"))
    return blocks


def _replace(text: str, name: str, body: str, page: str) -> str:
    pattern = re.compile(
        rf"(<!-- generated:{re.escape(name)} -->\n).*?(<!-- /generated:{re.escape(name)} -->)",
        re.DOTALL,
    )
    if not pattern.search(text):
        raise SystemExit(f"{page}: no markers for generated block {name!r}")
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale pages")
    args = parser.parse_args(argv)
    FIGURES.mkdir(parents=True, exist_ok=True)
    stale = []
    for page, parts in build(write_figures=not args.check).items():
        path = DOCS / page
        old = path.read_text(encoding="utf-8")
        new = old
        for name, body in parts.items():
            new = _replace(new, name, body, page)
        if new != old:
            stale.append(page)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print("stale generated docs: " + ", ".join(stale), file=sys.stderr)
        return 1
    for page in stale:
        print(f"updated docs/{page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
