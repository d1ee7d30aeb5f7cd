"""The next step after a non-pass outcome: the cause the run established and the command to run.

Every command that can reject, fail, leave a claim unsettled or find no valid interval ends with
one such line (``next: CAUSE; run: COMMAND``), and every machine format carries the same text
under :data:`NEXT_STEP_KEY`. The commands decide which case applies and build the command
lines; this module is the one place the sentences are written, so that the same cause reads
the same in ``sweep``, ``assert``, ``check`` and ``probe``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "NEXT_STEP_KEY",
    "NextStep",
    "command_lines",
    "theory_differs",
    "chance_rejection",
    "too_few",
    "unsettled",
    "seconds_needed",
    "time_capped",
    "no_fourth_moment",
    "extreme_kurtosis",
    "infinite_variance",
    "interrupted",
    "variance_law",
]

#: The key of the next step in every JSON document, CSV and Markdown row.
NEXT_STEP_KEY = "next_step"


@dataclass(frozen=True)
class NextStep:
    """What to do after a non-pass outcome.

    Attributes
    ----------
    cause : str
        The one cause the run established, in a clause.
    command : str or None
        The command to run next (``None`` when there is none to give).
    """

    cause: str
    command: str | None = None

    def __str__(self) -> str:
        return self.cause + ("" if self.command is None else f"; run: {self.command}")

    @property
    def lines(self) -> list[str]:
        """The (at most two) lines a table ends with: the cause, then the command to copy."""
        head = [f"next: {self.cause}"]
        return head if self.command is None else [*head, f"  run: {self.command}"]


def command_lines(line: str, width: int) -> list[str]:
    r"""A line ending in a shell command, cut at spaces outside quotes into lines of at most
    ``width`` columns that each end in `` \`` but the last, so that pasted whole it still runs.

    An option stays with its value; continuations are indented two columns past the line's own
    indent; a piece longer than the width stays whole.

    Examples
    --------
    >>> command_lines("  run: varcheck derive --dk 16 --dist 'normal:mean=0.5'", 40)
    ['  run: varcheck derive --dk 16 \\', "    --dist 'normal:mean=0.5'"]
    """
    indent = line[: len(line) - len(line.lstrip(" "))]
    words, word, quote = [], "", ""
    for ch in line.strip(" "):
        if ch == " " and not quote:
            words.append(word)
            word = ""
            continue
        if ch in "'\"" and quote in ("", ch):
            quote = "" if quote else ch
        word += ch
    words.append(word)
    pieces: list[str] = []
    for w in words:
        if pieces and pieces[-1].startswith("--") and " " not in pieces[-1] and w[:1] != "-":
            pieces[-1] += f" {w}"
        else:
            pieces.append(w)
    out = [indent + pieces[0]]
    for piece in pieces[1:]:
        if len(out[-1]) + 1 + len(piece) + 2 <= width:
            out[-1] += f" {piece}"
        else:
            out[-1] += " \\"
            out.append(f"{indent}  {piece}")
    return out


def _value(x: float) -> str:
    """A value as a claim can be typed: 24, 0.5, 1.5e+03 (six significant digits)."""
    return f"{x:.6g}"


def theory_differs(theory: float, dk: int, claim: str, derive: str) -> NextStep:
    """A claim rejected where the exact theory says otherwise: the theory's value, the option
    that tests it, and ``derive`` (the command) for which assumption of the claim breaks."""
    return NextStep(
        f"exact theory {_value(theory)} at d_k = {dk}, not {claim}; --claim theory tests it; why",
        derive,
    )


def chance_rejection(alpha: float, rerun: str) -> NextStep:
    """The exact theory itself rejected: a chance the test allows (``rerun`` at another seed),
    or a real discrepancy when it persists."""
    return NextStep(
        f"the exact theory is rejected by chance with probability ≤ {alpha:.3g}; "
        "if another seed rejects it, report it",
        rerun,
    )


def too_few(needed: int, unit: str, rerun: str | None) -> NextStep:
    """A fixed budget below what a valid interval needs; ``rerun`` draws ``needed``."""
    return NextStep(f"too few {unit} for a valid interval: {needed:,} needed", rerun)


def unsettled(more: int, unit: str, rerun: str | None) -> NextStep:
    """An inconclusive claim: about ``more`` further draws would settle it (``rerun`` draws them
    with the ones already made)."""
    return NextStep(f"undecided: about {more:,} more {unit} would settle it", rerun)


def seconds_needed(blocks: int, min_blocks: int, seconds: float) -> float:
    """The time cap at which a row that drew ``blocks`` in ``seconds`` reaches ``min_blocks``,
    with a fifth to spare, rounded up to a tenth of a second."""
    return math.ceil(seconds * min_blocks / max(blocks, 1) * 1.2 * 10) / 10


def time_capped(
    blocks: int, min_blocks: int, need: float | None, rerun: str, dk: int | None = None
) -> NextStep:
    """A row (at ``dk``, when there are several) stopped by its time cap before the blocks a
    valid interval needs; ``need`` the seconds it would take (:func:`seconds_needed`), ``None``
    when unknown."""
    what = "it" if dk is None else f"d_k = {dk}"
    cause = f"--max-seconds stopped {what} at {blocks} of {min_blocks} blocks"
    if need is not None:
        cause += f"; needs about {need:g} s"
    return NextStep(cause, rerun)


def no_fourth_moment(law: str, derive: str) -> NextStep:
    """E[(q·k)^4] infinite: no run gives a valid interval; the exact value is derived."""
    return NextStep(
        f"E[(q·k)^4] is infinite for {law}, so no budget gives a valid interval", derive
    )


def extreme_kurtosis(kurtosis: float, derive: str) -> NextStep:
    """The kurtosis of q·k above what any affordable run handles."""
    return NextStep(
        f"the kurtosis of q·k is {kurtosis:.3g}: no affordable run gives a valid interval",
        derive,
    )


def infinite_variance(law: str, derive: str) -> NextStep:
    """Var(q·k) infinite: nothing to estimate."""
    return NextStep(f"Var(q·k) is infinite for {law}: there is nothing to estimate", derive)


def interrupted(rerun: str | None) -> NextStep:
    """A run stopped by a signal: the same command, run to its end."""
    return NextStep("interrupted before its target: rerun it whole", rerun)


def variance_law(ratio: float, law: str | None, command: str) -> NextStep:
    """A sampler whose variance is off the claim: the ratio, the law it reads as, and the
    command that tests this claim alone."""
    reads = f": {law}" if law else ""
    if not math.isfinite(ratio):  # a claim of 0
        return NextStep(f"the variance differs from the claim{reads}", command)
    return NextStep(f"variance × {ratio:.4g} the claim{reads}", command)
