"""verify(), `varcheck assert` and the pytest helper."""

from __future__ import annotations

import json
import math

import pytest

from varcheck import VarcheckError, verify
from varcheck.testing import assert_variance


@pytest.mark.parametrize(
    ("kwargs", "outcome"),
    [
        ({"claim": "dk"}, "pass"),
        ({"claim": "1", "scaled": True}, "pass"),
        ({"claim": "theory", "dist": "uniform:mean=1"}, "pass"),
        ({"claim": "dk*(1+rho**2)", "rho": 0.5}, "pass"),
        # the zero-mean formula applied to non-zero means: Var is 1.5 dk
        ({"claim": "dk", "dist": "normal:mean=0.5"}, "fail"),
        ({"claim": "1.03*dk"}, "fail"),
        ({"claim": "0.97*dk"}, "fail"),
        ({"claim": "dk", "tolerance": 0.02}, "pass"),
        ({"claim": "dk", "tolerance": 1e-5}, "inconclusive"),
        # an infinite fourth moment: no valid interval at any budget, so a budget of 10^5
        # products shows it as the default 10^6 does, at a tenth of the cost (the default
        # budget's run: `assert --dist t:df=3` in test_exit_codes)
        ({"claim": "dk", "dist": "t:df=3", "samples": 100_000}, "unreliable"),
        ({"claim": "dk", "dist": "t:df=2"}, "infinite"),
    ],
)
def test_outcomes(kwargs: dict, outcome: str) -> None:
    res = verify(64, seed=1, **kwargs)
    assert res.outcome == outcome, res
    assert (
        res.exit_code
        == {"pass": 0, "fail": 1, "inconclusive": 3, "unreliable": 4, "infinite": 4}[outcome]
    )


def test_inconclusive_says_how_many_more_samples() -> None:
    """A tolerance of 0.5% against a 1% interval is inconclusive; ``more_samples`` is what makes
    a half-width (shrinking as 1/sqrt(products)) reach the room left: the equivalence test's
    90% interval's to the band's nearer edge when the estimate is inside the band (a pass),
    else the 95% interval's to the band's nearer edge (where more data would fail it, the whole
    interval then outside the band). Seeds 0 and 1 put the estimate outside the band, 5 and 6
    inside: both branches."""
    branches = set()
    for seed in (0, 1, 5, 6):
        res = verify(64, claim="dk", tolerance=0.005, seed=seed)
        assert res.outcome == "inconclusive", res
        band = (64 * 0.995, 64 * 1.005)
        inside = band[0] < res.estimate < band[1]
        lo, hi = res.equivalence_interval if inside else res.confidence_interval
        half = (hi - lo) / 2
        branches.add(inside)
        if inside:
            room = min(res.estimate - band[0], band[1] - res.estimate)
        else:
            room = max(res.estimate - band[1], band[0] - res.estimate)
        assert res.more_samples is not None
        shrunk = half * math.sqrt(res.samples / (res.samples + res.more_samples))
        assert shrunk == pytest.approx(room, rel=1e-4), seed
    assert branches == {True, False}


@pytest.mark.parametrize("seed", range(20))
def test_tiny_tolerance_is_never_pass(seed: int) -> None:
    assert verify(16, claim="dk", tolerance=1e-5, seed=seed, precision=0.05).outcome != "pass"


def test_confidence_alpha_and_errors() -> None:
    assert verify(8, claim="dk", alpha=0.1, seed=1).confidence == pytest.approx(0.9)
    with pytest.raises(VarcheckError, match="disagree"):
        verify(8, claim="dk", alpha=0.1, confidence=0.95)
    with pytest.raises(VarcheckError, match="tolerance"):
        verify(8, claim="dk", tolerance=0)
    with pytest.raises(VarcheckError, match="must be > 0"):
        verify(8, claim="dk - 8")
    with pytest.raises(VarcheckError, match="one d_k"):
        verify("2..8", claim="dk")  # type: ignore[arg-type]


def test_pytest_helper_message() -> None:
    assert assert_variance(32, "dk", seed=1).outcome == "pass"
    with pytest.raises(AssertionError) as err:
        assert_variance(32, "dk", dist="normal:mean=0.5", seed=1)
    text = str(err.value)
    for fragment in (
        "FAIL",
        "claimed value 32",
        "interval",
        "p = ",
        "--seed 1",
        "varcheck assert --dk 32 --dist normal:mean=0.5",
    ):
        assert fragment in text
    assert assert_variance(32, "dk", tolerance=1e-6, seed=1, allow_inconclusive=True)


def test_cli_assert(run_cli) -> None:
    """Guards against `varcheck assert` reporting other numbers than verify() for the same
    arguments, or an outcome and exit code that do not follow its interval."""
    res = run_cli("assert", "--dk", "64", "--claim", "dk", "--seed", "1", "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["command"] == "assert" and doc["outcome"] == "pass" and doc["seed"] == 1
    api = verify(64, claim="dk", seed=1)
    assert doc["claim_value"] == doc["theory_value"] == 64.0  # standard normal: Var(q·k) = d_k
    assert (doc["estimate"], doc["ci_low"], doc["ci_high"]) == (
        api.estimate,
        *api.confidence_interval,
    )
    assert (doc["p_value"], doc["samples"]) == (api.p_value, api.samples)
    assert doc["ci_low"] <= 64.0 <= doc["ci_high"] and doc["p_value"] >= 0.05  # hence "pass"
    assert (doc["ci_high"] - doc["ci_low"]) / 2 <= 0.01 * doc["estimate"]  # default precision
    res = run_cli("assert", "--dk", "64", "--claim", "dk", "--tolerance", "1e-5", "--seed", "1")
    assert res.exit_code == 3, res.output
    assert "INCONCLUSIVE" in res.output and "more products" in res.output
    more = verify(64, claim="dk", tolerance=1e-5, seed=1).more_samples
    assert more is not None and f"about {more:,} more products" in res.output, res.output
    # Var(q·k) = 64 ((1 + 0.25)² - 0.25²) = 96 for mean 0.5: the claim 64 is 33 % low
    res = run_cli(
        "assert",
        "--dk",
        "64",
        "--claim",
        "dk",
        "--dist",
        "normal:mean=0.5",
        "--seed",
        "1",
        "--format",
        "json",
    )
    assert res.exit_code == 1, res.output
    doc = json.loads(res.output)
    assert doc["outcome"] == "fail" and doc["theory_value"] == pytest.approx(96.0)
    assert not doc["ci_low"] <= 64.0 <= doc["ci_high"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--dk", "64", "--claim", "import os"), "not a valid expression"),
        (("--dk", "64", "--claim", "dk**dk**dk"), "cannot be evaluated"),
        (("--dk", "0", "--claim", "dk"), "not in the range"),
        (("--claim", "dk"), "Missing option '--dk'"),
        (("--dk", "8", "--claim", "dk", "--tolerance", "2"), "out of range"),
    ],
)
def test_cli_assert_usage_errors(run_cli, args: tuple[str, ...], fragment: str) -> None:
    res = run_cli("assert", *args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output and len(res.output.strip().splitlines()) == 1


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, blocks: int) -> None:
    """Ctrl-C (a ``KeyboardInterrupt``) in the loop once ``blocks`` blocks are drawn (in the
    middle of a chunk: its first blocks count), in a row's own blocks and in shared ones (a
    zero-mean law's single row)."""
    from varcheck.core import estimation, parallel, shared_blocks

    drawn = [0]

    def ordered_map(*args):  # noqa: ANN002, ANN202 - parallel.ordered_map's own arguments
        for m, a in parallel.ordered_map(*args):
            room = blocks - drawn[0]
            drawn[0] += min(room, len(m))
            if room > 0:
                yield m[:room], a[:room]
            if room <= len(m):
                raise KeyboardInterrupt

    for module in (estimation, shared_blocks):
        monkeypatch.setattr(module, "ordered_map", ordered_map)


#: a law drawn in its own blocks, and one drawn in shared blocks
LAWS = ("normal:mean=0.5", "normal")


@pytest.mark.parametrize("dist", LAWS)
def test_interrupted_verify_keeps_its_partial_estimate(
    monkeypatch: pytest.MonkeyPatch, dist: str
) -> None:
    """Guards against Ctrl-C or SIGTERM in verify (and `varcheck assert`) losing the estimate
    under way (#17): as sweep does, it returns what the blocks drawn so far give, marked
    interrupted (exit code 130), with its interval and the outcome they support."""
    _interrupt_after(monkeypatch, 201)
    res = verify(64, claim="theory", dist=dist, precision=1e-3, seed=1)
    assert res.interrupted and res.exit_code == 130 and res.raw.blocks == 201
    # shared blocks are planned to reach the target in one round: they may have by then
    assert res.raw.stop_reason == "interrupted" or (dist == "normal" and res.raw.precision < 1e-3)
    lo, hi = res.confidence_interval
    assert lo < res.estimate < hi and res.outcome == "pass"
    doc = res.to_dict()
    assert doc["interrupted"] is True and doc["exit_code"] == 130 and doc["ci_low"] == lo
    assert list(doc)[:7] == [
        "command",
        "version",
        "seed",
        "confidence",
        "time_limited",
        "interrupted",
        "dk",
    ]


@pytest.mark.parametrize("dist", LAWS)
def test_interrupted_verify_below_min_blocks_has_no_interval(
    monkeypatch: pytest.MonkeyPatch, dist: str
) -> None:
    """Guards against an interval from too few blocks after an early Ctrl-C: the estimate is
    kept, without an interval or verdict, and the reason says why."""
    _interrupt_after(monkeypatch, 150)
    res = verify(64, claim="theory", dist=dist, seed=1)
    assert res.interrupted and res.exit_code == 130 and res.raw.blocks == 150
    assert res.outcome == "unreliable" and math.isfinite(res.estimate)
    assert all(math.isnan(x) for x in res.confidence_interval)
    assert res.reason.startswith(f"interrupted after {res.raw.blocks:,} independent blocks")


@pytest.mark.parametrize("dist", LAWS)
def test_interrupted_verify_before_two_blocks_raises(
    monkeypatch: pytest.MonkeyPatch, dist: str
) -> None:
    """Guards against a NaN 'result' when nothing was drawn: the interrupt goes on."""
    _interrupt_after(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        verify(64, claim="theory", dist=dist, seed=1)


def test_interrupted_verify_with_a_sampler() -> None:
    """The same for a user's sampler (core.sampler_blocks): the calls made so far count."""
    calls = [0]

    def logits(rng, dk):  # noqa: ANN001, ANN202
        calls[0] += 1
        if calls[0] > 3 + 449:  # three pilot calls, then 449 calls, every one of them kept
            raise KeyboardInterrupt
        return rng.standard_normal(dk)

    res = verify(16, claim=1, sampler=logits, precision=1e-4, seed=1)
    assert res.interrupted and res.exit_code == 130 and res.raw.blocks == 449
    assert res.outcome == "pass" and res.confidence_interval.low < 1 < res.confidence_interval.high


@pytest.mark.parametrize(("blocks", "verdict"), [(250, "consistent"), (150, "unreliable")])
def test_a_sweeps_row_cut_short_keeps_its_blocks(
    monkeypatch: pytest.MonkeyPatch, blocks: int, verdict: str
) -> None:
    """Guards against a sweep interrupted in a row of its own blocks printing 'over 0 rows'
    (#17): the row under way is kept, stop reason 'interrupted', with a caution and the table's
    (partial) mark; with fewer than 200 blocks it has no valid interval (unreliable)."""
    import io

    from rich.console import Console

    from varcheck import sweep
    from varcheck.checks.render import render_sweep

    _interrupt_after(monkeypatch, blocks)
    res = sweep(64, dist="normal:mean=0.5", precision=1e-3, seed=1)
    (row,) = res.rows
    assert res.interrupted and res.exit_code == 130 and row.estimate.blocks == blocks
    assert row.estimate.stop_reason == "interrupted" and row.verdict == verdict
    assert row.caution.startswith("interrupted: from the blocks drawn before the signal")
    console = Console(file=io.StringIO(), width=240)
    render_sweep(res, "table", console)
    text = console.file.getvalue()
    assert "(partial)" in text and "Interrupted:" in text
    assert ("no valid CI" in text) is (verdict == "unreliable")
    assert "E[(q·k)^4] is infinite" not in text  # the note for another kind of unreliable
