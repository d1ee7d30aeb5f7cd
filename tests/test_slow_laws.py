"""Slow laws under a time cap (#17): scipy laws drawn by numerical inversion come in small
pieces, with the same numbers as one draw, and stop at a deadline or on cancellation."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.stats

from varcheck.core import distributions as D
from varcheck.core.distributions import (
    DrawDeadline,
    cancel_draws,
    draw_deadline,
    parse_distribution,
    resume_draws,
)

INVERTED = scipy.stats.kappa3(a=2.0)  # scipy's generic ppf(U) sampler, and a fast ppf


def test_which_laws_are_drawn_by_inversion() -> None:
    assert D._by_inversion(INVERTED)
    assert D._by_inversion(scipy.stats.studentized_range(k=3, df=10))
    assert not D._by_inversion(scipy.stats.gamma(a=2.0))  # its own sampler: drawn whole


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (300, 41), (3, 5, 1000)])
def test_pieces_give_the_numbers_of_one_draw(shape: tuple[int, ...]) -> None:
    """Guards against pieces changing the numbers (results must not depend on timing)."""
    whole = INVERTED.rvs(size=shape, random_state=np.random.default_rng(5))
    pieces = D._inverted_in_pieces(INVERTED, np.random.default_rng(5), shape, np.dtype(float))
    assert pieces.shape == shape and np.array_equal(pieces, whole)


def test_distribution_sample_uses_pieces_with_unchanged_numbers() -> None:
    """Guards against the piecewise path changing a scipy law's draws (goldens, seeds)."""
    dist = parse_distribution("scipy.kappa3:a=2")
    got = dist.sample(np.random.default_rng(3), (64, 50))
    raw = INVERTED.rvs(size=(64, 50), random_state=np.random.default_rng(3))
    assert (dist.scale, dist.loc) == (1.0, 0.0)  # the law as scipy draws it
    assert np.array_equal(got, raw)
    out = np.empty((64, 50))
    assert np.allclose(dist.sample(np.random.default_rng(3), (64, 50), out=out), got)


def test_pieces_grow_towards_the_target_time(monkeypatch) -> None:
    """Guards against one piece per entry (slow) or one piece for all (no time cap)."""
    sizes: list[int] = []
    real = INVERTED.rvs

    class Spy:
        def rvs(self, size, random_state):  # noqa: ANN001, ANN201
            sizes.append(size)
            return real(size=size, random_state=random_state)

    D._inverted_in_pieces(Spy(), np.random.default_rng(1), (100_000,), np.dtype(float))
    assert sizes[0] == 1 and sizes[1] == 8  # at most 8 times larger each time
    assert len(sizes) < 40 and sum(sizes) == 100_000


def test_a_deadline_stops_a_slow_draw() -> None:
    """Guards against --max-seconds ignored by a law that takes seconds per thousand entries."""
    slow = scipy.stats.studentized_range(k=3, df=10)
    start = time.perf_counter()
    with pytest.raises(DrawDeadline, match="time cap"), draw_deadline(0.3):
        D._inverted_in_pieces(slow, np.random.default_rng(1), (100_000,), np.dtype(float))
    assert time.perf_counter() - start < 5


def test_deadlines_nest_and_restore() -> None:
    assert D._deadline.at is None
    with draw_deadline(100.0):
        outer = D._deadline.at
        with draw_deadline(1000.0):
            assert D._deadline.at == outer  # the earlier deadline holds
        with draw_deadline(None):
            assert D._deadline.at == outer
        with draw_deadline(1.0):
            assert D._deadline.at < outer  # type: ignore[operator]
        assert D._deadline.at == outer
    assert D._deadline.at is None


def test_an_expired_deadline_leaves_fast_laws_alone() -> None:
    """Guards against the fast path paying for (or being stopped by) the time cap."""
    with draw_deadline(-1.0):
        for spec in ("normal", "uniform", "t:df=5", "scipy.gamma:a=2"):
            assert parse_distribution(spec).sample(np.random.default_rng(1), (10,)).shape == (10,)
        with pytest.raises(DrawDeadline):
            parse_distribution("scipy.kappa3:a=2").sample(np.random.default_rng(1), (10,))


def test_cancel_and_resume() -> None:
    cancel_draws()
    try:
        with pytest.raises(DrawDeadline, match="cancelled"):
            D._inverted_in_pieces(INVERTED, np.random.default_rng(1), (10,), np.dtype(float))
    finally:
        resume_draws()
    assert D._inverted_in_pieces(INVERTED, np.random.default_rng(1), (10,), np.dtype(float)).size
