"""What a probe would need, checked before any call of the kernel: memory and time.

Each design's largest arrays at once (queries and keys, values and outputs, the pilot's stacked
weights and logits) are refused above :data:`MAX_BYTES`, in one line naming the options that
make them large. The time is that of the fewest calls the run can make (a fixed ``samples``
count, or the first round of an adaptive one) at a per-call cost that grows with
heads · n · m · d_k; without ``max_seconds`` a run above
:data:`~varcheck.core.options.MAX_RUN_SECONDS` is refused, as ``assert`` and ``check`` refuse
theirs. The estimates are rough (a factor of two either way, on the fast side): what matters is
that ``--dk 65536 --heads 64`` or ``--samples 1e13`` is answered at once instead of eating the
runner's memory or hanging a CI job.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import VarcheckError
from ..estimation import MIN_BLOCKS
from ..messages import duration_text, size_text
from ..options import MAX_RUN_SECONDS
from .weights import Design

__all__ = ["MAX_BYTES", "PILOT_READS", "design_bytes", "call_seconds", "check_memory", "check_time"]

#: Largest memory a probe may plan for (its biggest arrays at once); the 2 GiB of the paper
#: commands' limit (``varcheck.paper.limits.MAX_BYTES``, which core cannot import).
MAX_BYTES = 2 * 1024**3
#: Readings of the weights the pilot makes: its sizing and linearity calls and its 16 reads
#: (``measure.PILOT_CALLS``, repeated here so that measure can import this module).
PILOT_READS = 18
#: Rough costs on a fast core: a call's fixed cost, a drawn input, a multiply-add, a weight read.
_CALL_SECONDS = 5e-5
_DRAW_SECONDS = 5e-9
_MAC_SECONDS = 1e-10
_WEIGHT_SECONDS = 2e-8
_FLOAT = 8
#: Arrays of the pilot's weights' size that the fit of one head holds at once (log-weights,
#: powers of the logits, their centred forms).
_ANALYSIS_COPIES = 12


def design_bytes(d: Design) -> dict[str, tuple[float, str]]:
    """The memory of one design's largest arrays, by part: ``{part: (bytes, options)}``.

    q and k are drawn, rounded and copied to float64 for q·k (3 copies); v is made full in the
    kernel's layout and rounded, the output read back as float64 (2 copies each); the pilot
    holds ``PILOT_READS`` weight matrices and as many logit matrices (heads · n · m each), and
    its fit of a head makes about a dozen transient arrays of its weights' size.
    """
    h, n, m, dk, dv = d.heads, d.queries, d.keys, d.dk, d.dv
    return {
        "q and k": (3.0 * _FLOAT * h * (n + m) * dk, "dk, heads, queries or keys"),
        "v and the output": (2.0 * _FLOAT * h * (m + n) * dv, "dv, heads or keys"),
        "the pilot's weights and logits": (
            _FLOAT * PILOT_READS * n * m * (2.0 * h + _ANALYSIS_COPIES),
            "queries, keys or heads",
        ),
    }


def _shapes(d: Design) -> str:
    dv = "" if d.dv == d.keys else f", dv={d.dv}"
    return f"dk={d.dk}, heads={d.heads}, queries={d.queries}, keys={d.keys}{dv}"


def check_memory(d: Design) -> None:
    """Refuse a design whose arrays would take more than :data:`MAX_BYTES` at once."""
    parts = design_bytes(d)
    total = sum(b for b, _ in parts.values())
    if total <= MAX_BYTES:
        return
    part, (n_bytes, options) = max(parts.items(), key=lambda kv: kv[1][0])
    raise VarcheckError(
        f"probe at {_shapes(d)} needs about {size_text(total)} of memory "
        f"({part}: {size_text(n_bytes)}), "
        f"above the {size_text(MAX_BYTES)} limit; lower {options}"
    )


def call_seconds(d: Design) -> float:
    """Rough seconds of one reading of the weights (``calls_per_block`` kernel calls)."""
    h, n, m, dk, dv, calls = d.heads, d.queries, d.keys, d.dk, d.dv, d.calls_per_block
    return (
        calls * _CALL_SECONDS
        + _DRAW_SECONDS * h * (n + m) * dk
        + _MAC_SECONDS * calls * h * n * m * (dk + dv)
        + _WEIGHT_SECONDS * h * n * m
    )


def check_time(
    designs: Sequence[Design],
    samples: int | None,
    max_seconds: float | None,
    *,
    name: str = "samples",
) -> None:
    """Refuse, without ``max_seconds``, a probe whose fewest calls take above a day.

    The fewest calls are the pilot's and ``samples`` (or the first round of an adaptive run,
    :data:`~varcheck.core.estimation.MIN_BLOCKS`) at every d_k of ``designs``.
    """
    if max_seconds is not None or not designs:
        return
    blocks = MIN_BLOCKS if samples is None else samples
    seconds = sum((PILOT_READS + blocks) * call_seconds(d) for d in designs)
    if seconds <= MAX_RUN_SECONDS:
        return
    where = f"at d_k={designs[0].dk}" if len(designs) == 1 else f"over {len(designs)} d_k"
    what = f"{name} {blocks:.3g} needs" if samples is not None else "the first round needs"
    each = max(designs, key=call_seconds)
    raise VarcheckError(
        f"{what} {blocks * len(designs):.3g} kernel calls {where} (about "
        f"{duration_text(call_seconds(each))} each at {_shapes(each)}): at least "
        f"{duration_text(seconds)} even on a fast machine, above the limit of "
        f"{duration_text(MAX_RUN_SECONDS)} for a run without max_seconds; ask for fewer calls or "
        "smaller shapes, or cap the time with max_seconds (--max-seconds)"
    )
