"""The scale a kernel is expected to apply, and the simple law nearest to the one it applies.

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

from ..core.expressions import BINARY_OPERATORS, UNARY_OPERATORS, apply_binary
from ..errors import VarcheckError

__all__ = ["Expectation", "parse_expectation", "Reading", "nearest_law", "LAWS", "law_exponent"]

_NAMES = ("dk", "h")
_FUNCS: dict[str, Callable[[float], float]] = {
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "abs": abs,
}
_ACCEPTED = "a number or an expression in dk and h with + - * / ** and sqrt, exp, log, abs"


def _eval(node: ast.AST, ctx: dict[str, float]) -> float:
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return ctx[node.id]
    if isinstance(node, ast.BinOp):
        return apply_binary(node.op, _eval(node.left, ctx), _eval(node.right, ctx))
    if isinstance(node, ast.UnaryOp):
        return UNARY_OPERATORS[type(node.op)](_eval(node.operand, ctx))
    return _FUNCS[node.func.id](_eval(node.args[0], ctx))  # type: ignore[attr-defined]


def _check(node: ast.AST, text: str) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise VarcheckError(f"expect {text!r}: {node.value!r} is not a number; {_ACCEPTED}")
    elif isinstance(node, ast.Name):
        if node.id not in _NAMES:
            raise VarcheckError(f"expect {text!r}: unknown name {node.id!r}; {_ACCEPTED}")
    elif isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPERATORS:
        _check(node.left, text)
        _check(node.right, text)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPERATORS:
        _check(node.operand, text)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id not in _FUNCS:
            raise VarcheckError(
                f"expect {text!r}: function {node.func.id!r} is not allowed; {_ACCEPTED}"
            )
        if node.keywords or len(node.args) != 1:
            raise VarcheckError(f"expect {text!r}: {node.func.id}() takes one argument")
        _check(node.args[0], text)
    else:
        raise VarcheckError(f"expect {text!r}: {type(node).__name__} is not allowed; {_ACCEPTED}")


@dataclass(frozen=True)
class Expectation:
    """A parsed expected scale; :meth:`value` evaluates it."""

    text: str
    _tree: ast.Expression

    def value(self, dk: int, h: int = 1) -> float:
        """The expected scale at ``dk`` with ``h`` heads; it must be finite and non-zero."""
        try:
            out = float(_eval(self._tree.body, {"dk": float(dk), "h": float(h)}))
        except (ArithmeticError, ValueError, TypeError) as exc:
            raise VarcheckError(f"expect {self.text!r} cannot be evaluated: {exc}") from None
        if not math.isfinite(out) or out == 0:
            raise VarcheckError(
                f"expect {self.text!r} is {out!r} at d_k={dk}; give a finite non-zero scale"
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
    if len(text) > 200:
        raise VarcheckError("expect is longer than 200 characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise VarcheckError(f"expect {text!r} is not a valid expression; {_ACCEPTED}") from None
    _check(tree.body, text)
    return Expectation(text.strip(), tree)


def law_exponent(expect: Expectation, dks: list[int], h: int) -> float:
    """The exponent p of s ∝ d_k^p an expectation implies between the first and last d_k."""
    a, b = min(dks), max(dks)
    if a == b:
        a, b = a, 2 * a
    return math.log(abs(expect.value(b, h) / expect.value(a, h))) / math.log(b / a)


#: (label, scale at (dk, h), what it means): the simple laws a scale is compared with
LAWS: tuple[tuple[str, Callable[[int, int], float], str], ...] = (
    ("1/sqrt(dk)", lambda d, h: 1 / math.sqrt(d), "the standard 1/√d_k"),
    ("1", lambda d, h: 1.0, "no scale: the 1/√d_k is forgotten"),
    ("1/dk", lambda d, h: 1 / d, "1/d_k: μP's scale, or 1/√d_k applied twice"),
    (
        "1/sqrt(dk*h)",
        lambda d, h: 1 / math.sqrt(d * h),
        "1/√(h·d_k): the model's width in place of one head's d_k",
    ),
    ("1/dk**2", lambda d, h: 1 / d**2, "1/d_k²"),
    ("sqrt(dk)", lambda d, h: math.sqrt(d), "√d_k: multiplied where it should divide"),
)


def _simple_factors() -> list[tuple[str, float, int]]:
    """(label, value, complexity) of factors such as 1/3, 2, 1/√2, 2/3; simplest first."""
    out: list[tuple[str, float, int]] = [("1", 1.0, 0)]
    for n in range(2, 65):
        out += [(f"1/{n}", 1.0 / n, n), (f"{n}", float(n), n)]
        if math.isqrt(n) ** 2 != n:
            out += [(f"1/√{n}", 1.0 / math.sqrt(n), 2 * n), (f"√{n}", math.sqrt(n), 2 * n)]
    for a in range(2, 9):
        for b in range(2, 9):
            if a != b and math.gcd(a, b) == 1:
                out.append((f"{a}/{b}", a / b, 4 * (a + b)))
    return sorted(out, key=lambda f: f[2])


_FACTORS = _simple_factors()


@dataclass(frozen=True)
class Reading:
    """The simple law nearest to a scale.

    Attributes
    ----------
    law : str
        One of :data:`LAWS`' labels.
    factor : float
        scale / law.
    factor_label : str
        The factor as a simple number (``1/3``, ``1/√4``...), or to 4 digits.
    meaning : str
        What the law and factor amount to, in words.
    """

    law: str
    factor: float
    factor_label: str
    meaning: str


def _factor_meaning(label: str) -> str:
    if label.startswith("1/") and label[2:].isdigit():
        n = int(label[2:])
        return (
            f"an extra factor 1/{n} (a 1/(layer+1) at layer {n - 1}, or the width of "
            f"{n * n} heads in place of one head's d_k)"
        )
    if label.startswith("1/√"):
        n = int(label[3:])
        return f"the width of {n} heads in place of one head's d_k"
    return f"an extra factor {label}"


def nearest_law(scale: float, low: float, high: float, dk: int, h: int = 1) -> Reading:
    """The simple law a scale (with interval [low, high]) reads as, and the factor left over.

    A law matched by the interval with factor 1 wins; then 1/√d_k times the simplest number the
    interval holds (1/3 before 3/8); else the law nearest on the log scale.
    """
    laws = [law for law in LAWS if h > 1 or law[0] != "1/sqrt(dk*h)"]
    if not (scale > 0 and math.isfinite(scale)):
        sign = "negative" if scale < 0 else "zero"
        return Reading("—", math.nan, "—", f"a {sign} scale: no law applies")
    pad_lo, pad_hi = min(low, scale * (1 - 1e-6)), max(high, scale * (1 + 1e-6))
    best: tuple[int, int, str, float, str] | None = None
    for rank, (label, f, _) in enumerate(laws):
        base = f(dk, h)
        # a factor is read against 1/√d_k only: "1 × 1/10" would name a forgotten scale
        factors = _FACTORS if label == "1/sqrt(dk)" else _FACTORS[:1]
        for flabel, fval, cost in factors:
            if pad_lo <= base * fval <= pad_hi and (best is None or (cost, rank) < best[:2]):
                best = (cost, rank, label, fval, flabel)
                break
    if best is not None:
        _, rank, label, fval, flabel = best
        meaning = laws[rank][2]
        if flabel != "1":
            extra = _factor_meaning(flabel) if label == "1/sqrt(dk)" else f"times {flabel}"
            meaning = f"{meaning}, {extra}"
        return Reading(label, scale / laws[rank][1](dk, h), flabel, meaning)
    label, f, meaning = min(laws, key=lambda law: abs(math.log(scale / law[1](dk, h))))
    factor = scale / f(dk, h)
    return Reading(label, factor, f"{factor:.4g}", f"{meaning}, times {factor:.4g}")
