"""Size a run before it is put into CI: the samples each row needs to catch an error with a power.

A short pilot per row, drawn from a stream of its own, measures one block's relative spread and
skewness; :func:`varcheck.core.power.planned_blocks` turns them into blocks, and the floors every
run has (the budget rule, ``MIN_BLOCKS`` blocks, the ``--samples`` minimum) apply on top. The
derivation and the simulations that check a planned run's power are in docs/power.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ..core import estimation
from ..core.distributions import Distribution
from ..core.options import MIN_SAMPLES, confidence_from, resolve_seed, valid_tolerance
from ..core.power import DEFAULT_POWER, detectable_error, planned_blocks, tost_power
from ..core.ranges import resolve_dks
from ..core.theory import DotProductTheory, dot_product_theory
from ..core.user_code import UserSampler
from ..errors import VarcheckError
from .plan_result import PlanResult, PlanRow
from .verify import claim_source

__all__ = ["plan", "row_from_pilot", "PLAN_STREAM", "MAX_PILOT_WORK"]

#: Spawn key of the pilots: a run with the same seed never reuses a pilot's draws.
PLAN_STREAM = 2**31 - 3

#: The most multiply-adds (products × d_k) a built-in pilot may take: plan's own time stays
#: within seconds (a smaller error needs larger blocks, and so a larger pilot).
MAX_PILOT_WORK = 4 * 10**8

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


def plan(
    dk: int | str,
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
    confidence: float | None = None,
    alpha: float | None = None,
    seed: int | None = None,
) -> PlanResult:
    """How many samples each row of a run needs to detect ``detect`` with probability ``power``.

    Parameters
    ----------
    dk : int or str
        One d_k (as for ``assert``) or a range (as for ``sweep``: every row is planned at
        α / rows, its share of the Holm family).
    claim : str or float, optional
        The claim the run will test (as in :func:`varcheck.verify`; required with a sampler).
    detect : float
        The relative error of the truth from the claim the run must catch, both ways.
    power : float
        The probability of catching it (default 0.9).
    tolerance : float, optional
        Plan a tolerance claim instead: a true claim passes with probability ``power``.
    sampler, dist, q_dist, k_dist, rho
        The values' source, as in :func:`varcheck.verify`.
    confidence, alpha : float, optional
        The run's level (give one; default 0.95).
    seed : int, optional
        Root seed of the pilots (drawn and reported when not given).

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
    dks = resolve_dks(dk)
    target = _target(len(dks), detect, power, tolerance, confidence, alpha)
    q, k, rho, claim_obj, user = claim_source((sampler, None), (dist, q_dist, k_dist, rho), claim)
    seed = resolve_seed(seed)
    if user is not None:
        rows, interrupted = _rows(lambda d: _sampler_row(user, d, seed, target), dks)
        source = user.target
    else:

        def make(d: int) -> PlanRow:
            return _builtin_row(q, k, dot_product_theory(d, q, k, rho), seed, target)  # type: ignore[arg-type]

        rows, interrupted = _rows(make, dks)
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


def _rows(make: Callable[[int], PlanRow], dks: list[int]) -> tuple[list[PlanRow], bool]:
    """Each d_k's row; on Ctrl-C or SIGTERM after the first, the rows planned so far."""
    rows: list[PlanRow] = []
    try:
        for d in dks:
            rows.append(make(d))
    except KeyboardInterrupt:
        if not rows:
            raise
        return rows, True
    return rows, False


def _target(
    rows: int,
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
    elif rows > 1:
        raise VarcheckError(
            f"a tolerance plan takes one d_k, got {rows} (a tolerance is tested one claim "
            "at a time: plan each d_k)"
        )
    level = round(1.0 - confidence_from(confidence, alpha), 12)
    power = _in_range("power", power, POWER_RANGE)
    return {
        "detect": detect,
        "power": power,
        "alpha": level,
        "family": rows,
        "tolerance": tolerance,
    }


def row_from_pilot(
    pilot: estimation.VarianceEstimate,
    dk: int,
    seconds: float,
    floors: dict[str, int],
    target: dict[str, Any],
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
    )


def _builtin_row(
    q: Distribution, k: Distribution, th: DotProductTheory, seed: int, target: dict[str, Any]
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
            q, k, th, seed=seed, stream=(PLAN_STREAM, th.dk), samples=pilot_n
        )
        seconds = time.perf_counter() - start
        per_block = pilot.samples / pilot.blocks
        floors = {
            "budget rule": int(need),
            f"{MIN_SAMPLES} samples": MIN_SAMPLES,
            f"{estimation.MIN_BLOCKS} blocks": int(estimation.MIN_BLOCKS * per_block),
        }
        row = row_from_pilot(pilot, th.dk, seconds, floors, target)
        if estimation._default_plan(q, k, th, row.samples, None).side == side:
            return row
        budget = row.samples
    return row


def _sampler_row(user: UserSampler, dk: int, seed: int, target: dict[str, Any]) -> PlanRow:
    """Pilot of ``MIN_BLOCKS`` calls: a call is a block."""
    from ..core.sampler_blocks import estimate_sampler

    start = time.perf_counter()
    pilot = estimate_sampler(
        user,
        dk,
        seed=seed,
        stream=(PLAN_STREAM, dk),
        name=user.target,
        samples=estimation.MIN_BLOCKS,
        precision=None,
    )
    seconds = time.perf_counter() - start
    per_call = pilot.samples / pilot.blocks
    floors = {
        f"{estimation.MIN_BLOCKS} blocks": int(estimation.MIN_BLOCKS * per_call),
        f"{MIN_SAMPLES} samples": MIN_SAMPLES,
    }
    return row_from_pilot(pilot, dk, seconds, floors, target)
