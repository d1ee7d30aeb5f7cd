"""One d_k of a probe: the pilot (input size, checks, structure), then the blocks.

Every call draws fresh queries and keys from its own generator: call ``i`` of chunk ``c`` uses
``SeedSequence(seed, spawn_key=(dk, 1, c)).spawn(blocks)[i]`` and the pilot
``spawn_key=(dk, 0)``, so a row of a d_k sweep is the probe of that d_k alone. Calls are
independent, so each call's scale (one per head) is one block of the interval: a Student t
interval on ``blocks − 1`` degrees of freedom with Hall's skewness correction
(:mod:`varcheck.core.estimation`), never narrower than the resolution of the formats the kernel
computes in and returns (``4 · eps`` relative of the coarser of ``dtype`` and the output's
format, at least 64 float64 eps: rounding that does not average out).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import VarcheckError
from .. import estimation as est
from ..distributions import DrawDeadline
from ..estimation import ConfidenceInterval, StopRule
from ..watchdog import guarded
from .analysis import (
    EXPLAINED_MIN,
    TINY,
    HeadStructure,
    call_slopes,
    check_convex,
    offset_slope,
    pilot_structure,
    rough_slope,
    underflow_edge,
)
from .weights import Design, call_kernel, draw_qk, input_eps, read_weights, rounded

__all__ = [
    "Measurement",
    "HeadEstimate",
    "PartialMeasurement",
    "measure",
    "PILOT_CALLS",
    "MAX_CALLS",
]

#: Independent calls of the pilot that finds masks, bias and curvature.
PILOT_CALLS = 16
#: Most blocks an adaptive run draws (a precision below the kernel's noise stops here).
MAX_CALLS = 20_000
#: Logit standard deviation the inputs are sized for (rescaled from a first call).
LOGIT_SD = 1.0
#: Fewest pilot reads a time cap leaves (masks and curvature need a few calls).
PILOT_MIN_CALLS = 4


class _Clock:
    """The time cap of one d_k, from the start of its pilot (``None``: no cap), and ``arm``,
    which restarts the watchdog's count before a reading of the weights: a call is stopped when
    it alone runs past the run's cap and its grace, however long the readings before it took
    (the pilot's and two blocks' are needed whatever the cap)."""

    def __init__(self, max_seconds: float | None, arm: Callable[[], None] = lambda: None) -> None:
        self.at = None if max_seconds is None else time.monotonic() + max_seconds
        self.arm = arm

    def passed(self) -> bool:
        return self.at is not None and time.monotonic() > self.at

    def left(self) -> float | None:
        return None if self.at is None else max(self.at - time.monotonic(), 1e-6)


class PartialMeasurement(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a d_k's calls, with the :class:`Measurement` of the calls
    finished by then (``measurement``, stop reason ``interrupted``), as
    :class:`~varcheck.core.estimation.PartialInterrupt` carries an estimate."""

    def __init__(self, measurement: Measurement) -> None:
        super().__init__()
        self.measurement = measurement


@dataclass(frozen=True)
class HeadEstimate(est.IntervalTest):
    """One head's (or all heads' mean) scale from the blocks.

    Its tests are :class:`~varcheck.core.estimation.IntervalTest`'s, the ones ``assert`` uses:
    ``p_value(claim)`` (two-sided), ``equivalence_p_value(low, high)`` (TOST) and
    ``interval_at(confidence)``, all inverting the same interval.

    Attributes
    ----------
    scale : float
    se : float
        Standard error, at least the format's resolution over the t quantile.
    confidence_interval : ConfidenceInterval
    skewness : float
        Of the per-call scales (Hall's correction).
    blocks : int
        The independent calls the scale is the mean of.
    """

    scale: float
    se: float
    confidence_interval: ConfidenceInterval
    skewness: float
    blocks: int
    interval_method: str = "hall"

    @property
    def var(self) -> float:
        """The estimate, under the name :class:`~varcheck.core.estimation.IntervalTest` reads."""
        return self.scale


@dataclass(frozen=True)
class Measurement:
    """What one d_k gave: the per-head and mean scales, the structure, the bookkeeping."""

    design: Design
    heads: tuple[HeadEstimate, ...]
    pooled: HeadEstimate
    structure: tuple[HeadStructure, ...]
    blocks: int
    kernel_calls: int
    stop_reason: str
    precision: float
    input_sd: float
    resolution: float


def _estimate(
    values: np.ndarray, confidence: float, floor: float, model: float = 0.0
) -> HeadEstimate:
    """Mean, floored standard error and Hall interval of i.i.d. per-call scales.

    The half-width is at least ``floor`` relative (the format's resolution) and ``model``
    absolute (the gap between the degree-5 and degree-3 readings of a curved kernel).
    """
    n = values.size
    mean = float(values.mean())
    sd = float(values.std(ddof=1)) if n > 1 else math.inf
    tq = est.t_quantile(confidence, n - 1)
    se_stat = sd / math.sqrt(n)
    se_floor = max(floor * abs(mean), model) / tq
    skew = 0.0
    if se_stat > se_floor and sd > 0 and n > 2:
        skew = float(((values - mean) ** 3).mean() / values.std() ** 3)
    se = max(se_stat, se_floor)
    return HeadEstimate(mean, se, est.hall_interval(mean, se, skew, n, tq), skew, n)


def _read(kernel: Any, design: Design, rng: np.random.Generator, sd: float):  # noqa: ANN202
    q, k = draw_qk(rng, design, sd)
    w, dtype = read_weights(kernel, q, k, design)
    x = q.astype(np.float64) @ np.ascontiguousarray(k.transpose(0, 2, 1), dtype=np.float64)
    return w, x, dtype, (q, k)


def _tolerance(dtype: np.dtype, design: Design) -> float:
    """How far from convex a row may be: rounding of the output (and of 16-bit inputs)."""
    eps = float(np.finfo(dtype).eps) if dtype.kind == "f" else 1.0
    if design.dtype in ("float16", "bfloat16"):
        eps = max(eps, 2.0**-7)
    return max(8.0 * eps, 1e-9)


def _low_tolerance(design: Design) -> float | None:
    """The largest row-sum error 16-bit rounding explains (None when a 16-bit dtype is given)."""
    if design.dtype in ("float16", "bfloat16"):
        return None
    return 8.0 * 2.0**-7


def _smallest_normal(dtype: np.dtype, design: Design) -> float:
    """Below this a weight is subnormal in the output format or in ``dtype``: not read."""
    tiny = float(np.finfo(dtype).tiny) if dtype.kind == "f" else TINY
    fmt = "float32" if design.dtype == "bfloat16" else design.dtype  # bfloat16: float32's range
    return max(tiny, float(np.finfo(np.dtype(fmt)).tiny))


def _log_floor(w: np.ndarray, dtype: np.dtype, design: Design) -> float:
    """The log of the largest weight the kernel's formats may turn into an exact 0.

    Those of the output and of the inputs (a kernel may compute in either). A weight below half
    a format's smallest subnormal rounds to 0 there; a kernel that flushes subnormals to 0
    (fast-math GPU code) zeroes every weight below the smallest normal, so a format none of
    whose subnormals shows among the pilot's weights counts up to its smallest normal.
    """
    formats = [(float(np.finfo(dtype).tiny), float(np.finfo(dtype).smallest_subnormal))]
    if dtype.kind != "f":
        formats = []
    if design.dtype == "bfloat16":
        formats.append((2.0**-126, 2.0**-133))
    else:
        f = np.finfo(np.dtype(design.dtype))
        formats.append((float(f.tiny), float(f.smallest_subnormal)))
    shown = w[w > 0]
    # half of float64's smallest subnormal is 0 in float64: take its log
    return max(
        math.log(sub) - math.log(2.0) if (shown < tiny).any() else math.log(tiny)
        for tiny, sub in formats
    )


def _resolution(dtype: np.dtype, design: Design) -> float:
    """The interval's floor: 4 eps of the coarser of the output format and the inputs' format.

    A kernel that computes in its inputs' format (``--dtype``) rounds its logits and weights
    there; that rounding depends on q·k, so it biases the slope at the level of that format,
    whatever format the output is upcast to.
    """
    eps = float(np.finfo(dtype).eps) if dtype.kind == "f" else 1.0
    eps = max(eps, input_eps(design.dtype))
    return max(4.0 * eps, 64.0 * float(np.finfo(np.float64).eps))


def _size_inputs(kernel: Any, design: Design, rng: np.random.Generator, sd: float):  # noqa: ANN202
    """The inputs' sd that gives logits of sd ~1 (from a first call's rough scale)."""
    for _ in range(8):
        w, x, dtype, qk = _read(kernel, design, rng, sd)
        check_convex(w, _tolerance(dtype, design), kernel.label, _low_tolerance(design))
        s = rough_slope(w, x)
        fitted = offset_slope(w, x, _smallest_normal(dtype, design))
        # a steep position bias confounds the rough slope (an ALiBi kernel's was 1/50 of it)
        if fitted > 0 and not 2.0 / 3.0 < s / fitted < 1.5:
            s = fitted
        if math.isnan(s):  # every row one-hot: logits far too wide to read
            sd /= 4.0
            continue
        if s != 0:
            sd = 1.0 / math.sqrt(abs(s) * math.sqrt(design.dk) / LOGIT_SD)
        return sd, w, dtype, qk
    raise VarcheckError(
        f"kernel {kernel.label}: every row of its weights puts all its weight on one key, "
        "however small the inputs; the weights say nothing about the scale (a --layout that "
        f"is not the kernel's, here {design.layout}, does this too)"
    )


def _check_linear_in_values(kernel: Any, design: Design, w: np.ndarray, qk, tol: float) -> None:  # noqa: ANN001
    """The output must be W v for the same W whatever the values (one more call)."""
    q, k = qk
    v = rounded(
        np.random.default_rng(0).standard_normal((design.heads, design.keys, design.dv)),
        design.dtype,
    )
    out, _ = call_kernel(kernel, q, k, v, design)
    gap = float(np.abs(out - w @ v).max())
    if gap > tol * max(1.0, float(np.abs(v).max())) * math.sqrt(design.keys):
        raise VarcheckError(
            f"kernel {kernel.label} is not softmax attention: with other values its output "
            f"is off W·v by {gap:.3g} (not linear in v, or not deterministic)"
        )


def _check_input_size(sd: float, expected: float, design: Design) -> None:
    """Refuse, before any call, an expected scale that sizes the inputs outside their format
    (the kernel would be blamed for the overflow or the underflow)."""
    fmt = "float32" if design.dtype == "bfloat16" else design.dtype
    info = np.finfo(np.dtype(fmt))
    if not float(info.tiny) / float(info.eps) < sd < float(info.max) / 64.0:
        raise VarcheckError(
            f"expect {expected:.3g} at d_k={design.dk} sizes the inputs at sd {sd:.3g}, outside "
            f"what {design.dtype} holds; give an expected scale nearer the kernel's (the "
            "inputs are sized from it), or a wider --dtype"
        )


def _pilot(kernel: Any, design: Design, expected: float, seed: int, clock: _Clock):  # noqa: ANN202
    """Size the inputs, check the kernel, read its structure (fewer reads past the time cap)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(design.dk, 0)))
    sd0 = 1.0 / math.sqrt(abs(expected) * math.sqrt(design.dk) / LOGIT_SD)
    _check_input_size(sd0, expected, design)
    clock.arm()
    sd, w, dtype, qk = _size_inputs(kernel, design, rng, sd0)
    tol = _tolerance(dtype, design)
    clock.arm()
    _check_linear_in_values(kernel, design, w, qk, tol)
    shape = (PILOT_CALLS, design.heads, design.queries, design.keys)
    wa, xa = np.empty(shape), np.empty(shape)  # filled in place: no list and stacked copy
    reads = 0
    while reads < PILOT_CALLS and (reads < PILOT_MIN_CALLS or not clock.passed()):
        clock.arm()
        wa[reads], xa[reads], _, _ = _read(kernel, design, rng, sd)
        check_convex(wa[reads], tol, kernel.label, _low_tolerance(design))
        reads += 1
    wa, xa = wa[:reads], xa[:reads]
    tiny, floor = _smallest_normal(dtype, design), _log_floor(wa, dtype, design)
    heads = tuple(
        pilot_structure(wa[:, h], xa[:, h], kernel.label, tiny, floor) for h in range(design.heads)
    )
    worst = min(h.explained for h in heads)
    if worst < EXPLAINED_MIN:
        raise VarcheckError(
            f"kernel {kernel.label} is not softmax attention of q·k: a scale, a position bias and "
            f"a curvature explain only {worst:.0%} of its log-weights (linear attention and "
            "other normalisations cannot be probed)"
        )
    resolution = _resolution(dtype, design)
    unit = 1.0 / max(float(xa.std()), 1e-300)
    calls = (reads + 2) * design.calls_per_block + 1
    return sd, heads, resolution, unit, calls


def _chunk(kernel: Any, design: Design, seed: int, chunk: int, blocks: int, sd: float,
           heads: tuple[HeadStructure, ...], curved: bool, unit: float,
           clock: _Clock) -> np.ndarray:  # fmt: skip
    """Per-call slopes of one chunk: past the time cap it stops before the next call (with at
    least two calls in all); on Ctrl-C, SIGTERM or the watchdog the calls finished go with
    the exception (``finished_blocks``, read by :func:`~varcheck.core.estimation.draw_rounds`)."""
    children = np.random.SeedSequence(seed, spawn_key=(design.dk, 1, chunk)).spawn(blocks)
    out = np.empty((blocks, 2, design.heads))
    i = 0
    try:
        for i in range(blocks):
            if clock.passed() and (chunk > 0 or i >= 2):
                return out[:i]
            clock.arm()
            _slopes(kernel, design, children[i], sd, heads, curved, unit, out[i])
    except (KeyboardInterrupt, DrawDeadline) as exc:
        if i > 0:
            exc.finished_blocks = out[:i].copy()  # type: ignore[attr-defined]
        raise
    return out


def _slopes(kernel: Any, design: Design, child: np.random.SeedSequence, sd: float,
            heads: tuple[HeadStructure, ...], curved: bool, unit: float,
            out: np.ndarray) -> None:  # fmt: skip
    """One call's slopes (and their degree-5 twins) per head, into ``out``."""
    w, x, _, _ = _read(kernel, design, np.random.default_rng(child), sd)
    try:
        out[:] = call_slopes(w, x, list(heads), curved=curved, unit=unit)
    except np.linalg.LinAlgError:
        out[:] = math.nan
    readable = np.isfinite(out).all(axis=0)
    if not readable.all():  # a head with no query of two readable keys in this call
        h = int(np.argmin(readable))
        raise VarcheckError(underflow_edge(kernel.label, heads[h].tiny, f"in a call (head {h})"))


def measure(
    kernel: Any,
    design: Design,
    *,
    expected: float,
    seed: int,
    confidence: float,
    precision: float | None,
    calls: int | None,
    max_seconds: float | None,
    progress: Callable[[float], None] | None = None,
    stuck_after: float | None = None,
) -> Measurement:
    """Pilot, then independent calls until the interval is ``precision`` wide (relative).

    ``max_seconds`` counts from the pilot's first call: the pilot then stops after
    :data:`PILOT_MIN_CALLS` reads, the blocks after at least two calls, and the stop reason is
    ``max-seconds``. A reading of the weights still running ``stuck_after`` (default
    ``max_seconds``; a probe of several d_k gives its whole cap) plus a grace (1 s, or 10%)
    after it began is stopped by the SIGALRM watchdog of
    :mod:`varcheck.core.watchdog` (main thread only; code stuck in C is not). The kernel's
    prints go to stderr (stdout holds the results). On Ctrl-C or SIGTERM after two blocks,
    :class:`PartialMeasurement` carries the measurement of the calls finished.
    """
    cap = max_seconds if stuck_after is None else stuck_after
    with guarded(cap) as arm:
        clock = _Clock(max_seconds, arm)
        try:
            pilot = _pilot(kernel, design, expected, seed, clock)
        except DrawDeadline:
            raise _too_slow(kernel, design, "its pilot had not finished", cap) from None
        found: list[np.ndarray] = []
        try:
            stop = _blocks(kernel, design, seed, confidence, precision, calls, clock, pilot,
                           found, progress)  # fmt: skip
        except KeyboardInterrupt:
            if sum(len(f) for f in found) < 2:
                raise
            raise PartialMeasurement(
                _summary(design, pilot, found, confidence, "interrupted")
            ) from None
    if sum(len(f) for f in found) < 2:  # the watchdog stopped the first calls
        calls = sum(len(f) for f in found)
        raise _too_slow(kernel, design, f"only {calls} call(s) of the estimate had finished", cap)
    return _summary(design, pilot, found, confidence, stop)


def _too_slow(kernel: Any, design: Design, done: str, max_seconds: float | None) -> VarcheckError:
    return VarcheckError(
        f"kernel {kernel.label} at d_k={design.dk}: a call ran longer than --max-seconds "
        f"{max_seconds:g} and its grace: {done}, too few for an estimate; "
        "raise the time cap or make one call faster"
    )


def _blocks(kernel: Any, design: Design, seed: int, confidence: float, precision: float | None,
            calls: int | None, clock: _Clock, pilot: tuple[Any, ...], found: list[np.ndarray],
            progress: Callable[[float], None] | None) -> str:  # fmt: skip
    """Draw the blocks into ``found`` (their per-call slopes); the stop reason."""
    sd, heads, _, unit, _ = pilot
    curved = any(h.curved for h in heads)

    def draw(tasks: Iterator[tuple[int, int]]) -> Iterator[np.ndarray]:
        return (_chunk(kernel, design, seed, c, b, sd, heads, curved, unit, clock)
                for c, b in tasks)  # fmt: skip

    def widest() -> float:
        values = np.concatenate(found)[:, 0]
        worst = 0.0
        for column in [*values.T, values.mean(axis=1)]:
            worst = max(worst, _relative(_estimate(column, confidence, 0.0)))
        return worst

    def absorb(rs: list[np.ndarray]) -> None:
        found.extend(r for r in rs if len(r))

    if calls is None:
        rule = StopRule(precision, est.MIN_BLOCKS, None, clock.left(), max_blocks=MAX_CALLS)
    else:
        rule = StopRule(None, calls, "samples", clock.left())
    rounds = est.draw_rounds(rule, 50, draw, absorb, widest, progress=progress)
    # a chunk cut short by the time cap counts its calls made, not those asked for
    return "max-seconds" if sum(len(f) for f in found) < rounds.blocks else rounds.stop_reason


def _summary(design: Design, pilot: tuple[Any, ...], found: list[np.ndarray], confidence: float,
             stop_reason: str) -> Measurement:  # fmt: skip
    """The measurement of the blocks in ``found``."""
    sd, heads, resolution, _, pilot_calls = pilot
    both = np.concatenate(found)
    values, gap = both[:, 0], np.abs(both[:, 0] - both[:, 1]).mean(axis=0)
    per_head = tuple(
        _estimate(col, confidence, resolution, float(g))
        for col, g in zip(values.T, gap, strict=True)
    )
    pooled = _estimate(values.mean(axis=1), confidence, resolution, float(gap.mean()))
    return Measurement(
        design=design,
        heads=per_head,
        pooled=pooled,
        structure=heads,
        blocks=len(both),
        kernel_calls=pilot_calls + len(both) * design.calls_per_block,
        stop_reason=stop_reason,
        precision=_relative(pooled),
        input_sd=sd,
        resolution=resolution,
    )


def _relative(e: HeadEstimate) -> float:
    """Half the interval's width over |scale| (0 for an exact zero, inf for a noisy one)."""
    half = (e.confidence_interval.high - e.confidence_interval.low) / 2.0
    if half == 0:
        return 0.0
    return half / abs(e.scale) if e.scale != 0 else math.inf
