"""Claim expressions: safe parsing and evaluation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from varcheck import VarcheckError, parse_claim
from varcheck.checks.claims import CLAIM_NAMES

CTX = {name: 2.0 for name in CLAIM_NAMES} | {"dk": 8.0, "rho": 0.5, "theory": 9.0}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("dk", 8.0),
        ("1", 1.0),
        ("dk*(1+rho**2)", 10.0),
        ("theory", 9.0),
        ("1.03*theory", 9.27),
        ("sqrt(dk)*2", math.sqrt(8) * 2),
        ("max(dk, theory) - min(1, 2)", 8.0),
        ("-dk + +3", -5.0),
        ("dk * var_q * var_k", 32.0),
    ],
)
def test_evaluate(text: str, value: float) -> None:
    assert parse_claim(text).evaluate(CTX) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("__import__('os').system('true')", "not allowed"),
        ("dk.real", "not allowed"),
        ("open('x')", "not allowed"),
        ("dkk", "unknown name 'dkk'"),
        ("dk +", "not a valid expression"),
        ("'dk'", "not a number"),
        ("True", "not a number"),
        ("[1, 2]", "not allowed"),
        ("lambda: 1", "not allowed"),
        ("dk if rho else 1", "not allowed"),
        ("sqrt(1, 2)", "one positional argument"),
        ("dk // 2", "not allowed"),
        ("", "non-empty"),
    ],
)
def test_rejected(text: str, fragment: str) -> None:
    with pytest.raises(VarcheckError) as err:
        parse_claim(text)
    assert fragment in str(err.value)


@pytest.mark.parametrize("text", ["1/(dk-8)", "log(-dk)", "9**9**9", "exp(1000)", "10**100000"])
def test_no_finite_value(text: str) -> None:
    with pytest.raises(VarcheckError, match="claim"):
        parse_claim(text).evaluate(CTX)


@given(st.text(max_size=30))
def test_parser_never_crashes(text: str) -> None:
    try:
        claim = parse_claim(text)
    except VarcheckError:
        return
    try:
        value = claim.evaluate(CTX)
    except VarcheckError:
        return
    assert math.isfinite(value)
