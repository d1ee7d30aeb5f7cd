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


# --- bounds on every intermediate value (#17) ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        # Python integers would grow without bound: minutes and gigabytes for one level less
        ("((((((9**64)**64)**64)**64)**64)**64)", "beyond the largest float"),
        ("(9**64)**64", "beyond the largest float"),
        ("exp(1000)", "beyond the largest float"),
        ("1e200*1e200 - 1e200*1e200 + dk", "beyond the largest float"),
        ("(-8)**(1/3)", "not a real number"),
        ("sqrt(-1)", "math domain error"),
        ("dk**65", "exponent 65.0 is out of range"),
    ],
)
def test_intermediate_values_stay_finite_and_real(text: str, fragment: str) -> None:
    """Guards against an intermediate value growing unbounded, turning complex or infinite."""
    with pytest.raises(VarcheckError) as err:
        parse_claim(text).evaluate(CTX)
    assert fragment in str(err.value)


def test_nested_powers_are_refused_at_once() -> None:
    """Guards against integer arithmetic: one level fewer took 20 s as Python integers."""
    import time

    start = time.perf_counter()
    with pytest.raises(VarcheckError):
        parse_claim("(((((9**64)**64)**64)**64)**64)").evaluate(CTX)
    assert time.perf_counter() - start < 0.5


def test_values_are_floats_even_from_integer_literals() -> None:
    """Guards against an integer result (2**64 exact) leaking out instead of a float."""
    value = parse_claim("2**64").evaluate(CTX)
    assert type(value) is float and value == 2.0**64


def test_an_infinite_moment_is_named() -> None:
    """Guards against 'inf' reported as an overflow instead of naming the moment."""
    ctx = CTX | {"kurt_q": math.inf}
    with pytest.raises(VarcheckError, match="kurt_q here is inf"):
        parse_claim("dk*kurt_q").evaluate(ctx)
    assert parse_claim("dk").evaluate(ctx) == 8.0


def test_a_finite_result_from_an_infinite_intermediate_is_refused() -> None:
    """Guards against min() hiding an overflow: every intermediate value is bounded."""
    with pytest.raises(VarcheckError, match="beyond the largest float"):
        parse_claim("min(1e308*10, dk)").evaluate(CTX)


@pytest.mark.parametrize(
    ("claim", "fragment"),
    [
        ("1e400", "1e400 is beyond the largest float"),
        ("9" * 400, "is beyond the largest float"),
        (math.inf, "claim inf is not a finite number"),
        (math.nan, "claim nan is not a finite number"),
        (float("-inf"), "claim -inf is not a finite number"),
    ],
)
def test_infinite_literals_are_refused_by_name(claim: object, fragment: str) -> None:
    """Guards against TOML's claim = 1e400 reported as "unknown name 'inf'"."""
    with pytest.raises(VarcheckError) as err:
        parse_claim(claim)  # type: ignore[arg-type]
    assert fragment in str(err.value)
    assert "unknown name" not in str(err.value)


def test_finite_float_claims_still_parse() -> None:
    """Guards against the finiteness check refusing ordinary numbers."""
    assert parse_claim(1e300).evaluate(CTX) == 1e300
    assert parse_claim(16).evaluate(CTX) == 16.0


def test_messages_cut_long_claims() -> None:
    """Guards against a 500-character claim echoed whole in every message."""
    text = "dk+" * 150 + "nope"
    with pytest.raises(VarcheckError) as err:
        parse_claim(text)
    assert len(str(err.value)) < 400 and "…" in str(err.value)


def test_too_deep_nesting_is_a_syntax_error() -> None:
    """Guards against the parser's own limits (200 parentheses) escaping as MemoryError."""
    with pytest.raises(VarcheckError, match="not a valid expression"):
        parse_claim("(" * 240 + "1" + ")" * 240)
