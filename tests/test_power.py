"""The detectable error is calibrated: a deviation equal to it is caught about 90% of the time.

Each configuration draws R = 400 independent runs at once (the library's own block draws, split
into R runs of the same size) and estimates each with the library's accumulator. A scale
deviation of the truth is the same test as the claim moved the other way (values × λ and claim
× λ² leave the estimate, interval and p-value equivariant; docs/power.md), so every count comes
from the same R estimates: the run "detects" a truth claim × (1 + δ) when the p-value of
claim / (1 + δ) is below α.

Tolerances, from the binomial law of a count of R = 400 runs: at the stated error (the runs'
median figure) the rate should be 0.9, sd √(400 · 0.9 · 0.1) = 6 runs; a two-sided binomial test
at p > 0.001 accepts about 341..377. At half the stated error the normal approximation predicts
Φ(3.24 / 2 − 1.96) ≈ 0.37 (148 of 400, sd 9.7); "clearly fewer" is asserted as fewer than 240, at
least 12 sd below 360 and 9 above 148. A true claim is rejected at the test's α: 20 of 400, a
two-sided binomial test at p > 0.001. The counts are pinned as well, so that a change in the
draws or the formula shows.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from block_estimates import block_estimate
from scipy.stats import binomtest

import varcheck
from varcheck.checks.pilots import row_from_pilot
from varcheck.core.blocks import draw_chunk
from varcheck.core.distributions import parse_distribution
from varcheck.core.estimation import _default_plan
from varcheck.core.power import (
    detectable_error,
    detectable_of,
    inflation,
    planned_blocks,
    tost_power,
)
from varcheck.core.sampler_blocks import sampler_chunk
from varcheck.core.theory import dot_product_theory

R = 400
ALPHA = 0.05


def _estimates(m: np.ndarray, a: np.ndarray, per_block: int, shift: float = 0.0) -> list:
    """R estimates from R equal runs of per-block means ``m`` and mean squares ``a``."""
    pairs = zip(m.reshape(R, -1), a.reshape(R, -1), strict=True)
    return [block_estimate(mi, ai, per_block, shift) for mi, ai in pairs]


@functools.lru_cache(maxsize=2)  # the normal runs serve two tests
def _builtin(spec: str, dk: int, samples: int, seed: int) -> tuple[list, float]:
    """R runs of ``samples`` products of the law ``spec`` (the block plan a fixed budget uses)."""
    q = parse_distribution(spec)
    th = dot_product_theory(dk, q, q)
    plan = _default_plan(q, q, th, samples, None)
    blocks = -(-samples // plan.products_per_block)
    rng = np.random.default_rng(seed)
    parts = [
        draw_chunk(q, q, dk, plan, rng, blocks=blocks * R // 4, shift=th.mean) for _ in range(4)
    ]
    m, a = (np.concatenate(x) for x in zip(*parts, strict=True))
    return _estimates(m, a, plan.products_per_block, th.mean), th.var


def _qk_block(rng: np.random.Generator, dk: int, calls: int) -> np.ndarray:
    """A user's vectorised sampler: an 8 × 8 block of q·k/√d_k per run, values sharing rows."""
    q = rng.standard_normal((calls, 8, dk))
    k = rng.standard_normal((calls, dk, 8))
    return (q @ k / math.sqrt(dk)).reshape(calls, 64)


def _sampler(seed: int) -> tuple[list, float]:
    """R runs of 200 calls of :func:`_qk_block` at d_k = 16, through the vectorised path."""
    m, a = sampler_chunk(_qk_block, 16, seed, (), 0, 200 * R, 0.0, 64, "qk_block", vectorized=True)
    return _estimates(m, a, 64), 1.0


def _counts(estimates: list, truth: float) -> dict[str, int]:
    """How many runs reject a truth off by the median stated error (each way), by half of it,
    and a true claim."""
    found = [detectable_of(e, alpha=ALPHA) for e in estimates]
    above = float(np.median([f.above for f in found]))
    below = float(np.median([f.below for f in found]))

    def rejected(claim: float) -> int:
        return sum(e.p_value(claim) < ALPHA for e in estimates)

    return {
        "above": rejected(truth / (1 + above)),
        "below": rejected(truth / (1 - below)),
        "half above": rejected(truth / (1 + above / 2)),
        "half below": rejected(truth / (1 - below / 2)),
        "true": rejected(truth),
    }


def _assert_calibrated(counts: dict[str, int], pinned: dict[str, int]) -> None:
    for side in ("above", "below"):
        assert binomtest(counts[side], R, 0.9).pvalue > 0.001, (side, counts)
        assert counts[f"half {side}"] < 240, counts
    assert binomtest(counts["true"], R, ALPHA).pvalue > 0.001, counts
    assert counts == pinned


@pytest.mark.parametrize(
    ("spec", "dk", "samples", "pinned"),
    [
        (
            "normal",
            16,
            5000,
            {"above": 366, "below": 361, "half above": 156, "half below": 141, "true": 13},
        ),
        (
            "scipy.lognorm:s=0.3",
            8,
            5000,
            {"above": 360, "below": 361, "half above": 144, "half below": 152, "true": 21},
        ),
    ],
    ids=["normal", "lognormal"],
)
def test_a_deviation_equal_to_the_stated_error_is_caught_90_percent_of_the_time(
    spec: str, dk: int, samples: int, pinned: dict[str, int] | None
) -> None:
    """Normal entries and a skewed scipy law, at a fixed budget inside the calibrated range
    (γ/√blocks below 0.07 in the median run)."""
    estimates, truth = _builtin(spec, dk, samples, seed=11)
    assert np.median([e.skewness / math.sqrt(e.blocks) for e in estimates]) < 0.07
    _assert_calibrated(_counts(estimates, truth), pinned)


def test_the_figure_an_assert_run_states_is_caught_90_percent_of_the_time() -> None:
    """The error ``varcheck assert`` reports for its own run (normal entries, d_k = 16, 5000
    products) is one run's figure, not the median: runs of the same size catch a truth off by
    it 90% ± binomial error of the time (the same two-sided test at p > 0.001)."""
    res = varcheck.verify(16, claim="dk", samples=5000, seed=3)
    estimates, truth = _builtin("normal", 16, 5000, seed=11)
    det = res.detectable
    above = sum(e.p_value(truth / (1 + det.above)) < ALPHA for e in estimates)
    below = sum(e.p_value(truth / (1 - det.below)) < ALPHA for e in estimates)
    for count in (above, below):
        assert binomtest(count, R, 0.9).pvalue > 0.001, (above, below)
    assert (above, below) == (365, 365)


def test_a_samplers_dependent_values_are_calibrated_as_well() -> None:
    """A user's sampler whose 64 values per call share rows of q and k."""
    estimates, truth = _sampler(seed=12)
    pinned = {"above": 355, "below": 371, "half above": 141, "half below": 153, "true": 15}
    _assert_calibrated(_counts(estimates, truth), pinned)


def test_a_run_at_the_planned_samples_has_the_planned_power() -> None:
    """Plan 5% at 90% for normal entries at d_k = 16 from R pilots (200 blocks each, at the
    block side the planned budget uses), then one run per pilot at its planned samples: the
    binding direction (above the claim, for light tails) is caught 90% ± binomial error of the
    time (the same two-sided test as above); the other direction at least as often."""
    q = parse_distribution("normal")
    th = dot_product_theory(16, q, q)
    plan = _default_plan(q, q, th, 12_800, None)
    rng = np.random.default_rng(21)
    m, a = draw_chunk(q, q, 16, plan, rng, blocks=200 * R)
    pilots = _estimates(m, a, plan.products_per_block)
    target = {"detect": 0.05, "power": 0.9, "alpha": ALPHA, "family": 1, "tolerance": None}
    floors = {"1000 samples": 1000}
    rows = [row_from_pilot(p, 16, 0.0, floors, target) for p in pilots]
    assert {_default_plan(q, q, th, r.samples, None).side for r in rows} == {plan.side}
    draws = (draw_chunk(q, q, 16, plan, rng, blocks=row.blocks) for row in rows)
    runs = [block_estimate(m, a, plan.products_per_block) for m, a in draws]
    above = sum(e.p_value(th.var / 1.05) < ALPHA for e in runs)
    below = sum(e.p_value(th.var / 0.95) < ALPHA for e in runs)
    assert binomtest(above, R, 0.9).pvalue > 0.001, above
    assert below >= above - 12, below  # 2 sd of the difference
    assert (above, below) == (353, 357)


def test_with_many_blocks_and_no_skew_the_figure_is_the_normal_approximation() -> None:
    """(z_{1−α/2} + z_P) r / (1 − (z + z) r) above, the same over 1 + (z + z) r below."""
    d = 1.959964 + 1.281552
    found = detectable_error(100.0, 1.0, blocks=10**7)
    assert found.above == pytest.approx(d * 0.01 / (1 - d * 0.01), rel=1e-4)
    assert found.below == pytest.approx(d * 0.01 / (1 + d * 0.01), rel=1e-4)
    assert found.error == found.above and not found.approximate
    by_width = detectable_error(100.0, half_width=1.959964, blocks=10**7)
    assert by_width.above == pytest.approx(found.above, rel=1e-5)


def test_right_skewed_values_lower_both_distances_and_a_family_raises_them() -> None:
    """Hall's correction moves both distances down by about 2.8 γ/√B standard errors; a row of a
    family of four is sized at α/4."""
    plain = detectable_error(1.0, 0.01, blocks=400)
    skewed = detectable_error(1.0, 0.01, blocks=400, skewness=1.0)
    assert skewed.above < plain.above and skewed.below > plain.below
    assert (plain.above - skewed.above) / 0.01 == pytest.approx(2.8 / 20, rel=0.25)
    four = detectable_error(1.0, 0.01, blocks=400, family=4)
    assert four.alpha == ALPHA / 4 and four.error > plain.error * 1.15


def test_a_tolerance_figure_lies_beyond_the_band_and_the_tost_power_matches_its_formula() -> None:
    """Fail side: (1 + T)/(1 − D r) − 1; pass side: 2Φ(T/r − z_{1−α}) − 1 (0.8 at T = 2.93 r)."""
    found = detectable_error(1.0, 0.01, blocks=10**6, tolerance=0.02)
    assert found.above > 0.02 + 0.032 and found.below > 0.02 + 0.030
    assert tost_power(1.0, 0.01, tolerance=0.0293, blocks=10**6) == pytest.approx(0.8, abs=0.005)
    assert tost_power(1.0, 0.01, tolerance=0.016, blocks=10**6) == 0.0


def test_a_small_pilot_inflates_the_plan_more() -> None:
    """Exact on average over pilots: 1.3% for 200 pilot blocks, 14.7% for 20 (docs/power.md)."""
    assert inflation(199) == pytest.approx(1.013, abs=0.002)
    assert inflation(19) == pytest.approx(1.147, abs=0.003)
    blocks, factor = planned_blocks(1.0, detect=0.05, skewness=0.0, pilot_blocks=200)
    assert factor == inflation(199)
    assert blocks == pytest.approx(1.013 * (3.241 * 1.05 / 0.05) ** 2, rel=0.02)


# --- growth laws of a user's sampler ------------------------------------------------------------


def _layer(rng: np.random.Generator, dk: int, calls: int, twice: bool = False) -> np.ndarray:
    """A vectorised attention layer's logits: 8 tokens of width 32, fresh LeCun weights per run,
    scaled by 1/√d_k (or, ``twice``, by 1/d_k: the bug of a scale applied twice)."""
    x = rng.standard_normal((calls, 8, 32))
    w_q, w_k = (rng.standard_normal((calls, 32, dk)) / math.sqrt(32) for _ in range(2))
    logits = (x @ w_q) @ (x @ w_k).transpose(0, 2, 1)
    return logits / (dk if twice else math.sqrt(dk))


def _layer_twice(rng: np.random.Generator, dk: int, calls: int) -> np.ndarray:
    return _layer(rng, dk, calls, twice=True)


@pytest.mark.parametrize(
    ("sampler", "exponent", "law"), [(_layer, 0.0, "1/sqrt(dk)"), (_layer_twice, -1.0, "1/dk")]
)
def test_a_sampler_sweep_fits_the_growth_of_var_over_the_claim_and_names_its_law(
    sampler, exponent: float, law: str
) -> None:
    """Var = 1 + 2/(n d_model) does not depend on d_k for the correct layer (b = 0, the claim's
    own exponent); scaling twice gives Var ∝ 1/d_k (b = −1), and the fit names 1/d_k."""
    from varcheck import sweep

    res = sweep("8..64", sampler=sampler, claim=1, samples=200 * 64, seed=3)
    fit = res.fit
    assert fit is not None and fit.expected == pytest.approx(0.0, abs=1e-12)
    low, high = fit.confidence_interval
    assert low < exponent < high and high - low < 0.1
    assert f"scale {law}," in res.fit_law
    assert res.to_dict()["fit"]["law"] == res.fit_law


def test_a_failing_sampler_at_one_dk_names_the_nearest_law_of_its_ratio() -> None:
    """The issue's "estimate 0.0156" at d_k = 64 reads as 1/d_k (1/√d_k applied twice); a pass
    names nothing."""
    from varcheck import verify

    res = verify(64, sampler=_layer_twice, claim=1, samples=200 * 64, seed=4)
    assert res.outcome == "fail" and "nearest law 1/dk (" in res.law
    assert "nearest law 1/dk (" in " ".join(str(res).split()) and res.to_dict()["law"] == res.law
    assert verify(64, sampler=_layer, claim=1, samples=200 * 64, seed=4).law is None
