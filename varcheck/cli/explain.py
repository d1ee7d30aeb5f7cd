"""``varcheck explain``: why np.var(A @ B) came out as it did (the seed's 2×2 "1.6")."""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import click

from . import exit_codes_help
from .options import confidence_option, dist_option, output_options, seed_option
from .run import run
from .types import OBSERVED, SHAPE, CountType

if TYPE_CHECKING:
    from ..core.distributions import Distribution


@click.command(
    "explain",
    epilog="""\b
Examples:
  varcheck explain                         # the seed's 2x2 case, observed 1.6
  varcheck explain --long                  # the full account: quantiles, why
  varcheck explain --observed 40           # far in the tail: rejected
  varcheck explain --shape 1111x111x1111 --observed 110.56
  varcheck explain --shape 4x8x4 --ddof 1 --dist uniform --format json
  varcheck explain --plot np_var.png

The observed value is judged twice: as np.var(A @ B) (one entry has variance D for unit
entries) and as np.var(A @ B / sqrt(D)) (entry variance 1). Exit 1 only when both readings
reject it.

"""
    + exit_codes_help(0, 1, 2, 4),
)
@click.option(
    "--shape",
    type=SHAPE,
    default=None,
    help="NxDxM: A is N×D, B is D×M (default 2x2x2, the seed's experiment).",
)
@click.option(
    "--observed",
    type=OBSERVED,
    default=None,
    help="The np.var value seen (default 1.6 when --shape is omitted, else none).",
)
@click.option(
    "--ddof",
    type=click.Choice(["0", "1"]),
    default="0",
    show_default=True,
    help="Delta degrees of freedom of np.var (numpy's default is 0).",
)
@dist_option(
    "--dist",
    "Entry distribution of A and B: normal, uniform, rademacher, laplace, t:df=D, "
    "scipy.NAME:... (built-in laws have mean 0, sd 1; scipy's keep their own); every spec "
    "takes mean= and sd=.",
    "normal",
)
@dist_option("--a-dist", "Entry distribution of A only.")
@dist_option("--b-dist", "Entry distribution of B only.")
@click.option(
    "--replicates",
    type=CountType(),
    default=None,
    help="Simulated experiments for quantiles and p-values (default up to 100000; large "
    "shapes use a gamma law with the exact mean and sd).",
)
@click.option(
    "--long",
    "long_",
    is_flag=True,
    help="The full account in the table form: the simulation check, every quantile with its "
    "interval, larger shapes and why (without it, one screen).",
)
@confidence_option(0.95, "A reading is rejected when its p-value is below 1 - confidence.")
@seed_option()
@output_options("the distribution of np.var")
def command(
    shape: Any,
    observed: float | str | None,
    ddof: str,
    dist: Distribution,
    a_dist: Distribution | None,
    b_dist: Distribution | None,
    replicates: int | None,
    long_: bool,
    confidence: float,
    seed: int | None,
    output: dict[str, Any],
) -> int:
    """Explain an observed np.var(A @ B): its exact mean and spread, and how unusual it is.

    Draws A (N×D) and B (D×M) with i.i.d. entries and studies np.var(A @ B): the exact
    expectation (mean subtraction and ddof included), its exact standard deviation, quantiles
    and the observed value's percentile and p-value by simulation, and how the spread shrinks
    as the shape grows up to the seed thread's 1111×111×1111 experiment.
    """
    from ..teaching.explain import SEED_OBSERVED, SEED_SHAPE, explain
    from ..teaching.render import full_account

    if observed is None:
        obs = SEED_OBSERVED if shape is None else None
    else:
        obs = None if observed == "none" else float(observed)
    # --long: the table form is the whole account (the other formats always are)
    with full_account() if long_ else nullcontext():
        result = run(
            lambda: explain(
                SEED_SHAPE if shape is None else shape,
                obs,
                ddof=int(ddof),
                dist=dist,
                a_dist=a_dist,
                b_dist=b_dist,
                replicates=replicates,
                confidence=confidence,
                seed=seed,
            ),
            **output,
        )
    return result.exit_code
