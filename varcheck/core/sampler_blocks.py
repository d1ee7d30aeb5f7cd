"""A user's sampler as a source of independent blocks: each call of ``fn(rng, dk)`` is one block.

The values one call returns (attention logits of one batch, say) may depend on each other in any
way: they share rows, columns and freshly drawn weights. Different calls are independent, given
independent generators, so each call is one block of the block estimator of
:mod:`varcheck.core.estimation`, and its interval accounts for the dependence inside a call as
it does for products that share rows and columns. Call ``i`` of chunk ``c`` gets the generator
of ``SeedSequence(seed, spawn_key=(*stream, c)).spawn(blocks)[i]``: the same seed gives the same
values for any split of the work, as long as ``fn`` draws only from the generator it is given.
A vectorised sampler, ``fn(rng, dk, calls)``, makes a whole chunk of runs in one call with the
chunk's generator ``SeedSequence(seed, spawn_key=(*stream, c))``, one run per row; each row is
then one block, and varcheck's cost per run falls from a generator and a few checks to a
share of one.

This module is the statistical core of verifying a user's own code (issue #15); loading a
sampler by name and the command line come on top of it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..errors import VarcheckError
from . import estimation as est
from .distributions import DrawDeadline
from .estimation import MIN_BLOCKS, StopRule, VarianceEstimate
from .messages import cut
from .parallel import Runner, SerialRunner, ordered_map
from .user_code import UserSampler, call_user, takes_batch
from .watchdog import guarded, watched_call
from .workspace import Workspace

__all__ = [
    "Sampler",
    "call_sampler",
    "is_vectorized",
    "sampler_chunk",
    "estimate_sampler",
    "PILOT_STREAM",
    "MAX_VALUES_PER_CALL",
]

#: ``fn(rng, dk)`` returning the values of one independent run (any shape).
Sampler = Callable[[np.random.Generator, int], Any]

#: Spawn key of the pilot calls that check the sampler and fix its standardisation.
PILOT_STREAM = 2**31 - 1

#: The largest spread (sd) of a sampler's values: the squared standard error of their variance,
#: of order sd^4, must stay a finite float.
MAX_SCALE = 1e70

#: Values a chunk of calls holds at most (chunks are the unit of seeding and parallel work).
_CHUNK_VALUES = 1 << 18

#: The most values one call may return (512 MiB as float64): checked on the size the returned
#: array declares, before anything is copied, since a view (``np.broadcast_to``) can declare
#: terabytes in a few bytes.
MAX_VALUES_PER_CALL = 1 << 26

#: Each thread's array for a vectorised sampler's chunk of runs (see :class:`Workspace`).
_WORKSPACE = Workspace()

#: Estimates stopped by Ctrl-C or SIGTERM: their chunks still running in worker threads stop.
_interrupted_runs: set[int] = set()
_run_numbers = itertools.count()


def _returned(out: Any, values: np.ndarray) -> str:
    """What a sampler returned, for an error: ``None (a missing return?)``, ``str`` values..."""
    if out is None:
        return "None (a missing return?)"
    if isinstance(out, np.ndarray) or values.ndim:
        return f"{values.dtype} values"
    return f"a {type(out).__name__}"


def _returned_array(
    fn: Sampler, rng: np.random.Generator, dk: int, name: str, calls: int | None = None
) -> np.ndarray:
    """What one call returned, as a numpy array of real numbers, checked but not yet copied.

    Its kind and its declared size are checked first (a view can declare terabytes in a few
    bytes). With ``calls`` (a vectorised sampler), its first axis must hold the calls.
    """
    what = f"sampler {name}"
    call = fn if calls is None else functools.partial(_call_batch, fn, calls)
    with watched_call(what):
        out, values = call_user(call, rng, dk, what=what)
    kind = values.dtype.kind
    if kind == "c":
        raise VarcheckError(f"sampler {name} returned complex values; give real numbers")
    if kind not in "biuf":
        raise VarcheckError(
            f"sampler {name} returned {_returned(out, values)}, not numbers (expected an "
            "array of floats such as the attention logits)"
        )
    if values.size > MAX_VALUES_PER_CALL:
        raise VarcheckError(
            f"sampler {name} returned {values.size:,} values in one call (shape "
            f"{cut(str(values.shape), 40)}); at most {MAX_VALUES_PER_CALL:,} are read (512 MiB "
            "as float64): return fewer values per call"
        )
    if values.size == 0:
        raise VarcheckError(f"sampler {name} returned no values (an empty array)")
    if calls is not None and (values.ndim == 0 or values.shape[0] != calls):
        raise VarcheckError(
            f"sampler {name} takes calls and was asked for {calls}, but returned shape "
            f"{cut(str(values.shape), 40)}: its first axis must hold one independent run per call"
        )
    return values


def _call_batch(fn: Sampler, calls: int, rng: np.random.Generator, dk: int) -> Any:
    return fn(rng, dk, calls=calls)  # type: ignore[call-arg]


def _check_finite(values: np.ndarray, name: str, dk: int) -> None:
    if not np.isfinite(values).all():
        bad = "NaN" if np.isnan(values).any() else "infinite"
        raise VarcheckError(f"sampler {name} returned {bad} values at d_k={dk}")


def call_sampler(
    fn: Sampler, rng: np.random.Generator, dk: int, *, name: str, calls: int | None = None
) -> np.ndarray:
    """One call of the sampler as float64 values; a one-line error naming what is wrong.

    Anything ``numpy.asarray`` turns into a real array of numbers is accepted (numpy arrays, CPU
    tensors of other frameworks), without importing those frameworks. The values are flat, or
    with ``calls`` (a vectorised sampler, asked for that many runs) one row per run.
    """
    values = _returned_array(fn, rng, dk, name, calls)
    _check_finite(values, name, dk)
    flat = values.astype(np.float64, copy=False).ravel()
    return flat if calls is None else flat.reshape(calls, -1)


def is_vectorized(fn: Sampler) -> bool:
    """Whether a sampler returns many runs per call: it takes ``calls`` (docs/own-code.md)."""
    return fn.vectorized if isinstance(fn, UserSampler) else takes_batch(fn)


def _standardised(values: np.ndarray, buffer: np.ndarray, shift: float, scale: float) -> np.ndarray:
    """``values / scale - shift / scale`` in float64, written into ``buffer`` (of the same size).

    One buffer serves every call of a chunk: a fresh array per call costs page faults that, for
    large outputs, take longer than the arithmetic. The operations and their rounding are those
    of the expression.
    """
    np.divide(values, scale, out=buffer.reshape(values.shape), dtype=np.float64)
    np.subtract(buffer, shift / scale, out=buffer)
    return buffer


def sampler_chunk(
    fn: Sampler,
    dk: int,
    seed: int,
    stream: tuple[int, ...],
    chunk: int,
    blocks: int,
    shift: float,
    size: int,
    name: str,
    scale: float = 1.0,
    deadline: float | None = None,
    run: int | None = None,
    vectorized: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-call means of the values and of their squares, standardised as ``(x - shift) /
    scale`` (one chunk).

    Every call must return ``size`` values (the pilot call's count), so that the number of
    values reported is the number used. Past ``deadline`` (a ``time.perf_counter`` reading) the
    chunk stops after the call under way, with at least two calls: a slow sampler's time cap
    holds to within a call or two instead of a whole chunk; so does a chunk of an interrupted
    ``run`` in a worker thread (its results are not wanted: the interrupt is not kept waiting
    for up to :data:`MIN_BLOCKS` slow calls). On Ctrl-C, SIGTERM or the
    watchdog's :class:`DrawDeadline`, the exception carries the calls finished so far in its
    ``finished_blocks`` (see :func:`varcheck.core.estimation.draw_rounds`). A ``vectorized``
    sampler makes the whole chunk in one call (:func:`_vectorized_chunk`).
    """
    if vectorized:
        return _vectorized_chunk(fn, dk, seed, stream, chunk, blocks, shift, size, name, scale)
    children = np.random.SeedSequence(seed, spawn_key=(*stream, chunk)).spawn(blocks)
    m = np.empty(blocks)
    a = np.empty(blocks)
    buffer = np.empty(size)
    i = 0
    try:
        for i, child in enumerate(children):
            if deadline is not None and i >= 2 and time.perf_counter() > deadline:
                return m[:i], a[:i]
            if run in _interrupted_runs:
                return m[:i], a[:i]
            values = _returned_array(fn, np.random.default_rng(child), dk, name)
            if values.size != size:
                raise _size_changed(name, size, values.size)
            x = _standardised(values, buffer, shift, scale)
            # x.mean() to the bit, without np.mean's Python layer (a sum divided by the count)
            m[i], a[i] = float(np.add.reduce(x)) / size, np.dot(x, x) / size
            if not (math.isfinite(m[i]) and math.isfinite(a[i])):
                _check_finite(values, name, dk)  # else finite values whose squares overflow
    except (KeyboardInterrupt, DrawDeadline) as exc:
        if i:  # the calls finished before Ctrl-C, SIGTERM or the watchdog count
            # an attribute no exception class declares (draw_rounds reads it with getattr)
            exc.finished_blocks = (m[:i].copy(), a[:i].copy())  # type: ignore[union-attr]
        raise
    return m, a


def _size_changed(name: str, size: int, now: float) -> VarcheckError:
    shown = f"{int(now)}" if float(now).is_integer() else f"{now:g} per call"
    return VarcheckError(
        f"sampler {name} returned {size} values, then {shown}: every call must return the "
        "same number of values"
    )


def _vectorized_chunk(
    fn: Sampler,
    dk: int,
    seed: int,
    stream: tuple[int, ...],
    chunk: int,
    blocks: int,
    shift: float,
    size: int,
    name: str,
    scale: float,
) -> tuple[np.ndarray, np.ndarray]:
    """A chunk of a vectorised sampler: one call ``fn(rng, dk, calls=blocks)`` with the
    chunk's generator, each row of what it returns one run (one block)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(*stream, chunk)))
    values = _returned_array(fn, rng, dk, name, calls=blocks)
    if values.size != blocks * size:
        raise _size_changed(name, size, values.size / blocks)
    shape = (blocks, size)
    small = blocks * size <= _CHUNK_VALUES  # reused per thread; a larger one is not kept
    buffer = _WORKSPACE.get("runs", shape, np.dtype(np.float64)) if small else np.empty(shape)
    x = _standardised(values, buffer, shift, scale)
    m = x.mean(axis=1)
    a = np.einsum("ij,ij->i", x, x) / size
    if not (np.isfinite(m).all() and np.isfinite(a).all()):
        _check_finite(values, name, dk)
    return m, a


def estimate_sampler(
    fn: Sampler,
    dk: int,
    *,
    seed: int,
    stream: tuple[int, ...] = (),
    name: str = "sampler",
    runner: Runner | None = None,
    confidence: float = 0.95,
    precision: float | None = 0.01,
    samples: int | None = None,
    max_seconds: float | None = None,
    progress: Callable[[float], None] | None = None,
) -> VarianceEstimate:
    """Estimate the variance of the values a sampler returns, each call one independent block.

    Parameters
    ----------
    fn : callable
        ``fn(rng, dk)``: the values of one independent run of the user's code; or, vectorised,
        ``fn(rng, dk, calls)``: ``calls`` independent runs at once, one per row of the first
        axis (see :func:`is_vectorized` and docs/own-code.md).
    dk : int
        Passed to ``fn``.
    seed, stream
        Root seed and stream, as in :func:`varcheck.core.estimation.estimate_variance`.
    name : str
        How errors name the sampler (``module:function``).
    runner, confidence, precision, samples, max_seconds, progress
        As in :func:`varcheck.core.estimation.estimate_variance`; ``samples`` counts values
        (rounded up to whole calls, at least ``MIN_BLOCKS`` calls from 200 values on).

    Returns
    -------
    VarianceEstimate
        ``samples`` counts values, ``blocks`` calls; ``block_side`` is 0 (a call has no rows).
        On Ctrl-C or SIGTERM, ``PartialInterrupt`` carries the estimate of the calls made.

    Notes
    -----
    The variance is that of one entry drawn at random from a call's values: it is the variance
    of "the logits" when every entry has the same law. Three pilot calls (their own generators)
    check the sampler before any work (see :func:`_pilot`) and fix the standardisation.
    A vectorised sampler is called once per chunk, with the chunk's generator and ``calls``
    set to the chunk's number of blocks; each row is one block, as one call is otherwise.

    The sampler's prints go to stderr (stdout holds the results). With ``max_seconds``, a call
    still running ``max_seconds`` plus a grace (1 s, or 10% of the cap) after the pilot or the
    estimate began is stopped by a SIGALRM watchdog (main thread only; see
    :mod:`varcheck.core.watchdog`), and the estimate keeps the calls finished, stop reason
    ``max-seconds``.
    """
    vectorized = is_vectorized(fn)
    with guarded(max_seconds) as arm:
        arm()
        try:
            pilot = _pilot(fn, dk, seed, stream, name, vectorized)
        except DrawDeadline:
            raise _too_slow(name, dk, 0, max_seconds) from None
        arm()
        return _estimate(
            fn,
            dk,
            seed,
            stream,
            name,
            runner,
            confidence,
            precision,
            samples,
            max_seconds,
            progress,
            pilot,
            vectorized,
        )


def _too_slow(name: str, dk: int, calls: int, max_seconds: float | None) -> VarcheckError:
    return VarcheckError(
        f"sampler {name} at d_k={dk}: a call ran past --max-seconds {max_seconds:g} (and its "
        f"grace) with {calls} call(s) finished, too few for an estimate; raise the time cap or "
        "make one call faster"
    )


def _estimate(
    fn: Sampler,
    dk: int,
    seed: int,
    stream: tuple[int, ...],
    name: str,
    runner: Runner | None,
    confidence: float,
    precision: float | None,
    samples: int | None,
    max_seconds: float | None,
    progress: Callable[[float], None] | None,
    pilot: tuple[float, float, int],
    vectorized: bool = False,
) -> VarianceEstimate:
    """The estimate of :func:`estimate_sampler` once its pilot fixed the standardisation."""
    shift, scale, per_call = pilot
    per_chunk = max(1, min(MIN_BLOCKS, _CHUNK_VALUES // per_call))
    acc = est.BlockAccumulator()
    runner = SerialRunner() if runner is None else runner
    task = (fn, dk, seed, stream)
    deadline = None if max_seconds is None else time.perf_counter() + max_seconds
    run = next(_run_numbers)

    def draw(tasks: Iterator[tuple[int, int]]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return ordered_map(
            runner,
            sampler_chunk,
            (
                (*task, c, b, shift, per_call, name, scale, deadline, run, vectorized)
                for c, b in tasks
            ),
        )

    def widest() -> float:
        var, _, _ = acc.variance_and_se()
        if var == 0 or math.isnan(var):
            raise VarcheckError(
                f"sampler {name} returned the same value in all of its first {acc.n:,} calls "
                f"at d_k={dk}: there is no variance to test"
            )
        return acc.relative_width(confidence, "hall")

    def summary(stop_reason: str) -> VarianceEstimate:
        if acc.n < 2:  # the watchdog stopped the first calls
            raise _too_slow(name, dk, acc.n, max_seconds)
        standard = est.summarise(
            acc,
            confidence=confidence,
            method="hall",
            products_per_block=per_call,
            block_side=0,
            stop_reason=stop_reason,
        )
        return _in_units(standard, shift, scale)

    rule = _rule(precision, samples, per_call, max_seconds)
    try:
        return est.estimate_blocks(acc, rule, per_chunk, draw, widest, summary, progress)
    except KeyboardInterrupt:
        _interrupted_runs.add(run)
        raise


def _rule(
    precision: float | None, samples: int | None, per_call: int, max_seconds: float | None
) -> StopRule:
    """Adaptive to ``precision`` from ``MIN_BLOCKS`` calls, or enough whole calls for
    ``samples`` values (at least ``MIN_BLOCKS`` calls from 200 values on)."""
    if samples is None:
        return StopRule(precision, MIN_BLOCKS, None, max_seconds)
    floor = MIN_BLOCKS if samples >= MIN_BLOCKS else 2
    return StopRule(None, max(floor, math.ceil(samples / per_call)), "samples", max_seconds)


def _pilot(
    fn: Sampler, dk: int, seed: int, stream: tuple[int, ...], name: str, vectorized: bool = False
) -> tuple[float, float, int]:
    """Three calls before any work: they check the sampler, and fix the shift and scale that
    standardise its values (the estimate does not depend on them; they keep the squares from
    cancelling when the mean is large, and from under- or overflowing at extreme units).

    The first two calls get different generators: identical values mean that the sampler does
    not draw from the generator it is given, so its calls are not independent runs (every block
    would be the same, and the interval would have width zero). The third gets the first one's
    generator again: other values mean that it draws from somewhere else too (a global
    generator), so the seed could not reproduce the run. Values equal to 1e-6 relative count
    as the same (a multi-threaded sum may round in another order). A vectorised sampler is asked
    for two runs in each of these calls, and its two runs must differ too.
    """
    keys = np.random.SeedSequence(seed, spawn_key=(*stream, PILOT_STREAM)).spawn(2)
    calls = 2 if vectorized else None
    runs = [
        call_sampler(fn, np.random.default_rng(key), dk, name=name, calls=calls) for key in keys
    ]
    first, second = runs
    if first.size == second.size and np.array_equal(first, second):
        raise VarcheckError(
            f"sampler {name} returned the same values for two different generators: it must "
            "draw its random numbers from the rng it is given (each call one independent run)"
        )
    if vectorized and np.array_equal(first[0], first[1]):
        raise VarcheckError(
            f"sampler {name} returned the same values in both rows when asked for calls=2: "
            "each row must be an independent run, drawn with numbers of its own"
        )
    again = call_sampler(fn, np.random.default_rng(keys[0]), dk, name=name, calls=calls)
    if again.size != first.size or not np.allclose(again, first, rtol=1e-6, atol=0.0):
        raise VarcheckError(
            f"sampler {name} returned other values for the same generator: it must draw all its "
            "random numbers from the rng it is given (not from a global generator such as "
            "np.random.*), or the seed cannot reproduce the run"
        )
    both = np.concatenate([run.ravel() for run in runs])
    top = float(np.abs(both).max())  # finite and > 0: the two calls differ
    shift = float(np.mean(both / top)) * top
    scale = float(np.std(both / top)) * top
    scale = scale if scale > 0 else top
    if scale > MAX_SCALE:
        raise VarcheckError(
            f"sampler {name} returns values spread over {scale:.3g}; varcheck handles spreads "
            f"up to {MAX_SCALE:.0e} (the variance's uncertainty must fit a float): divide the "
            "values by a constant, and the claim by its square"
        )
    return shift, scale, first.size // (2 if vectorized else 1)


def _in_units(standard: VarianceEstimate, shift: float, scale: float) -> VarianceEstimate:
    """An estimate of standardised values ``(x - shift) / scale`` in the units of ``x``."""
    factor = scale * scale
    var, interval = standard.scaled(factor)
    return dataclasses.replace(
        standard,
        var=var,
        confidence_interval=interval,
        se=standard.se * factor,
        mean=standard.mean * scale + shift,
    )
