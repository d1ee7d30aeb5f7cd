"""``varcheck derive``: the derivation of Var(q·k) = d_k, each step checked by simulation."""

from __future__ import annotations

import click

from ..core.distributions import Distribution
from . import EXIT_CODES_HELP
from .console import stdout_console
from .options import SAMPLES_REASON, dist_options, exclusive, format_option, sampling_options


@click.command(
    "derive",
    epilog="""\b
Examples:
  varcheck derive                                   # every step holds: exit 0
  varcheck derive --dist normal:mean=0.5            # step 2 breaks: Var(XY) != Var X Var Y
  varcheck derive --rho 0.5 --dk 16                 # correlated q_i, k_i
  varcheck derive --dist t:df=2                     # infinite variance: exit 4
  varcheck derive --q-dist uniform:sd=2 --format json

\b
Exit 1 here means the textbook result Var(q·k) = d_k does not hold for these
distributions (a step breaks), or a check rejected its own formula.

"""
    + EXIT_CODES_HELP,
)
@click.option(
    "--dk",
    type=click.IntRange(min=1, max=1_000_000),
    default=64,
    show_default=True,
    help="Length d_k of q and k.",
)
@dist_options
@sampling_options
@format_option()
@click.pass_context
def command(
    ctx: click.Context,
    dk: int,
    dist: Distribution,
    q_dist: Distribution | None,
    k_dist: Distribution | None,
    rho: float,
    precision: float,
    samples: int | None,
    max_seconds: float | None,
    confidence: float,
    seed: int | None,
    fmt: str,
) -> int:
    """Walk through Var(q·k) = d_k step by step, with a Monte-Carlo check beside each step.

    Steps: E[XY]; Var(XY) in general; the sum of d_k independent terms; the 1/√d_k scaling.
    Each shows its formula, its exact value for the chosen distributions, the textbook's value
    and a simulation with its interval. Where an assumption fails (non-zero mean, correlation,
    variance not 1, infinite moments) the step that breaks is named with the correct value.
    """
    from ..teaching.derive import derive
    from ..teaching.render import render_derive

    exclusive(ctx, "precision", "samples", SAMPLES_REASON)
    result = derive(
        dk,
        dist=dist,
        q_dist=q_dist,
        k_dist=k_dist,
        rho=rho,
        confidence=confidence,
        precision=None if samples else precision,
        samples=samples,
        max_seconds=max_seconds,
        seed=seed,
    )
    render_derive(result, fmt, stdout_console())
    return result.exit_code
