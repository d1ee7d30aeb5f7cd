"""``varcheck derive``: the derivation of Var(q·k) = d_k, each step checked by simulation."""

from __future__ import annotations

from typing import Any

import click

from ..core.ranges import MAX_DK
from . import exit_codes_help
from .options import dist_options, int_option, output_options, sampling_options
from .run import run


@click.command(
    "derive",
    epilog="""\b
Examples:
  varcheck derive                          # every step holds
  varcheck derive --dist normal:mean=0.5   # step 2 breaks: means add terms
  varcheck derive --rho 0.5 --dk 16        # correlated q_i, k_i
  varcheck derive --dist t:df=2            # infinite variance: exit 4
  varcheck derive --q-dist uniform:sd=2 --format json
  varcheck derive --dist normal:mean=0.5 --plot derive.png

derive explains: a textbook step that breaks is its answer, not a failure, so it
exits 0 whenever every check is consistent with the exact values it shows.
Exit 1 means a check rejected an exact value (at most 1 - confidence of the
time by chance; rerun with another --seed). To fail a script when
Var(q·k) = d_k does not hold, use varcheck assert --claim dk.

--max-seconds caps each of the three Monte-Carlo checks (step 4 reuses step 3's
draws); a check it stops is marked time-limited: its interval then depends on
the machine's speed, not only on the seed.

"""
    + exit_codes_help(0, 1, 2, 4),
)
@int_option("--dk", 1, MAX_DK, 64, "Length d_k of q and k.")
@dist_options
@sampling_options
@output_options("each step: exact value, textbook value and Monte-Carlo interval")
def command(
    dk: int,
    laws: dict[str, Any],
    sampling: dict[str, Any],
    output: dict[str, Any],
) -> int:
    """Walk through Var(q·k) = d_k step by step, with a Monte-Carlo check beside each step.

    Steps: E[XY]; Var(XY) in general; the sum of d_k independent terms; the 1/√d_k scaling.
    Each shows its formula, its exact value for the chosen distributions, the textbook's value
    and a simulation with its interval. Where an assumption fails (non-zero mean, correlation,
    variance not 1, infinite moments) the step that breaks is named with the correct value.
    """
    from ..teaching.derive import derive

    result = run(
        lambda: derive(dk, **laws, **sampling),
        **output,
    )
    return result.exit_code
