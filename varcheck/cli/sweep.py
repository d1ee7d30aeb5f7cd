"""``varcheck sweep``: Var(q·k) against a claim over a range of d_k."""

from __future__ import annotations

import click

from ..checks.claims import Claim
from ..core.distributions import Distribution
from . import EXIT_CODES_HELP
from .console import ProgressReporter, stdout_console
from .options import (
    SAMPLES_REASON,
    dist_options,
    dk_range_option,
    exclusive,
    format_option,
    parallel_options,
    plot_option,
    sampling_options,
)
from .types import CLAIM


@click.command(
    "sweep",
    epilog="""\b
Examples:
  varcheck sweep --dk 2..512
  varcheck sweep --dk 2..512 --dist uniform --format json
  varcheck sweep --dk 16,64 --dist normal:mean=0.5 --claim dk     # rejected: means add terms
  varcheck sweep --dk 8..64:8 --rho 0.5 --claim 'dk*(1+rho**2)'
  varcheck sweep --dk 4..256 --dist t:df=6 --precision 0.02 --seed 7

"""
    + EXIT_CODES_HELP,
)
@dk_range_option
@dist_options
@click.option(
    "--claim",
    type=CLAIM,
    default="theory",
    show_default=True,
    help="Claimed Var(q·k): 'theory' (exact for the chosen distributions), 'dk' (the "
    "textbook statement), or an expression in dk, rho and the entry moments.",
)
@sampling_options
@parallel_options
@format_option()
@plot_option("estimate and interval against d_k")
@click.pass_context
def command(
    ctx: click.Context,
    dks: list[int],
    dist: Distribution,
    q_dist: Distribution | None,
    k_dist: Distribution | None,
    rho: float,
    claim: Claim,
    precision: float,
    samples: int | None,
    max_seconds: float | None,
    confidence: float,
    seed: int | None,
    workers: int | None,
    scheduler: str | None,
    fmt: str,
    plot: str | None,
) -> int:
    """Check Var(q·k) = claim for each d_k with calibrated intervals.

    For each d_k, draws q·k products in independent blocks until the variance interval reaches
    the target precision, and reports the exact theory, the estimate with its interval, the
    scaled variance Var(q·k/√d_k) and a verdict. Verdicts control the family-wise error over all
    rows (Holm), so a true claim shows any rejection at most 1 − confidence of the time.
    """
    from ..checks import sweep as api
    from ..checks.render import render_sweep

    exclusive(ctx, "precision", "samples", SAMPLES_REASON)
    if plot is not None:
        from ..output.figures import check_plot_path

        check_plot_path(plot)
    with ProgressReporter("sweep d_k") as progress:
        result = api.sweep(
            dks,
            dist=dist,
            q_dist=q_dist,
            k_dist=k_dist,
            rho=rho,
            claim=claim.text,
            confidence=confidence,
            precision=None if samples else precision,
            samples=samples,
            max_seconds=max_seconds,
            seed=seed,
            workers=workers,
            scheduler=scheduler,
            progress=progress,
        )
    render_sweep(result, fmt, stdout_console())
    if plot is not None:
        from ..output.figures import plot_sweep

        plot_sweep(result, plot)
    return result.exit_code
