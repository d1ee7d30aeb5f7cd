"""Sampling and moment edge cases of varcheck.core.distributions, pinned against independent values.

Written to kill mutation-testing survivors: each test names the bug it guards against.
Reference values come from hand formulas (gamma raw moments a(a+1)...), numpy/scipy generators
called directly with the same seed, or the documented canonical-spec rules.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from varcheck.core.distributions import parse_distribution
from varcheck.errors import VarcheckError

# --- raw_moment ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "order"),
    [("t:df=1", 2), ("t:df=1", 3), ("t:df=2", 3), ("t:df=1", 4)],
)
def test_raw_moment_of_heavy_tail_is_inf_not_nan(spec, order):
    """Guards against computing E[X^p] from an infinite central moment without the isfinite
    guard: nan mean (df=1) or 0 * inf (df=2) would turn the answer into nan instead of inf."""
    assert parse_distribution(spec).raw_moment(order) == math.inf


@pytest.mark.parametrize("a", [2.0, 3.5])
def test_raw_moments_of_gamma_match_closed_form(a):
    """Guards against a wrong sign or coefficient in the central-to-raw moment formulas
    (e.g. m4 - 4 m mu3 or 5 m mu3): for Gamma(a), E[X^p] = a (a+1) ... (a+p-1) exactly, and the
    mean and third central moment are both non-zero so every term matters."""
    d = parse_distribution(f"scipy.gamma:a={a}")
    assert d.raw_moment(1) == pytest.approx(a, rel=1e-12)
    assert d.raw_moment(2) == pytest.approx(a * (a + 1), rel=1e-12)
    assert d.raw_moment(3) == pytest.approx(a * (a + 1) * (a + 2), rel=1e-12)
    assert d.raw_moment(4) == pytest.approx(a * (a + 1) * (a + 2) * (a + 3), rel=1e-12)


# --- sampling: dtype and exact streams -------------------------------------------------------


@pytest.mark.parametrize(
    "spec", ["rademacher", "laplace", "t:df=5", "t:df=2", "scipy.gamma:a=2", "uniform"]
)
def test_sample_returns_requested_float32_dtype(spec):
    """Guards against a family's sampler ignoring the requested dtype (astype(None) or
    asarray without dtype), which returns float64 when float32 was asked for."""
    x = parse_distribution(spec).sample(np.random.default_rng(1), (3, 4), dtype=np.float32)
    assert x.dtype == np.float32
    assert x.shape == (3, 4)


def test_normal_sample_never_silently_changes_dtype():
    """Guards against the float64 normal path dropping dtype=: asking for float16 must either
    be refused or give float16, never a silent float64 array."""
    d = parse_distribution("normal")
    try:
        x = d.sample(np.random.default_rng(2), (5,), dtype=np.float16)
    except (TypeError, ValueError):
        return
    assert x.dtype == np.float16


def test_rademacher_stream_matches_numpy_bits():
    """Guards against drawing the +-1 signs from another range or stream: the entries are
    2 * b - 1 for numpy's integers(0, 2) bits drawn from the same seed."""
    bits = np.random.default_rng(3).integers(0, 2, size=(50,), dtype=np.int8)
    x = parse_distribution("rademacher").sample(np.random.default_rng(3), (50,))
    np.testing.assert_array_equal(x, 2.0 * bits - 1.0)


def test_raw_t_with_mean_is_shifted():
    """Guards against dropping loc for the raw t (df <= 2): t:df=2,mean=3 is 3 + T_2, drawn
    from numpy's standard_t with the same seed."""
    ref = np.random.default_rng(4).standard_t(2.0, size=(20,)) + 3.0
    x = parse_distribution("t:df=2,mean=3").sample(np.random.default_rng(4), (20,))
    np.testing.assert_allclose(x, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("spec", "a", "mean", "sd"),
    [("scipy.gamma:a=2,sd=1", 2.0, None, 1.0), ("scipy.gamma:a=3,mean=0,sd=0.5", 3.0, 0.0, 0.5)],
)
def test_scipy_affine_sample_is_rescaled(spec, a, mean, sd):
    """Guards against passing sd= on to scipy (a TypeError at sampling time) and against
    forgetting the scale of the affine map: X = new_mean + (sd / sqrt(a)) (G - a), G ~ Gamma(a)
    drawn by scipy from the same seed."""
    g = scipy.stats.gamma(a).rvs(size=(30,), random_state=np.random.default_rng(5))
    factor = sd / math.sqrt(a)
    new_mean = a if mean is None else mean
    ref = new_mean + factor * (g - a)
    x = parse_distribution(spec).sample(np.random.default_rng(5), (30,))
    np.testing.assert_allclose(x, ref, rtol=1e-10, atol=1e-12)


# --- parsing and canonical specs -------------------------------------------------------------


def test_value_with_two_equals_signs_is_reported_as_not_a_number():
    """Guards against splitting key=value at the last '=' (rpartition): in normal:mean=1=2 the
    key is 'mean' and the value '1=2' is not a number."""
    with pytest.raises(VarcheckError, match=r"mean='1=2' is not a number"):
        parse_distribution("normal:mean=1=2")


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("t:df=1e15", "t:df=1000000000000000.0"),
        ("t:df=999999999999999", "t:df=999999999999999"),
        ("t:df=5.0", "t:df=5"),
    ],
)
def test_canonical_spec_integer_cutoff_is_exclusive_at_1e15(spec, canonical):
    """Guards against moving the integer-formatting cutoff (< 1e15) of canonical specs:
    whole numbers below 1e15 print as ints, 1e15 itself keeps its float repr."""
    assert parse_distribution(spec).spec == canonical


def test_negative_sd_message_keeps_float_repr_at_1e15():
    """Guards against the same cutoff in error messages: sd=-1e15 is shown as a float."""
    with pytest.raises(VarcheckError, match=r"sd=-1000000000000000\.0 must be > 0"):
        parse_distribution("normal:sd=-1e15")


def test_scipy_zero_variance_is_refused_as_out_of_range():
    """Guards against treating a variance of exactly 0 (norm with scale 1e-200, whose square
    underflows) as infinite: it is a finite sd of 0, outside the accepted range."""
    with pytest.raises(VarcheckError, match=r"its sd 0 is outside the accepted range"):
        parse_distribution("scipy.norm:scale=1e-200")


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((3, 5), np.float64), ((4, 4), np.float32), ((4, 5), np.float32)],
)
def test_sample_refuses_out_of_the_wrong_shape_or_dtype(shape, dtype):
    """Guards against `and` for `or` in the check of ``out``: a buffer with the right dtype but
    the wrong shape (or the reverse) must be refused, not filled or broadcast into."""
    dist = parse_distribution("uniform")
    out = np.empty(shape, dtype=dtype)
    with pytest.raises(ValueError, match=r"out is float\d\d\(\d, \d\), not float64\(4, 5\)"):
        dist.sample(np.random.default_rng(0), (4, 5), np.float64, out=out)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_normal_sample_into_out_allocates_nothing(dtype):
    """Guards against normal entries drawn into ``out`` through a fresh array (the normal branch
    skipped, a misspelt family name): that is what ``out`` exists to avoid. Drawing 10^6 numbers
    into a buffer of 4 or 8 MB must allocate well under one such buffer, with the same values as
    a fresh draw from the same seed."""
    import tracemalloc

    dist = parse_distribution("normal:sd=2")
    out = np.empty((1000, 1000), dtype=dtype)
    tracemalloc.start()
    try:
        got = dist.sample(np.random.default_rng(3), out.shape, dtype, out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got is out
    assert peak < out.nbytes / 4
    np.testing.assert_array_equal(got, dist.sample(np.random.default_rng(3), out.shape, dtype))


def test_mean_out_of_range_names_the_spec():
    """Guards against the scale check losing the spec (`None` in its message) and against `>=`
    at the bound: |mean| = 1e6 is accepted, just above is refused, naming what was typed."""
    assert parse_distribution("normal:mean=1e6").mean == 1e6
    with pytest.raises(VarcheckError, match=r"^distribution 'normal:mean=1000001': its mean"):
        parse_distribution("normal:mean=1000001")


def test_raw_t_refusal_names_the_spec():
    """Guards against the raw t (df <= 2) losing the spec in its messages."""
    with pytest.raises(VarcheckError, match=r"^distribution 't:df=2,sd=1': sd= is impossible"):
        parse_distribution("t:df=2,sd=1")


@pytest.mark.parametrize("df", [3.5, 4.0])
def test_t_third_moment_is_zero_above_df_3(df):
    """Guards against a wrong threshold for the t's third moment (`df > 4`): E[X^3] exists for
    df > 3 and is 0 by symmetry, while the fourth is still infinite at df <= 4."""
    dist = parse_distribution(f"t:df={df}")
    assert dist.mu3 == 0.0
    assert dist.mu4 == math.inf


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("scipy.gamma:a=-1", "invalid parameters for scipy.gamma (a=-1)"),
        ("scipy.uniform:scale=1e9", "its sd 2.89e+08 is outside the accepted range"),
        ("scipy.cauchy:sd=1", "sd= is impossible, scipy.cauchy with these parameters has infinite"),
        ("scipy.cauchy:mean=1", "mean=/sd= are impossible, scipy.cauchy with these parameters"),
    ],
)
def test_scipy_refusals_name_the_spec(spec, says):
    """Guards against a scipy law's moment or rescaling step losing the spec (None in its
    message): each refusal starts with the distribution as it was typed."""
    with pytest.raises(VarcheckError) as err:
        parse_distribution(spec)
    assert str(err.value).startswith(f"distribution {spec!r}: {says}")
