"""``output.formats.fmt``: significant digits counted on the rounded value."""

from __future__ import annotations

import math

import pytest

from varcheck.output.formats import fmt


@pytest.mark.parametrize(
    ("x", "digits", "shown"),
    [
        (0.99996, 4, "1.000"),
        (1.00001, 4, "1.000"),
        (0.99996, 3, "1.00"),
        (1.00001, 3, "1.00"),
        (-0.99996, 4, "-1.000"),
        (9.99996, 4, "10.00"),
        (0.0099996, 4, "0.01000"),
        (0.999999999, 6, "1.00000"),
        (123.456, 4, "123.5"),
        (0.001, 4, "0.001000"),
        (2.5e-4, 4, "2.500e-04"),
        (3, 4, "3"),
        (0.0, 4, "0"),
        (math.inf, 4, "∞"),
        (math.nan, 4, "—"),
        (None, 4, "—"),
    ],
)
def test_fmt_counts_digits_after_rounding(x, digits: int, shown: str) -> None:
    """A value just under a power of ten printed the digits of the raw value (0.99996 as
    "1.0000", one digit more than 1.00001's "1.000"): the rounded value sets the decimals."""
    assert fmt(x, digits) == shown
