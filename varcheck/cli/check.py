"""``varcheck check FILE.toml``: a file of named claims, with family-wise error control."""

from __future__ import annotations

import click

from ..core.options import MIN_SAMPLES
from ._common import (
    EXIT_CODES_HELP,
    CountType,
    ProgressReporter,
    finite_float,
    format_option,
    parallel_options,
    stdout_console,
)


@click.command(
    "check",
    epilog="""\b
Examples:
  varcheck check examples/claims.toml
  varcheck check examples/claims.toml --junit-xml reports/varcheck.xml
  varcheck check examples/claims.toml --format json --seed 7

\b
File format (TOML):
  [defaults]                 # optional: seed, confidence (or alpha), precision or samples,
  seed = 2024                #           max_seconds; options given here override them
  [[claim]]
  name = "textbook"          # unique
  dk = "2..512"              # integer, range spec or list
  dist = "normal"            # or q_dist / k_dist; optional rho
  claim = "dk"               # number or expression
  scaled = false             # optional
  tolerance = 0.02           # optional: equivalence test
  description = "..."        # optional

\b
Every (claim, d_k) pair is one test, and Holm's procedure over all of them keeps the chance
that a file of true claims fails at most 1 - confidence. The exit code is the worst outcome.

"""
    + EXIT_CODES_HELP,
)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--precision",
    type=finite_float(0.0, 1.0, what="a number in (0, 1), e.g. 0.01"),
    default=None,
    help="Target relative half-width (overrides the file; default 0.01).",
)
@click.option(
    "--samples",
    type=CountType(MIN_SAMPLES),
    default=None,
    help="Fixed number of products per test instead of --precision.",
)
@click.option(
    "--max-seconds",
    type=finite_float(0.0, None, what="a number > 0"),
    default=None,
    help="Wall-time cap per test.",
)
@click.option(
    "--confidence",
    type=finite_float(0.0, 1.0, what="a number in (0, 1)"),
    default=None,
    help="Confidence level (overrides the file; default 0.95).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=None,
    help="Root seed (overrides the file; drawn and shown when neither gives one).",
)
@parallel_options
@format_option()
@click.option(
    "--junit-xml",
    "junit",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write a JUnit XML report (one test case per claim) to this path.",
)
def command(
    file: str,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    confidence: float | None,
    seed: int | None,
    workers: int | None,
    scheduler: str | None,
    fmt: str,
    junit: str | None,
) -> int:
    """Check every claim of a TOML claim file, as a CI gate."""
    from ..checks.claim_file import check, load_check_file
    from ..checks.render import check_to_junit, render_check
    from ..errors import VarcheckError
    from ..output.figures import check_output_path

    if precision is not None and samples is not None:
        raise click.UsageError("--precision and --samples cannot be used together")
    spec = load_check_file(file)
    if junit is not None:
        import os

        # like pytest's --junitxml, create the report's folder (e.g. reports/varcheck.xml)
        os.makedirs(os.path.dirname(os.path.abspath(junit)), exist_ok=True)
        check_output_path(junit, "--junit-xml")
    with ProgressReporter("check") as progress:
        result = check(
            spec,
            seed=seed,
            workers=workers,
            scheduler=scheduler,
            confidence=confidence,
            precision=precision,
            samples=samples,
            max_seconds=max_seconds,
            progress=progress,
        )
    render_check(result, fmt, stdout_console())
    if junit is not None:
        try:
            with open(junit, "w", encoding="utf-8") as fh:
                fh.write(check_to_junit(result))
        except OSError as exc:
            raise VarcheckError(f"--junit-xml {junit!r}: cannot write ({exc.strerror})") from None
    return result.exit_code
