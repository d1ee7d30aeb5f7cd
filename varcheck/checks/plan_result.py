"""What ``varcheck plan`` computes: per row, the samples and seconds a run needs for its target."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._version import __version__
from ..core.verdicts import exit_code
from ..output.display import Displayable

__all__ = ["PlanRow", "PlanResult"]


@dataclass(frozen=True)
class PlanRow:
    """The planned size of one row (one d_k).

    Attributes
    ----------
    dk : int
        The row's d_k.
    samples : int
        The value to pass to ``--samples``: q·k products, or a sampler's values.
    blocks : int
        Independent blocks of the planned run (a sampler's calls).
    seconds : float
        Predicted wall time of the planned run on this machine now (an estimate from the pilot's
        pace, not a bound).
    detectable_error : float
        The relative error the planned run detects with the plan's power, both ways (smaller than
        asked when a floor binds).
    power_at_claim : float or None
        With a tolerance: the probability that a true claim passes the planned run.
    floor : str
        What set the size: ``power``, or the floor that binds (``budget rule``, ``200 blocks``,
        ``1000 samples``).
    spread : float
        The pilot's relative spread of one block, se·√blocks/estimate.
    skewness : float
        The pilot's skewness of the blocks' influence values.
    pilot_samples, pilot_blocks : int
        The pilot's size (drawn from its own stream, not shared with a run of the same seed).
    inflation : float
        The factor for the pilot's own uncertainty (power right on average over pilots).
    precision : float
        The relative half-width (at the run's confidence) of the blocks the target needs,
        floors aside: a run sized by ``--precision`` no larger meets the target too.
    unit : str
        What ``samples`` counts: ``products``, a sampler's ``values`` or a kernel's ``calls``.
    name : str
        The claim's name in a claim file (empty otherwise).
    """

    dk: int
    samples: int
    blocks: int
    seconds: float
    detectable_error: float
    power_at_claim: float | None
    floor: str
    spread: float
    skewness: float
    pilot_samples: int
    pilot_blocks: int
    inflation: float
    precision: float = math.nan
    unit: str = "products"
    name: str = ""


@dataclass(frozen=True, repr=False)
class PlanResult(Displayable):
    """The result of :func:`varcheck.plan`: the size of a run that catches ``detect`` with
    ``power``, per row.

    Attributes
    ----------
    rows : tuple of PlanRow
        One per d_k.
    claim : str
        The claim the run will test.
    source : str
        The entry laws (``normal``...) or the sampler's name.
    sampler : bool
        Whether the values come from the user's sampler (``samples`` then counts values).
    detect : float or None
        The relative error to detect (``None`` with a tolerance).
    tolerance : float or None
        A tolerance claim's T: the plan is then for a true claim to pass with ``power``.
    power : float
        The probability asked for.
    alpha : float
        The family's level (1 − confidence).
    family : int
        Rows in the Holm family: each row is planned at alpha / family.
    seed : int
        Root seed of the pilots.
    kernel : bool
        Whether the rows plan ``varcheck probe`` of a kernel (``samples`` then counts calls,
        ``detect`` is an error of its scale, and each head is one test of the family).
    run_command : str
        A kernel plan's run: ``varcheck probe`` with the kernel's options and the planned
        ``--samples`` (empty otherwise).
    notes : tuple of str
        What stands between the plan and its run (a claim file's ``max_seconds`` that would
        stop a planned test short).
    file : str or None
        The claim file planned (``None`` otherwise): its rows share one ``samples``, and its
        probe rows keep their own calls.
    interrupted : bool
        Ctrl-C or SIGTERM stopped the plan: ``rows`` holds the rows planned by then (exit 130,
        or 143 after SIGTERM).
    """

    rows: tuple[PlanRow, ...]
    claim: str
    source: str
    sampler: bool
    detect: float | None
    tolerance: float | None
    power: float
    alpha: float
    family: int
    seed: int
    kernel: bool = False
    run_command: str = ""
    file: str | None = None
    notes: tuple[str, ...] = ()
    interrupted: bool = False
    version: str = __version__

    def shares_budget(self, row: PlanRow) -> bool:
        """Whether ``row`` runs at the plan's ``samples``: every row but a claim file's probe
        rows (a file's ``samples`` counts products; its probes run to a precision)."""
        return self.file is None or row.unit != "calls"

    @property
    def samples(self) -> int:
        """The value to pass to ``--samples``: the largest row's need (one budget for all)."""
        shared = [row.samples for row in self.rows if self.shares_budget(row)]
        return max(shared or [row.samples for row in self.rows])

    @property
    def seconds(self) -> float:
        """Predicted seconds of the whole run at ``samples`` per row (a file's probe rows at
        their own calls)."""
        return sum(
            row.seconds * (self.samples / row.samples if self.shares_budget(row) else 1.0)
            for row in self.rows
        )

    @property
    def outcome(self) -> str:
        """``done``, or ``interrupted`` (the rows planned before a signal)."""
        return "interrupted" if self.interrupted else "done"

    @property
    def exit_code(self) -> int:
        """0; interrupted, 130 (Ctrl-C) or 143 (SIGTERM)."""
        return exit_code([], interrupted=self.interrupted)
