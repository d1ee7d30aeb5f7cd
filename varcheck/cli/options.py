"""The options several commands share, declared once, and the check of options that conflict.

Every option shows its default in the help unless the default is None (nothing to show).
Options whose help differs between commands take the help text as an argument: the help pages
are part of the interface (golden files).

Four groups of options reach the command as one argument each, the keyword arguments of the
functions they configure: `dist_options` as ``laws``, `sampling_options` as ``sampling``,
`parallel_options` as ``parallel`` (the API's), `output_options` as ``output`` (those of
:func:`varcheck.cli.run.run`); a command passes them on with ``**laws`` and so on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from ..core.messages import shown
from ..core.options import MIN_SAMPLES
from .types import DISTRIBUTION, DK_RANGE, SAMPLER_ARG, CountType, FiniteFloat

__all__ = [
    "confidence_option",
    "dist_option",
    "dist_options",
    "distinct_keys",
    "dk_range_option",
    "exclusive",
    "format_option",
    "given",
    "grouped",
    "int_option",
    "option",
    "output_options",
    "path_option",
    "parallel_options",
    "plot_option",
    "positive_option",
    "precision_option",
    "samples_option",
    "sampling_options",
    "seed_option",
    "source_options",
    "stack",
]

#: a decorator adding options to a click command function
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def stack(*decorators: Decorator) -> Decorator:
    """One decorator applying ``decorators`` so that their options appear in the order given."""

    def apply(f: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            f = decorator(f)
        return f

    return apply


def option(*decls: str, kind: Any, default: Any, text: str, **extra: Any) -> Decorator:
    """``click.option`` whose default is shown in the help unless it is None."""
    return click.option(
        *decls, type=kind, default=default, show_default=default is not None, help=text, **extra
    )


def int_option(flag: str, low: int, high: int | None, default: int | None, text: str) -> Decorator:
    """A whole-number option in [low, high] (no upper bound when ``high`` is None)."""
    return option(flag, kind=click.IntRange(low, high), default=default, text=text)


def grouped(
    name: str, options: Decorator, build: Callable[..., dict[str, Any]] = dict
) -> Decorator:
    """Add ``options`` and hand the command ``name=build(**their values)`` in their place.

    ``build`` (default: the values as they are) may adjust them, or refuse a combination by
    raising click's usage error.
    """

    def probe() -> None: ...

    # click's decorators add __click_params__ to the function, which its type hints do not say
    fields = tuple(param.name for param in options(probe).__click_params__)  # type: ignore[attr-defined]

    def decorator(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def command(*args: Any, **kwargs: Any) -> Any:
            values = {field: kwargs.pop(field) for field in fields}
            return f(*args, **{name: build(**values)}, **kwargs)

        return options(command)

    return decorator


def dist_option(flag: str, text: str, default: str | None = None) -> Decorator:
    """An entry distribution option (``--dist``, ``--q-dist``, ``--a-dist``...)."""
    return option(flag, kind=DISTRIBUTION, default=default, text=text)


#: --dk A..B: the d_k values of a sweep (parameter ``dks``)
dk_range_option = option(
    "--dk",
    "dks",
    kind=DK_RANGE,
    default="2..512",
    text="d_k values: A..B doubles, A..B:S steps by S, commas mix (2,3,10..40:10).",
)


def seed_option(
    text: str = "Root seed (drawn and shown when omitted); same seed, same output.",
) -> Decorator:
    """--seed, the root seed of every command that draws random numbers; VARCHECK_SEED in the
    environment stands in for it (a rehearsed lecture or a CI job gets the same numbers every
    run), and the run says so on stderr."""
    return option(
        "--seed",
        kind=click.IntRange(0, None),
        default=None,
        text=text,
        envvar="VARCHECK_SEED",
        show_envvar=True,
        callback=_seed_source,
    )


def _seed_source(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """Say when the seed came from VARCHECK_SEED rather than --seed."""
    from click.core import ParameterSource

    if (
        value is not None
        and ctx.get_parameter_source(str(param.name)) is ParameterSource.ENVIRONMENT
    ):
        click.echo(f"varcheck: seed {value} from VARCHECK_SEED; --seed overrides it", err=True)
    return value


def confidence_option(
    default: float | None = 0.95, text: str = "Confidence level of the intervals."
) -> Decorator:
    """--confidence, a level in (0, 1)."""
    what = "a number in (0, 1)"
    return option("--confidence", kind=FiniteFloat(0.0, 1.0, what=what), default=default, text=text)


def precision_option(
    default: float | None = 0.01,
    text: str = "Target relative half-width of each variance interval.",
    *,
    example: float | None = None,
) -> Decorator:
    """--precision, the target relative half-width of an interval.

    A refused value is answered with ``example`` (default: the default) as a valid one.
    """
    what = f"a number in (0, 1), e.g. {default if example is None else example}"
    return option("--precision", kind=FiniteFloat(0.0, 1.0, what=what), default=default, text=text)


def samples_option(
    text: str = "Fixed number of q·k products per row instead of --precision (e.g. 1e6).",
) -> Decorator:
    """--samples, a fixed budget of at least MIN_SAMPLES products (``1e6`` accepted)."""
    return option("--samples", kind=CountType(MIN_SAMPLES), default=None, text=text)


def positive_option(flag: str, text: str) -> Decorator:
    """A float option > 0 with no default (``--max-seconds``, ``--sigma-x``)."""
    return option(flag, kind=FiniteFloat(0.0, None, what="a number > 0"), default=None, text=text)


#: options naming a file varcheck writes: checked at parsing, before any work
_OUTPUT_FLAGS = frozenset({"--plot", "--junit-xml"})


def _output_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Refuse at once an output path that can never take a whole report.

    An empty name, a folder, and anything that exists but is not a regular file (a FIFO would
    block the write forever, /dev/full fails it) except /dev/null; the folder and the
    permissions are checked by the command before its run.
    """
    if value is None:
        return None
    import os
    import stat

    flag = param.opts[0]
    if not value.strip():
        raise click.BadParameter("the path is empty; give a file name", ctx, param)
    if os.path.realpath(value) == os.devnull:
        return value
    try:
        mode = os.stat(value).st_mode
    except FileNotFoundError:
        return value  # a new file: the command checks its folder
    except (OSError, ValueError) as exc:  # a name too long, a NUL, a file used as a folder
        reason = getattr(exc, "strerror", None) or str(exc)
        raise click.BadParameter(
            f"{shown(value)} cannot be written ({reason})", ctx, param
        ) from None
    if stat.S_ISDIR(mode):
        raise click.BadParameter(f"{shown(value)} is a folder; give a file name", ctx, param)
    if not stat.S_ISREG(mode):
        raise click.BadParameter(
            f"{shown(value)} is not a regular file (a device, FIFO or socket); {flag} writes "
            "a file",
            ctx,
            param,
        )
    return value


def path_option(*decls: str, text: str, **checks: Any) -> Decorator:
    """A file path option with no default; ``checks`` go to ``click.Path`` (``writable=True``).

    --plot and --junit-xml name a file varcheck writes: :func:`_output_path` checks it first.
    """
    extra: dict[str, Any] = {}
    if _OUTPUT_FLAGS.intersection(decls):
        extra["callback"] = _output_path
    return option(
        *decls, kind=click.Path(dir_okay=False, **checks), default=None, text=text, **extra
    )


def plot_option(what: str) -> Decorator:
    """--plot PATH: also write a figure of ``what`` (the path is checked before any work)."""
    return path_option(
        "--plot", text=f"Also write a figure (PNG) of {what} (needs varcheck[plot])."
    )


#: The --format choices (:data:`varcheck.output.formats.FORMATS`, without importing it).
FORMAT_CHOICES = ("table", "json", "csv", "csv-meta", "markdown")


def format_option(choices: tuple[str, ...] = FORMAT_CHOICES) -> Decorator:
    """--format, the output format (parameter ``fmt``)."""
    return option(
        "--format",
        "fmt",
        kind=click.Choice(choices),
        default="table",
        text="Output format (table on a terminal; others for machines): csv is plain CSV, "
        "header first; csv-meta puts a '# key=value ...' line of the run's metadata (seed, "
        "version, settings) above it, as JSON holds them.",
    )


def output_options(
    what: str | None = None,
    *,
    plot: Decorator | None = None,
    formats: tuple[str, ...] = FORMAT_CHOICES,
) -> Decorator:
    """--format and, for a command that draws, --plot: handed over as ``output``.

    ``output`` holds the keywords ``fmt`` and ``plot`` of :func:`varcheck.cli.run.run`, which
    the command passes on with ``**output``.

    Parameters
    ----------
    what : str, optional
        What the figure shows (the help of :func:`plot_option`).
    plot : decorator, optional
        A --plot option of the command's own, instead of ``what``'s.
    formats : tuple of str
        The --format choices.
    """
    if plot is None and what is not None:
        plot = plot_option(what)
    options = format_option(formats) if plot is None else stack(format_option(formats), plot)
    return grouped("output", options)


def _given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) not in (click.core.ParameterSource.DEFAULT, None)


def given(name: str) -> bool:
    """Whether the running command's option ``name`` was typed (not left at its default)."""
    return _given(click.get_current_context(), name)


def exclusive(first: str, second: str, reason: str | None = None) -> None:
    """Refuse two options of the running command given together instead of picking one.

    Parameters
    ----------
    first, second : str
        Parameter names (``precision``, ``samples``); the message names them as options.
    reason : str, optional
        Why they contradict each other, appended to the message after a colon.

    Raises
    ------
    click.UsageError
        "--first and --second cannot be used together[: reason]" when both were given.
    """
    ctx = click.get_current_context()
    if _given(ctx, first) and _given(ctx, second):
        message = f"--{first} and --{second} cannot be used together"
        raise click.UsageError(message if reason is None else f"{message}: {reason}")


_law_options = stack(
    dist_option(
        "--dist",
        "Entry distribution for q and k: normal, uniform, rademacher, laplace, "
        "t:df=D (each scaled to mean 0, sd 1), or scipy.NAME:shape=... (scipy's own mean and "
        "sd); every spec takes mean= and sd=.",
        "normal",
    ),
    dist_option("--q-dist", "Distribution of q's entries (overrides --dist for q)."),
    dist_option("--k-dist", "Distribution of k's entries (overrides --dist for k)."),
    option(
        "--rho",
        kind=FiniteFloat(-1.0, 1.0, what="a number in [-1, 1]", closed=True),
        default=0.0,
        text="Correlation of q_i with k_i (normal entries).",
    ),
)

#: --dist, --q-dist, --k-dist, --rho, handed over as ``laws``
dist_options = grouped("laws", _law_options)


def distinct_keys(flag: str, pairs: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """The KEY=VALUE pairs of a repeatable option (``--sampler-arg``, ``--arg``) as keywords.

    Raises
    ------
    click.UsageError
        "FLAG KEY is given twice", naming the first such key in alphabetical order.
    """
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise click.UsageError(f"{flag} {twice[0]} is given twice")
    return dict(pairs)


def _source(sampler: str | None, sampler_args: tuple[tuple[str, Any], ...], **laws: Any) -> Any:
    """The entry laws, or a user's sampler (loaded now, so a bad one fails before any work)."""
    if sampler is None:
        if sampler_args:
            raise click.UsageError("--sampler-arg binds arguments of --sampler: add --sampler")
        return laws
    for name in laws:
        exclusive(name, "sampler", "the values come from the sampler")
    from ..core.user_code import load_sampler

    return {"sampler": load_sampler(sampler, distinct_keys("--sampler-arg", sampler_args))}


#: the entry laws (dist_options) or --sampler TARGET with --sampler-arg KEY=VALUE, as ``laws``
source_options = grouped(
    "laws",
    stack(
        _law_options,
        option(
            "--sampler",
            kind=None,
            default=None,
            metavar="MODULE:FUNCTION",
            text="Test your own code: fn(rng, dk) in a module or a file.py, returning the "
            "values (e.g. attention logits) of one independent run. See docs/own-code.md.",
        ),
        option(
            "--sampler-arg",
            "sampler_args",
            kind=SAMPLER_ARG,
            default=None,
            multiple=True,
            text="KEY=VALUE passed to the sampler on every call (a Python literal; repeatable).",
        ),
    ),
    _source,
)


def _sampling(
    precision: float,
    samples: int | None,
    max_seconds: float | None,
    confidence: float,
    seed: int | None,
) -> dict[str, Any]:
    exclusive(
        "precision",
        "samples",
        "--samples fixes the number of products, --precision targets a width",
    )
    return {
        "confidence": confidence,
        "precision": None if samples else precision,
        "samples": samples,
        "max_seconds": max_seconds,
        "seed": seed,
    }


#: --precision, --samples, --max-seconds, --confidence, --seed, handed over as ``sampling``
#: (--precision and --samples together are refused before the command runs)
sampling_options = grouped(
    "sampling",
    stack(
        precision_option(),
        samples_option(),
        positive_option(
            "--max-seconds",
            "Wall-time cap per estimate (a row, a test, a derive check; rows drawn from shared "
            "blocks share rows × this); an estimate stopped by it reports the precision "
            "reached, and the output then depends on the machine's speed.",
        ),
        confidence_option(),
        seed_option(),
    ),
    _sampling,
)


#: --workers, --scheduler, handed over as ``parallel``
parallel_options = grouped(
    "parallel",
    stack(
        int_option(
            "--workers",
            1,
            256,
            None,
            "Threads drawing chunks (default: all cores); results do not depend on it.",
        ),
        option(
            "--scheduler",
            kind=None,
            default=None,
            metavar="ADDRESS",
            text="Run chunks on a Dask cluster: 'local' (a LocalCluster with --workers "
            "processes) or a scheduler address such as tcp://host:8786 (needs varcheck[dask]).",
        ),
    ),
)
