"""The command lines that rerun a result: the same run, or the next one a result asks for.

Pure functions of a result: each gives a line a user can paste, naming only the options that
differ from the defaults, and the seed.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .claim_file import CheckResult
    from .sweep import SweepResult
    from .verify import VerifyResult

__all__ = ["reproduce_command", "rerun_command", "sweep_command", "derive_command"]


def reproduce_command(
    result: VerifyResult, *, claim: str | None = None, samples: int | None = None
) -> str:
    """The ``varcheck assert`` line that reruns one claim test; ``claim`` or ``samples`` replace
    the run's own (a fixed ``samples`` replaces its precision too)."""
    parts = ["varcheck assert", f"--dk {result.dk}", *_source_options(result)]
    parts.append(f"--claim '{claim or result.claim}'")
    if result.scaled and claim is None:
        parts.append("--scaled")
    if result.tolerance is not None and claim is None:
        parts.append(f"--tolerance {result.tolerance!r}")
    given = result.requested_samples if samples is None else samples
    parts += _effort_options(given, result.precision, result.confidence)
    parts.append(f"--seed {result.seed}")
    return " ".join(parts)


def sweep_command(
    result: Any,
    *,
    claim: str | None = None,
    samples: int | None = None,
    seed: int | None = None,
    max_seconds: float | None = None,
) -> str:
    """The ``varcheck sweep`` line that reruns a sweep (its d_k, laws or sampler, claim, effort
    and seed); each keyword replaces the run's own (``claim="theory"`` drops the option)."""
    dks = ",".join(str(r.dk) for r in result.rows)
    parts = ["varcheck sweep", f"--dk {dks}", *_source_options(result)]
    claim = result.claim if claim is None else claim
    if claim != "theory":
        parts.append(f"--claim '{claim}'")
    given = result.samples if samples is None else samples
    parts += _effort_options(given, result.precision, result.confidence)
    if max_seconds is not None:
        parts.append(f"--max-seconds {max_seconds:g}")
    parts.append(f"--seed {result.seed if seed is None else seed}")
    return " ".join(parts)


def derive_command(result: Any, dk: int) -> str:
    """The ``varcheck derive`` line for the laws of a result at one d_k: the exact variance,
    step by step, and the step whose assumption breaks."""
    return " ".join(["varcheck derive", f"--dk {dk}", *_source_options(result)])


def _source_options(result: VerifyResult | SweepResult) -> list[str]:
    """The options that say where the values come from: the laws, or the sampler."""
    if result.sampler is not None:
        parts = [f"--sampler {shlex.quote(result.sampler.target)}"]
        parts += [f"--sampler-arg {shlex.quote(f'{k}={v!r}')}" for k, v in result.sampler.args]
        return parts
    q, k = result.q_dist, result.k_dist
    parts = []
    if q == k:
        if q.spec != "normal":  # type: ignore[union-attr]
            parts.append(f"--dist {q.spec}")  # type: ignore[union-attr]
    else:
        parts += [f"--q-dist {q.spec}", f"--k-dist {k.spec}"]  # type: ignore[union-attr]
    if result.rho:
        parts.append(f"--rho {result.rho!r}")
    return parts


def _effort_options(samples: int | None, precision: float | None, confidence: float) -> list[str]:
    """The sampling options of a rerun that differ from the defaults (a fixed count wins)."""
    options = []
    if samples is not None:
        options.append(f"--samples {samples}")
    elif precision is not None and precision != 0.01:
        options.append(f"--precision {precision!r}")
    if confidence != 0.95:
        options.append(f"--confidence {confidence!r}")
    return options


def rerun_command(result: CheckResult) -> str:
    """The command line that reruns a claim file with the same seed and sampling effort."""
    parts = [f"varcheck check {result.path}", f"--seed {result.seed}"]
    parts += _effort_options(result.samples, result.precision, result.confidence)
    return " ".join(parts)
