"""``varcheck.probe``: the effective scale of a black-box attention kernel, with its verdict.

:func:`probe` reads one d_k; :func:`probe_sweep` reads several and fits ``s ∝ d_k^b``. Both
test the scale against an expected law (``1/sqrt(dk)`` by default) on core's ladder: a
consistency test, or with ``tolerance`` an equivalence test (:func:`varcheck.core.verdicts.decide`);
the heads of a 4-D kernel (and the rows of a sweep) are one family under Holm's procedure.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._version import __version__
from ..core.estimation import ConfidenceInterval
from ..core.messages import shown
from ..core.options import (
    resolve_seed,
    sampling_effort,
    valid_confidence,
    valid_count,
    valid_tolerance,
)
from ..core.power import Detectable, weakest
from ..core.probe import budget, cost, judge
from ..core.probe.measure import Measurement, PartialMeasurement, measure
from ..core.probe.target import KernelTarget, as_kernel
from ..core.probe.weights import Design
from ..core.progress import ProgressCallback
from ..core.ranges import resolve_dks
from ..core.verdicts import (
    UNRELIABLE,
    GrowthFit,
    adjusted_p_values,
    exit_code,
    fit_growth,
    outcome_of,
)
from ..errors import VarcheckError
from ..output.display import Displayable
from .laws import Expectation, Reading, law_exponent, nearest_law, parse_expectation

__all__ = [
    "Diagnostics",
    "HeadScale",
    "ProbeResult",
    "ProbeSweepResult",
    "probe",
    "probe_sweep",
    "judge_rows",
    "MIN_CALLS",
    "MAX_PROBE_DK",
]

#: Fewest calls of a fixed budget (``samples``): an estimate; an interval needs
#: :data:`~varcheck.core.estimation.MIN_BLOCKS` (below it the row is ``unreliable``).
MIN_CALLS = 20
#: The interval of a row or head that has none (``nan`` ends).
NO_INTERVAL = ConfidenceInterval(math.nan, math.nan)
#: Largest d_k probed (an n × d_k input per head).
MAX_PROBE_DK = 65536


@dataclass(frozen=True)
class Diagnostics:
    """What a scale alone does not explain, over all heads.

    Attributes
    ----------
    mask : str
        ``none``, ``causal``, ``causal (bottom-right)`` or ``other`` (the first head's, or
        ``mixed``).
    masked : int
        Weights exactly zero in every pilot call (all heads).
    bias : str
        ``none``, ``alibi``, ``relative`` or ``other`` (``mixed`` when heads differ).
    bias_size : float
        Largest RMS bias over the RMS of the logits, over heads.
    alibi_slopes : tuple of float
        With ``alibi``: each head's bias per position of distance.
    nonlinear : bool
        A non-linearity in q·k was found (the scale is then the slope at q·k = 0).
    curvature : float
        Largest relative size of the quadratic and cubic terms, over heads.
    linearity_residual : float
        Largest RMS residual of the linear model over the RMS of the logits.
    explained : float
        Smallest fraction of the log-weights explained, over heads.
    notes : tuple of str
        Each finding in one sentence.
    underflowed : int
        Of ``masked``, the weights past the mask (or with no mask) that a steep position bias
        drove to 0 (all heads).
    """

    mask: str
    masked: int
    bias: str
    bias_size: float
    alibi_slopes: tuple[float, ...]
    nonlinear: bool
    curvature: float
    linearity_residual: float
    explained: float
    notes: tuple[str, ...]
    underflowed: int = 0


@dataclass(frozen=True)
class HeadScale:
    """One head's scale, its test and verdict.

    ``p_value`` is the two-sided p-value of the expected scale, Holm-adjusted over every head
    (and d_k) of the run without a tolerance; ``raw_p_value`` is the head's own, for a caller
    that adjusts over a larger family (a claim file). With a tolerance, ``p_equivalence`` is the
    head's TOST p-value (a pass needs it below alpha; not adjusted) and ``p_outside`` the
    p-value that its scale lies outside the band (a fail needs it below alpha; Holm-adjusted
    over every head and d_k instead of ``p_value``); both ``None`` without a tolerance. A head
    of a row without a valid interval (too few calls, or too small a design) has outcome
    ``unreliable``, ``nan`` interval ends and p-values. ``detectable`` is what the head's test
    could have caught (:func:`~varcheck.core.power.detectable_of`): the relative error of the
    *scale* it detects with 90% power at α/m, m the heads × d_k Holm adjusts over; ``None``
    without a valid test.
    """

    head: int
    scale: float
    confidence_interval: ConfidenceInterval
    p_value: float
    outcome: str
    raw_p_value: float = float("nan")
    p_equivalence: float | None = None
    p_outside: float | None = None
    detectable: Detectable | None = None


@dataclass(frozen=True, repr=False)
class ProbeResult(Displayable):
    """The effective scale of one kernel at one d_k (see :func:`probe`).

    Attributes
    ----------
    kernel : KernelTarget
        The kernel and its bound arguments.
    dk, heads, queries, keys, dv : int
        ``heads`` per call (1 for ``nd``).
    law_heads : int
        The ``h`` of the laws: ``heads``, or what was given with ``nd``.
    layout, dtype : str
    reading : str
        How the weights were read (one-hot values, all keys at once or d_v at a time).
    out_layout : str
        The output's layout (``layout`` unless the kernel returns another).
    kv_heads : int
        Key/value heads per call (``heads`` unless grouped).
    computes_in, returned : str
        The format the kernel computes in (the coarsest of ``dtype``, the returned format and
        the format of the returned numbers) and the format of the array it returns.
    format_source : str
        Where ``computes_in`` was learnt: ``declared`` (``dtype``), ``returned`` or ``values``
        (inferred from the returned numbers).
    expect : str
        The expected law, as written; ``expected`` its value here.
    scale : float
        The effective scale (all heads' mean); ``confidence_interval`` its interval and ``se``
        its standard error (``nan`` without a valid interval).
    ratio : float
        scale / expected, with ``ratio_interval``.
    law : Reading
        The nearest simple law and the factor left over (read off the interval, or off the
        scale alone when there is none).
    outcome, reason : str
        ``pass``, ``fail``, ``inconclusive`` or ``unreliable``, and why. ``unreliable``: fewer
        calls than a valid interval needs (a fixed ``samples`` below
        :data:`~varcheck.core.estimation.MIN_BLOCKS`, or a run stopped before it by
        ``max_seconds`` or a signal), or too few queries and keys for the d_k
        (:mod:`varcheck.core.probe.budget`): the scale without an interval, a p-value or a
        verdict (exit 4).
    more_calls : int or None
        For ``inconclusive``: about how many more calls would settle it.
    p_value : float
        Two-sided, of the expected scale (the deciding head's; without a tolerance Holm-adjusted
        over heads and d_k).
    tolerance : float or None
        With a tolerance T, as in ``assert``, the expected scale is the band
        expected × [1 − T, 1 + T]: a pass needs the whole ``equivalence_interval`` (the
        ``2 confidence - 1`` interval: 90% at 95%) inside it, and ``p_equivalence`` is that
        test's (TOST) p-value (its largest over heads); a fail needs the whole
        ``confidence`` interval outside it, and ``p_outside`` (the deciding head's,
        Holm-adjusted over heads and d_k) is that test's p-value; otherwise inconclusive.
    per_head : tuple of HeadScale
    diagnostics : Diagnostics
    calls : int
        Independent readings of the weights (the blocks); ``kernel_calls`` counts every call.
    min_samples : int or None
        When a fixed ``samples`` was below what a valid interval needs, the calls it needs.
    precision : float
        The interval's relative half-width (``nan`` without one).
    detectable : Detectable or None
        The weakest head's :attr:`HeadScale.detectable` (the largest error): a scale error
        shared by every head is caught by each with at least that power, so the row fails with
        at least 90%. With a tolerance, ``power_at_claim`` is also the weakest head's, an upper
        bound on the chance that a true row (every head) passes.
    """

    kernel: KernelTarget
    dk: int
    heads: int
    law_heads: int
    queries: int
    keys: int
    dv: int
    layout: str
    dtype: str
    reading: str
    causal: bool
    expect: str
    expected: float
    scale: float
    confidence_interval: ConfidenceInterval
    se: float
    ratio: float
    ratio_interval: ConfidenceInterval
    law: Reading
    outcome: str
    reason: str
    more_calls: int | None
    p_value: float
    tolerance: float | None
    confidence: float
    per_head: tuple[HeadScale, ...]
    diagnostics: Diagnostics
    calls: int
    kernel_calls: int
    stop_reason: str
    precision: float
    input_sd: float
    seed: int
    equivalence_interval: ConfidenceInterval | None = None
    p_equivalence: float | None = None
    p_outside: float | None = None
    max_seconds: float | None = None
    out_layout: str = "nd"
    kv_heads: int = 1
    computes_in: str = "float64"
    returned: str = "float64"
    format_source: str = "returned"
    min_samples: int | None = None
    detectable: Detectable | None = None
    version: str = field(default=__version__)

    @property
    def time_limited(self) -> bool:
        """The time cap stopped the calls: the numbers depend on the machine's speed."""
        return self.stop_reason == "max-seconds"

    @property
    def has_interval(self) -> bool:
        """The scale has a valid interval (none, ``nan`` ends, with fewer calls than it
        needs)."""
        return not math.isnan(self.confidence_interval.low)

    @property
    def interrupted(self) -> bool:
        """Ctrl-C or SIGTERM stopped the calls: the scale is from the calls finished by then."""
        return self.stop_reason == "interrupted"

    @property
    def exit_code(self) -> int:
        """0 pass, 1 fail, 3 inconclusive, 4 unreliable (core.verdicts.exit_code); 130 (143)
        interrupted."""
        return exit_code([self.outcome], interrupted=self.interrupted)


@dataclass(frozen=True, repr=False)
class ProbeSweepResult(Displayable):
    """A probe at several d_k and the power law ``s ∝ d_k^b`` fitted to them.

    Attributes
    ----------
    rows : tuple of ProbeResult
        One per d_k (verdicts Holm-adjusted over all rows and heads).
    exponent : GrowthFit or None
        The fitted exponent b with its interval, against the expected law's exponent, over the
        rows with a valid interval (None with fewer than two; JSON ``exponent.slope``).
    outcome : str
        The worst row's outcome.
    interrupted : bool
        Ctrl-C or SIGTERM stopped the run: ``rows`` are the d_k finished before it, the last
        one maybe from the calls made by then (its ``stop_reason`` is ``interrupted``; exit
        code 130, or 143 after SIGTERM).
    """

    rows: tuple[ProbeResult, ...]
    exponent: GrowthFit | None
    expect: str
    seed: int
    confidence: float
    interrupted: bool = False
    version: str = field(default=__version__)

    @property
    def outcome(self) -> str:
        """The worst row's outcome, or ``interrupted``: the word the exit code follows."""
        return outcome_of((r.outcome for r in self.rows), interrupted=self.interrupted)

    @property
    def time_limited(self) -> bool:
        """Some d_k stopped at the time cap: the numbers depend on the machine's speed."""
        return any(r.time_limited for r in self.rows)

    @property
    def exit_code(self) -> int:
        return exit_code([r.outcome for r in self.rows], interrupted=self.interrupted)


def _diagnostics(m: Measurement, causal: bool) -> Diagnostics:
    st = m.structure
    mask = judge.mask_of(m)
    kinds = {h.bias_kind for h in st}
    bias = kinds.pop() if len(kinds) == 1 else "mixed"
    slopes = tuple(h.alibi_slope for h in st) if bias == "alibi" else ()
    nonlinear = any(h.curved for h in st)
    notes, under = [], sum(h.underflowed for h in st)
    if under:
        notes.append(
            f"mask: {mask} ({sum(h.masked for h in st)} weights exactly 0, {under} of them "
            "far keys underflowed under the steep position bias, not masked)"
        )
    elif mask != "none":
        steep = mask == "other" and bias != "none"
        under_note = ": masked, or underflowed under the bias" if steep else ""
        notes.append(f"mask: {mask} ({sum(h.masked for h in st)} weights exactly 0{under_note})")
    if causal and mask == "none":
        notes.append("mask: none, but a causal mask was expected")
    if bias == "alibi":
        shown = ", ".join(f"{s:.4g}" for s in slopes[:4]) + (" …" if len(slopes) > 4 else "")
        notes.append(
            f"position bias: ALiBi-like, linear in |i − j| ({shown} per position of distance)"
        )
    elif bias == "relative":
        notes.append("position bias: a function of j − i only (relative position bias)")
    elif bias != "none":
        notes.append(f"position bias: {bias} (an additive bias that depends on positions)")
    if bias != "none":
        notes.append("the bias is removed before the scale is read: the scale is that of q·k")
    if nonlinear:
        notes.append(
            "non-linearity: log-weights curve in q·k (tanh soft-capping, label smoothing?); "
            "the scale is the slope at q·k = 0"
        )
    if not notes:
        notes.append("no mask, no position bias, log-weights linear in q·k")
    if m.format.sentence:
        notes.append(m.format.sentence)
    return Diagnostics(
        mask=mask,
        masked=sum(h.masked for h in st),
        bias=bias,
        bias_size=max(h.bias_size for h in st),
        alibi_slopes=slopes,
        nonlinear=nonlinear,
        curvature=max(h.curvature for h in st),
        linearity_residual=max(h.linearity_residual for h in st),
        explained=min(h.explained for h in st),
        notes=tuple(notes),
        underflowed=under,
    )


def judge_rows(
    measurements: list[Measurement],
    expected: list[float],
    *,
    confidence: float,
    tolerance: float | None,
) -> list[tuple[list[HeadScale], Any]]:
    """Each head's verdict, Holm over every head of every measurement (the p-values a fail
    rests on); the worst per row, with its head's p-values: the family of a probe over several
    heads and d_k. A measurement without a valid interval
    (:func:`~varcheck.core.probe.budget.no_interval`) gives its heads no interval and ``nan``
    p-values, and takes no part in Holm."""
    alpha = 1.0 - confidence
    tests = [
        judge.head_p_values(m, e, tolerance) for m, e in zip(measurements, expected, strict=True)
    ]
    adjusted = iter(adjusted_p_values([p for row in tests for p in row]))
    family = sum(not math.isnan(p.p_fail) for row in tests for p in row)
    out = []
    for m, e, row in zip(measurements, expected, tests, strict=True):
        ps = [next(adjusted) for _ in row]
        decisions = judge.decide_heads(m, e, ps, alpha=alpha, tolerance=tolerance)
        caught = judge.head_detectables(m, row, alpha=alpha, family=family, tolerance=tolerance)
        valid = budget.no_interval(m) is None
        heads = [
            HeadScale(
                i,
                h.scale,
                h.confidence_interval if valid else NO_INTERVAL,
                p.p_value,
                d.outcome,
                own.p_value,
                p.p_equivalence,
                p.p_outside,
                det,
            )
            for i, (h, own, p, d, det) in enumerate(
                zip(m.heads, row, ps, decisions, caught, strict=True)
            )
        ]
        out.append((heads, judge.worst_head(list(zip(decisions, ps, strict=True)))))
    return out


def _result(
    kernel: KernelTarget,
    m: Measurement,
    judged: Any,
    *,
    expect: Expectation,
    expected: float,
    law_h: int,
    causal: bool,
    tolerance: float | None,
    confidence: float,
    seed: int,
    max_seconds: float | None,
) -> ProbeResult:
    heads, (decision, p) = judged
    diag = _diagnostics(m, causal)
    outcome, reason = decision.outcome, decision.reason
    if len(heads) > 1 and outcome not in ("pass", UNRELIABLE):
        reason = (
            f"{_heads_words([h.head for h in heads if h.outcome == outcome], len(heads))}: {reason}"
        )
    if (wrong := judge.causal_failure(m, causal)) is not None:
        outcome, reason = wrong.outcome, wrong.reason
    d, (scale, se, lo_hi, precision) = m.design, _pooled(m)
    ratio_iv = sorted((lo_hi.low / expected, lo_hi.high / expected))
    # without an interval the law is read off the estimate alone
    law_iv = (scale, scale) if math.isnan(lo_hi.low) else lo_hi
    return ProbeResult(
        kernel=kernel,
        dk=d.dk,
        heads=d.heads,
        law_heads=law_h,
        queries=d.queries,
        keys=d.keys,
        dv=d.dv,
        layout=d.layout,
        dtype=d.dtype,
        reading=d.reading,
        causal=causal,
        expect=expect.text,
        expected=expected,
        scale=scale,
        confidence_interval=lo_hi,
        se=se,
        ratio=scale / expected,
        ratio_interval=ConfidenceInterval(*ratio_iv),
        law=nearest_law(scale, *law_iv, d.dk, law_h, queries=d.queries, keys=d.keys),
        outcome=outcome,
        reason=reason,
        more_calls=decision.more_samples if outcome == "inconclusive" else None,
        p_value=p.p_value,
        p_outside=p.p_outside,
        tolerance=tolerance,
        confidence=confidence,
        per_head=tuple(heads),
        diagnostics=diag,
        calls=m.blocks,
        kernel_calls=m.kernel_calls,
        stop_reason=m.stop_reason,
        precision=precision,
        input_sd=m.input_sd,
        seed=seed,
        max_seconds=max_seconds,
        out_layout=d.output_layout,
        kv_heads=d.groups,
        computes_in=m.format.name,
        returned=m.format.returned,
        format_source=m.format.source,
        min_samples=budget.min_calls(m),
        detectable=weakest(h.detectable for h in heads),
        **_equivalence(m, heads, tolerance, confidence),
    )


def _pooled(m: Measurement) -> tuple[float, float, ConfidenceInterval, float]:
    """The mean scale, its standard error, interval and relative half-width; without a valid
    interval (:func:`~varcheck.core.probe.budget.no_interval`) only the scale, the rest ``nan``."""
    e = m.pooled
    if budget.no_interval(m) is not None:
        return e.scale, math.nan, NO_INTERVAL, math.nan
    return e.scale, e.se, e.confidence_interval, m.precision


def _heads_words(bad: list[int], total: int) -> str:
    """``head 1``, ``heads 0, 2``, ``every head (4)``: the heads an outcome is about."""
    if len(bad) == total:
        return f"every head ({total})"
    if len(bad) == 1:
        return f"head {bad[0]}"
    shown = ", ".join(map(str, bad[:8])) + (f" … ({len(bad)} in all)" if len(bad) > 8 else "")
    return f"heads {shown}"


def _equivalence(
    m: Measurement, heads: list[HeadScale], tolerance: float | None, confidence: float
) -> dict[str, Any]:
    """The ``1 - 2 alpha`` interval of the mean scale and the largest head TOST p-value
    (none and ``nan`` without a valid interval)."""
    if tolerance is None:
        return {}
    if budget.no_interval(m) is not None:
        return {"p_equivalence": math.nan}
    inner = m.pooled.interval_at(max(2.0 * confidence - 1.0, 0.0))
    return {"equivalence_interval": inner, "p_equivalence": max(h.p_equivalence for h in heads)}  # type: ignore[type-var]


def _until_stopped(measure: Callable[[], None], measured: list[Measurement]) -> bool:
    """Run ``measure`` (which appends to ``measured``); whether a signal cut it short (the d_k
    under way then keeps the calls it finished)."""
    try:
        measure()
    except PartialMeasurement as exc:
        measured.append(exc.measurement)
        return True
    except KeyboardInterrupt:
        if not measured:
            raise
        return True
    return False


def _run(
    fn: Any,
    dks: list[int],
    *,
    expect: Any,
    queries: int,
    keys: int,
    heads: int | None,
    dv: int | None,
    causal: bool,
    layout: str,
    dtype: Any,
    out_layout: str | None,
    kv_heads: int | None,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    confidence: float,
    tolerance: float | None,
    seed: int | None,
    args: Any,
    progress: ProgressCallback | None,
) -> tuple[list[ProbeResult], Expectation, int, float, bool]:
    """Validate everything once, measure each d_k, judge them together."""
    expectation = parse_expectation(expect)
    _valid_progress(progress)
    for dk in dks:
        valid_count("dk", dk, 1, MAX_PROBE_DK)
    confidence = valid_confidence(confidence)
    # a call costs far more than a product: the cost of calls is checked below
    confidence, precision, samples, max_seconds = sampling_effort(
        confidence, precision, samples, max_seconds, least=MIN_CALLS, feasible=False
    )
    tolerance = valid_tolerance(tolerance)
    if not isinstance(causal, bool):
        raise VarcheckError(f"causal must be True or False, got {causal!r}")
    seed = resolve_seed(seed)
    designs = [
        judge.design(dk, queries, keys, heads, dv, layout, dtype, out_layout, kv_heads)
        for dk in dks
    ]
    for d in designs:  # before the kernel's file is imported, let alone called
        cost.check_memory(d)
    cost.check_time(designs, samples, max_seconds)
    kernel = as_kernel(fn, args)
    law_h = heads or designs[0].heads
    for dk in dks:  # an argument expression that cannot be evaluated fails before any call
        kernel.at(dk, law_h)
    expected = [expectation.value(dk, law_h) for dk in dks]
    measured: list[Measurement] = []
    effort = (seed, confidence, precision, samples, max_seconds, progress)
    interrupted = _until_stopped(
        lambda: _measure_all(kernel, designs, expected, law_h, measured, *effort), measured
    )
    expected = expected[: len(measured)]
    judged = judge_rows(measured, expected, confidence=confidence, tolerance=tolerance)
    rows = [
        _result(
            kernel,
            m,
            j,
            expect=expectation,
            expected=e,
            law_h=law_h,
            causal=causal,
            tolerance=tolerance,
            confidence=confidence,
            seed=seed,
            max_seconds=max_seconds,
        )
        for m, j, e in zip(measured, judged, expected, strict=True)
    ]
    return rows, expectation, law_h, confidence, interrupted


def _valid_progress(progress: object) -> None:
    if progress is not None and not callable(progress):
        raise VarcheckError(
            f"progress must be a callable (called with the fraction done), got {shown(progress)}"
        )


def _measure_all(
    kernel: KernelTarget,
    designs: list[Design],
    expected: list[float],
    law_h: int,
    measured: list[Measurement],
    seed: int,
    confidence: float,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    progress: ProgressCallback | None,
) -> None:
    """Measure each d_k in turn, appending to ``measured`` (what finished survives Ctrl-C).

    ``max_seconds`` bounds the whole run: each d_k gets an equal share of the time left.
    """
    end = None if max_seconds is None else time.monotonic() + max_seconds
    for i, (design, e) in enumerate(zip(designs, expected, strict=True)):
        tick = None if progress is None else (lambda f, i=i: progress(i, len(designs), f))
        share = None
        if end is not None:
            share = max(end - time.monotonic(), 1e-3) / (len(designs) - i)
        measured.append(
            measure(
                kernel.at(design.dk, law_h),
                design,
                expected=e,
                seed=seed,
                confidence=confidence,
                precision=precision,
                calls=samples,
                max_seconds=share,
                progress=tick,
                stuck_after=max_seconds,
            )
        )


def probe(
    fn: Any,
    dk: int,
    *,
    expect: str | float = "1/sqrt(dk)",
    queries: int = judge.QUERIES,
    keys: int = judge.KEYS,
    heads: int | None = None,
    dv: int | None = None,
    causal: bool = False,
    layout: str = "nd",
    dtype: Any = None,
    out_layout: str | None = None,
    kv_heads: int | None = None,
    precision: float | None = 0.01,
    samples: int | None = None,
    max_seconds: float | None = None,
    confidence: float = 0.95,
    tolerance: float | None = None,
    seed: int | None = None,
    args: dict[str, Any] | None = None,
    progress: Callable[[float], None] | None = None,
) -> ProbeResult:
    """The effective scale of an attention kernel at one d_k, tested against a law.

    Parameters
    ----------
    fn : callable or str
        ``fn(q, k, v)`` returning ``softmax(s · q kᵀ + bias) v`` (anything ``numpy.asarray``
        reads, or a bfloat16 tensor), or ``"module:function"`` / ``"file.py:function"``.
    dk : int
        The width of q and k.
    expect : str or float
        The expected scale: an expression in ``dk`` and ``h`` (heads), default ``1/sqrt(dk)``.
    queries, keys : int
        n and m per head and call (48 and 80: unequal and no power of two, docs/probe.md).
    heads, dv : int, optional
        Heads per call (``bhnd``/``bnhd``, default 2; with ``nd`` the laws' ``h``); the width
        of v (default ``keys``: one-hot values; fewer: d_v keys per call).
    layout, causal
        ``nd`` (q: (n, d_k)), ``bhnd`` (1, h, n, d_k) or ``bnhd`` (1, n, h, d_k); whether a
        causal mask is expected (fail when the weights show none).
    dtype : str or numpy dtype, optional
        Round the inputs to ``float32``, ``float16`` or ``bfloat16`` (simulated in float32),
        the format the kernel computes in (else read off the numbers it returns).
    out_layout, kv_heads : optional
        The output's layout when not ``layout``'s (transformers: ``bhnd`` in, ``bnhd`` out);
        key/value heads (grouped queries: head i uses ``i // (heads / kv_heads)``).
    precision, samples, max_seconds, confidence
        Target relative half-width, or a fixed number of calls (>= 20; fewer than a valid
        interval needs give none: :mod:`varcheck.core.probe.budget`); a time cap; confidence.
    tolerance : float, optional
        Relative tolerance T, tested as ``assert`` tests one (TOST; docs/probe.md).
    seed : int, optional
        Root seed (drawn when omitted; ``result.seed`` reports it).
    args : dict, optional
        Keyword arguments bound to every call of ``fn``; ``varcheck.ArgExpression("1/dk")``
        is evaluated at each d_k.
    progress : callable, optional
        Called with the fraction done.

    Returns
    -------
    ProbeResult
        After Ctrl-C or SIGTERM: from the calls finished (``interrupted``, exit 130/143).

    Raises
    ------
    VarcheckError
        Bad options or kernels, and weights that are not softmax attention (with the reason).
    """
    # every keyword but the progress callback goes on to _run as given
    keywords = {k: v for k, v in locals().items() if k not in ("fn", "dk", "progress")}
    dk = valid_count("dk", dk, 1, MAX_PROBE_DK)
    _valid_progress(progress)
    tick = None if progress is None else (lambda i, n, f: progress(f))
    rows, *_ = _run(fn, [dk], **keywords, progress=tick)
    return rows[0]


def probe_sweep(
    fn: Any,
    dks: Any,
    *,
    expect: str | float = "1/sqrt(dk)",
    progress: ProgressCallback | None = None,
    **options: Any,
) -> ProbeSweepResult:
    """:func:`probe` at every d_k of ``dks`` (``"8..512"``, a list), and ``s ∝ d_k^b`` fitted.

    Takes the keyword arguments of :func:`probe`. Rows share the seed (row d_k is the probe of
    that d_k alone); the verdicts are Holm-adjusted over all rows and heads together. The
    exponent's interval (weighted least squares on log s) is tested against the expected
    law's exponent (−½ for 1/√d_k, −1 for 1/d_k, 0 for a forgotten scale).
    """
    try:
        dks = resolve_dks(dks)
    except TypeError:  # None, a float...: not a d_k, a range or a list
        raise VarcheckError(
            f"dks must be a d_k, a range such as '8..512' or a list of d_k, got {shown(dks)}"
        ) from None
    defaults = {
        "queries": judge.QUERIES,
        "keys": judge.KEYS,
        "heads": None,
        "dv": None,
        "causal": False,
        "layout": "nd",
        "dtype": None,
        "out_layout": None,
        "kv_heads": None,
        "precision": 0.01,
        "samples": None,
        "max_seconds": None,
        "confidence": 0.95,
        "tolerance": None,
        "seed": None,
        "args": None,
    }
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise VarcheckError(f"probe_sweep got unknown option {unknown[0]!r}")
    rows, expectation, law_h, confidence, interrupted = _run(
        fn, dks, expect=expect, progress=progress, **{**defaults, **options}
    )
    fit = None
    fitted = [r for r in rows if r.has_interval]
    if len(fitted) > 1 and all(r.scale > 0 for r in fitted):
        fit = fit_growth(
            [r.dk for r in fitted],
            [r.scale for r in fitted],
            [r.se for r in fitted],
            confidence=confidence,
            expected=law_exponent(expectation, dks, law_h),
        )
    interrupted = interrupted or len(rows) < len(dks)
    return ProbeSweepResult(
        tuple(rows), fit, expectation.text, rows[0].seed, confidence, interrupted
    )
