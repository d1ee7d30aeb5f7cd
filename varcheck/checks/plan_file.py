"""``varcheck check FILE --plan``: the size each claim of a claim file needs, one row per test.

Every (claim, d_k) of the file is planned as :mod:`.plan` plans a row of its kind (built-in
laws, a sampler, a kernel's scale), each at α/m with m the tests the file's Holm family adjusts
over (a probe claim's heads count one each), and a claim's own ``tolerance`` planned as a
tolerance (a true claim passes with the plan's power). The pilots share one time cap.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from ..core.options import confidence_from, resolve_seed
from ..core.power import DEFAULT_POWER
from ..core.theory import dot_product_theory
from ..errors import VarcheckError
from .claim_file import CheckFile, ClaimSpec, load_check_file
from .pilots import (
    PLAN_STREAM,
    PilotClock,
    builtin_row,
    collect,
    kernel_row,
    make_target,
    probe_design,
    sampler_row,
)
from .plan_result import PlanResult, PlanRow

__all__ = ["plan_file"]


def plan_file(
    source: str | os.PathLike[str] | CheckFile,
    *,
    detect: float | None,
    power: float = DEFAULT_POWER,
    confidence: float | None = None,
    alpha: float | None = None,
    seed: int | None = None,
    max_seconds: float | None = None,
) -> PlanResult:
    """Plan every claim of a claim file: one row per (claim, d_k), each at its share of the
    file's Holm family.

    Parameters
    ----------
    source : str, path or CheckFile
        The claim file.
    detect : float or None
        The relative error each test must catch, both ways (a probe claim's: of its scale);
        may be left out when every claim has a tolerance.
    power : float
        The probability of catching it, or for a tolerance claim of a true claim passing.
    confidence, alpha : float, optional
        The run's level (default the file's).
    seed : int, optional
        Root seed of the pilots (default the file's; drawn when neither gives one).
    max_seconds : float, optional
        The pilots' wall-time cap, all rows together (default
        :data:`~varcheck.checks.plan.PILOT_SECONDS`).
    """
    spec_file = source if isinstance(source, CheckFile) else load_check_file(source)
    if confidence is None and alpha is None:
        confidence = spec_file.confidence
    tests = [(ci, spec, dk) for ci, spec in enumerate(spec_file.claims) for dk in spec.dks]
    family = sum(probe_design(s.probe, dk).heads if s.probe else 1 for _, s, dk in tests)
    if detect is None and any(s.tolerance is None for _, s, _ in tests):
        raise VarcheckError(
            "give the error to detect (--detect 0.03): the file has claims without a tolerance"
        )
    target = make_target(family, detect, power, None, confidence_from(confidence, alpha), None)
    seed = resolve_seed(spec_file.seed if seed is None else seed)
    clock = PilotClock(max_seconds, len(tests))

    def make(test: tuple[int, ClaimSpec, int]) -> PlanRow:
        ci, spec, dk = test
        try:
            row = _row(spec, dk, seed, {**target, "tolerance": spec.tolerance}, clock, ci)
        except VarcheckError as exc:
            raise VarcheckError(f"claim {spec.name!r} at d_k={dk}: {exc}") from None
        return replace(row, name=spec.name)

    rows, interrupted = collect(make, tests)
    result = PlanResult(
        rows=tuple(rows),
        interrupted=interrupted,
        claim="each claim of the file",
        source=os.path.basename(spec_file.path),
        sampler=any(s.sampler is not None for s in spec_file.claims),
        seed=seed,
        file=spec_file.path,
        **target,
    )
    return replace(result, notes=_cut_short(result, spec_file.max_seconds))


def _cut_short(result: PlanResult, max_seconds: float | None) -> tuple[str, ...]:
    """A note when the file's own ``max_seconds`` (per test) would stop planned tests short of
    their size, and so of their power (from the pilots' pace: an estimate)."""
    if max_seconds is None:
        return ()
    late = [
        row
        for row in result.rows
        if row.seconds * (result.samples / row.samples if result.shares_budget(row) else 1.0)
        > max_seconds
    ]
    if not late:
        return ()
    names = ", ".join(f"{row.name} at d_k={row.dk}" for row in late[:3])
    more = f" and {len(late) - 3} more" if len(late) > 3 else ""
    return (
        f"the file's max_seconds ({max_seconds:g} s a test) would stop {len(late)} planned "
        f"test(s) short of their size, and of their power ({names}{more}): raise it",
    )


def _row(
    spec: ClaimSpec, dk: int, seed: int, target: dict[str, Any], clock: PilotClock, ci: int
) -> PlanRow:
    """The row of one test: its pilot drawn from a stream of the plan's, the claim's and d_k's."""
    stream = (PLAN_STREAM, ci, dk)
    if spec.probe is not None:
        return kernel_row(spec.probe, dk, seed, target, clock, stream)
    if spec.sampler is not None:
        return sampler_row(spec.sampler, dk, seed, target, clock, stream)
    th = dot_product_theory(dk, spec.q, spec.k, spec.rho)  # type: ignore[arg-type]
    return builtin_row(spec.q, spec.k, th, seed, target, clock, stream)  # type: ignore[arg-type]
