"""Pieces shared by every command: option types, sampling options, consoles, progress, exits."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from ..checks.claims import Claim, parse_claim
from ..core.distributions import Distribution, parse_distribution
from ..core.options import MIN_SAMPLES
from ..core.ranges import parse_dk
from ..errors import VarcheckError

EXIT_CODES_HELP = (
    "Exit codes: 0 all consistent (or pass), 1 some claim rejected (fail), 2 bad usage or input, "
    "3 inconclusive, 4 no valid test for some row (infinite variance or infinite fourth moment), "
    "130 interrupted (partial results are printed), 141 output pipe closed (e.g. | head)."
)


class DistType(click.ParamType):
    name = "SPEC"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Distribution:
        if isinstance(value, Distribution):
            return value
        try:
            return parse_distribution(value)
        except VarcheckError as exc:
            self.fail(str(exc), param, ctx)


class DkType(click.ParamType):
    name = "RANGE"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> list[int]:
        if isinstance(value, list):
            return value
        try:
            return parse_dk(value)
        except VarcheckError as exc:
            self.fail(str(exc), param, ctx)


class ClaimType(click.ParamType):
    name = "EXPR"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Claim:
        if isinstance(value, Claim):
            return value
        try:
            return parse_claim(value)
        except VarcheckError as exc:
            self.fail(str(exc), param, ctx)


class CountType(click.ParamType):
    """A whole number that may be written in scientific notation (``1e6``)."""

    name = "N"

    def __init__(self, minimum: int = 100) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            number = float(value)
        except ValueError:
            self.fail(
                f"{value!r} is not a number; give a whole number such as 100000 or 1e6", param, ctx
            )
        if not math.isfinite(number) or not number.is_integer() or number < self.minimum:
            self.fail(
                f"{value!r} must be a whole number >= {self.minimum} (e.g. 100000 or 1e6)",
                param,
                ctx,
            )
        return int(number)


def finite_float(
    lo: float | None = None, hi: float | None = None, *, what: str, closed: bool = False
) -> click.ParamType:
    """A float in (lo, hi), or [lo, hi] when ``closed``; NaN and infinities are refused."""

    class _Float(click.ParamType):
        name = "FLOAT"

        def convert(
            self, value: Any, param: click.Parameter | None, ctx: click.Context | None
        ) -> float:
            if isinstance(value, float):
                number = value
            else:
                try:
                    number = float(value)
                except ValueError:
                    self.fail(f"{value!r} is not a number; accepted: {what}", param, ctx)
            above = lo is None or (number >= lo if closed else number > lo)
            below = hi is None or (number <= hi if closed else number < hi)
            ok = math.isfinite(number) and above and below
            if not ok:
                self.fail(f"{value!r} is out of range; accepted: {what}", param, ctx)
            return number

    return _Float()


def dist_options(f: Callable) -> Callable:
    """--dist, --q-dist, --k-dist, --rho."""
    f = click.option(
        "--rho",
        type=finite_float(-1.0, 1.0, what="a number in [-1, 1]", closed=True),
        default=0.0,
        show_default=True,
        help="Correlation of q_i with k_i (normal entries).",
    )(f)
    f = click.option(
        "--k-dist",
        type=DistType(),
        default=None,
        help="Distribution of k's entries (overrides --dist for k).",
    )(f)
    f = click.option(
        "--q-dist",
        type=DistType(),
        default=None,
        help="Distribution of q's entries (overrides --dist for q).",
    )(f)
    f = click.option(
        "--dist",
        type=DistType(),
        default="normal",
        show_default=True,
        help="Entry distribution for q and k: normal, uniform, rademacher, laplace, "
        "t:df=D, or scipy.NAME:shape=...; every spec takes mean= and sd=.",
    )(f)
    return f


def parallel_options(f: Callable) -> Callable:
    """--workers, --scheduler."""
    f = click.option(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="Run chunks on a Dask cluster: 'local' (a LocalCluster with --workers processes) "
        "or a scheduler address such as tcp://host:8786 (needs varcheck[dask]).",
    )(f)
    f = click.option(
        "--workers",
        type=click.IntRange(1, 256),
        default=None,
        help="Threads drawing chunks (default: all cores); results do not depend on it.",
    )(f)
    return f


#: the --seed option of every command that draws random numbers
seed_option = click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=None,
    help="Root seed (drawn and shown when omitted); same seed, same output.",
)


def plot_option(what: str) -> Callable:
    """--plot PATH: also write a figure of ``what`` (the path is checked before any work)."""
    return click.option(
        "--plot",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"Also write a figure (PNG) of {what} (needs varcheck[plot]).",
    )


def sampling_options(f: Callable) -> Callable:
    """--precision, --samples, --max-seconds, --confidence, --seed."""
    f = seed_option(f)
    f = click.option(
        "--confidence",
        type=finite_float(0.0, 1.0, what="a number in (0, 1)"),
        default=0.95,
        show_default=True,
        help="Confidence level of the intervals.",
    )(f)
    f = click.option(
        "--max-seconds",
        type=finite_float(0.0, None, what="a number > 0"),
        default=None,
        help="Wall-time cap per row (rows drawn from shared blocks share rows × this); a row "
        "stopped by it reports the precision reached.",
    )(f)
    f = click.option(
        "--samples",
        type=CountType(MIN_SAMPLES),
        default=None,
        help="Fixed number of q·k products per row instead of --precision (e.g. 1e6).",
    )(f)
    f = click.option(
        "--precision",
        type=finite_float(0.0, 1.0, what="a number in (0, 1), e.g. 0.01"),
        default=0.01,
        show_default=True,
        help="Target relative half-width of each variance interval.",
    )(f)
    return f


def format_option(choices: tuple[str, ...] = ("table", "json", "csv", "markdown")) -> Callable:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default="table",
        show_default=True,
        help="Output format (table on a terminal; others for machines).",
    )


def check_exclusive_sampling(ctx: click.Context, samples: int | None) -> None:
    """--precision and --samples contradict each other; refuse instead of silently picking one."""
    if samples is not None and ctx.get_parameter_source("precision") not in (
        click.core.ParameterSource.DEFAULT,
        None,
    ):
        raise click.UsageError(
            "--precision and --samples cannot be used together: "
            "--samples fixes the number of products, --precision targets a width"
        )


def stdout_console():  # noqa: ANN201
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit with status 1 ("rejected" here); let main() report a closed pipe
            self.quiet = True
            raise BrokenPipeError

    # a pipe or file gets a wide table instead of rich's 80-column default
    width = None if sys.stdout.isatty() else 150
    return _Console(soft_wrap=False, width=width)


def stderr_console():  # noqa: ANN201
    from rich.console import Console

    return Console(stderr=True)


class ProgressReporter:
    """A rich progress bar on stderr, shown only on a terminal and only after ``delay`` seconds."""

    def __init__(self, label: str, *, delay: float = 0.5, enabled: bool | None = None) -> None:
        self.label = label
        self.delay = delay
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.start = time.perf_counter()
        self._progress: Any = None
        self._task: Any = None

    def __call__(self, index: int, total: int, fraction: float) -> None:
        if not self.enabled:
            return
        if self._progress is None:
            if time.perf_counter() - self.start < self.delay:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                console=stderr_console(),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=total)
        self._progress.update(
            self._task,
            completed=index + min(fraction, 1.0),
            description=f"{self.label} {index + 1}/{total}",
        )

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> ProgressReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
