"""The one place options are validated (varcheck.core.options): accepted values and messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

from varcheck.core.options import (
    MIN_SAMPLES,
    sampling_effort,
    valid_confidence,
    valid_count,
    valid_positive,
    valid_tolerance,
)
from varcheck.errors import VarcheckError


@pytest.mark.parametrize(
    ("value", "least", "most", "whole_floats", "expected"),
    [
        (5, 1, 10, False, 5),
        (np.int64(7), 1, None, False, 7),
        (1e6, 1000, None, True, 1_000_000),
        (10, 1, 10, False, 10),
        (1, 1, 10, False, 1),
    ],
)
def test_valid_count_accepts(value, least, most, whole_floats, expected) -> None:
    got = valid_count("n", value, least, most, whole_floats=whole_floats)
    assert got == expected and type(got) is int


@pytest.mark.parametrize(
    ("value", "least", "most", "whole_floats", "message"),
    [
        (0, 1, 10, False, "n must be a whole number in 1..10, got 0"),
        (11, 1, 10, False, "n must be a whole number in 1..10, got 11"),
        (True, 0, None, False, "n must be a whole number >= 0, got True"),
        (2.0, 1, None, False, "n must be a whole number >= 1, got 2.0"),
        (2.5, 1, None, True, "n must be a whole number >= 1, got 2.5"),
        (math.inf, 1, None, True, "n must be a whole number >= 1, got inf"),
        ("3", 1, None, True, "n must be a whole number >= 1, got '3'"),
    ],
)
def test_valid_count_refuses_naming_the_value(value, least, most, whole_floats, message) -> None:
    """Guards against a silently rounded or reinterpreted count: every refusal names the value
    and the accepted range."""
    with pytest.raises(VarcheckError) as err:
        valid_count("n", value, least, most, whole_floats=whole_floats)
    assert str(err.value) == message


@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan, True, "1"])
def test_valid_positive_refuses(value) -> None:
    with pytest.raises(VarcheckError, match="must be a finite number > 0"):
        valid_positive("sigma_x", value)


@pytest.mark.parametrize("value", [0.0, 1.0, -0.5, 1.5, math.nan, True, "0.95"])
def test_valid_confidence_refuses(value) -> None:
    with pytest.raises(VarcheckError, match=r"confidence must be in \(0, 1\)"):
        valid_confidence(value)


def test_sampling_effort_fixed_budget_drops_precision() -> None:
    assert sampling_effort(0.9, 0.01, 2e3, None) == (0.9, None, 2000, None)
    assert sampling_effort(np.float64(0.95), 0.05, None, 3) == (0.95, 0.05, None, 3)


def test_sampling_effort_names_its_budget() -> None:
    """The budget's name and bounds come from the caller (project counts blocks, ints only)."""
    refusal = r"^blocks must be a whole number in 2..64, got 1000.0$"
    with pytest.raises(VarcheckError, match=refusal):
        sampling_effort(0.95, None, 1e3, None, name="blocks", least=2, most=64, whole_floats=False)
    with pytest.raises(VarcheckError, match=f"samples must be a whole number in {MIN_SAMPLES}.."):
        sampling_effort(0.95, None, MIN_SAMPLES - 1, None)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: valid_count("n", np.int64(0), 1), "n must be a whole number >= 1, got 0"),
        (lambda: valid_confidence(np.float64(1.5)), "confidence must be in (0, 1), got 1.5"),
        (lambda: valid_confidence(1), "confidence must be in (0, 1), got 1"),
        (
            lambda: valid_positive("sigma_x", np.float32(-2)),
            "sigma_x must be a finite number > 0, got -2.0",
        ),
    ],
)
def test_refusals_show_numpy_scalars_as_numbers(call, message) -> None:
    """A refused numpy value is quoted as the number it holds (not np.int64(0)), any other value
    as typed."""
    with pytest.raises(VarcheckError) as err:
        call()
    assert str(err.value) == message


def test_every_real_option_accepts_numpy_numbers() -> None:
    """rho, alpha, tolerance and max_seconds take a numpy number as confidence does."""
    from varcheck.core.distributions import parse_distribution
    from varcheck.core.options import confidence_from, valid_rho, valid_tolerance

    z = parse_distribution("normal")
    assert valid_rho(np.float32(0.5), z, z) == 0.5
    assert confidence_from(None, np.float64(0.1)) == pytest.approx(0.9)
    assert valid_tolerance(np.float64(0.25)) == 0.25
    assert sampling_effort(0.95, 0.1, None, np.int64(3))[3] == 3.0


# --- feasibility before any work (#17) ----------------------------------------------------------


@pytest.mark.parametrize("value", [1e-320, 1e-10, 5e-10, 1 - 5e-10, 0.9999999999999999])
def test_confidence_keeps_away_from_0_and_1(value: float) -> None:
    """Guards against ZeroDivisionError (1e-320) and StatisticsError (1 - 1e-16) deep inside."""
    with pytest.raises(VarcheckError, match=r"confidence must be in \[1e-09, 1 - 1e-09\]"):
        valid_confidence(value)


@pytest.mark.parametrize("value", [1e-9, 1 - 1e-9, 0.5])
def test_confidence_bounds_are_inclusive(value: float) -> None:
    assert valid_confidence(value) == value


@pytest.mark.parametrize(
    ("precision", "samples", "fragment"),
    [
        (1e-320, None, "precision 1e-320 needs more than 1e300 products"),
        (1e-9, None, "precision 1e-09 needs about 7.7e+18 products per d_k"),
        (1e-6, None, "at least 28 h"),
        (None, 10**15, "samples 1e+15 needs about 1e+15 products per d_k: at least 24 days"),
    ],
)
def test_infeasible_efforts_are_refused_before_any_work(
    precision: float | None, samples: int | None, fragment: str
) -> None:
    """Guards against endless runs: one line naming the option, the estimate and the limit."""
    with pytest.raises(VarcheckError) as err:
        sampling_effort(0.95, precision, samples, None)
    assert fragment in str(err.value) and "limit of 24 h" in str(err.value)
    assert "--max-seconds" in str(err.value)


def test_a_time_cap_makes_any_effort_feasible() -> None:
    """Guards against refusing what --max-seconds bounds anyway."""
    assert sampling_effort(0.95, 1e-9, None, 5.0) == (0.95, 1e-9, None, 5.0)
    assert sampling_effort(0.95, None, 10**15, 5.0)[2] == 10**15


def test_feasible_efforts_pass() -> None:
    """Guards against the limit catching ordinary runs (the estimate is optimistic)."""
    assert sampling_effort(0.95, 2e-6, None, None)[1] == 2e-6
    assert sampling_effort(0.95, None, 10**13, None)[2] == 10**13
    assert sampling_effort(1 - 1e-9, 1e-4, None, None)[1] == 1e-4


def test_higher_confidence_costs_more() -> None:
    """Guards against the estimate ignoring the confidence (z^2 grows the products needed)."""
    assert sampling_effort(0.95, 1.2e-6, None, None)[1] == 1.2e-6
    with pytest.raises(VarcheckError, match="precision 1.2e-06"):
        sampling_effort(0.999, 1.2e-6, None, None)


def test_samples_have_a_ceiling_even_with_a_time_cap() -> None:
    with pytest.raises(VarcheckError, match="samples must be a whole number in 1000..10"):
        sampling_effort(0.95, None, 1e308, 5.0)


def test_tolerance_has_a_floor() -> None:
    """Guards against --tolerance 1e-320 answered with 'inf times narrower'."""
    with pytest.raises(VarcheckError, match=r"tolerance must be >= 1e-06 .*got 1e-320"):
        valid_tolerance(1e-320)
    assert valid_tolerance(1e-6) == 1e-6


def test_refused_values_are_cut() -> None:
    """A 4001-digit value is shown by its leading digits and exponent, not echoed whole."""
    with pytest.raises(VarcheckError) as err:
        valid_count("n", 10**4000, 1, 10)
    assert len(str(err.value)) < 120 and str(err.value).endswith("got 1e+4000")


def test_feasibility_sums_over_the_tests_and_grows_with_dk() -> None:
    """Guards against a file of many tests (or a huge d_k) let through one d_k at a time."""
    from varcheck.core.options import feasible_effort

    feasible_effort(0.95, None, 10**13, None)  # one small d_k: about 6 h, accepted
    with pytest.raises(VarcheckError, match=r"products over 10 tests: at least 2\.4 days"):
        feasible_effort(0.95, None, 10**13, None, dks=(1,) * 10)
    with pytest.raises(VarcheckError, match="per d_k"):
        feasible_effort(0.95, None, 10**13, None, dks=(4096,))
    feasible_effort(0.95, 2e-6, None, None, dks=(4,))
    with pytest.raises(VarcheckError, match="over 4 tests"):
        feasible_effort(0.95, 2e-6, None, None, dks=(4,) * 4)
    feasible_effort(0.95, 1e-9, 10**15, 1.0, dks=(4,) * 100)  # a cap: never refused
