"""``varcheck sweep``: Var(q·k) against a claim over a range of d_k."""

from __future__ import annotations

from typing import Any

import click

from ..checks.claims import Claim
from . import exit_codes_help
from .options import (
    dk_range_option,
    given,
    output_options,
    parallel_options,
    sampling_options,
    source_options,
)
from .run import run
from .types import CLAIM


@click.command(
    "sweep",
    epilog="""\b
Examples:
  varcheck sweep --dk 2..512
  varcheck sweep --dk 2..512 --dist uniform --format json
  varcheck sweep --dk 16,64 --dist normal:mean=0.5 --claim dk   # rejected
  varcheck sweep --dk 8..64:8 --rho 0.5 --claim 'dk*(1+rho**2)'
  varcheck sweep --dk 4..256 --dist t:df=6 --precision 0.02 --seed 7
  varcheck sweep --dk 16..256 --sampler examples/attention.py:logits --claim 1

"""
    + exit_codes_help(0, 1, 2, 4),
)
@dk_range_option
@source_options
@click.option(
    "--claim",
    type=CLAIM,
    default="theory",
    show_default=True,
    help="Claimed Var(q·k): 'theory' (exact for the chosen distributions), 'dk' (the "
    "textbook statement), or an expression in dk, rho and the entry moments. With --sampler: "
    "required, a number or an expression in dk.",
)
@sampling_options
@parallel_options
@output_options("estimate and interval against d_k")
def command(
    dks: list[int],
    laws: dict[str, Any],
    claim: Claim,
    sampling: dict[str, Any],
    parallel: dict[str, Any],
    output: dict[str, Any],
) -> int:
    """Check Var(q·k) = claim for each d_k with calibrated intervals.

    For each d_k, draws q·k products in independent blocks until the variance interval reaches
    the target precision, and reports the exact theory, the estimate with its interval, the
    scaled variance Var(q·k/√d_k) and a verdict. Verdicts control the family-wise error over all
    rows (Holm), so a true claim shows any rejection at most 1 − confidence of the time.

    The "q·k pairs" column counts the products a row's estimate pools: every pair of distinct
    vectors in each block, most summed through Gram matrices rather than formed one by one.
    Pairs in a block share vectors, so they are far from independent (the interval rests on
    the blocks), and a sweep's rows share blocks: the count is large and need not fall with d_k.
    """
    from ..checks import sweep as sweeps

    result = run(
        lambda progress: sweeps.sweep(
            dks,
            **laws,
            claim=None if "sampler" in laws and not given("claim") else claim.text,
            **sampling,
            **parallel,
            progress=progress,
        ),
        **output,
        progress="sweep d_k",
    )
    return result.exit_code
