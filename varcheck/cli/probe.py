"""``varcheck probe TARGET``: the effective scale of an attention kernel, read off its outputs."""

from __future__ import annotations

from typing import Any

import click

from ..core.messages import shown
from . import exit_codes_help
from .options import (
    confidence_option,
    distinct_keys,
    exclusive,
    grouped,
    int_option,
    option,
    output_options,
    positive_option,
    precision_option,
    seed_option,
    stack,
)
from .run import run
from .types import DK_RANGE, KERNEL_ARG, CountType, FiniteFloat, as_number

#: Exit 4 of a probe: what ``varcheck.core.probe.budget.no_interval`` gives no interval (its
#: 200 is core.estimation.MIN_BLOCKS, which this module does not import: it would load numpy;
#: tests/test_probe_budget.py checks that the help names it)
_UNRELIABLE_EXIT = (
    "4 no valid interval for some row (fewer calls than 200, or too few queries and keys)"
)


class CallsType(CountType):
    """A number of kernel calls (>= ``minimum``): the examples are numbers of calls, not the
    products of ``assert`` (100000 or 1e6)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        number = as_number(
            self, value, "give a whole number of calls such as 200 or 1000", param, ctx
        )
        if not number.is_integer() or number < self.minimum:  # NaN and ∞ fail is_integer
            self.fail(
                f"{shown(value)} must be a whole number of calls >= {self.minimum} "
                "(e.g. 200 or 1000)",
                param,
                ctx,
            )
        return int(number)


def _effort(**values: Any) -> dict[str, Any]:
    exclusive("precision", "samples", "--samples fixes the number of calls, --precision a width")
    if values["samples"] is not None:
        values["precision"] = None
    return values


#: --precision, --samples (calls), --max-seconds, --confidence, --seed, handed over as ``effort``
effort_options = grouped(
    "effort",
    stack(
        precision_option(0.01, "Target relative half-width of the scale's interval."),
        option(
            "--samples",
            kind=CallsType(20),
            default=None,
            text="Fixed number of independent calls instead of --precision (>= 20; an "
            "interval needs 200).",
        ),
        positive_option("--max-seconds", "Wall-time cap of the run (each d_k an equal share)."),
        confidence_option(),
        seed_option(),
    ),
    _effort,
)


@click.command(
    "probe",
    epilog="""\b
Examples:
  cd examples
  varcheck probe attention_kernels.py:attention --dk 64
  varcheck probe attention_kernels.py:scale_forgotten --dk 64
  varcheck probe attention_kernels.py:scaled_by_dk --dk 64 --expect 1/dk
  varcheck probe attention_kernels.py:layer_scaled --dk 64 --arg layer=2
  varcheck probe attention_kernels.py:attention --dk 8..512 --plot p.png
  varcheck probe attention_kernels.py:alibi_heads --dk 64 --layout bhnd

\b
The kernel is fn(q, k, v) -> softmax(s·q kᵀ + bias) v. varcheck gives it
random q and k and values that make its output the attention weights; the
log-weights regressed on q·k give s, each call one independent block of the
interval. Masks, position biases (ALiBi) and non-linearities (soft-capping)
are reported; outputs that are not softmax attention are refused (exit 2).
With several d_k, s ∝ d_k^b is fitted. See docs/probe.md.

\b
Without --tolerance: a consistency test, fail when the interval excludes
the expected scale. With --tolerance T, as in assert: pass when the whole
90% interval lies inside expected ± T; fail when the whole 95% interval
lies outside it; otherwise inconclusive (at --confidence C: the 2C − 1
and C intervals). Below 200 calls (a smaller --samples, or a run that
--max-seconds stops early) no interval is calibrated: the scale is shown
without one, and without a verdict (unreliable, exit 4); so it is with
too few --queries and --keys for the d_k, at any number of calls (the
reason names enough).

"""
    + exit_codes_help(0, 1, 2, 3, 4, meanings={4: _UNRELIABLE_EXIT}),
)
@click.argument("target", metavar="TARGET")
@option(
    "--dk",
    "dks",
    kind=DK_RANGE,
    default=None,
    text="d_k: one value, or a range (8..512).",
    required=True,
)
@option(
    "--expect",
    kind=None,
    default="1/sqrt(dk)",
    metavar="EXPR",
    text="Expected scale: an expression in dk and h (heads), e.g. 1/dk.",
)
@click.option("--causal", is_flag=True, help="Expect a causal mask (fail without one).")
@option(
    "--layout",
    kind=click.Choice(("nd", "bhnd", "bnhd")),
    default="nd",
    text="q, k, v as (n, d), (batch, heads, n, d) or (batch, n, heads, d).",
)
@option(
    "--out-layout",
    kind=click.Choice(("nd", "bhnd", "bnhd")),
    default=None,
    text="The output's layout if not --layout's (HF attention: bhnd in, bnhd out).",
)
@int_option("--heads", 1, 1024, None, "Heads per call (bhnd/bnhd, default 2); h of the laws.")
@int_option(
    "--kv-heads",
    1,
    1024,
    None,
    "Key/value heads (grouped queries): head i uses i // (heads/kv-heads).",
)
# the API's defaults (core.probe.judge.QUERIES, KEYS; tests/test_probe_cli.py checks): no
# power of two and unequal, so a kernel dividing by √n in place of √d_k cannot pass at d_k = 64
@int_option("--queries", 2, 4096, 48, "Queries per head and call.")
@int_option("--keys", 2, 4096, 80, "Keys per head and call.")
@int_option("--dv", 1, 65536, None, "Width of v (default: --keys, one-hot values).")
@option(
    "--dtype",
    kind=click.Choice(("float64", "float32", "float16", "bfloat16")),
    default="float64",
    text="Round the inputs to this format, the one the kernel computes in.",
)
@option(
    "--arg",
    "kernel_args",
    kind=KERNEL_ARG,
    default=None,
    multiple=True,
    text="KEY=VALUE passed to the kernel: a Python literal, or an expression in dk "
    "and h (scale=1/dk); repeatable.",
)
@option(
    "--tolerance",
    kind=FiniteFloat(0.0, 1.0, what="a number in (0, 1), e.g. 0.02"),
    default=None,
    text="Relative tolerance T: the band expected × [1 − T, 1 + T].",
)
@effort_options
@output_options("the effective scale against d_k with the expected law")
def command(
    target: str,
    dks: list[int],
    kernel_args: tuple[tuple[str, Any], ...],
    effort: dict[str, Any],
    output: dict[str, Any],
    **design: Any,
) -> int:
    """Read the effective scale of an attention kernel and test it against the expected law."""
    # design: --expect, --causal, --layout, --out-layout, --heads, --kv-heads, --queries, --keys,
    # --dv, --dtype and --tolerance, named as probe_sweep's keywords and validated there
    from ..kernels.probe import probe_sweep

    args = distinct_keys("--arg", kernel_args)
    result = run(
        lambda progress: probe_sweep(target, dks, args=args, **design, **effort, progress=progress),
        **output,
        progress="probe",
    )
    return result.exit_code
