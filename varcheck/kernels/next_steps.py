"""Which next step a probe calls for: the law its scale reads as and the probe to run next.

The sentences are :mod:`varcheck.core.next_step`'s; this module picks the case from a
:class:`~varcheck.kernels.probe.ProbeResult` and builds the ``varcheck probe`` line.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..core import next_step as steps
from ..core.next_step import NextStep
from ..core.probe.laws import LAWS
from ..core.verdicts import FAIL, INCONCLUSIVE, PASS
from .commands import reproduce_command

if TYPE_CHECKING:
    from .probe import ProbeResult, ProbeSweepResult

__all__ = ["probe_step", "probe_sweep_step"]

#: The laws a user can name with --expect (the token laws 1/√n, 1/√m cannot be).
_EXPECTABLE = frozenset(label for label, _, _ in LAWS)


def probe_step(result: ProbeResult, dks: str | None = None) -> NextStep | None:
    """The next step one probed d_k calls for (``None`` for a pass); ``dks`` the run's d_k,
    for the rerun command of a probe over several (a kernel passed as a function, not by
    name, has no command: the step gives its cause alone)."""
    if result.outcome == PASS and not result.interrupted:
        return None
    if result.interrupted:
        return steps.interrupted(reproduce_command(result, dks))
    if result.outcome == FAIL:
        return _failed(result, dks)
    if result.outcome == INCONCLUSIVE and result.more_calls:
        total = result.calls + result.more_calls
        rerun = reproduce_command(result, dks, samples=total)
        return steps.unsettled(result.more_calls, "calls", rerun)
    if result.min_samples is not None:
        rerun = reproduce_command(result, dks, samples=result.min_samples)
        return steps.too_few(result.min_samples, "calls", rerun)
    return None


def _failed(result: ProbeResult, dks: str | None) -> NextStep:
    """A scale off the expected one: the law it reads as, and the probe that confirms it (the
    token count changed, the law as --expect, or more d_k to tell a power from a constant)."""
    law = result.law
    said = law.law + ("" if law.factor_label in ("1", "—") else f" × {law.factor_label}")
    expect = _expectable(law.law, law.factor_label)
    if law.law in ("1/sqrt(n)", "1/sqrt(m)"):
        option, letter = ("queries", "n") if law.law == "1/sqrt(n)" else ("keys", "m")
        count = getattr(result, option)
        cause = (
            f"scale is 1/√{letter} ({letter} = {count} {option}), not 1/√d_k; --{option} moves it"
        )
        rerun = reproduce_command(result, dks, **{option: 2 * count})
    elif expect is not None:
        cause = f"scale reads as {said}; if intended, test --expect {expect}"
        rerun = reproduce_command(result, dks, expect=expect)
    elif dks is None:
        cause = f"scale reads as {said}; more d_k tell a power of d_k from a constant"
        more = sorted({max(1, result.dk // 4), result.dk, result.dk * 4})
        rerun = reproduce_command(result, ",".join(map(str, more)))
    else:
        return NextStep(f"scale reads as {said}: fix the kernel's scale")
    return NextStep(cause, rerun)


def _expectable(law: str, factor: str) -> str | None:
    """The --expect expression of a law and a whole or fractional factor (``1/3/sqrt(dk)``),
    or ``None`` (a token law, or a factor such as 1/√2 that --expect is not given here)."""
    if law not in _EXPECTABLE:
        return None
    if factor == "1":
        return law
    if re.fullmatch(r"\d+(/\d+)?", factor) and law == "1/sqrt(dk)":
        return f"{factor}/sqrt(dk)"
    return None


def probe_sweep_step(result: ProbeSweepResult) -> NextStep | None:
    """A probe's one next step: its worst d_k's."""
    dks = None if len(result.rows) == 1 else ",".join(str(r.dk) for r in result.rows)
    worst = next((r for r in result.rows if r.outcome == result.outcome), result.rows[0])
    return probe_step(worst, dks)
