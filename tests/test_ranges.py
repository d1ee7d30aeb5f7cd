"""The d_k grammar."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from varcheck import VarcheckError, parse_dk
from varcheck.core.ranges import MAX_DK, MAX_VALUES


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("2..512", [2, 4, 8, 16, 32, 64, 128, 256, 512]),
        ("3..20", [3, 6, 12]),
        ("10..40:10", [10, 20, 30, 40]),
        ("2,3,10..40:10", [2, 3, 10, 20, 30, 40]),
        ("7", [7]),
        (" 64 , 1 ", [64, 1]),
        ("1..1", [1]),
    ],
)
def test_parse(text: str, values: list[int]) -> None:
    assert parse_dk(text) == values


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("2..1", "ends below its start"),
        ("0..8", "must be >= 1"),
        ("a..b", "is not a whole number"),
        ("2..512:0", "must be >= 1"),
        ("", "is empty"),
        ("2,,4", "empty item"),
        ("2..8,4", "listed twice"),
        ("4:2", "needs a range"),
        ("-4", "must be >= 1"),
        ("2.5", "is not a whole number"),
        (f"{MAX_DK + 1}", "above the limit"),
    ],
)
def test_errors(text: str, fragment: str) -> None:
    with pytest.raises(VarcheckError) as err:
        parse_dk(text)
    assert fragment in str(err.value)


@given(st.integers(1, 5000), st.integers(0, 5000), st.integers(1, 300))
def test_step_ranges(lo: int, span: int, step: int) -> None:
    expected = list(range(lo, lo + span + 1, step))
    if len(expected) > MAX_VALUES:
        with pytest.raises(VarcheckError, match="more than"):
            parse_dk(f"{lo}..{lo + span}:{step}")
        return
    assert parse_dk(f"{lo}..{lo + span}:{step}") == expected


@given(st.integers(1, 10_000), st.integers(0, 10_000))
def test_doubling_ranges(lo: int, span: int) -> None:
    values = parse_dk(f"{lo}..{lo + span}")
    assert values[0] == lo and values[-1] <= lo + span < 2 * values[-1]
    assert all(b == 2 * a for a, b in zip(values, values[1:], strict=False))


@given(st.text(max_size=20))
def test_never_crashes(text: str) -> None:
    try:
        values = parse_dk(text)
    except VarcheckError:
        return
    assert values and all(1 <= v <= MAX_DK for v in values)
