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

import math
from dataclasses import dataclass

import numpy as np

from .._version import __version__
from ..core.blocks import BlockPlan
from ..core.distributions import Distribution, parse_distribution
from ..core.estimation import ConfidenceInterval, VarianceEstimate, estimate_variance, t_quantile
from ..core.options import entry_laws, resolve_seed, sampling_effort, valid_count, valid_rho
from ..core.ranges import MAX_DK
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.verdicts import REJECTED, exit_code, judge

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
        valid interval: a moment it needs is infinite) or ``infinite`` (nothing to estimate).
    stop_reason : str
        How the simulation stopped: ``precision``, ``samples`` (fixed number asked for),
        ``budget`` (d_k too large to chase the precision; a fixed budget of products was used),
        ``max-seconds``, or ``""`` (step 1, or nothing simulated).
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


@dataclass(frozen=True)
class DeriveResult:
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

    @property
    def exit_code(self) -> int:
        """1 a check rejects its formula or the textbook value breaks (with a finite correct
        value), 4 a check without a valid test, 0 the textbook derivation holds and is confirmed."""
        verdicts = [s.verdict for s in self.steps]
        if self.broken_step is not None and math.isfinite(self.correct_var):
            verdicts.append(REJECTED)  # the textbook's value is wrong, whatever the checks say
        return exit_code(verdicts)


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
    q: Distribution, k: Distribution, rho: float, n: int, seed: int, confidence: float
) -> tuple[float, float, ConfidenceInterval]:
    """Mean of n products X Y with a t-interval (chunks seeded by SeedSequence spawn keys)."""
    total = 0.0
    total_sq = 0.0
    shift = None
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
    mean_dev = total / n
    var = max(total_sq / n - mean_dev * mean_dev, 0.0) * n / (n - 1)
    se = math.sqrt(var / n)
    half = t_quantile(confidence, n - 1) * se
    mean = mean_dev + (shift or 0.0)
    return mean, se, ConfidenceInterval(mean - half, mean + half)


def _p(estimate: float, se: float, claim: float, df: int) -> float:
    from ..core.estimation import t_two_sided_p

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
        products behind step 1).
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

    dk = valid_count("dk", dk, 1, MAX_DK)
    # dist is parsed first: None is refused, not read as normal
    q, k = entry_laws(parse_distribution(dist), q_dist, k_dist)
    rho = valid_rho(rho, q, k)
    confidence, precision, samples, max_seconds = sampling_effort(
        confidence, precision, samples, max_seconds
    )
    seed = resolve_seed(seed)
    alpha = 1.0 - confidence
    one = dot_product_theory(1, q, k, rho)
    th = dot_product_theory(dk, q, k, rho)

    # step 1: the mean of one product
    mean_value = one.term_mean
    mean_valid = math.isfinite(one.term_var)
    n1 = samples if samples is not None else _MEAN_SAMPLES
    if math.isnan(mean_value):
        m_est, m_se, m_ci = math.nan, math.nan, ConfidenceInterval(math.nan, math.nan)
        n1 = 0
    else:
        m_est, m_se, m_ci = _mean_check(q, k, rho, n1, seed, confidence)

    def var_estimate(theory: DotProductTheory, stream: tuple[int, ...]) -> VarianceEstimate | None:
        if not theory.var_finite:
            return None
        fixed = samples
        if fixed is None and not theory.estimable:
            # with E[(q·k)^4] infinite the interval never settles: a fixed budget, shown as
            # unreliable, instead of chasing a precision that is never reached
            fixed = _UNRELIABLE_SAMPLES
        if fixed is None and precision is not None:
            # products the precision needs, generously (the estimator's own planning bound):
            # the relative variance of a variance estimate is about (kurtosis - 1) / n
            need = 4.0 * max(theory.estimator_relative_variance, 0.5) / precision**2
            if need * theory.dk > STEP_BUDGET:
                fixed = max(_MIN_BUDGET_SAMPLES, int(STEP_BUDGET // theory.dk))
                budget_steps.add(stream)
        plan = None
        if _degenerate(theory):
            # (q·k)² is constant (e.g. Rademacher with d_k = 1): the block planner's correlation
            # model divides by Var((q·k)²) = 0, and any block shape is equally good here
            plan = BlockPlan(
                side=1, paired=rho != 0.0, blocks_per_chunk=1 << 16, row_correlation=1.0
            )
        return estimate_variance(
            q,
            k,
            theory,
            seed=seed,
            stream=stream,
            confidence=confidence,
            precision=None if fixed is not None else precision,
            samples=fixed,
            max_seconds=max_seconds,
            plan=plan,
        )

    budget_steps: set[tuple[int, ...]] = set()
    est2 = var_estimate(one, (2,))
    est3 = var_estimate(th, (3,))

    def stop(est: VarianceEstimate | None, stream: tuple[int, ...]) -> str:
        if est is None:
            return ""
        return "budget" if stream in budget_steps else est.stop_reason

    textbook = [0.0, 1.0, float(dk), 1.0]
    values = [mean_value, one.term_var, th.var, th.scaled_var]
    statuses = []
    reasons = []
    broken_var = False
    for i, (tv, v) in enumerate(zip(textbook, values, strict=True)):
        if i == 0:
            bad = _differs(tv, v)
            statuses.append(BREAKS if bad else HOLDS)
            reasons.append(_mean_reason(q, k, rho) if bad else "")
        elif i == 1:
            broken_var = _differs(tv, v)
            statuses.append(BREAKS if broken_var else HOLDS)
            reasons.append(_var_reason(q, k, rho, v) if broken_var else "")
        else:
            statuses.append(INHERITS if broken_var else HOLDS)
            reasons.append("")
    broken_step = 2 if broken_var else None

    # p-values and Holm over the three independent checks (step 4 is step 3 divided by d_k)
    df1 = max(n1 - 1, 1)
    p1 = _p(m_est, m_se, mean_value, df1) if mean_valid else math.nan
    ok2 = est2 is not None and one.estimable and not _degenerate(one)
    ok3 = est3 is not None and th.estimable and not _degenerate(th)
    p2 = est2.p_value(one.term_var) if ok2 else math.nan  # type: ignore[union-attr]
    p3 = est3.p_value(th.var) if ok3 else math.nan  # type: ignore[union-attr]
    adj, verdicts = judge(
        [p1, p2, p3],
        alpha=alpha,
        finite=[not math.isnan(mean_value), one.var_finite, th.var_finite],
        valid=[mean_valid, ok2, ok3],
    )
    adj.append(adj[2])
    verdicts.append(verdicts[2])

    nan_ci = ConfidenceInterval(math.nan, math.nan)
    steps = [
        DeriveStep(
            number=1,
            quantity="E[XY]",
            formula="E[X]·E[Y] + ρ·sd(X)·sd(Y)" if rho else "E[X]·E[Y]",
            textbook="E[X]·E[Y] = 0",
            textbook_value=0.0,
            value=mean_value,
            status=statuses[0],
            reason=reasons[0],
            estimate=m_est,
            confidence_interval=m_ci,
            se=m_se,
            samples=n1,
            p_value=p1,
            p_adjusted=adj[0],
            textbook_p_value=_p(m_est, m_se, 0.0, df1) if mean_valid else math.nan,
            verdict=verdicts[0],
        )
    ]
    var_formula = (
        "E[X²Y²] − E[XY]² (correlated normal pair)"
        if rho
        else "(Var X + E[X]²)(Var Y + E[Y]²) − E[X]²E[Y]²"
    )
    for number, quantity, formula, book, est, th_i, factor, why_stop in (
        (2, "Var(XY)", var_formula, "Var X · Var Y = 1", est2, one, 1.0, stop(est2, (2,))),
        (3, "Var(q·k)", "d_k · Var(XY)", "d_k · 1 = d_k", est3, th, 1.0, stop(est3, (3,))),
        (
            4,
            "Var(q·k/√d_k)",
            "Var(q·k) / d_k = Var(XY)",
            "d_k / d_k = 1",
            est3,
            th,
            1.0 / dk,
            stop(est3, (3,)),
        ),
    ):
        i = number - 1
        if est is None:
            e, se, ci, n = math.nan, math.nan, nan_ci, 0
            p_book = math.nan
        else:
            e, ci = est.scaled(factor)
            se, n = est.se * factor, est.samples
            p_book = est.p_value(textbook[i] / factor) if th_i.estimable else math.nan
        steps.append(
            DeriveStep(
                number=number,
                quantity=quantity,
                formula=formula,
                textbook=book,
                textbook_value=textbook[i],
                value=values[i],
                status=statuses[i],
                reason=reasons[i],
                estimate=e,
                confidence_interval=ci,
                se=se,
                samples=n,
                p_value=[p1, p2, p3, p3][i],
                p_adjusted=adj[i],
                textbook_p_value=p_book,
                verdict=verdicts[i],
                stop_reason=why_stop,
            )
        )
    return DeriveResult(
        steps=tuple(steps),
        broken_step=broken_step,
        correct_var=th.var,
        correct_scaled_var=th.scaled_var,
        theory=th,
        q_dist=q,
        k_dist=k,
        rho=rho,
        dk=dk,
        confidence=confidence,
        seed=seed,
        precision=precision,
        samples=samples,
        max_seconds=max_seconds,
    )
