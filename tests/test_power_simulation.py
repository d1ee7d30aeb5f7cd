"""A deviation equal to the stated detectable error is caught 90% of the time, and a run at the
planned size has the planned power: four configurations, many independent runs at once.

The configurations are those of the issue's "Must show": normal entries, a skewed scipy law
(lognormal), a user's sampler whose values share rows of q and k (dependent values), and the
probe of a noisy kernel. Each draws R independent runs with the library's own block draws
(a kernel's heads are independent runs: one call of a ``bhnd`` kernel of R heads measures R
scales at once, each from its own q, k and logit noise). As in tests/test_power.py, a scale
deviation of the truth is the same test as the claim moved the other way, so "the truth is
claim × (1 + δ)" is the test of the claim truth / (1 + δ) on the same runs.

* **Detection.** Each run states its own detectable error; a truth off by the runs' median
  figure, each way, is rejected in about 90% of runs; off by half of it in clearly fewer
  (Φ(3.24/2 − 1.96) ≈ 37% in the normal approximation); a true claim in about α.
* **Plan, then run.** Each of R pilots (200 blocks, its own draws) plans the blocks for the
  target with :func:`varcheck.checks.pilots.row_from_pilot`; a fresh run of that size per pilot
  is then tested. The binding side (the plan sizes for the harder of the two) is caught in
  90% ± binomial error of the runs, the other side at least as often.

Tolerances, from the binomial law of a count out of R runs: a rate p is accepted when a
two-sided exact binomial test gives p-value > 0.001 (at R = 200 and p = 0.9: about 169..190;
at R = 2000: 1865..1933). "Clearly fewer" at half the error is asserted as below 0.6 R: at
R = 200 that is 9 sd (sd √(200·0.9·0.1) = 4.2) under the 90% and 7 sd (sd 6.8) over the 37%
expected. "At least as often" is a one-sided binomial bound at 0.001 under 0.9 R. The suite
pins the counts of R = 200 runs, so that a change in the draws or the formulas shows; the
`long` tests (`make test-long`) run R = 2000 and their figures are in docs/power.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from block_estimates import block_estimate
from scipy.stats import binom, binomtest

from varcheck.checks.pilots import MIN_PILOT_BLOCKS, Pilot, row_from_pilot
from varcheck.core.blocks import draw_chunk
from varcheck.core.distributions import parse_distribution
from varcheck.core.estimation import _default_plan
from varcheck.core.power import detectable_of
from varcheck.core.probe import judge
from varcheck.core.probe import measure as probing
from varcheck.core.probe.target import as_kernel
from varcheck.core.sampler_blocks import sampler_chunk
from varcheck.core.theory import dot_product_theory

ALPHA = 0.05
PILOT = 200
KERNELS = str(Path(__file__).resolve().parents[1] / "examples" / "attention_kernels.py")
#: Most products one draw of a built-in law holds (its arrays are products × d_k).
CHUNK_PRODUCTS = 500_000
#: Most heads one probe call is given (probe's --heads allows 1024).
MAX_HEADS = 1000
assert PILOT >= MIN_PILOT_BLOCKS


@dataclass(frozen=True)
class Source:
    """A configuration: ``draw(rng_seed, counts)`` returns one estimate per entry of
    ``counts`` (a run of that many blocks), each from draws of its own; ``truth`` the true
    value; ``per_block`` the samples of a block (products, values or 1 call)."""

    name: str
    draw: Callable[[int, list[int]], list]
    truth: float
    per_block: int
    detect: float
    run_blocks: int = 200


def _split(m: np.ndarray, a: np.ndarray, counts: list[int], per_block: int, shift: float) -> list:
    edges = np.cumsum([0, *counts])
    return [
        block_estimate(m[lo:hi], a[lo:hi], per_block, shift)
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    ]


def _builtin(
    name: str, spec: str, dk: int, side_budget: int, detect: float, run_blocks: int = 200
) -> Source:
    """Built-in laws at the block side a run of ``side_budget`` products uses."""
    q = parse_distribution(spec)
    th = dot_product_theory(dk, q, q)
    plan = _default_plan(q, q, th, side_budget, None)

    def draw(seed: int, counts: list[int]) -> list:
        rng, total = np.random.default_rng(seed), sum(counts)
        step = max(CHUNK_PRODUCTS // plan.products_per_block, 1)  # bounded memory
        parts = [
            draw_chunk(q, q, dk, plan, rng, blocks=min(step, total - i), shift=th.mean)
            for i in range(0, total, step)
        ]
        m, a = (np.concatenate(x) for x in zip(*parts, strict=True))
        return _split(m, a, counts, plan.products_per_block, th.mean)

    return Source(name, draw, th.var, plan.products_per_block, detect, run_blocks)


def _qk_block(rng: np.random.Generator, dk: int, calls: int) -> np.ndarray:
    """A user's vectorised sampler: an 8 × 8 block of q·k/√d_k per call (values share rows)."""
    q = rng.standard_normal((calls, 8, dk))
    k = rng.standard_normal((calls, dk, 8))
    return (q @ k / math.sqrt(dk)).reshape(calls, 64)


def _sampler(detect: float) -> Source:
    def draw(seed: int, counts: list[int]) -> list:
        m, a = sampler_chunk(
            _qk_block, 16, seed, (), 0, sum(counts), 0.0, 64, "qk", vectorized=True
        )
        return _split(m, a, counts, 64, 0.0)

    return Source("sampler", draw, 1.0, 64, detect)


def _kernel_runs(seed: int, counts: list[int]) -> list:
    """Probes of a noisy kernel of up to :data:`MAX_HEADS` heads, one head a run."""
    parts = [counts[i : i + MAX_HEADS] for i in range(0, len(counts), MAX_HEADS)]
    return [e for i, part in enumerate(parts) for e in _kernel_heads(seed + 1000 * i, part)]


def _kernel_heads(seed: int, counts: list[int]) -> list:
    """One probe of a noisy kernel with len(counts) heads; head i's scale from its first
    counts[i] calls (each call's slopes as :func:`measure` reads them)."""
    kernel = as_kernel(f"{KERNELS}:noisy", {"noise": 0.2})
    design = judge.design(16, 8, 8, len(counts), None, "bhnd", "float64", None, None)
    kept: list[np.ndarray] = []
    summary = probing._summary

    def keep(design, pilot, found, confidence, stop_reason):  # noqa: ANN001, ANN202
        kept.append(np.concatenate(found)[:, 0])
        return summary(design, pilot, found, confidence, stop_reason)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(probing, "_summary", keep)
        m = probing.measure(
            kernel,
            design,
            expected=0.25,
            seed=seed,
            confidence=1 - ALPHA,
            precision=None,
            calls=max(counts),
            max_seconds=None,
        )
    values = kept[0]
    return [probing._estimate(values[:n, h], 1 - ALPHA, m.resolution) for h, n in enumerate(counts)]


def _kernel(detect: float) -> Source:
    """The noisy kernel's scale is 1/√16 (its logit noise is independent of q·k)."""
    return Source("kernel", _kernel_runs, 0.25, 1, detect)


SOURCES = {
    "normal": lambda: _builtin("normal", "normal", 16, 12_800, 0.05),
    "lognormal": lambda: _builtin("lognormal", "scipy.lognorm:s=0.3", 8, 12_800, 0.15),
    # the skewed law's detection at 5000 products (blocks of one): 200 blocks of four are
    # where its figure is flagged approximate (γ/√blocks > 0.07; docs/power.md)
    "lognormal-5000": lambda: _builtin(
        "lognormal-5000", "scipy.lognorm:s=0.3", 8, 5000, 0.15, run_blocks=5000
    ),
    "sampler": lambda: _sampler(0.045),
    "kernel": lambda: _kernel(0.005),
}


@functools.lru_cache(maxsize=8)
def _runs(name: str, runs: int, seed: int, blocks: int = PILOT) -> list:
    """``runs`` runs of ``blocks`` blocks (the detection's runs of 200 are also the plans'
    pilots)."""
    return _source(name).draw(seed, [blocks] * runs)


def _detection(src: Source, runs: int, seed: int) -> dict[str, int]:
    """Rejections, out of ``runs`` runs of the source's size, of a truth off by the median
    stated error each way, by half of it, and of a true claim."""
    estimates = _runs(src.name, runs, seed, src.run_blocks)
    found = [detectable_of(e, alpha=ALPHA) for e in estimates]
    above = float(np.median([f.above for f in found]))
    below = float(np.median([f.below for f in found]))

    def rejected(claim: float) -> int:
        return sum(e.p_value(claim) < ALPHA for e in estimates)

    t = src.truth
    return {
        "above": rejected(t / (1 + above)),
        "below": rejected(t / (1 - below)),
        "half above": rejected(t / (1 + above / 2)),
        "half below": rejected(t / (1 - below / 2)),
        "true": rejected(t),
    }


def _planned(src: Source, runs: int, seed: int) -> dict[str, int]:
    """Rejections by runs at the planned size of a truth ``detect`` above and below the claim,
    and how many plans a floor set (the 200-block floor only: no budget rule here)."""
    pilots = _runs(src.name, runs, seed)
    target = {"detect": src.detect, "power": 0.9, "alpha": ALPHA, "family": 1, "tolerance": None}
    floors = {"200 blocks": PILOT * src.per_block}
    as_pilots = [Pilot(p.var, p.se, p.skewness, p.blocks, p.blocks * src.per_block) for p in pilots]
    rows = [row_from_pilot(p, 16, 0.0, floors, target) for p in as_pilots]
    done = src.draw(seed + 1, [row.blocks for row in rows])
    d, t = src.detect, src.truth
    return {
        "above": sum(e.p_value(t / (1 + d)) < ALPHA for e in done),
        "below": sum(e.p_value(t / (1 - d)) < ALPHA for e in done),
        "floored": sum(row.floor != "power" for row in rows),
    }


def _accepts(count: int, runs: int, rate: float) -> bool:
    return binomtest(count, runs, rate).pvalue > 0.001


def assert_detection(counts: dict[str, int], runs: int) -> None:
    for side in ("above", "below"):
        assert _accepts(counts[side], runs, 0.9), counts
        assert counts[f"half {side}"] < 0.6 * runs, counts
    assert _accepts(counts["true"], runs, ALPHA), counts


def assert_planned(counts: dict[str, int], runs: int) -> None:
    low, high = sorted((counts["above"], counts["below"]))
    assert _accepts(low, runs, 0.9), counts  # the side the plan is sized for
    assert high >= binom.ppf(0.001, runs, 0.9), counts  # the other, at least as often
    assert counts["floored"] < 0.05 * runs, counts  # the power set the size, not a floor


@functools.cache
def _source(name: str) -> Source:
    return SOURCES[name]()


R = 200


def test_a_noisy_kernels_stated_error_is_caught_and_its_plan_has_the_planned_power() -> None:
    """200 heads of the noisy kernel, 200 calls each: detection; then each head a pilot, and
    a fresh run of its planned calls per head (normal, lognormal and the sampler's detection:
    tests/test_power.py at 400 runs)."""
    found = _detection(_source("kernel"), R, seed=31)
    assert_detection(found, R)
    assert found == {"above": 180, "below": 180, "half above": 64, "half below": 72, "true": 11}
    planned = _planned(_source("kernel"), R, seed=31)
    assert_planned(planned, R)
    assert planned == {"above": 175, "below": 185, "floored": 0}


def test_a_skewed_laws_run_at_the_planned_size_has_the_planned_power() -> None:
    """Lognormal entries (normal entries: tests/test_power.py; the sampler at 2000 pilots in
    the long run)."""
    planned = _planned(_source("lognormal"), R, seed=31)
    assert_planned(planned, R)
    assert planned == {"above": 180, "below": 180, "floored": 0}


LONG_RUNS = 2000


@pytest.mark.long
@pytest.mark.parametrize("name", ["normal", "lognormal-5000", "sampler", "kernel"])
def test_long_detection_at_2000_runs(name: str) -> None:
    runs = LONG_RUNS
    src = _source(name)
    counts = _detection(src, runs, seed=51)
    found = [detectable_of(e, alpha=ALPHA) for e in _runs(name, runs, 51, src.run_blocks)]
    stated = [
        np.percentile([f.above for f in found], (5, 50, 95)),
        np.median([f.below for f in found]),
    ]
    print(name, "detection", runs, counts, "stated", stated)  # the figures of docs/power.md
    assert_detection(counts, runs)


@pytest.mark.long
@pytest.mark.parametrize("name", ["normal", "lognormal", "sampler", "kernel"])
def test_long_plan_then_run_at_2000_pilots(name: str) -> None:
    runs = LONG_RUNS
    counts = _planned(_source(name), runs, seed=61)
    print(name, "planned", runs, counts)
    assert_planned(counts, runs)
