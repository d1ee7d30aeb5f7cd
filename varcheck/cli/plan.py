"""``varcheck plan``: the samples a CI gate needs to catch an error of a given size."""

from __future__ import annotations

from typing import Any

import click

from ..checks.claims import Claim
from . import exit_codes_help
from .options import (
    confidence_option,
    distinct_keys,
    format_option,
    given,
    grouped,
    int_option,
    option,
    positive_option,
    seed_option,
    source_options,
    stack,
)
from .run import run
from .types import CLAIM, DK_RANGE, KERNEL_ARG, FiniteFloat

EXIT_CODES = exit_codes_help(
    0,
    2,
    meanings={
        0: "0 planned (plan tests nothing)",
        130: "130 interrupted by Ctrl-C and 143 by SIGTERM",
    },
)


def _kernel(**values: Any) -> dict[str, Any]:
    """The kernel and the probe options given (named as a claim file's probe claim)."""
    args = values.pop("kernel_args")
    chosen = {key: value for key, value in values.items() if value not in (None, False)}
    if args:
        chosen["args"] = distinct_keys("--arg", args)
    return {"kernel": values["kernel"], **chosen}


#: --kernel and the options of ``varcheck probe`` that shape its calls, handed over as ``probe``
kernel_options = grouped(
    "probe",
    stack(
        option(
            "--kernel",
            kind=None,
            default=None,
            metavar="MODULE:FUNCTION",
            text="Plan `varcheck probe` of this kernel fn(q, k, v) instead (docs/probe.md).",
        ),
        option("--expect", kind=None, default=None, metavar="EXPR", text="As probe's."),
        click.option("--causal", is_flag=True, default=None, help="As probe's."),
        option(
            "--layout", kind=click.Choice(("nd", "bhnd", "bnhd")), default=None, text="As probe's."
        ),
        option(
            "--out-layout",
            kind=click.Choice(("nd", "bhnd", "bnhd")),
            default=None,
            text="As probe's.",
        ),
        int_option("--heads", 1, 1024, None, "As probe's."),
        int_option("--kv-heads", 1, 1024, None, "As probe's."),
        int_option("--queries", 2, 4096, None, "As probe's (default 48)."),
        int_option("--keys", 2, 4096, None, "As probe's (default 80)."),
        option(
            "--dtype",
            kind=click.Choice(("float64", "float32", "float16", "bfloat16")),
            default=None,
            text="As probe's.",
        ),
        option(
            "--arg", "kernel_args", kind=KERNEL_ARG, default=None, multiple=True, text="As probe's."
        ),
    ),
    _kernel,
)


@click.command(
    "plan",
    epilog="""\b
Examples:
  varcheck plan --dk 64 --claim dk --detect 0.03 --power 0.9
  varcheck plan --dk 64 --claim dk --tolerance 0.02
  varcheck plan --dk 8..128 --claim dk --detect 0.05 --format json
  varcheck plan --dk 64 --sampler my_layer.py:logits --claim 1 --detect 0.02
  varcheck plan --dk 64 --kernel attention_kernels.py:noisy --detect 0.002
  varcheck check claims.toml --plan --detect 0.03

A short pilot per row (200 blocks, or 200 calls of a sampler; its own random stream) measures
the spread of one block; the plan is the fewest samples whose run detects an error of --detect
of the claim, either way, with probability --power, at the run's level (each row of a range at
its share, α/rows, of the Holm family). With --tolerance: a true claim passes with probability
--power. Pass "samples" to the run's --samples. With --kernel: the calls
`varcheck probe KERNEL` needs (--detect is an error of its scale; each head is
one test). The pilots together stop at --max-seconds (default 60), and a row
whose pilot drew fewer than 20 blocks by then is refused. See docs/power.md.

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
@kernel_options
@positive_option("--max-seconds", "Wall-time cap of the pilots, all rows together (default 60).")
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
    probe: dict[str, Any],
    max_seconds: float | None,
    confidence: float,
    seed: int | None,
    fmt: str,
) -> int:
    """Plan a run: the samples each row needs to catch --detect with --power."""
    from ..checks.plan import plan

    if (detect is None) == (tolerance is None):
        raise click.UsageError("give one of --detect (an error to catch) and --tolerance")
    kernel = probe.pop("kernel")
    if kernel is None and probe:
        raise click.UsageError(f"--{next(iter(probe)).replace('_', '-')} describes a --kernel")
    typed = ("claim", "dist", "q_dist", "k_dist", "rho", "sampler")
    if kernel is not None and any(given(name) for name in typed):
        raise click.UsageError("--kernel takes --expect, not --claim, --dist or --sampler")
    source = {"kernel": kernel, "probe_options": probe} if kernel is not None else laws
    result = run(
        lambda: plan(
            ",".join(str(d) for d in dks),
            claim=None if claim is None else claim.text,
            detect=detect,
            power=power,
            tolerance=tolerance,
            confidence=confidence,
            seed=seed,
            max_seconds=max_seconds,
            **source,
        ),
        fmt=fmt,
    )
    return result.exit_code
