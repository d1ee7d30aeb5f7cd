"""``varcheck probe`` at the underflow edge of the output format (reviewer R1's findings).

* a call whose head has no query with two readable keys gave a NaN scale, which passed; it is
  now refused with one line, and a wrong scale there fails;
* the zeros a steep ALiBi bias leaves past a causal mask are underflow when the fitted bias
  predicts their weights below the formats' rounding floor (a correct float16 causal ALiBi
  kernel was mask ``other`` and failed ``--causal``);
* a sliding window, whose masked keys would have weights far above that floor, is ``other``
  (float16 windows were ``causal`` with "N far keys underflowed").

The kernels live in tests/data/kernels/underflow_kernels.py.
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import varcheck
from varcheck.core.estimation import MIN_BLOCKS
from varcheck.core.probe.analysis import HeadStructure, call_slopes
from varcheck.core.probe.formats import FLOOR_ROUNDINGS, FORMATS
from varcheck.errors import VarcheckError

DATA = Path(__file__).parent / "data" / "kernels"
sys.path.insert(0, str(DATA))
import underflow_kernels as uk  # noqa: E402

#: the readings below hold at every seed; seeds 0-4 in every run, 5-19 with `make test-long`
SEEDS = [
    pytest.param(range(5), id="seeds-0-4"),
    pytest.param(range(5, 20), id="seeds-5-19", marks=pytest.mark.long),
]
#: 64 x 64 weights at d_k = 64, a fixed budget of 20 calls: enough for the readings (masks,
#: biases, scales: the pilot's and the calls' means), too few for an interval (a verdict needs
#: MIN_BLOCKS calls, a second a probe here)
SIZE = {"queries": 64, "keys": 64, "samples": 20}


def _probe(kernel, seed: int, **kw):  # noqa: ANN001, ANN202
    return varcheck.probe(kernel, 64, **{**SIZE, "seed": seed, **kw})


# --- (1) no NaN scale -------------------------------------------------------------------------


def test_a_head_with_no_readable_pair_has_no_slope() -> None:
    """call_slopes gives NaN for such a head (the measurement refuses the call)."""
    used = np.zeros((4, 4), dtype=bool)
    used[1, :2] = True
    head = HeadStructure(
        valid=np.ones((4, 4), dtype=bool),
        used=used,
        tiny=1e-4,
        mask="none",
        masked=0,
        underflowed=0,
        bias=None,
        bias_size=0.0,
        bias_kind="none",
        alibi_slope=math.nan,
        curved=False,
        curvature=0.0,
        linearity_residual=0.0,
        explained=1.0,
        scale=1.0,
    )
    x = np.arange(16.0).reshape(1, 4, 4)
    w = np.full((1, 4, 4), 0.25)
    assert np.isfinite(call_slopes(w, x, [head], curved=False, unit=1.0)).all()
    w[0, 1, 1] = 1e-6  # the pair's second key is below tiny in this call
    assert np.isnan(call_slopes(w, x, [head], curved=False, unit=1.0)).all()


def test_r1_wrong_scale_at_the_float16_edge_fails() -> None:
    """R1's repro: scale × 2, float16 output, ALiBi slope 8, seed 4 passed with scale NaN."""
    kernel = functools.partial(uk.causal_alibi, slope=8.0, f=2.0)
    r = varcheck.probe(kernel, 64, seed=4)
    assert math.isfinite(r.scale) and r.outcome == "fail"
    assert r.ratio == pytest.approx(2.0, rel=0.01)


@pytest.mark.statistical
@pytest.mark.parametrize("seeds", SEEDS)
@pytest.mark.parametrize("f", [0.125, 0.5, 2.0])
def test_no_scale_is_nan_at_the_float16_edge(f: float, seeds: range) -> None:
    """R1's settings (ALiBi slope 8, float16 output): the wrong scale read (a finite ratio f to
    the expected one, which fails: above), or refused."""
    kernel = functools.partial(uk.causal_alibi, slope=8.0, f=f)
    for seed in seeds:
        try:
            r = varcheck.probe(kernel, 64, seed=seed, samples=20)
        except VarcheckError as exc:
            assert "underflow edge" in str(exc)
            continue
        assert math.isfinite(r.scale) and r.ratio == pytest.approx(f, rel=0.01), (seed, r.scale)


def test_a_call_with_no_readable_pair_is_refused_in_one_line(run_cli) -> None:  # noqa: ANN001
    """ALiBi slope 8.5 in float16: a pair is readable in the pilot, not in some later call."""
    target = f"{DATA / 'underflow_kernels.py'}:causal_alibi"
    res = run_cli("probe", target, "--dk", "64", "--arg", "slope=8.5", "--seed", "1")
    assert res.exit_code == 2 and res.stdout == "", res.stdout
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "underflow edge" in lines[0] and "in a call (head 0)" in lines[0], lines[0]
    assert "float32" in lines[0] and "fewer keys" in lines[0]


# --- (2) a causal mask under a steep ALiBi bias -----------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("seeds", SEEDS)
@pytest.mark.parametrize("slope", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_a_correct_float16_causal_alibi_kernel_keeps_its_causal_mask(
    slope: float, seeds: range
) -> None:
    """Failed 10/10 seeds at slopes 0.5 and 1 (mask other, so --causal failed); 2 to 8 were
    refused or other. Now the mask is causal at every seed (no causal fail), and the scale's
    ratio to 1/√d_k is 1 to the format's resolution."""
    kernel = functools.partial(uk.causal_alibi, slope=slope)
    for seed in seeds:
        r = _probe(kernel, seed, dtype="float16", causal=True)
        d = r.diagnostics
        assert (d.mask, d.bias, r.outcome) == ("causal", "alibi", "unreliable"), (seed, d.notes)
        assert d.alibi_slopes == pytest.approx((-slope,), rel=0.01)
        # within the interval's floor: the slope's bias from float16's rounding is below it
        assert abs(r.ratio - 1) < FLOOR_ROUNDINGS * FORMATS["float16"].u, (seed, r.ratio)


@pytest.mark.parametrize("slope", [0.5, 1.0])
def test_a_correct_float16_causal_alibi_kernel_passes_causal(slope: float) -> None:
    kernel = functools.partial(uk.causal_alibi, slope=slope)
    r = _probe(kernel, 0, dtype="float16", causal=True, samples=MIN_BLOCKS)
    assert (r.diagnostics.mask, r.outcome) == ("causal", "pass"), r.reason


def test_underflowed_keys_are_counted() -> None:
    d = _probe(functools.partial(uk.causal_alibi, slope=1.0), 0, dtype="float16").diagnostics
    assert d.mask == "causal" and d.underflowed > 0
    assert "underflowed under the steep position bias" in d.notes[0]


def test_a_flush_to_zero_kernel_keeps_its_causal_mask() -> None:
    """float32 weights below the smallest normal flushed to 0 (no subnormal ever shows): the
    floor is the smallest normal, not half the smallest subnormal (17 nats lower)."""
    kernel = functools.partial(uk.causal_alibi, slope=2.0, dtype="float32", ftz=True)
    r = _probe(kernel, 1, dtype="float32", causal=True, samples=MIN_BLOCKS)
    assert (r.diagnostics.mask, r.outcome) == ("causal", "pass"), r.diagnostics.notes
    assert r.diagnostics.underflowed > 0


# --- (3) sliding windows ----------------------------------------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("seeds", SEEDS)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("slope,width", [(0.0, 16), (0.1, 40), (0.3, 16)])
def test_a_sliding_window_is_not_taken_for_underflow(
    dtype: str, slope: float, width: int, seeds: range
) -> None:
    """float16 windows with a mild bias were named causal, "N far keys underflowed"."""
    kernel = functools.partial(uk.window, width=width, slope=slope, dtype=dtype)
    for seed in seeds:
        d = _probe(kernel, seed, dtype=dtype).diagnostics
        assert (d.mask, d.underflowed) == ("other", 0), (seed, d.notes)


def test_r1_window_repro_is_other_and_fails_causal() -> None:
    """R1's repro: causal, window 40, ALiBi 0.1, float16, seed 1 passed as causal."""
    kernel = functools.partial(uk.window, width=40, slope=0.1)
    r = varcheck.probe(kernel, 64, seed=1, dtype="float16", causal=True)
    assert (r.diagnostics.mask, r.diagnostics.underflowed, r.outcome) == ("other", 0, "fail")


def test_a_window_past_the_subnormals_is_a_mask() -> None:
    """float32, ALiBi slope 2: keys 44 to 46 back are subnormal (so the kernel rounds, not
    flushes) and a window masks 47 back and beyond, whose weights (~1e-41) would be subnormal
    too: not underflow."""
    kernel = functools.partial(uk.window, width=47, slope=2.0, dtype="float32")
    d = _probe(kernel, 1, dtype="float32").diagnostics
    assert (d.mask, d.underflowed) == ("other", 0), d.notes
