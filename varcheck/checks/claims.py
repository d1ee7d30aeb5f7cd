"""Claims: the value a variance is asserted to have, as a safely parsed arithmetic expression.

A claim is a number or an expression in ``dk``, ``rho``, ``theory`` (the exact value varcheck
computes for the same setting) and the entry moments ``mean_q, var_q, sd_q, mu4_q, kurt_q``
(and the same with ``_k``), with ``+ - * / **``, parentheses and the functions
``sqrt, exp, log, abs, min, max``. Nothing is passed to ``eval``: the expression's syntax tree
is walked and anything else is refused. Every value is computed as a float and every
intermediate value must be a finite real number, so no expression can build a huge integer
(``(9**64)**64`` would take minutes and gigabytes as Python integers) or a complex number.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.expressions import BINARY_OPERATORS, UNARY_OPERATORS, apply_binary
from ..core.messages import cut
from ..errors import VarcheckError

if TYPE_CHECKING:
    from ..core.distributions import Distribution
    from ..core.theory import DotProductTheory

__all__ = [
    "Claim",
    "parse_claim",
    "claimed_value",
    "sampler_claim",
    "sampler_claimed_value",
    "CLAIM_NAMES",
]

CLAIM_NAMES: tuple[str, ...] = (
    "dk",
    "rho",
    "theory",
    "mean_q",
    "var_q",
    "sd_q",
    "mu4_q",
    "kurt_q",
    "mean_k",
    "var_k",
    "sd_k",
    "mu4_k",
    "kurt_k",
)
_FUNCS: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "abs": abs,
    "min": min,
    "max": max,
}
_ACCEPTED = (
    "a number or an expression in "
    + ", ".join(CLAIM_NAMES)
    + " with + - * / ** and sqrt, exp, log, abs, min, max"
)


@dataclass(frozen=True)
class Claim:
    """A parsed claim.

    Attributes
    ----------
    text : str
        The expression as written.
    names : frozenset of str
        The variables it uses.
    """

    text: str
    names: frozenset[str]
    _tree: ast.Expression

    def evaluate(self, context: Mapping[str, float]) -> float:
        """The claimed value in ``context`` (a mapping with every name in :data:`CLAIM_NAMES`).

        Raises
        ------
        VarcheckError
            The expression has no finite value there (division by zero, overflow, log of a
            negative number, an infinite moment).
        """
        try:
            return _eval(self._tree.body, context)
        except (ArithmeticError, ValueError, TypeError) as exc:
            raise VarcheckError(f"claim {cut(self.text)!r} cannot be evaluated: {exc}") from None

    @property
    def is_theory(self) -> bool:
        return self.text.strip() == "theory"


_OVERFLOW = "an intermediate value is beyond the largest float (1.8e308)"


def _real(value: object, what: str = "an intermediate value") -> float:
    """``value`` as a finite float: the bound every intermediate value must keep."""
    if isinstance(value, complex):
        raise ValueError(f"{what} is not a real number")
    value = float(value)  # type: ignore[arg-type]
    if not math.isfinite(value):
        raise ValueError(f"{what} is {value}, not a finite number")
    return value


def _eval(node: ast.AST, ctx: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant):
        return _real(node.value, "a number")
    if isinstance(node, ast.Name):
        return _real(ctx[node.id], f"{node.id} here")
    if isinstance(node, ast.UnaryOp):
        return UNARY_OPERATORS[type(node.op)](_eval(node.operand, ctx))
    args: tuple[Any, ...]  # an operator and two numbers, or a function's numbers
    if isinstance(node, ast.BinOp):
        fn, args = apply_binary, (node.op, _eval(node.left, ctx), _eval(node.right, ctx))
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):  # as _check made it
        fn, args = _FUNCS[node.func.id], tuple(_eval(a, ctx) for a in node.args)
    else:
        raise TypeError(f"unsupported expression {type(node).__name__}")
    try:
        value = fn(*args)
    except OverflowError:  # 1e200**2, exp(1000): one message, not errno's tuple
        raise OverflowError(_OVERFLOW) from None
    if isinstance(value, float) and math.isinf(value):  # 1e308 * 10
        raise OverflowError(_OVERFLOW)
    return _real(value)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer literal of 309 digits or more
        return False


def _check(node: ast.AST, text: str, names: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            shown = cut(repr(node.value))
            raise VarcheckError(f"claim {cut(text)!r}: {shown} is not a number; {_ACCEPTED}")
        if not _finite(node.value):
            literal = ast.get_source_segment(text, node) or repr(node.value)
            raise VarcheckError(
                f"claim {cut(text)!r}: {cut(literal)} is beyond the largest float (1.8e308)"
            )
        return
    if isinstance(node, ast.Name):
        if node.id not in CLAIM_NAMES:
            raise VarcheckError(f"claim {cut(text)!r}: unknown name {cut(node.id)!r}; {_ACCEPTED}")
        names.add(node.id)
        return
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPERATORS:
        _check(node.left, text, names)
        _check(node.right, text, names)
        return
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPERATORS:
        _check(node.operand, text, names)
        return
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        _check_call(node, text, names)
        return
    what = type(node).__name__
    raise VarcheckError(f"claim {cut(text)!r}: {what} is not allowed; {_ACCEPTED}")


def _check_call(node: ast.Call, text: str, names: set[str]) -> None:
    name = node.func.id  # type: ignore[attr-defined]
    if name not in _FUNCS:
        raise VarcheckError(
            f"claim {cut(text)!r}: function {cut(name)!r} is not allowed; {_ACCEPTED}"
        )
    for arg in node.args:
        _check(arg, text, names)
    several = name in ("min", "max")
    if node.keywords or (len(node.args) < 2 if several else len(node.args) != 1):
        takes = "two or more positional arguments" if several else "one positional argument"
        raise VarcheckError(f"claim {cut(text)!r}: {name}() takes {takes}")


def parse_claim(text: str | float | int) -> Claim:
    """Parse a claim such as ``"dk"``, ``"dk*(1+rho**2)"``, ``"1"`` or ``"theory"``.

    Raises
    ------
    VarcheckError
        Syntax errors, unknown names, and anything that is not plain arithmetic.

    Examples
    --------
    >>> c = parse_claim("dk*(1+rho**2)")
    >>> c.evaluate({"dk": 8, "rho": 0.5})
    10.0
    """
    if isinstance(text, bool):
        raise VarcheckError(f"claim must be a number or an expression, got {text!r}")
    if isinstance(text, int | float):
        if not math.isfinite(text):  # a TOML claim = 1e400 or nan
            raise VarcheckError(f"claim {text!r} is not a finite number; {_ACCEPTED}")
        text = repr(text)
    if not isinstance(text, str) or not text.strip():
        raise VarcheckError(f"claim must be a non-empty expression; {_ACCEPTED}")
    if len(text) > 500:
        raise VarcheckError("claim is longer than 500 characters")
    text = text.strip()
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, MemoryError, RecursionError):  # MemoryError: too deeply nested
        raise VarcheckError(f"claim {cut(text)!r} is not a valid expression; {_ACCEPTED}") from None
    names: set[str] = set()
    _check(tree.body, text, names)
    return Claim(text=text, names=frozenset(names), _tree=tree)


def claim_context(
    dk: int, rho: float, theory: float, q: Distribution, k: Distribution
) -> dict[str, float]:
    """The variables a claim may use, for one setting."""
    ctx = {"dk": float(dk), "rho": float(rho), "theory": float(theory)}
    for suffix, dist in (("q", q), ("k", k)):
        ctx[f"mean_{suffix}"] = dist.mean
        ctx[f"var_{suffix}"] = dist.var
        ctx[f"sd_{suffix}"] = dist.sd
        ctx[f"mu4_{suffix}"] = dist.mu4
        ctx[f"kurt_{suffix}"] = dist.kurtosis
    return ctx


def claimed_value(
    claim: Claim,
    theory: DotProductTheory,
    q: Distribution,
    k: Distribution,
    *,
    scaled: bool = False,
) -> float | None:
    """Evaluate a claim for one setting; ``None`` when it has no finite value there."""
    if not theory.var_finite:
        return None
    exact = theory.scaled_var if scaled else theory.var
    return _positive(
        claim, claim.evaluate(claim_context(theory.dk, theory.rho, exact, q, k)), theory.dk
    )


def _positive(claim: Claim, value: float, dk: int) -> float:
    if value <= 0:
        raise VarcheckError(
            f"claim {cut(claim.text)!r} is {value!r} at d_k={dk}; a variance claim must be > 0"
        )
    return value


def sampler_claim(claim: str | float | Claim | None, target: str) -> Claim:
    """The claim about a user's sampler: a number or an expression in ``dk`` only (varcheck
    knows neither the theory nor the entry laws of the user's code); it must be given."""
    if claim is None:
        raise VarcheckError(
            f"sampler {target} needs a claim: a number or an expression in dk (e.g. 1 for "
            "the scaled logits, or dk)"
        )
    parsed = claim if isinstance(claim, Claim) else parse_claim(claim)
    if parsed.names - {"dk"}:
        used = ", ".join(sorted(parsed.names - {"dk"}))
        raise VarcheckError(
            f"claim {cut(parsed.text)!r} uses {used}, which varcheck knows only for its own "
            f"sampler; with sampler {target} give a number or an expression in dk"
        )
    return parsed


def sampler_claimed_value(claim: Claim, dk: int) -> float:
    """The value of a claim (in ``dk`` only) at one d_k; it must be positive."""
    return _positive(claim, claim.evaluate({"dk": float(dk)}), dk)
