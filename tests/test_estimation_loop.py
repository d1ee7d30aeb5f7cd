"""The adaptive loop of ``estimate_variance``: budgets, stopping rules, planning cap, progress.

Each test names the bug it guards against. The draws are seeded, the budgets small (a few
thousand products), so the file runs in about a second.
"""

from __future__ import annotations

import math
from concurrent.futures import Future

import pytest

from varcheck.core.blocks import BlockPlan, plan_blocks
from varcheck.core.distributions import parse_distribution
from varcheck.core.estimation import (
    MIN_BLOCKS,
    PartialInterrupt,
    _side_cap,
    estimate_variance,
    hall_interval,
    run_chunk,
)
from varcheck.core.theory import dot_product_theory


def _setting(spec: str, dk: int):
    q = parse_distribution(spec)
    return q, q, dot_product_theory(dk, q, q)


def _plan(side: int, blocks_per_chunk: int) -> BlockPlan:
    return BlockPlan(
        side=side, paired=False, blocks_per_chunk=blocks_per_chunk, row_correlation=0.0
    )


def test_default_precision_is_one_percent() -> None:
    """Guards against a wrong default target (1.01 instead of 0.01): without ``precision`` the
    delivered relative half-width must meet 1% and not be far below it (the loop overshoots its
    prediction by 10%, so a run stopping under half the target would have drawn ~4x too much)."""
    q, k, theory = _setting("normal", 2)
    est = estimate_variance(q, k, theory, seed=3)
    assert est.stop_reason == "precision"
    assert 0.005 < est.precision <= 0.01


@pytest.mark.parametrize(
    ("samples", "side", "blocks"),
    [
        # at least MIN_BLOCKS blocks once the budget reaches MIN_BLOCKS products, even when fewer
        # (bigger) blocks would hold it: 1000 products in 4-product blocks is 250 blocks, in
        # 16-product blocks 63 blocks, raised to 200
        (1000, 2, 250),
        (1000, 4, MIN_BLOCKS),
        (MIN_BLOCKS, 2, MIN_BLOCKS),  # the boundary itself: >=, not >
        # below MIN_BLOCKS products the floor is two blocks (one degree of freedom)
        (3, 2, 2),
        (5, 1, 5),
        (9, 2, 3),
    ],
)
def test_fixed_budget_block_count(samples: int, side: int, blocks: int) -> None:
    """Guards against a wrong floor on the number of blocks of a fixed budget (the MIN_BLOCKS
    floor dropped, `>` for `>=` at samples == MIN_BLOCKS, a floor of 3 instead of 2 for tiny
    budgets): blocks = max(floor, ceil(samples / products_per_block))."""
    q, k, theory = _setting("normal", 4)
    est = estimate_variance(
        q, k, theory, seed=1, samples=samples, plan=_plan(side, blocks_per_chunk=7)
    )
    assert est.blocks == blocks
    assert est.samples == blocks * side * side
    assert est.stop_reason == "samples"


def test_max_seconds_stops_at_two_blocks() -> None:
    """Guards against the time cap's block floor (`acc.n > 2` or `>= 3` for `>= 2`): with a cap
    already spent and one block per chunk, the loop stops as soon as two blocks exist (the
    fewest that give an interval), not at three."""
    q, k, theory = _setting("normal", 4)
    est = estimate_variance(
        q, k, theory, seed=1, samples=10_000, max_seconds=0.0, plan=_plan(1, blocks_per_chunk=1)
    )
    assert est.blocks == 2
    assert est.stop_reason == "max-seconds"


def test_time_cap_reports_max_seconds_even_with_a_budget() -> None:
    """Guards against a fixed budget overwriting the stop reason of a run cut short by the time
    cap (`or` for `and`, or a misspelt "max-seconds" in the comparison): the reason must say the
    budget was not used up."""
    q, k, theory = _setting("normal", 4)
    est = estimate_variance(q, k, theory, seed=2, samples=10**6, max_seconds=0.0)
    assert est.stop_reason == "max-seconds"
    assert est.samples < 10**6


def test_generous_time_cap_does_not_stop_the_run() -> None:
    """Guards against a wrong elapsed time (`perf_counter() + start`, always past the cap): a run
    with a budget of a few milliseconds' work and an hour's cap uses its whole budget."""
    q, k, theory = _setting("normal", 4)
    est = estimate_variance(q, k, theory, seed=2, samples=4000, max_seconds=3600.0)
    assert est.stop_reason == "samples"
    assert est.samples >= 4000


def test_not_estimable_setting_runs_until_the_time_cap() -> None:
    """Guards against the planning cap of a setting with no trustworthy interval (extreme
    kurtosis) becoming something other than unbounded (None: a TypeError in the side cap): the
    loop must run, plan blocks up to the largest side, and stop on the time cap."""
    q, k, theory = _setting("scipy.lognorm:s=1.5", 2)
    assert not theory.estimable
    est = estimate_variance(q, k, theory, seed=4, precision=0.01, max_seconds=0.0)
    assert est.stop_reason == "max-seconds"
    assert est.block_side == plan_blocks(q, k, theory).side


def test_infinite_mean_setting_is_not_shifted_by_nan() -> None:
    """Guards against centring the products on a non-finite exact mean (Cauchy entries: E[q·k]
    does not exist): every product would become NaN. The estimates stay finite."""
    q, k, theory = _setting("t:df=1", 2)
    assert not math.isfinite(theory.mean)
    est = estimate_variance(q, k, theory, seed=5, samples=2000)
    assert math.isfinite(est.var) and est.var > 0
    assert math.isfinite(est.mean)


@pytest.mark.parametrize(("dk", "precision"), [(2, 0.02), (2, 0.05), (8, 0.02), (64, 0.03)])
def test_first_round_never_exceeds_the_predicted_need(dk: int, precision: float) -> None:
    """Guards against a larger planning floor (max(kurtosis - 1, 1.5) for 0.5): the first
    round's MIN_BLOCKS blocks must hold at most the 4 * max(kurtosis - 1, 1/2) / precision^2
    products the theory predicts a run needs (Rademacher entries at d_k = 2 have kurtosis 2, so
    the floor decides the largest side allowed)."""
    q, k, theory = _setting("rademacher", dk)
    need = 4.0 * max(theory.estimator_relative_variance, 0.5) / precision**2
    est = estimate_variance(q, k, theory, seed=6, precision=precision)
    assert MIN_BLOCKS * est.block_side**2 <= need
    assert est.block_side == plan_blocks(q, k, theory, max_side=_side_cap(need)).side


class _CountingRunner:
    """A serial runner that records how many chunks it was given."""

    workers = 1

    def __init__(self) -> None:
        self.calls = 0

    def submit(self, fn, *args) -> Future:
        self.calls += 1
        fut: Future = Future()
        fut.set_result(fn(*args))
        return fut


def test_given_runner_is_used() -> None:
    """Guards against the runner argument being replaced by the default serial runner (a
    `--workers` or `--scheduler` option that silently runs on one thread): every chunk must go
    through the runner passed in, and the result must not depend on it."""
    q, k, theory = _setting("normal", 4)
    runner = _CountingRunner()
    plan = _plan(2, blocks_per_chunk=10)
    est = estimate_variance(q, k, theory, seed=7, samples=4000, plan=plan, runner=runner)
    assert runner.calls == math.ceil(est.blocks / plan.blocks_per_chunk) == 100
    plain = estimate_variance(q, k, theory, seed=7, samples=4000, plan=plan)
    assert (plain.var, plain.confidence_interval) == (est.var, est.confidence_interval)


def test_progress_reports_fractions_up_to_one() -> None:
    """Guards against a wrong progress fraction (None, a cap of 2 instead of 1, n * target for
    n / target): after each chunk the callback gets blocks done over blocks planned, a float in
    (0, 1], increasing, ending at 1 for a fixed budget."""
    q, k, theory = _setting("normal", 4)
    seen: list[float] = []
    plan = _plan(2, blocks_per_chunk=50)
    estimate_variance(q, k, theory, seed=8, samples=800, plan=plan, progress=seen.append)
    assert seen == pytest.approx([0.25, 0.5, 0.75, 1.0], rel=1e-15)


def test_slow_convergence_loop_stops_on_the_reported_interval() -> None:
    """Guards against the loop's stopping test using another interval than the one reported
    (Hall's instead of the log-scale interval used when E[(q·k)^6] is infinite): the precision
    delivered must meet the request in every seed."""
    q, k, theory = _setting("t:df=5", 4)
    assert theory.slow_convergence
    for seed in range(12):
        est = estimate_variance(q, k, theory, seed=seed, precision=0.2)
        assert est.interval_method == "log"
        assert est.precision <= 0.2, seed


def test_run_chunk_default_shift_is_zero() -> None:
    """Guards against a non-zero default centring of the products in a chunk (shift 1.0): a
    chunk drawn without ``shift`` equals the same chunk drawn with shift 0."""
    q = parse_distribution("normal:mean=0.5")
    plan = _plan(2, blocks_per_chunk=5)
    args = (q, q, 3, plan, 11, (0,), 2, 5, 0.0)
    m_default, a_default = run_chunk(*args)
    m_zero, a_zero = run_chunk(*args, 0.0)
    assert (m_default == m_zero).all() and (a_default == a_zero).all()


@pytest.mark.parametrize(("se", "skew"), [(0.5, math.nan), (0.5, math.inf), (math.nan, 0.3)])
def test_hall_interval_falls_back_when_either_input_is_not_finite(se: float, skew: float) -> None:
    """Guards against `or` in Hall's fallback test: a finite SE with a NaN or infinite skewness
    (or the reverse) must give the plain symmetric t interval, not a NaN from the cubic."""
    low, high = hall_interval(2.0, se, skew, 50, 2.0)
    if math.isfinite(se):
        assert (low, high) == (2.0 - 2.0 * se, 2.0 + 2.0 * se)
    else:
        assert math.isnan(low) and math.isnan(high)


def test_not_estimable_setting_plans_without_a_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards against the planning cap being derived for a setting with no trustworthy interval
    (`estimable or var > 0`): its kurtosis (here 1.7e7) predicts no meaningful need, so the
    block side may go up to the largest (1024), not the 512 that 4 * (kurtosis - 1) / 0.5^2
    products would allow."""
    sides: list[int] = []
    real = plan_blocks

    def spy(q, k, theory, *, max_side=1024):
        sides.append(max_side)
        return real(q, k, theory, max_side=max_side)

    monkeypatch.setattr("varcheck.core.estimation.plan_blocks", spy)
    q, k, theory = _setting("scipy.lognorm:s=1.5", 16)
    assert not theory.estimable and theory.var > 0
    estimate_variance(q, k, theory, seed=4, precision=0.5, max_seconds=0.0)
    assert sides == [1024]


def test_slow_convergence_loop_checks_the_log_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards against the loop's stopping test computing another interval than the reported one
    (the method dropped: Hall's interval instead of the log scale used when E[(q·k)^6] is
    infinite). Every interval the loop computes must use the method it reports."""
    import varcheck.core.estimation as estimation

    methods: list[object] = []
    real = estimation.block_interval

    def spy(acc, est, se, confidence, method):
        methods.append(method)
        return real(acc, est, se, confidence, method)

    monkeypatch.setattr(estimation, "block_interval", spy)
    q, k, theory = _setting("t:df=5", 4)
    est = estimate_variance(q, k, theory, seed=1, precision=0.05)
    assert est.interval_method == "log"
    assert len(methods) >= 2 and set(methods) == {"log"}


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, blocks: int) -> None:
    """Ctrl-C (a ``KeyboardInterrupt``) in the chunk that would take the run past ``blocks``."""
    drawn = [0]

    def chunk(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - run_chunk's own arguments
        drawn[0] += args[7]
        if drawn[0] > blocks:
            raise KeyboardInterrupt
        return run_chunk(*args, **kwargs)

    monkeypatch.setattr("varcheck.core.estimation.run_chunk", chunk)


def test_an_interrupt_carries_the_estimate_of_the_blocks_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Guards against Ctrl-C or SIGTERM in a single estimate losing every block drawn (assert
    printed only 'interrupted before any result', #17): the interrupt carries the estimate and
    interval of the blocks drawn before it, as a group of one, stop reason 'interrupted'."""
    q, k, th = _setting("normal", 16)
    _interrupt_after(monkeypatch, 3 * MIN_BLOCKS)
    with pytest.raises(PartialInterrupt) as caught:
        estimate_variance(q, k, th, seed=1, precision=1e-4, plan=_plan(4, 50))
    (est,) = caught.value.partial.estimates
    assert est.stop_reason == "interrupted"
    assert 2 * MIN_BLOCKS <= est.blocks <= 3 * MIN_BLOCKS
    assert est.confidence_interval.low < est.var < est.confidence_interval.high
    assert abs(est.var / 16 - 1) < 0.2
    assert caught.value.partial.covariance.tolist() == [[est.se**2]]


def test_an_interrupt_before_two_blocks_carries_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards against a partial 'estimate' of no blocks (NaN) passed off as a result."""
    q, k, th = _setting("normal", 16)
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt) as caught:
        estimate_variance(q, k, th, seed=1, precision=1e-4, plan=_plan(4, 1))
    assert not isinstance(caught.value, PartialInterrupt)
