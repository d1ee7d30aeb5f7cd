"""``varcheck project``: the relaxed formula for Q = X W_q, K = X W_k against exact values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from . import exit_codes_help
from .options import (
    confidence_option,
    dist_option,
    exclusive,
    int_option,
    output_options,
    positive_option,
    precision_option,
    seed_option,
)
from .run import run
from .types import INIT

if TYPE_CHECKING:
    from ..core.distributions import Distribution


#: the exit statuses project can return (it has no inconclusive outcome)
EXIT_CODES = exit_codes_help(
    0,
    1,
    2,
    4,
    meanings={
        0: "0 every check consistent (findings do not count)",
        1: "1 a check rejected",
        2: "2 bad usage, or a run above the limits",
        4: "4 no valid test for some row (the input law lacks the moment the variance or its "
        "estimator needs, or a time limit left fewer than 200 blocks, or fewer blocks than a "
        "valid interval needs)",
        130: "130 interrupted by Ctrl-C and 143 by SIGTERM (the rows reached so far are "
        "printed, marked interrupted)",
    },
)


@click.command(
    "project",
    epilog="""\b
Examples:
  varcheck project                          # d_x = 32, d_k = 16, xavier
  varcheck project --dx 64 --dk 64 --init kaiming --format json
  varcheck project --dx 16 --dk 8 --x-dist uniform --sigma-x 2
  varcheck project --no-constructed         # only random weights, one draw
  varcheck project --blocks 2000 --seed 7 --plot project.png

Rows have a role. check rows (relaxed formula for random weights and different
tokens, the derived same-token value, the exact values given W) are derived to
be exact: a rejection there exits 1. finding rows (the paper's formula on the
same token, the σ-based value for one fixed W) are tested and reported, and are
expected to be rejected once the intervals are narrow enough (always for the
constructed heads), but they do not set the exit status: a default run exits 0.

A run that cannot reach --precision within 1,048,576 blocks per weight setting, or would
need more than 2 GiB of memory or about 10 minutes, is refused before any work, with the
estimate; --max-seconds bounds a run (its output then says it was time-limited).

"""
    + EXIT_CODES,
)
@int_option("--dx", 1, 4096, 32, "Input width d_x (rows of W_q and W_k).")
@int_option("--dk", 1, 4096, 16, "Head width d_k (columns of W_q and W_k).")
@click.option(
    "--init",
    type=INIT,
    default="xavier",
    show_default=True,
    help="Weight init (normal entries): xavier σ²=2/(d_x+d_k), kaiming σ²=2/d_x, "
    "lecun σ²=1/d_x, or normal:SD.",
)
@positive_option(
    "--sigma-x", "Standard deviation of the input entries (rescales --x-dist; default its sd)."
)
@dist_option(
    "--x-dist",
    "Law of the input entries, mean 0: normal, uniform, rademacher, laplace, "
    "t:df=D, scipy.NAME:... (the same-token variance depends on its kurtosis).",
    "normal",
)
@click.option(
    "--constructed/--no-constructed",
    default=True,
    show_default=True,
    help="Add the constructed aligned heads (W_k = W_q; rank-one W_q = W_k).",
)
@int_option("--tokens", 2, 256, 16, "Input rows per independent block.")
@precision_option(0.02, "Target relative half-width of every variance interval.")
@int_option(
    "--blocks",
    2,
    1 << 20,
    None,
    "Fixed number of independent blocks per weight setting instead of --precision.",
)
@positive_option(
    "--max-seconds",
    "Wall-time cap per weight setting; rows report the precision reached (default: each "
    "setting's share of the 10-minute limit).",
)
@confidence_option()
@seed_option()
@output_options("Monte Carlo over prediction per row")
def command(
    dx: int,
    dk: int,
    init: str,
    sigma_x: float | None,
    x_dist: Distribution,
    constructed: bool,
    tokens: int,
    precision: float,
    blocks: int | None,
    max_seconds: float | None,
    confidence: float,
    seed: int | None,
    output: dict[str, Any],
) -> int:
    """Check Var(q·k) for q = x W_q, k = x' W_k: relaxed formula, same token, fixed weights.

    Three kinds of rows, each a prediction checked by Monte Carlo with an interval over
    independent blocks:

    \b
    random-weights  fresh W for every block. Different tokens: the paper's
                    relaxed formula (d_x σ_X² σ_Wq²)(d_x σ_X² σ_Wk²) d_k. Same
                    token (q and k from one input row): the relaxed formula and
                    the derived relaxed · (1 + (κ−1)/d_x), κ the inputs' kurtosis.
    fixed-draw      one draw of W: the σ-based prediction from measured σ_W
                    (the entries' RMS, as in beta and train) against the exact
                    σ_X⁴ ‖W_q W_kᵀ‖_F², and the same-token mean σ_X² tr(W_q W_kᵀ).
    aligned,        constructed heads with the same entry RMS whose W_q and W_k
    rank-one        share directions: the σ-based prediction misses (for
                    W_k = W_q by about 1 + (d_k+κ_w−2)/d_x, κ_w = 3 the kurtosis
                    of these normal entries; by exactly d_k, the most possible,
                    for rank one), the exact one does not.

    Each row shows the β its prediction recommends and the measured Var(β·q·k).
    """
    from ..paper.projection import project

    exclusive(
        "precision", "blocks", "--blocks fixes the number of blocks, --precision targets a width"
    )
    result = run(
        lambda progress: project(
            dx,
            dk,
            init=init,
            sigma_x=sigma_x,
            x_dist=x_dist,
            constructed=constructed,
            tokens=tokens,
            confidence=confidence,
            precision=None if blocks else precision,
            blocks=blocks,
            max_seconds=max_seconds,
            seed=seed,
            progress=progress,
        ),
        **output,
        progress="project setting",
    )
    return result.exit_code
