"""Size a run before it is put into CI: the samples each row needs to catch an error with a power.

A short pilot per row, drawn from a stream of its own, measures one block's relative spread and
skewness; :func:`varcheck.core.power.planned_blocks` turns them into blocks, and the floors every
run has (the budget rule, ``MIN_BLOCKS`` blocks, the ``--samples`` minimum) apply on top. The
derivation and the simulations that check a planned run's power are in docs/power.md.

The pilots of a plan share one time cap (:data:`PILOT_SECONDS` unless given): each row's pilot
takes an equal share of what is left and stops there, and a row whose pilot drew fewer than
:data:`MIN_PILOT_BLOCKS` blocks in its share is refused rather than planned from too little.
A kernel (``varcheck probe``'s target) is planned from a pilot of calls, each head one test; a
claim file's rows in :mod:`.plan_file`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core import estimation
from ..core.distributions import Distribution
from ..core.options import (
    MIN_SAMPLES,
    confidence_from,
    resolve_seed,
    valid_positive,
    valid_tolerance,
)
from ..core.power import DEFAULT_POWER, detectable_error, planned_blocks, tost_power
from ..core.ranges import resolve_dks
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.user_code import UserSampler
from ..errors import VarcheckError
from .plan_result import PlanResult, PlanRow
from .verify import claim_source

__all__ = [
    "plan",
    "row_from_pilot",
    "Pilot",
    "PilotClock",
    "PLAN_STREAM",
    "MAX_PILOT_WORK",
    "PILOT_SECONDS",
    "MIN_PILOT_BLOCKS",
]

#: Spawn key of the pilots: a run with the same seed never reuses a pilot's draws.
PLAN_STREAM = 2**31 - 3

#: The most multiply-adds (products × d_k) a built-in pilot may take: plan's own time stays
#: within seconds (a smaller error needs larger blocks, and so a larger pilot).
MAX_PILOT_WORK = 4 * 10**8

#: The pilots' wall-time cap, all rows together, when none is given (seconds).
PILOT_SECONDS = 60.0

#: Fewest blocks a pilot cut short by the time cap may plan from: the spread of 20 blocks is
#: known within a χ² on 19 degrees of freedom, which the plan's factor covers (14.7%).
MIN_PILOT_BLOCKS = 20

#: The smallest and largest error and power a plan accepts.
DETECT_RANGE, POWER_RANGE = (1e-3, 0.9), (0.5, 0.999)


def _in_range(name: str, value: Any, bounds: tuple[float, float]) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and bounds[0] <= value <= bounds[1]):
        shown = repr(value)[:60]
        raise VarcheckError(
            f"{name} {shown} is not accepted: a number in [{bounds[0]:g}, {bounds[1]:g}]"
        )
    return float(value)


@dataclass(frozen=True)
class Pilot:
    """What :func:`row_from_pilot` reads of a pilot: a kernel head's scale as an estimate."""

    var: float
    se: float
    skewness: float
    blocks: int
    samples: int


class PilotClock:
    """The time cap the pilots of a plan share: each row's pilot takes an equal share of the
    time left, and one that drew fewer than :data:`MIN_PILOT_BLOCKS` blocks is refused."""

    def __init__(self, max_seconds: float | None, rows: int) -> None:
        given = max_seconds is not None
        self.cap = (
            PILOT_SECONDS if max_seconds is None else valid_positive("max_seconds", max_seconds)
        )
        self.option = "max_seconds" if given else f"the default cap ({PILOT_SECONDS:g} s)"
        self.rows = max(rows, 1)
        self.start = time.perf_counter()

    def share(self) -> float:
        """Seconds the next row's pilot may take (the next call of :meth:`done` ends it)."""
        left = self.cap - (time.perf_counter() - self.start)
        return max(left, 0.0) / self.rows

    def done(self) -> None:
        self.rows = max(self.rows - 1, 1)

    def enough(self, blocks: int, dk: int, share: float) -> None:
        """Refuse a pilot of too few blocks, naming the cap to raise."""
        if blocks < MIN_PILOT_BLOCKS:
            raise VarcheckError(
                f"the pilot at d_k={dk} drew {blocks} blocks in its {share:.2g} s share of "
                f"{self.option}; a plan needs {MIN_PILOT_BLOCKS}: raise max_seconds "
                "(--max-seconds) or plan fewer rows"
            )


def plan(
    dk: int | str | None = None,
    *,
    claim: str | float | None = None,
    detect: float | None = None,
    power: float = DEFAULT_POWER,
    tolerance: float | None = None,
    sampler: Callable[..., Any] | str | UserSampler | None = None,
    dist: str | Distribution | None = None,
    q_dist: str | Distribution | None = None,
    k_dist: str | Distribution | None = None,
    rho: float = 0.0,
    kernel: str | None = None,
    probe_options: Mapping[str, Any] | None = None,
    file: Any = None,
    confidence: float | None = None,
    alpha: float | None = None,
    seed: int | None = None,
    max_seconds: float | None = None,
) -> PlanResult:
    """How many samples each row of a run needs to detect ``detect`` with probability ``power``.

    Parameters
    ----------
    dk : int or str
        One d_k (as for ``assert``) or a range (as for ``sweep``: every row is planned at
        α / rows, its share of the Holm family). Not with ``file``.
    claim : str or float, optional
        The claim the run will test (as in :func:`varcheck.verify`; required with a sampler).
    detect : float
        The relative error of the truth from the claim the run must catch, both ways (of a
        kernel's scale with ``kernel``).
    power : float
        The probability of catching it (default 0.9).
    tolerance : float, optional
        Plan a tolerance claim instead: a true claim passes with probability ``power``.
    sampler, dist, q_dist, k_dist, rho
        The values' source, as in :func:`varcheck.verify`.
    kernel, probe_options : str, mapping, optional
        Plan ``varcheck probe KERNEL`` instead (each head one test; ``samples`` is then probe's
        ``--samples``), its options named as in a claim file's probe claim.
    file : str or path, optional
        Plan every claim of a claim file: one row per (claim, d_k), at the file's Holm family.
    confidence, alpha : float, optional
        The run's level (give one; default 0.95, or the file's).
    seed : int, optional
        Root seed of the pilots (drawn and reported when not given).
    max_seconds : float, optional
        The pilots' wall-time cap, all rows together (default :data:`PILOT_SECONDS`).

    Returns
    -------
    PlanResult
        ``samples`` is the value to pass to ``--samples``.

    Examples
    --------
    >>> res = plan(64, claim="dk", detect=0.03, seed=1)
    >>> 20_000 < res.samples < 50_000
    True
    """
    wanted = (detect, power, tolerance, confidence, alpha)
    if file is not None:
        return _file_plan(file, (dk, kernel, sampler), wanted, seed, max_seconds)
    dks = _planned_dks(dk, tolerance)
    seed = resolve_seed(seed)
    if kernel is not None:
        return _kernel_plan(
            kernel,
            probe_options,
            dks,
            seed,
            max_seconds,
            claim,
            sampler,
            wanted,
        )
    values = (sampler, dist, q_dist, k_dist, rho)
    return _values_plan(dks, seed, max_seconds, claim, values, wanted)


def _planned_dks(dk: int | str | None, tolerance: float | None) -> list[int]:
    """The d_k values of a plan, refused when missing or when a tolerance plan has several."""
    if dk is None:
        raise VarcheckError("give the d_k to plan (dk=64, or a range such as '8..128')")
    dks = resolve_dks(dk)
    if tolerance is not None and len(dks) > 1:
        raise VarcheckError(
            f"a tolerance plan takes one d_k, got {len(dks)} (a tolerance is tested one claim "
            "at a time: plan each d_k)"
        )
    return dks


def _file_plan(
    file: Any, others: tuple[Any, ...], wanted: tuple[Any, ...], seed: int | None, cap: float | None
) -> PlanResult:
    """Every claim of a claim file planned (:func:`plan` with ``file``)."""
    from .plan_file import plan_file

    if any(v is not None for v in others):
        raise VarcheckError("a claim file is planned alone: give file, not dk or a source")
    detect, power, _, confidence, alpha = wanted
    return plan_file(
        file,
        detect=detect,
        power=power,
        confidence=confidence,
        alpha=alpha,
        seed=seed,
        max_seconds=cap,
    )


def _values_plan(
    dks: list[int],
    seed: int,
    max_seconds: float | None,
    claim: Any,
    values: tuple[Any, ...],
    wanted: tuple[Any, ...],
) -> PlanResult:
    """The rows of a plan for built-in laws or a user's sampler (:func:`plan` with a d_k)."""
    sampler, dist, q_dist, k_dist, rho = values
    target = make_target(len(dks), *wanted)
    q, k, rho, claim_obj, user = claim_source((sampler, None), (dist, q_dist, k_dist, rho), claim)
    clock = PilotClock(max_seconds, len(dks))
    if user is not None:
        rows, interrupted = collect(lambda d: sampler_row(user, d, seed, target, clock), dks)
        source = user.target
    else:

        def make(d: int) -> PlanRow:
            th = dot_product_theory(d, q, k, rho)  # type: ignore[arg-type]
            return builtin_row(q, k, th, seed, target, clock)  # type: ignore[arg-type]

        rows, interrupted = collect(make, dks)
        source = q.spec if q.spec == k.spec else f"{q.spec} × {k.spec}"  # type: ignore[union-attr]
    return PlanResult(
        rows=tuple(rows),
        interrupted=interrupted,
        claim=claim_obj.text,
        source=source,
        sampler=user is not None,
        seed=seed,
        **target,
    )


def _kernel_plan(
    kernel: str,
    options: Mapping[str, Any] | None,
    dks: list[int],
    seed: int,
    max_seconds: float | None,
    claim: Any,
    sampler: Any,
    wanted: tuple[Any, ...],
) -> PlanResult:
    """The calls ``varcheck probe KERNEL`` needs at each d_k: each head one test, at α over
    heads × rows."""
    import os
    from types import SimpleNamespace

    from .probe_claims import parse_probe, probe_command

    if claim is not None or sampler is not None:
        raise VarcheckError("a kernel's plan takes expect (in probe_options), not claim or sampler")
    table = {**dict(options or {}), "probe": kernel}
    pc = parse_probe(table, os.getcwd(), tuple(dks))
    assert pc is not None  # a table with "probe" is a probe claim
    heads = probe_design(pc, dks[0]).heads
    target = make_target(len(dks) * heads, *wanted)
    clock = PilotClock(max_seconds, len(dks))
    rows, interrupted = collect(lambda d: kernel_row(pc, d, seed, target, clock), dks)
    samples = max(row.samples for row in rows)
    planned = SimpleNamespace(
        dk=",".join(str(row.dk) for row in rows),
        tolerance=target["tolerance"],
        precision=0.01,  # probe's default: not shown
        confidence=1.0 - target["alpha"],
        seed="S",
    )
    command = probe_command(pc, planned, "")  # type: ignore[arg-type]
    return PlanResult(
        rows=tuple(rows),
        interrupted=interrupted,
        claim=pc.expect.text,
        source=pc.kernel.label,
        sampler=False,
        seed=seed,
        kernel=True,
        run_command=command.replace(" --seed S", f" --samples {samples} --seed S"),
        **target,
    )


def collect(make: Callable[[Any], PlanRow], items: list[Any]) -> tuple[list[PlanRow], bool]:
    """Each item's row; on Ctrl-C or SIGTERM after the first, the rows planned so far."""
    rows: list[PlanRow] = []
    try:
        for item in items:
            rows.append(make(item))
    except KeyboardInterrupt:
        if not rows:
            raise
        return rows, True
    return rows, False


def make_target(
    family: int,
    detect: float | None,
    power: float,
    tolerance: float | None,
    confidence: float | None,
    alpha: float | None,
) -> dict[str, Any]:
    """The plan's target, checked: ``detect``, ``power``, ``alpha``, ``family``, ``tolerance``."""
    tolerance = valid_tolerance(tolerance)
    if tolerance is None:
        if detect is None:
            raise VarcheckError("give the error to detect (detect=0.03), or a tolerance")
        detect = _in_range("detect", detect, DETECT_RANGE)
    elif detect is not None:
        detect = _in_range("detect", detect, DETECT_RANGE)
    level = round(1.0 - confidence_from(confidence, alpha), 12)
    power = _in_range("power", power, POWER_RANGE)
    return {
        "detect": detect,
        "power": power,
        "alpha": level,
        "family": family,
        "tolerance": tolerance,
    }


def row_from_pilot(
    pilot: estimation.VarianceEstimate | Pilot,
    dk: int,
    seconds: float,
    floors: dict[str, int],
    target: dict[str, Any],
    unit: str = "products",
) -> PlanRow:
    """The planned row from a pilot's estimate: the blocks ``target`` needs, then ``floors``.

    ``target`` holds ``detect``, ``power``, ``alpha``, ``family`` and ``tolerance``;
    ``floors`` the samples each floor asks for, by name. The pilot's blocks must be the size the
    planned run will use.
    """
    spread = pilot.se * math.sqrt(pilot.blocks) / pilot.var if pilot.var > 0 else math.inf
    if not math.isfinite(spread):
        raise VarcheckError("the pilot's estimate is not positive: no plan can be made")
    tol = target["tolerance"]
    blocks, factor = planned_blocks(
        spread,
        detect=target["detect"] or 0.0,
        skewness=pilot.skewness,
        pilot_blocks=pilot.blocks,
        alpha=target["alpha"],
        power=target["power"],
        family=1 if tol is not None else target["family"],
        tolerance=tol,
    )
    per_block = pilot.samples / pilot.blocks
    need = {"power": int(math.ceil(blocks * per_block)), **floors}
    floor = max(need, key=lambda name: need[name])
    samples = need[floor]
    run_blocks = max(int(math.ceil(samples / per_block)), 2)
    r = spread / math.sqrt(run_blocks)
    kw = {"blocks": run_blocks, "skewness": pilot.skewness, "alpha": target["alpha"]}
    det = detectable_error(1.0, r, power=target["power"], family=target["family"], **kw)
    at_claim = None if tol is None else tost_power(1.0, r, tolerance=tol, **kw)
    # the relative half-width at the run's level of the blocks the target needs (no floor)
    width = estimation.t_quantile(1.0 - target["alpha"], blocks - 1) * spread / math.sqrt(blocks)
    return PlanRow(
        dk=dk,
        samples=samples,
        blocks=run_blocks,
        seconds=seconds / pilot.blocks * run_blocks,
        detectable_error=det.error,
        power_at_claim=at_claim,
        floor=floor,
        spread=spread,
        skewness=pilot.skewness,
        pilot_samples=pilot.samples,
        pilot_blocks=pilot.blocks,
        inflation=factor,
        precision=width,
        unit=unit,
    )


def builtin_row(
    q: Distribution,
    k: Distribution,
    th: DotProductTheory,
    seed: int,
    target: dict[str, Any],
    clock: PilotClock,
    stream: tuple[int, ...] | None = None,
) -> PlanRow:
    """Pilot at the block side the planned budget will use; again if the plan changes side."""
    need = estimation.minimum_products(q, k, th)
    if not math.isfinite(need):
        raise VarcheckError(
            f"no valid interval exists for these laws at d_k={th.dk} (infinite moments): "
            "nothing to plan"
        )
    factor = estimation.NONZERO_MEAN_BLOCK_FACTOR if (q.mean or k.mean) else 1.0
    budget = max(MIN_SAMPLES, int(need))
    share = clock.share()
    stop = time.perf_counter() + share
    for _ in range(4):
        side = estimation._default_plan(q, k, th, budget, None).side
        pilot_n = int(max(MIN_SAMPLES, estimation.MIN_BLOCKS * side * side * factor))
        if pilot_n * th.dk > MAX_PILOT_WORK:
            raise VarcheckError(
                f"the pilot for this plan at d_k={th.dk} would draw {pilot_n:,} products: "
                "ask for a larger error to detect (e.g. 0.01)"
            )
        start = time.perf_counter()
        pilot = estimation.estimate_variance(
            q,
            k,
            th,
            seed=seed,
            stream=stream or (PLAN_STREAM, th.dk),
            samples=pilot_n,
            max_seconds=max(stop - start, 1e-3),
        )
        seconds = time.perf_counter() - start
        clock.enough(pilot.blocks, th.dk, share)
        per_block = pilot.samples / pilot.blocks
        floors = {
            "budget rule": int(need),
            f"{MIN_SAMPLES} samples": MIN_SAMPLES,
            f"{estimation.MIN_BLOCKS} blocks": int(estimation.MIN_BLOCKS * per_block),
        }
        row = row_from_pilot(pilot, th.dk, seconds, floors, target)
        if estimation._default_plan(q, k, th, row.samples, None).side == side:
            break
        budget = row.samples
    clock.done()
    return row


def sampler_row(
    user: UserSampler,
    dk: int,
    seed: int,
    target: dict[str, Any],
    clock: PilotClock,
    stream: tuple[int, ...] | None = None,
) -> PlanRow:
    """Pilot of ``MIN_BLOCKS`` calls (a call is a block), stopped at its share of the cap."""
    from ..core.sampler_blocks import estimate_sampler

    share = clock.share()
    start = time.perf_counter()
    pilot = estimate_sampler(
        user,
        dk,
        seed=seed,
        stream=stream or (PLAN_STREAM, dk),
        name=user.target,
        samples=estimation.MIN_BLOCKS,
        precision=None,
        max_seconds=max(share, 1e-3),
    )
    seconds = time.perf_counter() - start
    clock.enough(pilot.blocks, dk, share)
    per_call = pilot.samples / pilot.blocks
    floors = {
        f"{estimation.MIN_BLOCKS} blocks": int(estimation.MIN_BLOCKS * per_call),
        f"{MIN_SAMPLES} samples": MIN_SAMPLES,
    }
    clock.done()
    return row_from_pilot(pilot, dk, seconds, floors, target, unit="values")


def probe_design(pc: Any, dk: int) -> Any:
    """The design ``varcheck probe`` draws for a probe claim at ``dk``."""
    from ..core.probe import judge

    return judge.design(
        dk, pc.queries, pc.keys, pc.heads, None, pc.layout, pc.dtype, pc.out_layout, pc.kv_heads
    )


def kernel_row(
    pc: Any,
    dk: int,
    seed: int,
    target: dict[str, Any],
    clock: PilotClock,
    stream: tuple[int, ...] | None = None,
) -> PlanRow:
    """Pilot of ``MIN_BLOCKS`` calls of a kernel (``varcheck probe``'s measurement, from a seed
    of the plan's own); the row is its weakest head's (each head is one test)."""
    import numpy as np

    from ..core.probe import budget
    from ..core.probe.measure import measure

    design = probe_design(pc, dk)
    if budget.tail_exponent(design.queries, design.keys, dk) < budget.MIN_TAIL:
        raise VarcheckError(
            f"{design.queries} queries and {design.keys} keys at d_k={dk} give no valid interval "
            "at any number of calls (varcheck probe names a design that does): nothing to plan"
        )
    key = stream or (PLAN_STREAM, dk)
    pilot_seed = int(np.random.SeedSequence(seed, spawn_key=key).generate_state(1)[0])
    share = clock.share()
    start = time.perf_counter()
    m = measure(
        pc.kernel,
        design,
        expected=pc.expect.value(dk, pc.law_heads),
        seed=pilot_seed,
        confidence=1.0 - target["alpha"],
        precision=None,
        calls=estimation.MIN_BLOCKS,
        max_seconds=max(share, 1e-3),
    )
    seconds = time.perf_counter() - start
    clock.enough(m.blocks, dk, share)
    floors = {f"{estimation.MIN_BLOCKS} calls": estimation.MIN_BLOCKS}
    rows = [
        row_from_pilot(
            Pilot(h.scale, h.se, h.skewness, h.blocks, h.blocks),
            dk,
            seconds,
            floors,
            target,
            unit="calls",
        )
        for h in m.heads
    ]
    clock.done()
    return max(rows, key=lambda r: (r.samples, r.detectable_error))
