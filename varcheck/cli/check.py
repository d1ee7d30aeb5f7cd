"""``varcheck check FILE.toml``: a file of named claims, with family-wise error control."""

from __future__ import annotations

from typing import Any

import click

from . import EXIT_CODES_HELP
from .options import (
    confidence_option,
    exclusive,
    grouped,
    output_options,
    parallel_options,
    path_option,
    positive_option,
    precision_option,
    samples_option,
    seed_option,
    stack,
)
from .planning import plan_file_command, planning_options
from .run import run


def _overrides(**values: Any) -> dict[str, Any]:
    """The options as given (None: the file decides), once not both --precision and --samples."""
    exclusive("precision", "samples")
    return values


#: the file's [defaults] the command line may override, handed over as ``overrides``
file_overrides = grouped(
    "overrides",
    stack(
        precision_option(
            None, "Target relative half-width (overrides the file; default 0.01).", example=0.01
        ),
        samples_option("Fixed number of products per test instead of --precision."),
        positive_option("--max-seconds", "Wall-time cap per test."),
        confidence_option(None, "Confidence level (overrides the file; default 0.95)."),
        seed_option("Root seed (overrides the file; drawn and shown when neither gives one)."),
    ),
    _overrides,
)


@click.command(
    "check",
    epilog="""\b
Examples:
  varcheck check examples/claims.toml
  varcheck check examples/claims.toml --junit-xml reports/varcheck.xml
  varcheck check examples/claims.toml --format json --seed 7
  varcheck check examples/claims.toml --plan --detect 0.03

\b
File format (TOML):
  [defaults]            # optional: seed, confidence (or alpha), precision
  seed = 2024           #   or samples, max_seconds (the command line wins)
  [[claim]]
  name = "textbook"     # unique
  dk = "2..512"         # integer, range spec or list
  dist = "normal"       # or q_dist / k_dist; optional rho
  claim = "dk"          # number or expression
  scaled = false        # optional
  tolerance = 0.02      # optional: the band claim × [0.98, 1.02]
  description = "..."   # optional
  # instead of dist, your code: sampler = "attention.py:logits" (path
  #   relative to this file), args = { heads = 4 } (docs/own-code.md)
  # or a kernel's scale: probe = "kernels.py:attn", with dk, expect,
  #   causal, layout, heads, queries, keys, dtype, tolerance, args
  #   (docs/probe.md)

Every (claim, d_k) pair is one test, and Holm's procedure over all of them keeps the chance
that a file of true claims fails at most 1 - confidence. With a tolerance T: pass when the
whole 90% interval lies inside claim ± T; fail when the whole 95% interval lies outside it;
otherwise inconclusive. The exit code is the worst outcome.

"""
    + EXIT_CODES_HELP,
)
@click.argument("file", type=click.Path(dir_okay=False))
@file_overrides
@parallel_options
@output_options()
@path_option(
    "--junit-xml",
    "junit",
    text="Also write a JUnit XML report (one test case per claim) to this path.",
)
@planning_options
def command(
    file: str,
    overrides: dict[str, Any],
    parallel: dict[str, Any],
    output: dict[str, Any],
    junit: str | None,
    planning: dict[str, Any],
) -> int:
    """Check every claim of a TOML claim file, as a CI gate."""
    if planning["plan"]:
        return plan_file_command(file, planning, overrides, output["fmt"], junit)
    from ..checks.claim_file import check, load_check_file
    from ..checks.render import check_to_junit
    from ..errors import VarcheckError
    from ..output.figures import ensure_writable

    spec = load_check_file(file)
    if junit is not None:
        import os

        # like pytest's --junitxml, create the report's folder (e.g. reports/varcheck.xml)
        os.makedirs(os.path.dirname(os.path.abspath(junit)), exist_ok=True)
        ensure_writable(junit, "--junit-xml")
    result = run(
        lambda progress: check(spec, **overrides, **parallel, progress=progress),
        **output,
        progress="check",
    )
    if junit is not None:
        try:
            with open(junit, "w", encoding="utf-8") as fh:
                fh.write(check_to_junit(result))
        except OSError as exc:
            raise VarcheckError(f"--junit-xml {junit!r}: cannot write ({exc.strerror})") from None
    return result.exit_code
