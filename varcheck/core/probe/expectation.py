"""The scale a kernel is expected to apply (a probe's ``expect``).

An expectation is an arithmetic expression in ``dk`` (one head's width) and ``h`` (heads, 1
unless given), e.g. ``1/sqrt(dk)``, ``1/dk``, ``0.5/sqrt(dk)``: numbers, ``+ - * / **``,
parentheses and ``sqrt, exp, log, abs``; the syntax tree is walked, nothing is passed to
``eval``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass

from ...errors import VarcheckError
from ..expressions import BINARY_OPERATORS, UNARY_OPERATORS, apply_binary

__all__ = ["Expectation", "parse_expectation", "parse_expression", "evaluate", "SCALE_RANGE"]

#: Expected scales accepted: the inputs are sized so that scale · q·k has sd ~1, and q·k must
#: stay well inside float64's range.
SCALE_RANGE = (1e-100, 1e100)

_NAMES = ("dk", "h")
_FUNCS: dict[str, Callable[[float], float]] = {
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "abs": abs,
}
_ACCEPTED = "a number or an expression in dk and h with + - * / ** and sqrt, exp, log, abs"


def _eval(node: ast.AST, ctx: dict[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):  # as _check made it
        return float(node.value)
    if isinstance(node, ast.Name):
        return ctx[node.id]
    if isinstance(node, ast.BinOp):
        return apply_binary(node.op, _eval(node.left, ctx), _eval(node.right, ctx))
    if isinstance(node, ast.UnaryOp):
        return UNARY_OPERATORS[type(node.op)](_eval(node.operand, ctx))
    return _FUNCS[node.func.id](_eval(node.args[0], ctx))  # type: ignore[attr-defined]


def _check(node: ast.AST, text: str, what: str = "expect") -> None:
    def refuse(reason: str) -> VarcheckError:
        return VarcheckError(f"{what} {text!r}: {reason}; {_ACCEPTED}")

    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise refuse(f"{node.value!r} is not a number")
    elif isinstance(node, ast.Name):
        if node.id not in _NAMES:
            raise refuse(f"unknown name {node.id!r}")
    elif isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPERATORS:
        _check(node.left, text, what)
        _check(node.right, text, what)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPERATORS:
        _check(node.operand, text, what)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id not in _FUNCS:
            raise refuse(f"function {node.func.id!r} is not allowed")
        if node.keywords or len(node.args) != 1:
            raise VarcheckError(f"{what} {text!r}: {node.func.id}() takes one argument")
        _check(node.args[0], text, what)
    else:
        raise refuse(f"{type(node).__name__} is not allowed")


def parse_expression(text: str, what: str) -> ast.Expression:
    """The checked syntax tree of an expression in ``dk`` and ``h``; errors name ``what``."""
    if len(text) > 200:
        raise VarcheckError(f"{what} is longer than 200 characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise VarcheckError(f"{what} {text!r} is not a valid expression; {_ACCEPTED}") from None
    _check(tree.body, text, what)
    return tree


def evaluate(tree: ast.Expression, dk: int, h: int, what: str) -> float:
    """An expression's value at ``dk`` and ``h`` (errors name ``what``)."""
    try:
        return float(_eval(tree.body, {"dk": float(dk), "h": float(h)}))
    except (ArithmeticError, ValueError, TypeError) as exc:
        # an OverflowError of ** holds (errno, message): say the message
        reason = exc.args[-1] if isinstance(exc, OverflowError) and exc.args else exc
        raise VarcheckError(f"{what} cannot be evaluated: {reason}") from None


@dataclass(frozen=True)
class Expectation:
    """A parsed expected scale; :meth:`value` evaluates it."""

    text: str
    _tree: ast.Expression

    def value(self, dk: int, h: int = 1) -> float:
        """The expected scale at ``dk`` with ``h`` heads; it must be finite and non-zero."""
        out = evaluate(self._tree, dk, h, f"expect {self.text!r}")
        if not math.isfinite(out) or out == 0:
            raise VarcheckError(
                f"expect {self.text!r} is {out!r} at d_k={dk}; give a finite non-zero scale"
            )
        if not SCALE_RANGE[0] <= abs(out) <= SCALE_RANGE[1]:
            raise VarcheckError(
                f"expect {self.text!r} is {out:.3g} at d_k={dk}; accepted: a scale of size "
                f"{SCALE_RANGE[0]:g}..{SCALE_RANGE[1]:g} (the inputs are sized from it: "
                "q·k of that size would leave float64's range)"
            )
        return out


def parse_expectation(text: object) -> Expectation:
    """Parse ``1/sqrt(dk)``, ``1/dk``, ``0.125``... (numbers are accepted as they are)."""
    if isinstance(text, Expectation):
        return text
    if isinstance(text, bool):
        raise VarcheckError(f"expect must be a number or an expression, got {text!r}")
    if isinstance(text, int | float):
        text = repr(float(text))
    if not isinstance(text, str) or not text.strip():
        raise VarcheckError(f"expect must be a non-empty expression; {_ACCEPTED}")
    return Expectation(text.strip(), parse_expression(text, "expect"))
