"""The ``varcheck probe`` command lines a probe's output offers to run next (used by its
presenters and next steps)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.probe.judge import KEYS, QUERIES
from ..core.probe.target import command_line

if TYPE_CHECKING:
    from .probe import ProbeResult

__all__ = ["reproduce_command"]

_DEFAULTS = {"queries": QUERIES, "keys": KEYS, "layout": "nd", "dtype": "float64"}


def reproduce_command(result: ProbeResult, dks: str | None = None, **change: Any) -> str | None:
    """The ``varcheck probe`` command line that reruns a probe (None for an unnamed kernel);
    ``change`` replaces the run's ``expect``, ``queries`` or ``samples`` (calls)."""
    k = result.kernel
    if not k.by_name:
        return None
    parts = ["varcheck", "probe", k.target, "--dk", dks or str(result.dk)]
    for key, value in k.args:
        parts += ["--arg", f"{key}={value!r}"]
    expect = change.get("expect", result.expect)
    if expect != "1/sqrt(dk)":
        parts += ["--expect", expect]
    for name in ("layout", "queries", "keys", "dtype"):
        value = change.get(name, getattr(result, name))
        if value != _DEFAULTS[name]:
            parts += [f"--{name}", str(value)]
    if result.out_layout != result.layout:
        parts += ["--out-layout", result.out_layout]
    if result.layout != "nd" or result.law_heads != 1:
        parts += ["--heads", str(result.law_heads)]
    if result.kv_heads != result.heads:
        parts += ["--kv-heads", str(result.kv_heads)]
    if result.dv != result.keys:
        parts += ["--dv", str(result.dv)]
    if result.causal:
        parts.append("--causal")
    if result.tolerance is not None:
        parts += ["--tolerance", f"{result.tolerance:g}"]
    if result.confidence != 0.95:
        parts += ["--confidence", f"{result.confidence:g}"]
    if "samples" in change:
        parts += ["--samples", str(change["samples"])]
    elif result.stop_reason == "samples":
        parts += ["--samples", str(result.calls)]
    if result.max_seconds is not None and "samples" not in change:  # reproduced with its cap
        parts += ["--max-seconds", f"{result.max_seconds:g}"]
    parts += ["--seed", str(result.seed)]
    return command_line(parts)
