"""The derivation of Var(q·k) = d_k, step by step, each step checked by simulation.

The textbook argument has four steps. With X = q_i and Y = k_i one pair of entries:

1. E[XY] = E[X] E[Y] (independence), which is 0 for zero-mean entries;
2. Var(XY) = (Var X + E[X]²)(Var Y + E[Y]²) − E[X]² E[Y]², which is Var X · Var Y for zero
   means and 1 for unit variances;
3. Var(q·k) = Var(sum_i X_i Y_i) = d_k Var(XY), because the d_k terms are independent;
4. Var(q·k / √d_k) = Var(q·k) / d_k = Var(XY), which is 1 under the textbook assumptions.

For the chosen distributions each step gets its exact value (from :mod:`varcheck.core.theory`, which
also covers correlated normal pairs) beside the value the textbook claims, and a Monte-Carlo
check with its interval. A step *breaks* when an assumption behind it fails and its value differs
from the textbook's; later steps then *inherit* the wrong number, although their own reasoning
still holds.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._version import __version__
from ..core.blocks import BlockPlan
from ..core.distributions import Distribution, parse_distribution
from ..core.estimation import (
    BlockAccumulator,
    ConfidenceInterval,
    VarianceEstimate,
    budget_shortfall,
    estimate_variance,
    interval_method,
    minimum_products,
    run_chunk,
    summarise,
    t_quantile,
    t_two_sided_p,
)
from ..core.options import entry_laws, resolve_seed, sampling_effort, valid_count, valid_rho
from ..core.ranges import MAX_DK
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.verdicts import CONSISTENT, exit_code, judge, marginal_only, outcome_of
from ..output.display import Displayable
from .limits import approx, refuse

__all__ = ["DeriveStep", "DeriveResult", "derive"]

HOLDS = "holds"
BREAKS = "breaks"
INHERITS = "inherits"
_MEAN_SAMPLES = 200_000
_CHUNK = 1 << 18
_UNRELIABLE_SAMPLES = 200_000
#: Products × d_k a variance step may spend chasing ``precision`` (a few seconds); a larger
#: d_k gets this fixed budget instead, and the note says the precision was not targeted.
STEP_BUDGET = 5e8
_MIN_BUDGET_SAMPLES = 200
#: Largest run accepted, in cost units (about a nanosecond each; a few minutes) ...
MAX_COST = 2e11
#: ... from these per-item costs: a pair of step 1, the bookkeeping of one product of a variance
#: step, and drawing one entry (shared by a block's ``side`` products).
_PAIR_COST = 40
_PRODUCT_COST = 25
_DRAW_COST = 15
#: A check cut short by Ctrl-C (or SIGTERM) before it ran: its verdict and stop reason.
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class DeriveStep:
    """One step of the derivation.

    Attributes
    ----------
    number : int
        1 to 4.
    quantity : str
        What the step computes, e.g. ``Var(XY)``.
    formula : str
        The general formula used for the value.
    textbook : str
        The textbook's form of the step.
    textbook_value : float
        The number the textbook claims (0, 1, d_k, 1).
    value : float
        The exact value for the chosen distributions (``inf`` if it does not exist, ``nan`` if
        undefined).
    status : str
        ``holds``, ``breaks`` (an assumption of this step fails) or ``inherits`` (the step is
        sound but uses a broken earlier value).
    reason : str
        Why the step breaks (empty when it holds).
    estimate : float
        Monte-Carlo estimate of the quantity.
    confidence_interval : ConfidenceInterval
    se : float
        Standard error of the estimate.
    samples : int
        Products behind the estimate.
    p_value, p_adjusted : float
        Two-sided p-value of ``value`` (Holm-adjusted over steps 1–3; step 4 reuses step 3's
        draws and test).
    textbook_p_value : float
        Two-sided p-value of ``textbook_value`` (shows the simulation rejecting a broken step).
    verdict : str
        The check of ``value``: ``consistent``, ``rejected``, ``unreliable`` (the estimate has no
        valid interval: a moment it needs is infinite, or it drew fewer products than a valid
        interval needs), ``infinite`` (nothing to estimate) or ``interrupted`` (not checked).
    stop_reason : str
        How the simulation stopped: ``precision``, ``samples`` (fixed number asked for),
        ``budget`` (d_k too large to chase the precision; a fixed budget of products was used),
        ``max-seconds``, ``interrupted`` (Ctrl-C cut the check short: the estimate is from the
        draws made by then; or came before it: no estimate and the verdict ``interrupted``), or
        ``""`` (step 1, or nothing simulated).
    min_samples : int or None
        When a variance step drew fewer products than a valid interval needs (a fixed
        ``samples``, the budget of a large d_k, or a run stopped at ``max_seconds``), the
        products it needs (:func:`~varcheck.core.estimation.minimum_products`); the verdict is
        then ``unreliable`` and no interval or p-value is given. ``None`` otherwise.
    """

    number: int
    quantity: str
    formula: str
    textbook: str
    textbook_value: float
    value: float
    status: str
    reason: str
    estimate: float
    confidence_interval: ConfidenceInterval
    se: float
    samples: int
    p_value: float
    p_adjusted: float
    textbook_p_value: float
    verdict: str
    stop_reason: str = ""
    min_samples: int | None = None

    def marginal_only(self, alpha: float) -> bool:
        """True when this step's own interval excludes its value (p < alpha) but Holm, over the
        steps, keeps it consistent (the table marks it †, as the sweep's does)."""
        return marginal_only(self.verdict, self.p_value, alpha)


@dataclass(frozen=True, repr=False)
class DeriveResult(Displayable):
    """The result of :func:`derive`.

    Attributes
    ----------
    steps : tuple of DeriveStep
    broken_step : int or None
        The first step whose failure changes Var(q·k) (2 for non-zero means, correlation,
        non-unit or infinite variances); ``None`` when Var(q·k) = d_k holds.
    correct_var, correct_scaled_var : float
        The right values of Var(q·k) and Var(q·k/√d_k) for these distributions.
    theory : DotProductTheory
    q_dist, k_dist : Distribution
    rho, dk, confidence, seed, precision, samples, max_seconds, version
        The settings used.
    interrupted : bool
        Ctrl-C (or SIGTERM) stopped the checks: the check under way keeps the draws made so far
        (stop reason ``interrupted``), the steps after it have no estimate and the verdict
        ``interrupted``; the exact values of every step are all there.
    """

    steps: tuple[DeriveStep, ...]
    broken_step: int | None
    correct_var: float
    correct_scaled_var: float
    theory: DotProductTheory
    q_dist: Distribution
    k_dist: Distribution
    rho: float
    dk: int
    confidence: float
    seed: int
    precision: float | None
    samples: int | None
    max_seconds: float | None
    version: str = __version__
    interrupted: bool = False

    @property
    def time_limited(self) -> bool:
        """True when ``max_seconds`` cut a check short: its interval then depends on the speed
        of the machine, not only on the seed."""
        return any(s.stop_reason == "max-seconds" for s in self.steps)

    def _verdicts(self) -> list[str]:
        """The steps' verdicts: what the exit code and the outcome are judged from.

        A step that breaks is the lesson derive teaches, not a failure: the exact value it
        shows instead is what the checks test. (A gate on Var(q·k) = d_k is ``assert`` or
        ``sweep --claim dk``.)"""
        return [s.verdict for s in self.steps]

    @property
    def exit_code(self) -> int:
        """0 every check is consistent with its exact value (whether the textbook's steps hold
        or break), 1 a check rejects its exact value, 4 a check without a valid test; 130
        interrupted."""
        return exit_code(self._verdicts(), interrupted=self.interrupted)

    @property
    def outcome(self) -> str:
        """What the exit code says, in a word: ``rejected`` (a check rejects its exact value),
        ``unreliable``/``infinite`` (a check without a valid test), ``consistent``, or
        ``interrupted``; whether the textbook holds is ``broken_step``."""
        return outcome_of(self._verdicts(), interrupted=self.interrupted, best=CONSISTENT)


def _draw_pairs(
    q: Distribution, k: Distribution, rho: float, rng: np.random.Generator, n: int
) -> tuple[np.ndarray, np.ndarray]:
    if rho == 0.0:
        return q.sample(rng, (n,)), k.sample(rng, (n,))
    qmu, qsd = q.standard_normal_parts()
    kmu, ksd = k.standard_normal_parts()
    z1 = rng.standard_normal(n)
    z2 = rho * z1 + math.sqrt(1.0 - rho * rho) * rng.standard_normal(n)
    return qmu + qsd * z1, kmu + ksd * z2


def _mean_check(
    q: Distribution,
    k: Distribution,
    rho: float,
    n: int,
    seed: int,
    confidence: float,
    max_seconds: float | None = None,
) -> tuple[float, float, ConfidenceInterval, int, bool]:
    """Mean of n products X Y with a t-interval (chunks seeded by SeedSequence spawn keys), the
    products used (fewer than n when ``max_seconds`` ran out, after at least two chunks) and
    whether Ctrl-C cut the draws short (nothing drawn yet: :class:`_Stopped` without a check)."""
    total = 0.0
    total_sq = 0.0
    shift: float | None = None
    interrupted = False
    used = 0
    start_time = time.perf_counter()
    try:
        for i, start in enumerate(range(0, n, _CHUNK)):
            m = min(_CHUNK, n - start)
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1, i)))
            x, y = _draw_pairs(q, k, rho, rng, m)
            prod = x * y
            if shift is None:
                shift = float(prod[0])
            dev = prod - shift  # shifted sums keep the variance accurate for large means
            total += float(dev.sum())
            total_sq += float(dev @ dev)
            used += m
            late = max_seconds is not None and time.perf_counter() - start_time > max_seconds
            if late and i >= 1 and used < n:
                break
    except KeyboardInterrupt:
        if used < 2:
            raise _Stopped(None) from None
        interrupted = True
    mean_dev = total / used
    var = max(total_sq / used - mean_dev * mean_dev, 0.0) * used / (used - 1)
    se = math.sqrt(var / used)
    half = t_quantile(confidence, used - 1) * se
    mean = mean_dev + (shift or 0.0)
    return mean, se, ConfidenceInterval(mean - half, mean + half), used, interrupted


def _p(estimate: float, se: float, claim: float, df: int) -> float:
    if not (math.isfinite(claim) and math.isfinite(estimate)):
        return math.nan
    if se == 0:
        return 1.0 if estimate == claim else 0.0
    return t_two_sided_p((estimate - claim) / se, df)


def _differs(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return True
    if math.isinf(a) or math.isinf(b):
        return a != b
    return abs(a - b) > 1e-12 * max(1.0, abs(a), abs(b))


def _mean_reason(q: Distribution, k: Distribution, rho: float) -> str:
    if math.isnan(q.mean) or math.isnan(k.mean):
        return "an entry distribution has no mean (E|X| is infinite), so E[XY] is undefined"
    parts = []
    if q.mean != 0.0 and k.mean != 0.0:
        parts.append(f"both means are non-zero (E[X] = {q.mean:g}, E[Y] = {k.mean:g})")
    if rho != 0.0:
        parts.append(f"q_i and k_i are correlated (ρ = {rho:g}), adding ρ·sd(X)·sd(Y)")
    return "; ".join(parts)


def _var_reason(q: Distribution, k: Distribution, rho: float, value: float) -> str:
    if not math.isfinite(q.var) or not math.isfinite(k.var):
        return (
            "an entry distribution has infinite variance, so Var(XY) is infinite: no scale "
            "makes q·k unit-variance"
        )
    parts = []
    if q.mean != 0.0 or k.mean != 0.0:
        parts.append(
            "non-zero means: Var(XY) ≠ Var X · Var Y, the terms E[X]²Var Y + E[Y]²Var X "
            f"add {k.var * q.mean**2 + q.var * k.mean**2:g}"
        )
    if rho != 0.0:
        parts.append(f"correlation ρ = {rho:g}: Var(XY) picks up (1 + ρ²) and mean cross terms")
    if q.var != 1.0 or k.var != 1.0:
        parts.append(f"Var X · Var Y = {q.var * k.var:g}, not 1 (entries without unit variance)")
    return "; ".join(parts) + f"; the correct Var(XY) is {value:g}"


def _degenerate(theory: DotProductTheory) -> bool:
    """True when (q·k)² is constant: the delta-method standard error of the variance estimate
    is then zero to first order and its interval is not valid."""
    return theory.estimable and theory.var > 0 and theory.mu4 == theory.var**2


def _has_test(theory: DotProductTheory) -> bool:
    """A variance step's interval is valid: E[(q·k)⁴] is finite and (q·k)² is not constant."""
    return theory.estimable and not _degenerate(theory)


class _Settings(NamedTuple):
    """The checked arguments of :func:`derive`."""

    q: Distribution
    k: Distribution
    rho: float
    dk: int
    confidence: float
    precision: float | None
    samples: int | None
    max_seconds: float | None
    seed: int


class _Check(NamedTuple):
    """A step's Monte-Carlo check (named as :class:`DeriveStep`'s fields)."""

    estimate: float
    confidence_interval: ConfidenceInterval
    se: float
    samples: int
    p_value: float
    textbook_p_value: float
    stop_reason: str = ""
    min_samples: int | None = None


_NO_INTERVAL = ConfidenceInterval(math.nan, math.nan)
_NO_CHECK = _Check(math.nan, _NO_INTERVAL, math.nan, 0, math.nan, math.nan)
_NOT_CHECKED = _NO_CHECK._replace(stop_reason=INTERRUPTED)


class _Stopped(Exception):
    """Ctrl-C (or SIGTERM) inside a check, carrying what that check had drawn by then (a
    :class:`_Check`, or an estimate and its stop reason; None when nothing usable)."""

    def __init__(self, partial: _Check | tuple[VarianceEstimate, str] | None) -> None:
        super().__init__("interrupted")
        self.partial = partial


class _Recorder:
    """A runner (as :mod:`varcheck.core.parallel`'s serial one) that keeps every chunk it ran,
    so that a check cut short can still be summarised from the blocks drawn so far."""

    workers = 1

    def __init__(self) -> None:
        self.chunks: list[tuple[np.ndarray, np.ndarray]] = []
        self.task: dict[str, object] = {}

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        result = fn(*args)
        self.chunks.append(result)
        # the chunks are run_chunk's: its signature names the plan and shift they were drawn with
        self.task = inspect.signature(run_chunk).bind(*args).arguments
        done: Future = Future()
        done.set_result(result)
        return done

    def summary(self, theory: DotProductTheory, confidence: float) -> VarianceEstimate | None:
        """The estimate from the chunks run so far (None with fewer than two blocks)."""
        acc = BlockAccumulator()
        for m, a in self.chunks:
            acc.add(m, a)
        if acc.n < 2:
            return None
        plan = self.task["plan"]
        return summarise(
            acc,
            confidence=confidence,
            method=interval_method(theory),
            products_per_block=plan.products_per_block,  # type: ignore[attr-defined]
            block_side=plan.side,  # type: ignore[attr-defined]
            stop_reason=INTERRUPTED,
            shift=float(self.task.get("shift", 0.0)),  # type: ignore[arg-type]
        )


def _textbook(dk: int) -> tuple[float, float, float, float]:
    """The values the textbook claims for steps 1-4."""
    return 0.0, 1.0, float(dk), 1.0


def _step_texts(rho: float) -> tuple[tuple[str, str, str], ...]:
    """Each step's quantity, the general formula used for its value, and the textbook's form."""
    var_formula = (
        "E[X²Y²] − E[XY]² (correlated normal pair)"
        if rho
        else "(Var X + E[X]²)(Var Y + E[Y]²) − E[X]²E[Y]²"
    )
    return (
        ("E[XY]", "E[X]·E[Y] + ρ·sd(X)·sd(Y)" if rho else "E[X]·E[Y]", "E[X]·E[Y] = 0"),
        ("Var(XY)", var_formula, "Var X · Var Y = 1"),
        ("Var(q·k)", "d_k · Var(XY)", "d_k · 1 = d_k"),
        ("Var(q·k/√d_k)", "Var(q·k) / d_k = Var(XY)", "d_k / d_k = 1"),
    )


def _derive_iv(
    dk: int,
    dist: Distribution | str,
    q_dist: Distribution | str | None,
    k_dist: Distribution | str | None,
    rho: float,
    confidence: float,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    seed: int | None,
) -> _Settings:
    dk = valid_count("dk", dk, 1, MAX_DK)
    # dist is parsed first: None is refused, not read as normal
    q, k = entry_laws(parse_distribution(dist), q_dist, k_dist)
    rho = valid_rho(rho, q, k)
    effort = sampling_effort(confidence, precision, samples, max_seconds)
    cfg = _Settings(q, k, rho, dk, *effort, seed=resolve_seed(seed))
    _feasible(cfg)
    return cfg


def _block_side(samples: float) -> int:
    """The block side a fixed budget allows (as the estimator's planner caps it)."""
    side = 1
    while side < 1024 and 200 * (2 * side) ** 2 <= samples:
        side *= 2
    return side


def run_cost(dk: int, samples: int | float) -> float:
    """Cost units of a derivation with a fixed budget of ``samples`` products per check: step
    1's pairs, step 2's products (d_k = 1) and step 3's (d_k entries each, the draws shared by
    a block's side)."""
    n = approx(samples)
    draws = 2 * _DRAW_COST / _block_side(n)
    return n * (_PAIR_COST + 2 * _PRODUCT_COST + (1 + draws) * (1 + dk))


def _feasible(cfg: _Settings) -> None:
    """Refuse a fixed budget whose run would take longer than :data:`MAX_COST` (a time cap
    bounds it too: each of the three checks stops after ``max_seconds``)."""
    if cfg.samples is None:
        return  # a precision is chased within STEP_BUDGET per step (see _fixed_budget)
    units = run_cost(cfg.dk, cfg.samples)
    if cfg.max_seconds is not None:
        units = min(units, 3 * cfg.max_seconds * 1e9)
    if units > MAX_COST:
        size = min(approx(cfg.samples), 1e12)
        most = MAX_COST / run_cost(cfg.dk, size) * size
        raise refuse(
            "samples",
            cfg.samples,
            units=units,
            max_units=MAX_COST,
            accepted=f"up to about {most:.2g} products at d_k = {cfg.dk}, or a time cap "
            "(max_seconds), or a precision instead",
        )


def _mean_step(one: DotProductTheory, cfg: _Settings) -> _Check:
    """Step 1's check: the mean of products X·Y against E[XY] and against the textbook's 0
    (:class:`_Stopped` with the check so far when Ctrl-C cut it short)."""
    if math.isnan(one.term_mean):
        return _NO_CHECK
    n = cfg.samples if cfg.samples is not None else _MEAN_SAMPLES
    est, se, ci, used, interrupted = _mean_check(
        cfg.q, cfg.k, cfg.rho, n, cfg.seed, cfg.confidence, cfg.max_seconds
    )
    stop = INTERRUPTED if interrupted else "max-seconds" if used < n else ""
    if not math.isfinite(one.term_var):
        # E[(XY)²] is infinite: the t-interval is not valid, so neither it nor a test is given
        check = _Check(est, _NO_INTERVAL, se, used, math.nan, math.nan, stop)
    else:
        df = max(used - 1, 1)
        p_value, p_book = _p(est, se, one.term_mean, df), _p(est, se, 0.0, df)
        check = _Check(est, ci, se, used, p_value, p_book, stop)
    if interrupted:
        raise _Stopped(check)
    return check


def _fixed_budget(theory: DotProductTheory, cfg: _Settings) -> tuple[int | None, bool]:
    """The products a variance step draws when it does not chase the precision (None when it
    does), and whether that is because the precision, or the products a valid interval needs
    (:func:`~varcheck.core.estimation.minimum_products`, which an adaptive run draws at the
    least), would cost more than STEP_BUDGET."""
    if cfg.samples is not None:
        return cfg.samples, False
    if not theory.estimable:
        # with E[(q·k)^4] infinite the interval never settles: a fixed budget, shown as
        # unreliable, instead of chasing a precision that is never reached
        return _UNRELIABLE_SAMPLES, False
    if cfg.precision is not None:
        # products the precision needs, generously (the estimator's own planning bound):
        # the relative variance of a variance estimate is about (kurtosis - 1) / n
        # need * d_k > STEP_BUDGET with need = 4 max(rel. variance, 0.5) / precision², written
        # without dividing by precision² (which underflows to 0 for a precision of 1e-320)
        need_scale = 4.0 * max(theory.estimator_relative_variance, 0.5) * theory.dk
        least = minimum_products(cfg.q, cfg.k, theory) * theory.dk
        if cfg.precision < math.sqrt(need_scale / STEP_BUDGET) or least > STEP_BUDGET:
            return max(_MIN_BUDGET_SAMPLES, int(STEP_BUDGET // theory.dk)), True
    return None, False


def _variance_estimate(
    theory: DotProductTheory, stream: tuple[int, ...], cfg: _Settings
) -> tuple[VarianceEstimate | None, str]:
    """The estimate of Var(q·k) for ``theory`` (None when it is infinite) and how it stopped
    (``budget`` when STEP_BUDGET replaced the precision); :class:`_Stopped` with the estimate
    from the blocks drawn so far when Ctrl-C cut it short."""
    if not theory.var_finite:
        return None, ""
    fixed, budgeted = _fixed_budget(theory, cfg)
    plan = None
    if _degenerate(theory):
        # (q·k)² is constant (e.g. Rademacher with d_k = 1): the block planner's correlation
        # model divides by Var((q·k)²) = 0, and any block shape is equally good here
        plan = BlockPlan(
            side=1, paired=cfg.rho != 0.0, blocks_per_chunk=1 << 16, row_correlation=1.0
        )
    recorder = _Recorder()
    try:
        est = estimate_variance(
            cfg.q,
            cfg.k,
            theory,
            seed=cfg.seed,
            stream=stream,
            confidence=cfg.confidence,
            precision=None if fixed is not None else cfg.precision,
            samples=fixed,
            max_seconds=cfg.max_seconds,
            plan=plan,
            runner=recorder,
        )
    except KeyboardInterrupt:
        partial = recorder.summary(theory, cfg.confidence)
        raise _Stopped(None if partial is None else (partial, INTERRUPTED)) from None
    return est, "budget" if budgeted else est.stop_reason


def _variance_check(
    estimated: tuple[VarianceEstimate | None, str],
    theory: DotProductTheory,
    cfg: _Settings,
    values: tuple[float, float],
    factor: float,
) -> _Check:
    """A variance step's check: the estimate times ``factor``, the p-value of ``values[0]`` (the
    unscaled variance) and that of the textbook's ``values[1]``; with no valid interval (a
    moment it needs is infinite, or fewer products than the budget rule asks) the estimate
    alone, and the products a valid interval needs."""
    est, stop_reason = estimated
    if est is None:
        return _NO_CHECK
    estimate, ci = est.scaled(factor)
    need = budget_shortfall(cfg.q, cfg.k, theory, est.samples)
    if need is not None or not _has_test(theory):
        ci, p, p_book = _NO_INTERVAL, math.nan, math.nan
    else:
        p, p_book = est.p_value(values[0]), est.p_value(values[1] / factor)
    return _Check(estimate, ci, est.se * factor, est.samples, p, p_book, stop_reason, need)


def _checks(
    one: DotProductTheory, th: DotProductTheory, cfg: _Settings
) -> tuple[tuple[_Check, ...], bool]:
    """The four steps' checks (step 4 is step 3's estimate divided by d_k, and its test), and
    whether Ctrl-C (or SIGTERM) stopped them: the check under way keeps the draws it had, the
    steps after it have none."""
    book = _textbook(cfg.dk)
    checks = [_NOT_CHECKED] * 4

    def variance_steps(step: int, estimated: tuple[VarianceEstimate | None, str]) -> None:
        if step == 2:
            checks[1] = _variance_check(estimated, one, cfg, (one.term_var, book[1]), 1.0)
        else:
            checks[2] = _variance_check(estimated, th, cfg, (th.var, book[2]), 1.0)
            checks[3] = _variance_check(estimated, th, cfg, (th.var, book[3]), 1.0 / cfg.dk)

    step = 1
    try:
        checks[0] = _mean_step(one, cfg)
        step = 2
        variance_steps(2, _variance_estimate(one, (2,), cfg))
        step = 3
        variance_steps(3, _variance_estimate(th, (3,), cfg))
    except _Stopped as stopped:
        if isinstance(stopped.partial, _Check):  # step 1's
            checks[0] = stopped.partial
        elif stopped.partial is not None:
            variance_steps(step, stopped.partial)
        return tuple(checks), True
    except KeyboardInterrupt:
        return tuple(checks), True
    return tuple(checks), False


def _judge_steps(
    checks: tuple[_Check, ...], one: DotProductTheory, th: DotProductTheory, confidence: float
) -> tuple[list[float], list[str]]:
    """Holm-adjusted p-values and verdicts of the four steps: Holm over the three independent
    checks; step 4 reuses step 3's draws, so it shares step 3's test. A step an interruption
    left unchecked is ``interrupted``; one with fewer products than a valid interval needs is
    ``unreliable``."""
    adjusted, verdicts = judge(
        [c.p_value for c in checks[:3]],
        alpha=1.0 - confidence,
        finite=[not math.isnan(one.term_mean), one.var_finite, th.var_finite],
        valid=[
            math.isfinite(one.term_var),
            _has_test(one) and checks[1].min_samples is None,
            _has_test(th) and checks[2].min_samples is None,
        ],
    )
    verdicts = [*verdicts, verdicts[2]]
    verdicts = [
        INTERRUPTED if c is _NOT_CHECKED else v for c, v in zip(checks, verdicts, strict=True)
    ]
    return [*adjusted, adjusted[2]], verdicts


def _statuses(cfg: _Settings, values: tuple[float, ...]) -> tuple[list[str], list[str]]:
    """Each step's status and why it breaks: step 1 when E[XY] is not 0, step 2 when Var(XY)
    is not 1; steps 3 and 4 then inherit the wrong value."""
    book = _textbook(cfg.dk)
    mean_breaks = _differs(book[0], values[0])
    var_breaks = _differs(book[1], values[1])
    statuses = [BREAKS if mean_breaks else HOLDS, BREAKS if var_breaks else HOLDS]
    statuses += [INHERITS if var_breaks else HOLDS] * 2
    reasons = [
        _mean_reason(cfg.q, cfg.k, cfg.rho) if mean_breaks else "",
        _var_reason(cfg.q, cfg.k, cfg.rho, values[1]) if var_breaks else "",
        "",
        "",
    ]
    return statuses, reasons


def _steps(
    cfg: _Settings,
    values: tuple[float, ...],
    checks: tuple[_Check, ...],
    adjusted: list[float],
    verdicts: list[str],
) -> tuple[DeriveStep, ...]:
    statuses, reasons = _statuses(cfg, values)
    book = _textbook(cfg.dk)
    return tuple(
        DeriveStep(
            number=i + 1,
            quantity=quantity,
            formula=formula,
            textbook=textbook,
            textbook_value=book[i],
            value=values[i],
            status=statuses[i],
            reason=reasons[i],
            p_adjusted=adjusted[i],
            verdict=verdicts[i],
            **checks[i]._asdict(),
        )
        for i, (quantity, formula, textbook) in enumerate(_step_texts(cfg.rho))
    )


def derive(
    dk: int = 64,
    *,
    dist: Distribution | str = "normal",
    q_dist: Distribution | str | None = None,
    k_dist: Distribution | str | None = None,
    rho: float = 0.0,
    confidence: float = 0.95,
    precision: float | None = 0.01,
    samples: int | None = None,
    max_seconds: float | None = None,
    seed: int | None = None,
) -> DeriveResult:
    """Walk the derivation of Var(q·k) = d_k for the chosen distributions, checking each step.

    Parameters
    ----------
    dk : int
        Length of q and k.
    dist, q_dist, k_dist : str or Distribution
        Entry distributions (``q_dist``/``k_dist`` override ``dist``).
    rho : float
        Correlation of q_i with k_i (normal entries).
    confidence : float
        Level of every interval; verdicts are Holm-adjusted over the steps.
    precision : float or None
        Target relative half-width of the variance intervals (steps 2–4).
    samples : int, optional
        Fixed number of products per variance step instead of ``precision`` (and the number of
        products behind step 1). A variance step given fewer than a valid interval needs
        (:func:`~varcheck.core.estimation.minimum_products`, from the kurtosis of its product
        and the entries' tails) shows its estimate without an interval, verdict ``unreliable``
        and ``min_samples``; with ``precision`` each step draws at least that many.
    max_seconds : float, optional
        Wall-time cap per variance step.
    seed : int, optional
        Root seed (drawn and reported when omitted).

    Returns
    -------
    DeriveResult

    Examples
    --------
    >>> res = derive(16, seed=1, precision=0.05)
    >>> [s.status for s in res.steps], res.broken_step
    (['holds', 'holds', 'holds', 'holds'], None)
    >>> res = derive(16, dist="normal:mean=0.5", seed=1, precision=0.05)
    >>> res.broken_step, res.correct_var     # 16 * ((1 + 0.25)^2 - 0.25^2)
    (2, 24.0)
    """
    cfg = _derive_iv(
        dk, dist, q_dist, k_dist, rho, confidence, precision, samples, max_seconds, seed
    )
    one = dot_product_theory(1, cfg.q, cfg.k, cfg.rho)
    th = dot_product_theory(cfg.dk, cfg.q, cfg.k, cfg.rho)
    checks, interrupted = _checks(one, th, cfg)
    adjusted, verdicts = _judge_steps(checks, one, th, cfg.confidence)
    values = (one.term_mean, one.term_var, th.var, th.scaled_var)
    steps = _steps(cfg, values, checks, adjusted, verdicts)
    settings = cfg._asdict()
    return DeriveResult(
        steps=steps,
        broken_step=2 if steps[1].status == BREAKS else None,
        correct_var=th.var,
        correct_scaled_var=th.scaled_var,
        theory=th,
        q_dist=settings.pop("q"),
        k_dist=settings.pop("k"),
        **settings,
        interrupted=interrupted,
    )
