"""The pilots behind a plan: a short run per row, its time share, and the row it gives.

Used by :mod:`.plan` (one d_k or a range, a sampler, a kernel) and :mod:`.plan_file` (every
claim of a file); the derivation is in docs/power.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core import estimation
from ..core.distributions import Distribution
from ..core.options import (
    MIN_SAMPLES,
    confidence_from,
    valid_positive,
    valid_tolerance,
)
from ..core.power import detectable_error, planned_blocks, tost_power
from ..core.theory import DotProductTheory
from ..core.user_code import UserSampler
from ..errors import VarcheckError
from .plan_result import PlanRow

__all__ = [
    "row_from_pilot",
    "Pilot",
    "PilotClock",
    "PLAN_STREAM",
    "MAX_PILOT_WORK",
    "PILOT_SECONDS",
    "MIN_PILOT_BLOCKS",
    "collect",
    "make_target",
    "builtin_row",
    "sampler_row",
    "probe_design",
    "kernel_row",
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
