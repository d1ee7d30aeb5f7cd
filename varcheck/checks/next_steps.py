"""Which next step a sweep row, a claim test or a claim file's claim calls for.

Each function reads the facts a result holds (its verdict, its theory, why it has no interval)
and picks the one case of :mod:`varcheck.core.next_step` that applies, with the command that
follows from it (:mod:`varcheck.checks.commands`). ``None`` for a pass.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from ..core import next_step as steps
from ..core.estimation import MIN_BLOCKS
from ..core.next_step import NextStep
from ..core.verdicts import CONSISTENT, FAIL, INCONCLUSIVE, INFINITE, PASS, REJECTED
from .commands import derive_command, reproduce_command, sweep_command

if TYPE_CHECKING:
    from .claim_file import CheckResult, ClaimOutcome
    from .sweep import SweepResult, SweepRow
    from .verify import VerifyResult

__all__ = ["sweep_row_step", "sweep_step", "verify_step", "claim_step", "check_row_step"]


def _law(result: Any) -> str:
    """The entry laws in a few words: ``t:df=3``, or ``q ~ A, k ~ B``."""
    q, k = result.q_dist.spec, result.k_dist.spec
    return q if q == k else f"q ~ {q}, k ~ {k}"


def _no_interval(result: Any, theory: Any, dk: int) -> NextStep | None:
    """Why the theory says no interval is valid at any budget, if it does."""
    if theory is None:
        return None
    if theory.status == "infinite-fourth-moment":
        return steps.no_fourth_moment(_law(result), derive_command(result, dk))
    if theory.status == "extreme-kurtosis":
        return steps.extreme_kurtosis(theory.kurtosis, derive_command(result, dk))
    return None


def _differs(claimed: float | None, exact: float | None) -> bool:
    if claimed is None or exact is None or not math.isfinite(exact):
        return False
    return not math.isclose(claimed, exact, rel_tol=1e-9, abs_tol=1e-12)


def sweep_row_step(result: SweepResult, row: SweepRow) -> NextStep | None:
    """The next step a sweep row calls for (``None`` when consistent)."""
    est = row.estimate
    if row.verdict == CONSISTENT:
        return None
    if row.verdict == INFINITE:
        return steps.infinite_variance(_law(result), derive_command(result, row.dk))
    if row.verdict == REJECTED:
        return _sweep_rejected(result, row)
    if row.min_samples is not None:
        unit = "products" if result.sampler is None else "values"
        return steps.too_few(row.min_samples, unit, sweep_command(result, samples=row.min_samples))
    if est is not None and est.cut_short and est.stop_reason == "max-seconds":
        need = (
            None
            if result.max_seconds is None
            else steps.seconds_needed(est.blocks, MIN_BLOCKS, result.max_seconds)
        )
        rerun = sweep_command(result, max_seconds=need)
        return steps.time_capped(est.blocks, MIN_BLOCKS, need, rerun, row.dk)
    if est is not None and est.cut_short:
        return steps.interrupted(sweep_command(result))
    return _no_interval(result, row.theory, row.dk)


def _sweep_rejected(result: SweepResult, row: SweepRow) -> NextStep:
    if result.sampler is not None:
        claimed = row.claim_value or math.nan  # a claim of 0 has no ratio
        ratio = row.estimate.var / claimed  # type: ignore[union-attr]
        lo, hi = (x / claimed for x in row.estimate.confidence_interval)  # type: ignore[union-attr]
        meaning = _scale_meaning(ratio, lo, hi, row.dk)
        return steps.variance_law(ratio, meaning, _sampler_assert(result, row.dk))
    exact = None if row.theory is None else row.theory.var
    if _differs(row.claim_value, exact):
        return steps.theory_differs(
            exact,  # type: ignore[arg-type]
            row.dk,
            result.claim,
            derive_command(result, row.dk),
        )
    return steps.chance_rejection(result.alpha, sweep_command(result, seed=result.seed + 1))


def _sampler_sweep(result: VerifyResult) -> str:
    """The ``varcheck sweep`` line that tests a sampler's claim over d_k around the failing
    one (d_k/4, d_k, 4 d_k), so that a power of d_k shows apart from a constant factor."""
    from .commands import _effort_options, _source_options

    dks = ",".join(map(str, sorted({max(1, result.dk // 4), result.dk, result.dk * 4})))
    claim = f"({result.claim})*dk" if result.scaled else result.claim
    parts = ["varcheck sweep", f"--dk {dks}", *_source_options(result), f"--claim '{claim}'"]
    parts += _effort_options(result.requested_samples, result.precision, result.confidence)
    return " ".join([*parts, f"--seed {result.seed}"])


def _scale_meaning(ratio: float, low: float, high: float, dk: int) -> str | None:
    """What a variance ratio at one d_k (interval ``[low, high]``) amounts to as a scale on
    values the claim takes to be scaled by 1/√d_k: the nearest simple law's meaning (``None``
    for a ratio without one, or one that reads as the standard scale)."""
    from ..core.probe.laws import nearest_law

    if not (ratio > 0 and low > 0 and math.isfinite(high)):
        return None
    scale, lo, hi = (math.sqrt(x / dk) for x in (ratio, low, high))
    law = nearest_law(scale, lo, hi, dk)
    if law.law == "1/sqrt(dk)" and law.factor_label == "1":
        return None
    # the meaning's gist: "no scale: the 1/√d_k is forgotten, times 1.005" → its middle
    return law.meaning.split(": ", 1)[-1].split(", times")[0].split(" (")[0]


def _sampler_assert(result: SweepResult, dk: int) -> str:
    """The ``varcheck assert`` line that tests a sampler sweep's claim at one d_k."""
    from .commands import _effort_options, _source_options

    parts = ["varcheck assert", f"--dk {dk}", *_source_options(result)]
    parts.append(f"--claim '{result.claim}'")
    parts += _effort_options(result.samples, result.precision, result.confidence)
    return " ".join([*parts, f"--seed {result.seed}"])


def sweep_step(result: SweepResult) -> NextStep | None:
    """The sweep's one next step: its worst row's (a rejection first), else the rerun of an
    interrupted run."""
    order = {REJECTED: 0, INFINITE: 1}

    def rank(row: SweepRow) -> tuple[int, int]:
        # among rows cut by the time cap, the one with the fewest blocks needs the most time
        blocks = row.estimate.blocks if row.estimate is not None and row.estimate.cut_short else 0
        return order.get(row.verdict, 2), blocks

    for row in sorted(result.rows, key=rank):
        step = sweep_row_step(result, row)
        if step is not None:
            return step
    return steps.interrupted(sweep_command(result)) if result.interrupted else None


def verify_step(result: VerifyResult, command: str | None = None) -> NextStep | None:
    """The next step one claim test calls for (``None`` for a pass); ``command`` replaces the
    ``varcheck assert`` line that tests this claim alone (a claim file's sampler row)."""
    if result.outcome == PASS and not result.interrupted:
        return None
    if result.interrupted:
        return steps.interrupted(command or reproduce_command(result))
    unit = _unit(result)
    if result.min_samples is not None:
        rerun = reproduce_command(result, samples=result.min_samples)
        return steps.too_few(result.min_samples, unit, rerun)
    if result.outcome == INCONCLUSIVE:
        more = result.more_samples or 3 * result.samples
        total = result.samples + more
        return steps.unsettled(more, unit, reproduce_command(result, samples=total))
    if result.outcome == FAIL:
        return _verify_failed(result, command)
    raw = result.raw
    if raw is not None and raw.cut_short and raw.stop_reason == "max-seconds":
        return steps.time_capped(raw.blocks, MIN_BLOCKS, None, reproduce_command(result))
    if result.sampler is not None:
        return None
    from ..core.theory import dot_product_theory

    theory = dot_product_theory(result.dk, result.q_dist, result.k_dist, result.rho)  # type: ignore[arg-type]
    if result.outcome == INFINITE:
        return steps.infinite_variance(_law(result), derive_command(result, result.dk))
    return _no_interval(result, theory, result.dk)


def _unit(result: VerifyResult) -> str:
    if result.kernel is not None:
        return "calls"
    return "products" if result.sampler is None else "values"


def _verify_failed(result: VerifyResult, command: str | None) -> NextStep:
    """A failed claim: for laws, the exact theory when the claim differs from it; for a
    sampler, the law its variance ratio reads as."""
    if result.sampler is not None:
        claimed = result.claim_value or math.nan  # a claim of 0 has no ratio
        ratio = result.estimate / claimed
        if command is None:
            command = _sampler_sweep(result)
        lo, hi = (x / claimed for x in result.confidence_interval)
        return steps.variance_law(ratio, _scale_meaning(ratio, lo, hi, result.dk), command)
    if _differs(result.claim_value, result.theory_value):
        return steps.theory_differs(
            result.theory_value, result.dk, result.claim, derive_command(result, result.dk)
        )
    alpha = 1.0 - result.confidence
    return steps.chance_rejection(
        alpha,
        command
        or reproduce_command(result).replace(f"--seed {result.seed}", f"--seed {result.seed + 1}"),
    )


def claim_step(result: CheckResult, co: ClaimOutcome) -> NextStep | None:
    """A claim file's claim: the next step of its worst test (:func:`check_row_step`)."""
    from ..core.verdicts import worst

    bad = [r for r in co.results if r.outcome != PASS]
    if not bad:
        return None
    return check_row_step(result, co.spec, worst(bad, key=lambda r: r.outcome))


def check_row_step(result: CheckResult, spec: Any, row: VerifyResult) -> NextStep | None:
    """One test of a claim file, with a command that tests that claim alone: ``varcheck
    probe`` for a kernel (its scale read as the nearest simple law), ``varcheck assert`` for
    a sampler's claim."""
    if spec.probe is not None:
        from .probe_claims import probe_command

        probe = probe_command(spec.probe, row, os.path.dirname(result.path))
        if row.outcome != FAIL:
            return verify_step(row, probe)
        from .probe_claims import probe_reading

        return NextStep(f"scale {probe_reading(spec.probe, row)}", probe)
    command = None if spec.sampler is None else _claim_assert(result, row)
    return verify_step(row, command)


def _claim_assert(result: CheckResult, row: VerifyResult) -> str:
    """The ``varcheck assert`` line for one sampler row of a claim file, its sampler file named
    from the current directory."""
    line = reproduce_command(row)
    target = row.sampler.target  # type: ignore[union-attr]
    path, _, name = target.rpartition(":")
    folder = os.path.dirname(result.path)
    if path.endswith(".py") and not os.path.isabs(path) and folder:
        import shlex

        moved = f"{os.path.join(folder, path)}:{name}"
        line = line.replace(f"--sampler {shlex.quote(target)}", f"--sampler {shlex.quote(moved)}")
    return line
