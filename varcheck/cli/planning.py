"""``check FILE --plan``: the options that plan a claim file instead of running it.

``check`` adds them and hands a ``--plan`` run to :func:`plan_file_command`, which plans the
file with :func:`varcheck.checks.plan_file.plan_file`; ``varcheck plan`` itself is :mod:`.plan`.
"""

from __future__ import annotations

from typing import Any

import click

from .options import grouped, option, stack
from .run import run
from .types import FiniteFloat

__all__ = ["planning_options", "plan_file_command"]


def _planning(plan: bool, detect: float | None, power: float | None) -> dict[str, Any]:
    if not plan and (detect is not None or power is not None):
        raise click.UsageError("--detect and --power size a plan: add --plan")
    return {"plan": plan, "detect": detect, "power": 0.9 if power is None else power}


#: ``check FILE --plan --detect D [--power P]``: the file planned instead of run, as ``planning``
planning_options = grouped(
    "planning",
    stack(
        click.option(
            "--plan",
            is_flag=True,
            help="Plan instead of run: the samples each test needs to catch --detect "
            "with --power. The pilots stop at --max-seconds (default 60 s). See docs/power.md.",
        ),
        option(
            "--detect",
            kind=FiniteFloat(0.0, 1.0, what="a relative error in (0, 1), e.g. 0.03"),
            default=None,
            text="With --plan: the relative error each test must catch, either way.",
        ),
        option(
            "--power",
            kind=FiniteFloat(0.5, 1.0, what="a probability in (0.5, 1), e.g. 0.9"),
            default=None,
            text="With --plan: the probability of catching it (default 0.9).",
        ),
    ),
    _planning,
)


def plan_file_command(
    file: str, planning: dict[str, Any], overrides: dict[str, Any], fmt: str, junit: str | None
) -> int:
    """``varcheck check FILE --plan``: every test of the file planned; its exit code."""
    from ..checks.plan_file import plan_file

    for name in ("precision", "samples"):
        if overrides[name] is not None:
            raise click.UsageError(f"--plan sizes the run: drop --{name}")
    if junit is not None:
        raise click.UsageError("--plan runs no test: drop --junit-xml")
    result = run(
        lambda: plan_file(
            file,
            detect=planning["detect"],
            power=planning["power"],
            confidence=overrides["confidence"],
            seed=overrides["seed"],
            max_seconds=overrides["max_seconds"],
        ),
        fmt=fmt,
    )
    return result.exit_code
