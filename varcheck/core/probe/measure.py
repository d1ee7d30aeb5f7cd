"""One d_k of a probe: the pilot (input size, checks, structure), then the blocks.

Every call draws fresh queries and keys from its own generator: call ``i`` of chunk ``c`` uses
``SeedSequence(seed, spawn_key=(dk, 1, c)).spawn(blocks)[i]`` and the pilot
``spawn_key=(dk, 0)``, so a row of a d_k sweep is the probe of that d_k alone. Calls are
independent, so each call's scale (one per head) is one block of the interval: a Student t
interval on ``blocks − 1`` degrees of freedom with Hall's skewness correction
(:mod:`varcheck.core.estimation`), never narrower than the resolution of the format the kernel
computes in (:data:`~.formats.FLOOR_ROUNDINGS` unit roundoffs relative, of the coarsest of
``dtype``, the returned format and the format of the returned numbers: rounding that does not
average out; :mod:`.formats`).
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
    HeadStack,
    HeadStructure,
    call_slopes,
    check_nonnegative,
    explained_by,
    offset_slope,
    pilot_structure,
    rotary_signature,
    rough_slope,
    underflow_edge,
    unexplained,
)
from .formats import (
    FLOOR_ROUNDINGS,
    FORMATS,
    NEGATIVE_ROUNDINGS,
    ComputeFormat,
    Format,
    coarsest,
    compute_format,
    merged,
    sum_tolerance,
)
from .weights import Design, call_kernel, dot_products, draw_qk, read_weights, rounded

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
#: Unit roundoffs of float64 below which no interval is narrowed: varcheck's own sums
#: (docs/probe.md, "Thresholds").
OWN_ROUNDINGS = 128
#: The first call's rough scale is trusted within this factor of the one read with each row's
#: and offset's level removed (a steep position bias makes them differ more).
ROUGH_AGREEMENT = 1.5


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
    format: ComputeFormat


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


def _read(
    kernel: Any, design: Design, rng: np.random.Generator, sd: float
) -> tuple[np.ndarray, np.ndarray, str, tuple[np.ndarray, np.ndarray]]:
    q, k = draw_qk(rng, design, sd)
    w, returned = read_weights(kernel, q, k, design)
    return w, dot_products(q, k), returned, (q, k)


def _formats(fmt: ComputeFormat) -> list[Format]:
    """The formats the weights pass through: declared, computed in and returned."""
    return [FORMATS[n] for n in dict.fromkeys((fmt.declared, fmt.name, fmt.returned))]


def _smallest_normal(fmt: ComputeFormat) -> float:
    """Below this a weight is subnormal in a format it passes through: not read."""
    return max(f.tiny for f in _formats(fmt))


def _log_floor(w: np.ndarray, fmt: ComputeFormat) -> float:
    """The log of the largest weight the kernel's formats may turn into an exact 0.

    A weight below half a format's smallest subnormal rounds to 0 there; a kernel that flushes
    subnormals to 0 (fast-math GPU code) zeroes every weight below the smallest normal, so a
    format none of whose subnormals shows among the pilot's weights counts up to its smallest
    normal.
    """
    shown = w[w > 0]
    # half of float64's smallest subnormal is 0 in float64: take its log
    return max(
        math.log(f.subnormal) - math.log(2.0) if (shown < f.tiny).any() else math.log(f.tiny)
        for f in _formats(fmt)
    )


def _resolution(fmt: ComputeFormat) -> float:
    """The interval's floor: :data:`~.formats.FLOOR_ROUNDINGS` unit roundoffs of the format the
    kernel computes in (its rounding depends on q·k and biases the slope at that level), and
    never below :data:`OWN_ROUNDINGS` of float64 (varcheck's own sums)."""
    return max(FLOOR_ROUNDINGS * fmt.u, OWN_ROUNDINGS * FORMATS["float64"].u)


def _rounding(fmt: ComputeFormat) -> float:
    """The relative rounding of the log-weights as read: the compute format's unit roundoff,
    or varcheck's own float64 arithmetic when that is coarser."""
    return max(fmt.u, OWN_ROUNDINGS * FORMATS["float64"].u)


def _checked(w: np.ndarray, design: Design, returned: str, label: str) -> ComputeFormat:
    """The compute format of one or more reads, after refusing weights that are not convex."""
    fmt = compute_format(design.dtype, returned, w, label)
    check_nonnegative(w, NEGATIVE_ROUNDINGS * fmt.u, label)
    return fmt


def _size_inputs(
    kernel: Any, design: Design, rng: np.random.Generator, sd: float
) -> tuple[float, np.ndarray, ComputeFormat, tuple[np.ndarray, np.ndarray]]:
    """The inputs' sd that gives logits of sd ~1 (from a first call's rough scale)."""
    for _ in range(8):
        w, x, returned, qk = _read(kernel, design, rng, sd)
        fmt = _checked(w, design, returned, kernel.label)
        s = rough_slope(w, x)
        fitted = offset_slope(w, x, _smallest_normal(fmt))
        # a steep position bias confounds the rough slope (an ALiBi kernel's was 1/50 of it)
        if fitted > 0 and not 1.0 / ROUGH_AGREEMENT < s / fitted < ROUGH_AGREEMENT:
            s = fitted
        if math.isnan(s):  # every row one-hot: logits far too wide to read
            sd /= 4.0
            continue
        if s != 0:
            sd = 1.0 / math.sqrt(abs(s) * math.sqrt(design.dk) / LOGIT_SD)
        return sd, w, fmt, qk
    raise VarcheckError(
        f"kernel {kernel.label}: every row of its weights puts all its weight on one key, "
        "however small the inputs; the weights say nothing about the scale (a --layout that "
        f"is not the kernel's, here {design.layout}, does this too)"
    )


def _check_linear_in_values(
    kernel: Any,
    design: Design,
    w: np.ndarray,
    qk: tuple[np.ndarray, np.ndarray],
    fmt: ComputeFormat,
) -> None:
    """The output must be W v for the same W whatever the values (one more call).

    Each output is a sum of m products computed in the kernel's format: off W·v by at most
    (m + 4) u · max|v| (docs/probe.md, "Thresholds"). A head whose output is W·v with another
    head's values has its heads mixed, which is said as such.
    """
    q, k = qk
    v = rounded(
        np.random.default_rng(0).standard_normal((design.groups, design.keys, design.dv)),
        design.dtype,
    )
    out, _ = call_kernel(kernel, q, k, v, design)
    tol = sum_tolerance(fmt.name, design.keys) * max(1.0, float(np.abs(v).max()))
    paired = np.repeat(v, design.heads // design.groups, axis=0)
    gaps = np.abs(out - w @ paired).max(axis=(1, 2))
    if (gaps <= tol).all():
        return
    h = int(np.argmax(gaps))
    mixed = [g for g in range(design.groups) if np.abs(out[h] - w[h] @ v[g]).max() <= tol]
    if mixed:
        want = h // (design.heads // design.groups)
        raise VarcheckError(
            f"kernel {kernel.label} mixes its heads: the output of head {h} is the weighted sum "
            f"of the values of head {mixed[0]}, not of head {want}"
            + (
                " (grouped-query heads: query head i goes with key/value head "
                "i // (heads / kv_heads), as repeat_interleave pairs them)"
                if design.groups < design.heads
                else ""
            )
            + "; check how the kernel indexes or repeats its key/value heads"
        )
    raise VarcheckError(
        f"kernel {kernel.label} is not softmax attention: with other values its output "
        f"is off W·v by {float(gaps.max()):.3g} (not linear in v, or not deterministic)"
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


def _pilot(
    kernel: Any, design: Design, expected: float, seed: int, clock: _Clock
) -> tuple[float, tuple[HeadStructure, ...], ComputeFormat, float, int]:
    """Size the inputs, check the kernel, read its structure (fewer reads past the time cap)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(design.dk, 0)))
    sd0 = 1.0 / math.sqrt(abs(expected) * math.sqrt(design.dk) / LOGIT_SD)
    _check_input_size(sd0, expected, design)
    clock.arm()
    sd, w, fmt, qk = _size_inputs(kernel, design, rng, sd0)
    clock.arm()
    _check_linear_in_values(kernel, design, w, qk, fmt)
    shape = (PILOT_CALLS, design.heads, design.queries, design.keys)
    wa, xa = np.empty(shape), np.empty(shape)  # filled in place: no list and stacked copy
    reads, formats = 0, [fmt]
    while reads < PILOT_CALLS and (reads < PILOT_MIN_CALLS or not clock.passed()):
        clock.arm()
        wa[reads], xa[reads], got, qk = _read(kernel, design, rng, sd)
        formats.append(_checked(wa[reads], design, coarsest(got, fmt.returned), kernel.label))
        reads += 1
    wa, xa = wa[:reads], xa[:reads]
    fmt = merged(formats)  # the coarsest of every read's, with the largest row error
    heads = _structure(kernel.label, design, wa, xa, fmt, qk)
    unit = 1.0 / max(float(xa.std()), 1e-300)
    calls = (reads + 2) * design.calls_per_block + 1
    return sd, heads, fmt, unit, calls


def _mixed_keys(
    label: str, design: Design, w: np.ndarray, qk: tuple[np.ndarray, np.ndarray]
) -> str | None:
    """The refusal of a kernel whose weights of some head follow q·k with another head's keys
    (heads wired to the wrong key head), or None. ``w``: one read's (heads, n, m) weights."""
    q, k = qk
    per = design.heads // design.groups
    for h in range(design.heads):
        fits = [
            explained_by(w[h], dot_products(q[h : h + 1], k[g : g + 1])[0])
            for g in range(design.groups)
        ]
        best = int(np.argmax(fits))
        if best != h // per and fits[best] >= EXPLAINED_MIN > fits[h // per]:
            return (
                f"kernel {label} mixes its heads: the weights of head {h} follow q·k with the "
                f"keys of head {best} (R² {fits[best]:.2f}), not of head {h // per} "
                f"({fits[h // per]:.2f}); check how the kernel indexes or repeats its key/value "
                "heads"
            )
    return None


def _structure(
    label: str,
    design: Design,
    wa: np.ndarray,
    xa: np.ndarray,
    fmt: ComputeFormat,
    qk: tuple[np.ndarray, np.ndarray],
) -> tuple[HeadStructure, ...]:
    """Each head's structure from the pilot's reads; refused with the reason the weights show
    when q·k explains them poorly (another head's keys, a rotation by position)."""
    tiny, floor = _smallest_normal(fmt), _log_floor(wa, fmt)
    try:
        heads = tuple(
            pilot_structure(wa[:, h], xa[:, h], label, tiny, floor, roundoff=_rounding(fmt))
            for h in range(design.heads)
        )
    except VarcheckError as exc:
        raise VarcheckError(_mixed_keys(label, design, wa[-1], qk) or str(exc)) from None
    h = min(range(design.heads), key=lambda i: heads[i].explained)
    if heads[h].explained >= EXPLAINED_MIN:
        return heads
    if (mixed := _mixed_keys(label, design, wa[-1], qk)) is not None:
        raise VarcheckError(mixed)
    rotary = rotary_signature(wa[:, h], xa[:, h])
    if rotary is None:
        raise VarcheckError(unexplained(label, heads[h].explained))
    align, near, far = rotary
    raise VarcheckError(
        unexplained(
            label,
            heads[h].explained,
            (
                f": they follow q·k one position from the query's own (R² {near:.2f}, positions "
                f"aligned {align}) and less further away ({far:.2f} beyond 8 positions), as when "
                "q and k are rotated by position (rotary embeddings, RoPE); probe it with RoPE "
                "switched off (cos = 1, sin = 0): docs/probe.md, 'A whole module'"
            ),
        )
    )


def _chunk(
    kernel: Any,
    design: Design,
    seed: int,
    chunk: int,
    blocks: int,
    sd: float,
    heads: HeadStack,
    curved: bool,
    unit: float,
    clock: _Clock,
) -> np.ndarray:
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
            # an attribute no exception class declares (draw_rounds reads it with getattr)
            exc.finished_blocks = out[:i].copy()  # type: ignore[union-attr]
        raise
    return out


def _slopes(
    kernel: Any,
    design: Design,
    child: np.random.SeedSequence,
    sd: float,
    heads: HeadStack,
    curved: bool,
    unit: float,
    out: np.ndarray,
) -> None:
    """One call's slopes (and their degree-5 twins) per head, into ``out``."""
    w, x, _, _ = _read(kernel, design, np.random.default_rng(child), sd)
    try:
        out[:] = call_slopes(w, x, heads, curved=curved, unit=unit)
    except np.linalg.LinAlgError:
        out[:] = math.nan
    readable = np.isfinite(out).all(axis=0)
    if not readable.all():  # a head with no query of two readable keys in this call
        h = int(np.argmin(readable))
        tiny = float(heads.tiny[h, 0, 0])
        raise VarcheckError(underflow_edge(kernel.label, tiny, f"in a call (head {h})"))


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
            stop = _blocks(
                kernel, design, seed, confidence, precision, calls, clock, pilot, found, progress
            )
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


def _blocks(
    kernel: Any,
    design: Design,
    seed: int,
    confidence: float,
    precision: float | None,
    calls: int | None,
    clock: _Clock,
    pilot: tuple[Any, ...],
    found: list[np.ndarray],
    progress: Callable[[float], None] | None,
) -> str:
    """Draw the blocks into ``found`` (their per-call slopes); the stop reason."""
    sd, heads, _, unit, _ = pilot
    curved, stack = any(h.curved for h in heads), HeadStack.of(heads)

    def draw(tasks: Iterator[tuple[int, int]]) -> Iterator[np.ndarray]:
        return (
            _chunk(kernel, design, seed, c, b, sd, stack, curved, unit, clock) for c, b in tasks
        )

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


def _summary(
    design: Design,
    pilot: tuple[Any, ...],
    found: list[np.ndarray],
    confidence: float,
    stop_reason: str,
) -> Measurement:
    """The measurement of the blocks in ``found``."""
    sd, heads, fmt, _, pilot_calls = pilot
    resolution = _resolution(fmt)
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
        format=fmt,
    )


def _relative(e: HeadEstimate) -> float:
    """Half the interval's width over |scale| (0 for an exact zero, inf for a noisy one)."""
    half = (e.confidence_interval.high - e.confidence_interval.low) / 2.0
    if half == 0:
        return 0.0
    return half / abs(e.scale) if e.scale != 0 else math.inf
