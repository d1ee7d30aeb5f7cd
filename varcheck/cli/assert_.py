"""``varcheck assert``: one claim about Var(q·k) as a CI gate."""

from __future__ import annotations

from typing import Any

import click

from ..checks.claims import Claim
from ..core.ranges import MAX_DK
from . import EXIT_CODES_HELP
from .options import format_option, parallel_options, sampling_options, source_options
from .run import run
from .types import CLAIM, FiniteFloat, OneDk


@click.command(
    "assert",
    epilog="""\b
Examples:
  varcheck assert --dk 64 --claim dk
  varcheck assert --dk 64 --claim 1 --scaled --tolerance 0.02
  varcheck assert --dk 64 --dist normal:mean=0.5 --claim dk   # fails: 1.5 dk
  varcheck assert --dk 32 --rho 0.5 --claim 'dk*(1+rho**2)' --format json
  varcheck assert --dk 64 --sampler examples/attention.py:logits --claim 1

Without --tolerance: a consistency test, fail when the interval excludes the claim.

With --tolerance T: pass when the whole 90% interval lies inside claim ± T; fail when the
whole 95% interval lies outside it; otherwise inconclusive (with the number of further
products that would settle it). At --confidence C the intervals are 2C − 1 and C: a variance
on the band's edge passes, and one inside it fails, at most 1 − C of the time.

A fixed --samples below what a valid interval needs for these laws (high kurtosis of q·k,
heavy tails) gives an estimate without a verdict (unreliable, exit 4) and says how many.

"""
    + EXIT_CODES_HELP,
)
@click.option("--dk", type=OneDk(1, MAX_DK), required=True, help="Length of q and k.")
@source_options
@click.option(
    "--claim",
    type=CLAIM,
    required=True,
    help="Claimed variance: a number or an expression in dk, rho, theory and the entry "
    "moments (mean_q, var_q, sd_q, mu4_q, kurt_q and the same for k); with --sampler, in dk.",
)
@click.option("--scaled", is_flag=True, help="The claim is about Var(q·k/√d_k) (the values/√d_k).")
@click.option(
    "--tolerance",
    type=FiniteFloat(0.0, 1.0, what="a number in (0, 1), e.g. 0.02"),
    default=None,
    help="Relative tolerance T: the claim is the band claim × [1 − T, 1 + T].",
)
@sampling_options
@parallel_options
@format_option(("table", "json"))
def command(
    dk: int,
    laws: dict[str, Any],
    claim: Claim,
    scaled: bool,
    tolerance: float | None,
    sampling: dict[str, Any],
    parallel: dict[str, Any],
    fmt: str,
) -> int:
    """Assert one claim about Var(q·k) at one d_k; the exit code is the verdict."""
    from ..checks import verify as claim_tests

    result = run(
        lambda progress: claim_tests.verify(
            dk,
            claim=claim.text,
            **laws,
            scaled=scaled,
            tolerance=tolerance,
            **sampling,
            **parallel,
            progress=lambda f: progress(0, 1, f),
        ),
        fmt=fmt,
        progress="assert",
    )
    return result.exit_code
