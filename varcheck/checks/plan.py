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

from collections.abc import Callable, Mapping
from typing import Any

from ..core.distributions import Distribution
from ..core.options import (
    resolve_seed,
)
from ..core.power import DEFAULT_POWER
from ..core.ranges import resolve_dks
from ..core.theory import dot_product_theory
from ..core.user_code import UserSampler
from ..errors import VarcheckError
from .pilots import (
    PilotClock,
    builtin_row,
    collect,
    kernel_row,
    make_target,
    probe_design,
    sampler_row,
)
from .plan_result import PlanResult, PlanRow
from .verify import claim_source

__all__ = ["plan"]


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
