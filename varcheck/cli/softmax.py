"""``varcheck softmax``: why the 1/√d_k scale matters for the softmax."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from . import exit_codes_help
from .options import (
    dist_option,
    dk_range_option,
    int_option,
    output_options,
    seed_option,
)
from .run import run
from .types import CountType

if TYPE_CHECKING:
    from ..core.distributions import Distribution


@click.command(
    "softmax",
    epilog="""\b
Examples:
  varcheck softmax
  varcheck softmax --dk 8..1024 --keys 128
  varcheck softmax --dk 16,64,256 --dist uniform --format json
  varcheck softmax --plot softmax.png

"""
    + exit_codes_help(0, 2, meanings={0: "0 done (softmax measures, it tests nothing)"}),
)
@dk_range_option
@int_option("--keys", 2, 100_000, 64, "L, the number of keys each query attends over.")
@click.option(
    "--queries",
    type=CountType(),
    default=4096,
    show_default=True,
    help="Queries simulated per d_k (blocks of 32 share their keys; >= 960).",
)
@dist_option(
    "--dist",
    "Entry distribution of q and k: normal, uniform, rademacher, laplace, t:df=D, "
    "scipy.NAME:... (built-in laws have mean 0, sd 1; scipy's keep their own); every spec "
    "takes mean= and sd=.",
    "normal",
)
@dist_option("--q-dist", "Entry distribution of q only.")
@dist_option("--k-dist", "Entry distribution of k only.")
@seed_option()
@output_options("entropy, max weight and Jacobian against d_k")
def command(
    dks: list[int],
    keys: int,
    queries: int,
    dist: Distribution,
    q_dist: Distribution | None,
    k_dist: Distribution | None,
    seed: int | None,
    output: dict[str, Any],
) -> int:
    """Show what the softmax does to q·k with and without the 1/√d_k scale.

    For each d_k, one query attends over L keys: the mean attention entropy (also as a fraction
    of log L), the mean largest weight and the size of the softmax Jacobian diag(p) − ppᵀ, through
    which gradients reach the logits, each with its Monte-Carlo standard error. Without scaling
    the softmax saturates as d_k grows; with it, all three stay in a narrow band.
    """
    from ..teaching.softmax import softmax_study

    result = run(
        lambda: softmax_study(
            dks, keys=keys, queries=queries, dist=dist, q_dist=q_dist, k_dist=k_dist, seed=seed
        ),
        **output,
    )
    return result.exit_code
