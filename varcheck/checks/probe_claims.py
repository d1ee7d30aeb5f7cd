"""Probe claims of a claim file: ``probe = "TARGET"``, a black-box kernel's scale at each d_k.

A probe claim runs the measurement of ``varcheck probe`` (:mod:`varcheck.core.probe`) at the
file's seed, so that ``varcheck probe TARGET --dk D --seed S`` shows the same numbers::

    [[claim]]
    name = "kernel-scale"
    probe = "attention_kernels.py:attention"  # fn(q, k, v); a file is relative to the claim file
    dk = [16, 64]
    expect = "1/sqrt(dk)"                      # the default; an expression in dk and h
    causal = false                             # true: fail unless a causal mask is seen
    layout = "nd"                              # or bhnd / bnhd (every head probed)
    out_layout = "bnhd"                        # the output's, when not layout's
    heads = 4                                  # per call (bhnd/bnhd; default 2); h of the laws
    kv_heads = 2                               # grouped queries: fewer key/value heads
    queries = 48                               # n and m per head and call, as varcheck probe's
    keys = 80                                  #   defaults (--queries, --keys)
    dtype = "float16"                          # round the inputs to float32, float16 or bfloat16
    tolerance = 0.05                           # optional: the band expected × [0.95, 1.05]
    args = { layer = 0 }                       # keyword arguments bound to every call

Each (claim, d_k) is one row of the check; each of its heads' p-values a fail rests on (the
two-sided one; with a tolerance, ``p_outside``) joins the file's Holm family (one per head), and
a row takes its worst head's verdict. The scale's
interval is ``precision`` wide (the file's, relative) under ``max_seconds``; a file's fixed
``samples`` counts products, not kernel calls, so probe claims use the precision 0.01 then. A row
without a valid interval (stopped by ``max_seconds`` or a signal short of the calls one needs, or
too small a design: :func:`varcheck.core.probe.budget.no_interval`) is ``unreliable`` and takes
no part in Holm, as a variance test cut short does.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any

from ..core.estimation import ConfidenceInterval, VarianceEstimate
from ..core.messages import cut, shown
from ..core.options import valid_count
from ..core.power import weakest
from ..core.probe import budget, cost, judge
from ..core.probe.expectation import Expectation, parse_expectation
from ..core.probe.laws import law_sentence
from ..core.probe.measure import Measurement, PartialMeasurement, measure
from ..core.probe.target import KernelTarget, as_kernel, command_line
from ..core.probe.weights import DTYPES, LAYOUTS, Design
from ..core.verdicts import ClaimPValues, Decision
from ..errors import VarcheckError
from .claims import Claim
from .verify import VerifyResult

__all__ = [
    "PROBE_KEYS",
    "ProbeClaim",
    "ProbeRun",
    "PartialProbeRun",
    "parse_probe",
    "run_probe",
    "probe_row",
    "probe_command",
    "probe_reading",
    "check_probe_time",
]

#: Keys of a probe claim that a variance claim does not take.
PROBE_KEYS = (
    "probe",
    "expect",
    "causal",
    "layout",
    "out_layout",
    "queries",
    "keys",
    "heads",
    "kv_heads",
    "dtype",
)
_PRECISION = 0.01
_NO_INTERVAL = ConfidenceInterval(math.nan, math.nan)
#: Keys of a variance claim that mean nothing for a kernel.
_VARIANCE_KEYS = ("claim", "scaled", "sampler", "dist", "q_dist", "k_dist", "rho")


@dataclass(frozen=True)
class ProbeClaim:
    """A checked ``probe = ...`` claim: the kernel, the expected scale, mask, layout and the
    shapes and format of its inputs (``heads`` None: ``varcheck probe``'s default)."""

    kernel: KernelTarget
    expect: Expectation
    causal: bool
    layout: str
    queries: int = judge.QUERIES
    keys: int = judge.KEYS
    heads: int | None = None
    dtype: str = "float64"
    out_layout: str | None = None
    kv_heads: int | None = None

    @property
    def law_heads(self) -> int:
        """The ``h`` of the laws: ``heads``, or the heads per call of the layout."""
        return self.heads or (1 if self.layout == "nd" else 2)

    @property
    def claim(self) -> Claim:
        """The expectation as the :class:`~varcheck.checks.claims.Claim` a report shows."""
        return Claim(self.expect.text, frozenset({"dk", "h"}), self.expect._tree)


@dataclass(frozen=True)
class ProbeRun:
    """One (claim, d_k) measurement and each head's raw p-values."""

    measurement: Measurement
    expected: float
    p_values: tuple[ClaimPValues, ...]

    @property
    def interrupted(self) -> bool:
        """Ctrl-C or SIGTERM cut the measurement short: it holds the calls finished by then."""
        return self.measurement.stop_reason == "interrupted"


class PartialProbeRun(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a probe claim's calls, with the :class:`ProbeRun` of the calls
    finished by then (``run``; its ``interrupted`` is true)."""

    def __init__(self, run: ProbeRun) -> None:
        super().__init__()
        self.run = run


def parse_probe(table: dict[str, Any], folder: str, dks: tuple[int, ...]) -> ProbeClaim | None:
    """The claim's ``probe`` with its options (None for a variance claim); every d_k checked."""
    if "probe" not in table:
        given = [key for key in PROBE_KEYS if key in table]
        if given:
            raise VarcheckError(f'{given[0]} describes a probe: add probe = "MODULE:FUNCTION"')
        return None
    target, args = table["probe"], table.get("args")
    given = [key for key in _VARIANCE_KEYS if key in table]
    if given:
        raise VarcheckError(
            f"{given[0]} belongs to a variance claim; a probe claim takes dk, expect, causal, "
            "layout, out_layout, heads, kv_heads, queries, keys, dtype, tolerance, args"
        )
    if not isinstance(target, str):
        raise VarcheckError(f'probe must be a string "MODULE:FUNCTION", got {shown(target)}')
    if args is not None and not isinstance(args, dict):
        raise VarcheckError(f"args must be a table such as {{ layer = 2 }}, got {shown(args)}")
    causal = table.get("causal", False)
    if not isinstance(causal, bool):
        raise VarcheckError(f"causal must be true or false, got {shown(causal)}")
    layout = table.get("layout", "nd")
    if layout not in LAYOUTS:
        raise VarcheckError(f"layout must be one of {', '.join(LAYOUTS)}, got {shown(layout)}")
    shapes = _shapes(table, layout)
    expect = parse_expectation(table.get("expect", "1/sqrt(dk)"))
    pc = ProbeClaim(as_kernel(target, args, base=folder), expect, causal, layout, **shapes)
    for dk in dks:
        valid_count("dk", dk, 1, 65536)
        expect.value(dk, pc.law_heads)
        cost.check_memory(_design(pc, dk))  # before any claim runs
    return pc


def _design(pc: ProbeClaim, dk: int) -> Design:
    return judge.design(
        dk, pc.queries, pc.keys, pc.heads, None, pc.layout, pc.dtype, pc.out_layout, pc.kv_heads
    )


def check_probe_time(
    path: str, planned: list[tuple[ProbeClaim, int]], max_seconds: float | None
) -> None:
    """Refuse, before any claim runs and without ``max_seconds``, probe claims whose fewest
    calls (the pilot's and a first round at each d_k) take above a day (in calls, at a cost
    per call that grows with heads · n · m · d_k: :mod:`varcheck.core.probe.cost`)."""
    try:
        cost.check_time([_design(pc, dk) for pc, dk in planned], None, max_seconds)
    except VarcheckError as exc:
        raise VarcheckError(f"{cut(path)}: probe claims: {exc}") from None


def _shapes(table: dict[str, Any], layout: str) -> dict[str, Any]:
    """``queries``, ``keys``, ``heads`` and ``dtype``, checked as ``varcheck probe`` checks
    ``--queries`` (2..4096), ``--keys`` (2..4096), ``--heads`` (1..1024) and ``--dtype``."""
    dtype = table.get("dtype", "float64")
    if not isinstance(dtype, str):
        raise VarcheckError(f"dtype must be one of {', '.join(DTYPES)}, got {shown(dtype)}")
    d = judge.design(
        1,
        table.get("queries", judge.QUERIES),
        table.get("keys", judge.KEYS),
        table.get("heads"),
        None,
        layout,
        dtype,
        table.get("out_layout"),
        table.get("kv_heads"),
    )
    return {
        "queries": d.queries,
        "keys": d.keys,
        "heads": table.get("heads"),
        "dtype": d.dtype,
        "out_layout": table.get("out_layout"),
        "kv_heads": table.get("kv_heads"),
    }


def run_probe(
    pc: ProbeClaim,
    dk: int,
    *,
    tolerance: float | None,
    seed: int,
    confidence: float,
    precision: float | None,
    max_seconds: float | None,
) -> ProbeRun:
    """Measure one d_k of a probe claim (the pilot's refusals are errors naming the kernel)."""
    expected = pc.expect.value(dk, pc.law_heads)
    try:
        m = measure(
            pc.kernel,
            _design(pc, dk),
            expected=expected,
            seed=seed,
            confidence=confidence,
            precision=precision or _PRECISION,
            calls=None,
            max_seconds=max_seconds,
        )
    except PartialMeasurement as exc:
        m = exc.measurement
        raise PartialProbeRun(
            ProbeRun(m, expected, tuple(judge.head_p_values(m, expected, tolerance)))
        ) from None
    return ProbeRun(m, expected, tuple(judge.head_p_values(m, expected, tolerance)))


def probe_row(
    pc: ProbeClaim,
    run: ProbeRun,
    adjusted: list[ClaimPValues],
    *,
    tolerance: float | None,
    confidence: float,
    seed: int,
    precision: float | None,
    family: int = 1,
) -> VerifyResult:
    """One row of the check: the worst head's verdict from its Holm-adjusted p-values, or
    ``unreliable`` without a valid interval (its heads' ``nan`` p-values took no part in
    Holm); what it could have caught is its weakest head's at α/``family``
    (:func:`~varcheck.core.power.weakest`)."""
    alpha, m = 1.0 - confidence, run.measurement
    decisions = judge.decide_heads(m, run.expected, adjusted, alpha=alpha, tolerance=tolerance)
    decision, p = judge.worst_head(list(zip(decisions, adjusted, strict=True)))
    wrong = judge.causal_failure(m, pc.causal)
    if wrong is not None:
        decision = wrong
    inner = None
    if tolerance is not None:
        if budget.no_interval(m) is None:
            inner = m.pooled.interval_at(max(2.0 * confidence - 1.0, 0.0))
        tost = max(q.p_equivalence for q in run.p_values)  # type: ignore[type-var]
        p = ClaimPValues(p.p_value, tost, p.p_outside)
    caught = judge.head_detectables(
        m, list(run.p_values), alpha=alpha, family=family, tolerance=tolerance
    )
    row = _row(
        pc,
        run,
        decision,
        p,
        inner,
        tolerance=tolerance,
        confidence=confidence,
        seed=seed,
        precision=precision,
    )
    return replace(row, detectable=weakest(caught))


def _row(
    pc: ProbeClaim,
    run: ProbeRun,
    decision: Decision,
    p: ClaimPValues,
    inner: ConfidenceInterval | None,
    *,
    tolerance: float | None,
    confidence: float,
    seed: int,
    precision: float | None,
) -> VerifyResult:
    m = run.measurement
    valid = budget.no_interval(m) is None
    return VerifyResult(
        dk=m.design.dk,
        q_dist=None,
        k_dist=None,
        rho=0.0,
        claim=pc.expect.text,
        claim_value=run.expected,
        scaled=False,
        tolerance=tolerance,
        theory_value=math.nan,
        estimate=m.pooled.scale,
        confidence_interval=m.pooled.confidence_interval if valid else _NO_INTERVAL,
        p_value=p.p_value,
        outcome=decision.outcome,
        reason=decision.reason,
        more_samples=decision.more_samples if decision.outcome == "inconclusive" else None,
        samples=m.blocks,
        confidence=confidence,
        seed=seed,
        precision=precision or _PRECISION,
        sampler=pc.kernel,
        equivalence_interval=inner,
        p_equivalence=p.p_equivalence,
        p_outside=p.p_outside,
        raw=_raw(m, confidence),
        interrupted=run.interrupted,
        min_samples=budget.min_calls(m),
    )


def _raw(m: Measurement, confidence: float) -> VarianceEstimate:
    """The mean scale as the estimate a row's ``raw`` holds (what a report reads its stop
    reason from: ``max-seconds`` makes the check time-limited)."""
    e = m.pooled
    return VarianceEstimate(
        var=e.scale,
        confidence_interval=e.confidence_interval,
        se=e.se,
        mean=e.scale,
        samples=m.blocks,
        blocks=m.blocks,
        block_side=0,
        confidence=confidence,
        precision=m.precision,
        stop_reason=m.stop_reason,
        skewness=e.skewness,
    )


def probe_reading(pc: ProbeClaim, row: VerifyResult) -> str:
    """The row's scale against the expected one and its nearest law, as ``varcheck probe``
    reads it (``× 1/2 of the expected scale: nearest law 1/sqrt(dk) × 1/2 (…)``); off the
    scale alone when the row has no valid interval."""
    lo, hi = row.confidence_interval
    if math.isnan(lo):
        lo = hi = row.estimate
    assert row.claim_value is not None  # a probe row's expected scale
    tokens = {"queries": pc.queries, "keys": pc.keys}
    return law_sentence(row.estimate, lo, hi, row.claim_value, row.dk, pc.law_heads, **tokens)


def probe_command(pc: ProbeClaim, row: VerifyResult, folder: str) -> str:
    """The ``varcheck probe`` command that shows a row's numbers (from the current directory:
    a kernel file relative to the claim file is joined to its ``folder``)."""
    target = pc.kernel.target
    path, _, name = target.rpartition(":")
    if path.endswith(".py") and not os.path.isabs(path) and folder:
        target = f"{os.path.join(folder, path)}:{name}"
    parts = ["varcheck", "probe", target, "--dk", str(row.dk)]
    for key, value in pc.kernel.args:
        parts += ["--arg", f"{key}={value!r}"]
    if pc.expect.text != "1/sqrt(dk)":
        parts += ["--expect", pc.expect.text]
    shown_options = (
        ("layout", pc.layout, "nd"),
        ("queries", pc.queries, judge.QUERIES),
        ("keys", pc.keys, judge.KEYS),
        ("heads", pc.heads, None),
        ("dtype", pc.dtype, "float64"),
        ("out-layout", pc.out_layout, None),
        ("kv-heads", pc.kv_heads, None),
    )
    for name, value, default in shown_options:
        if value != default:
            parts += [f"--{name}", str(value)]
    if pc.causal:
        parts.append("--causal")
    if row.tolerance is not None:
        parts += ["--tolerance", f"{row.tolerance:g}"]
    if row.precision != _PRECISION:
        parts += ["--precision", f"{row.precision:g}"]
    if row.confidence != 0.95:
        parts += ["--confidence", f"{row.confidence:g}"]
    parts += ["--seed", str(row.seed)]
    return command_line(parts)
