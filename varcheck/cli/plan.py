"""``varcheck plan``: the samples a CI gate needs to catch an error of a given size."""

from __future__ import annotations

from typing import Any

import click

from ..checks.claims import Claim
from . import exit_codes_help
from .options import confidence_option, format_option, seed_option, source_options
from .run import run
from .types import CLAIM, DK_RANGE, FiniteFloat

EXIT_CODES = exit_codes_help(
    0,
    2,
    meanings={
        0: "0 planned (plan tests nothing)",
        130: "130 interrupted by Ctrl-C and 143 by SIGTERM",
    },
)


@click.command(
    "plan",
    epilog="""\b
Examples:
  varcheck plan --dk 64 --claim dk --detect 0.03 --power 0.9
  varcheck plan --dk 64 --claim dk --tolerance 0.02
  varcheck plan --dk 8..128 --claim dk --detect 0.05 --format json
  varcheck plan --dk 64 --sampler my_layer.py:logits --claim 1 --detect 0.02

A short pilot per row (200 blocks, or 200 calls of a sampler; its own random stream) measures
the spread of one block; the plan is the fewest samples whose run detects an error of --detect
of the claim, either way, with probability --power, at the run's level (each row of a range at
its share, α/rows, of the Holm family). With --tolerance: a true claim passes with probability
--power. Pass "samples" to the run's --samples. See docs/power.md.

"""
    + EXIT_CODES,
)
@click.option("--dk", "dks", type=DK_RANGE, required=True, help="d_k: one value or a range.")
@source_options
@click.option(
    "--claim",
    type=CLAIM,
    default=None,
    help="The claim the run will test (default theory; with --sampler required, in dk).",
)
@click.option(
    "--detect",
    type=FiniteFloat(0.0, 1.0, what="a relative error in (0, 1), e.g. 0.03"),
    default=None,
    help="Relative error of the truth from the claim to catch, either way (e.g. 0.03).",
)
@click.option(
    "--power",
    type=FiniteFloat(0.5, 1.0, what="a probability in (0.5, 1), e.g. 0.9"),
    default=0.9,
    show_default=True,
    help="Probability of catching it.",
)
@click.option(
    "--tolerance",
    type=FiniteFloat(0.0, 1.0, what="a number in (0, 1), e.g. 0.02"),
    default=None,
    help="Plan a tolerance claim: a true claim passes with probability --power.",
)
@confidence_option()
@seed_option("Root seed of the pilots (drawn and shown when omitted).")
@format_option()
def command(
    dks: list[int],
    laws: dict[str, Any],
    claim: Claim | None,
    detect: float | None,
    power: float,
    tolerance: float | None,
    confidence: float,
    seed: int | None,
    fmt: str,
) -> int:
    """Plan a run: the samples each row needs to catch --detect with --power."""
    from ..checks.plan import plan

    if (detect is None) == (tolerance is None):
        raise click.UsageError("give one of --detect (an error to catch) and --tolerance")
    result = run(
        lambda: plan(
            ",".join(str(d) for d in dks),
            claim=None if claim is None else claim.text,
            detect=detect,
            power=power,
            tolerance=tolerance,
            confidence=confidence,
            seed=seed,
            **laws,
        ),
        fmt=fmt,
    )
    return result.exit_code
