"""Which next step a ``varcheck project`` run calls for, and the command that reruns it.

The sentences are :mod:`varcheck.core.next_step`'s: a setting short of the blocks a valid
interval needs is given the ``--blocks`` that suffices; a rejected check row (a prediction
derived to be exact) is a chance the test allows, or a discrepancy when another seed rejects
it too; an interrupted run is rerun whole. Finding rows, rejected by design, call for nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import next_step as steps
from ..core.next_step import NextStep

if TYPE_CHECKING:
    from .projection import ProjectionResult

__all__ = ["project_command", "project_step"]


def project_command(
    result: ProjectionResult, *, blocks: int | None = None, seed: int | None = None
) -> str:
    """The ``varcheck project`` line that reruns a run (its non-default options); ``blocks``
    (a fixed budget, in place of the precision) or ``seed`` replace the run's own."""
    parts = ["varcheck project", f"--dx {result.dx}", f"--dk {result.dk}"]
    if result.init != "xavier":
        parts.append(f"--init {result.init}")
    if result.x.dist.spec != "normal":
        parts.append(f"--x-dist {result.x.dist.spec}")
    if result.x.sigma != result.x.dist.sd:
        parts.append(f"--sigma-x {result.x.sigma:g}")
    if not any(s.name in ("aligned", "rank-one") for s in result.sections):
        parts.append("--no-constructed")
    if result.tokens != 16:
        parts.append(f"--tokens {result.tokens}")
    given = blocks if blocks is not None else result.blocks
    if given is not None:
        parts.append(f"--blocks {given}")
    elif result.precision is not None and result.precision != 0.02:
        parts.append(f"--precision {result.precision:g}")
    if result.confidence != 0.95:
        parts.append(f"--confidence {result.confidence:g}")
    parts.append(f"--seed {result.seed if seed is None else seed}")
    return " ".join(parts)


def project_step(result: ProjectionResult) -> NextStep | None:
    """The run's next step, or ``None`` when every check row is consistent."""
    if result.interrupted:
        return steps.interrupted(project_command(result))
    if result.rejected_checks:
        return steps.chance_rejection(result.alpha, project_command(result, seed=result.seed + 1))
    needs = [r.min_blocks for r in result.rows if r.min_blocks is not None]
    if needs:
        need = max(needs)
        return steps.too_few(need, "blocks", project_command(result, blocks=need))
    return None
