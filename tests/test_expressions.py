"""The operators shared by claims and a kernel's expected scale (varcheck.core.expressions)."""

from __future__ import annotations

import ast

import pytest

from varcheck.core.expressions import (
    BINARY_OPERATORS,
    MAX_EXPONENT,
    UNARY_OPERATORS,
    apply_binary,
)


@pytest.mark.parametrize(
    ("op", "expected"),
    [(ast.Add(), 8.0), (ast.Sub(), 4.0), (ast.Mult(), 12.0), (ast.Div(), 3.0), (ast.Pow(), 36.0)],
)
def test_apply_binary(op: ast.operator, expected: float) -> None:
    assert apply_binary(op, 6.0, 2.0) == expected


def test_exponent_bound_is_inclusive() -> None:
    assert apply_binary(ast.Pow(), 1.0, float(MAX_EXPONENT)) == 1.0
    assert apply_binary(ast.Pow(), 1.0, -float(MAX_EXPONENT)) == 1.0
    with pytest.raises(ValueError, match=r"exponent 64\.5 is out of range \(\|exponent\| <= 64\)"):
        apply_binary(ast.Pow(), 1.0, 64.5)
    with pytest.raises(ValueError, match="out of range"):
        apply_binary(ast.Pow(), 1.0, -65.0)


def test_large_exponent_allowed_for_other_operators() -> None:
    assert apply_binary(ast.Mult(), 1.0, 100.0) == 100.0


def test_tables() -> None:
    assert set(BINARY_OPERATORS) == {ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow}
    assert UNARY_OPERATORS[ast.USub](2.0) == -2.0
    assert UNARY_OPERATORS[ast.UAdd](2.0) == 2.0
    with pytest.raises(KeyError):
        apply_binary(ast.Mod(), 1.0, 2.0)
