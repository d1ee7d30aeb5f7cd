"""The arithmetic of the safely parsed expressions (claims, a kernel's expected scale).

Their syntax trees are walked, never passed to ``eval``; these are the operators a walk may
apply, in one place so that claims and expectations accept the same arithmetic.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

__all__ = ["BINARY_OPERATORS", "UNARY_OPERATORS", "MAX_EXPONENT", "apply_binary"]

BINARY_OPERATORS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
UNARY_OPERATORS: dict[type, Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
#: Largest exponent of ``**``: enough for any claim, and no power chain can run away.
MAX_EXPONENT = 64


def apply_binary(op: ast.operator, left: float, right: float) -> float:
    """``left op right`` for an operator of :data:`BINARY_OPERATORS`.

    Raises
    ------
    ValueError
        For a power whose exponent is beyond ±:data:`MAX_EXPONENT`.
    """
    if isinstance(op, ast.Pow) and abs(right) > MAX_EXPONENT:
        raise ValueError(f"exponent {right} is out of range (|exponent| <= {MAX_EXPONENT})")
    return BINARY_OPERATORS[type(op)](left, right)
