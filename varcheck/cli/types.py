"""The click parameter types of the command line: parsed specs, counts, bounded floats, inits.

Like ``click.INT``, the parsed types are shared instances: a type holds no state of its own.
Parsers that need numpy import it when they parse, so that ``varcheck COMMAND --help`` and
usage errors do not wait for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import click

from ..checks.claims import Claim, parse_claim
from ..core.messages import cut, shown
from ..core.ranges import parse_dk
from ..errors import VarcheckError

__all__ = [
    "CLAIM",
    "DISTRIBUTION",
    "DK_RANGE",
    "INIT",
    "OBSERVED",
    "SAMPLER_ARG",
    "KERNEL_ARG",
    "SCHEMES",
    "SHAPE",
    "CountType",
    "FiniteFloat",
    "ParsedType",
    "as_number",
]


class ParsedType(click.ParamType):
    """A value read by a varcheck parser, whose refusal becomes click's usage error.

    Parameters
    ----------
    name : str
        Metavar shown in the help (``SPEC``, ``RANGE``, ...).
    parse : callable
        Turns the command-line text into the value; raises `VarcheckError` with the message to
        show when the text is refused.
    passes : type or tuple of type, optional
        Values of these types are already parsed (a default given as an object) and are
        returned unchanged.
    """

    def __init__(
        self, name: str, parse: Callable[[Any], Any], passes: type | tuple[type, ...] = ()
    ) -> None:
        self.name = name
        self.parse = parse
        self.passes = passes

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, self.passes):
            return value
        try:
            return self.parse(value)
        except VarcheckError as exc:
            self.fail(str(exc), param, ctx)


def _distribution(value: Any) -> Any:
    """An entry distribution (imported, with numpy, only when a command parses one)."""
    from ..core.distributions import Distribution, parse_distribution

    return value if isinstance(value, Distribution) else parse_distribution(value)


def _init_spec(value: Any) -> str:
    """An init name, checked by the projection's own rule (imported only when one is given)."""
    from ..paper.projection import init_sd

    init_sd(value, 1, 1)
    return str(value)


#: an entry distribution spec: normal, t:df=5, scipy.gamma:a=2, ...
DISTRIBUTION = ParsedType("SPEC", _distribution)
#: d_k values: 2..512, 8..64:8, 2,3,10..40:10
DK_RANGE = ParsedType("RANGE", parse_dk, list)
#: a claimed variance: theory, dk, a number or an expression
CLAIM = ParsedType("EXPR", parse_claim, Claim)
#: a weight init: xavier, kaiming, lecun or normal:SD
INIT = ParsedType("INIT", _init_spec)


def _sampler_arg(value: Any) -> tuple[str, Any]:
    from ..core.user_code import parse_sampler_arg

    return value if isinstance(value, tuple) else parse_sampler_arg(value)


#: KEY=VALUE bound to a user's sampler, the value a Python literal
SAMPLER_ARG = ParsedType("KEY=VALUE", _sampler_arg)


def _kernel_arg(value: Any) -> tuple[str, Any]:
    from ..core.probe.target import parse_kernel_arg

    return value if isinstance(value, tuple) else parse_kernel_arg(value)


#: KEY=VALUE bound to a kernel (``varcheck probe --arg``), the value a Python literal or an
#: expression in dk and h: its errors say "kernel argument"
KERNEL_ARG = ParsedType("KEY=VALUE", _kernel_arg)


def as_number(
    param_type: click.ParamType,
    value: Any,
    hint: str,
    param: click.Parameter | None,
    ctx: click.Context | None,
) -> float:
    """``float(value)``, or ``param_type``'s usage error "'value' is not a number; ``hint``"."""
    try:
        return float(value)
    except ValueError:
        param_type.fail(f"{shown(value)} is not a number; {hint}", param, ctx)


class OneDk(click.IntRange):
    """One d_k (``assert`` tests one); a list or range of them is sent to ``sweep``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and (".." in value or "," in value):
            command = ctx.info_name if ctx is not None else "this command"
            self.fail(
                f"{shown(value)}: {command} takes one d_k; for several, use varcheck sweep "
                f"--dk {cut(value)}",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


class CountType(click.ParamType):
    """A whole number that may be written in scientific notation (``1e6``)."""

    name = "N"

    def __init__(self, minimum: int = 100) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        number = as_number(self, value, "give a whole number such as 100000 or 1e6", param, ctx)
        if not math.isfinite(number) or not number.is_integer() or number < self.minimum:
            self.fail(
                f"{shown(value)} must be a whole number >= {self.minimum} (e.g. 100000 or 1e6)",
                param,
                ctx,
            )
        return int(number)


class FiniteFloat(click.ParamType):
    """A float in (lo, hi), or [lo, hi] when ``closed``; NaN and infinities are refused.

    Parameters
    ----------
    lo, hi : float or None
        Bounds; None leaves that side open.
    what : str
        The accepted values in words, shown when a value is refused.
    closed : bool
        Whether the bounds themselves are accepted.
    """

    name = "FLOAT"

    def __init__(
        self, lo: float | None = None, hi: float | None = None, *, what: str, closed: bool = False
    ) -> None:
        self.lo, self.hi, self.what, self.closed = lo, hi, what, closed

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            number = value
        else:
            number = as_number(self, value, f"accepted: {self.what}", param, ctx)
        lo, hi = self.lo, self.hi
        above = lo is None or (number >= lo if self.closed else number > lo)
        below = hi is None or (number <= hi if self.closed else number < hi)
        if not (math.isfinite(number) and above and below):
            hint = self._percent_hint(number)
            self.fail(f"{shown(value)} is out of range{hint}; accepted: {self.what}", param, ctx)
        return number

    def _percent_hint(self, number: float) -> str:
        """`` (did you mean 0.95?)`` for a level in (0, 1) given as a percentage."""
        if self.lo == 0.0 and self.hi == 1.0 and 1.0 < number < 100.0:
            return f" (did you mean {number / 100:g}?)"
        return ""


def _shape(value: Any) -> Any:
    """NxDxM read by the explain module (imported only when a shape is given)."""
    from ..teaching.explain import Shape, parse_shape

    return value if isinstance(value, Shape) else parse_shape(value)


class ObservedType(click.ParamType):
    """The variance explain is asked about: a number >= 0, or ``none``."""

    name = "V"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float | str:
        if isinstance(value, float):
            return value
        if str(value).strip().lower() == "none":
            return "none"
        number = as_number(self, value, "accepted: a variance >= 0, or none", param, ctx)
        if not math.isfinite(number) or number < 0:
            self.fail(
                f"{shown(value)} is out of range; accepted: a finite variance >= 0", param, ctx
            )
        return number


class SchemesType(click.ParamType):
    """train's --beta: distinct names of β schemes, separated by commas."""

    name = "LIST"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, ...]:
        from ..paper.training import BETA_SCHEMES

        if isinstance(value, tuple):
            return value
        names = tuple(v.strip() for v in str(value).split(",") if v.strip())
        bad = [n for n in names if n not in BETA_SCHEMES]
        if not names or bad or len(set(names)) != len(names):
            self.fail(
                f"{value!r} is not accepted; give distinct names from {', '.join(BETA_SCHEMES)} "
                "separated by commas (e.g. fixed,paper)",
                param,
                ctx,
            )
        return names


#: explain's NxDxM shape, read by the teaching family's parser (imported when one is given).
SHAPE = ParsedType("NxDxM", _shape)
OBSERVED = ObservedType()
SCHEMES = SchemesType()
