"""`varcheck train`: hand-written gradients, and fixed against adaptive β on the seeded run."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from scipy.stats import binomtest

from varcheck.core.logit_variance import weight_sigma
from varcheck.errors import VarcheckError
from varcheck.paper.training import (
    LookupBatch,
    Params,
    TrainConfig,
    init_params,
    logit_variance_interval,
    loss_and_grads,
    make_task,
    scheme_beta,
    train,
)


def test_lookup_batch_holds_the_matching_item() -> None:
    cfg = TrainConfig(dx=6, dk=4, dv=3, memory=5, keys=9, values=4)
    task = make_task(cfg, seed=2)
    b = task.sample(np.random.default_rng(3), 7)
    assert isinstance(b, LookupBatch)
    assert b.query.shape == (7, 6) and b.items.shape == (7, 5, 6)
    # the matching item and the query share the key embedding, so their difference is the
    # target's value embedding minus the query's decoy value embedding
    diff = b.items[np.arange(7), b.match] - b.query
    for d, target in zip(diff, b.target, strict=True):
        assert np.isclose(task.val_emb[target] - task.val_emb, d).all(axis=1).any()


@pytest.mark.parametrize("beta", [0.3, 1.7])
@pytest.mark.parametrize("name", ["w_q", "w_k", "w_v", "w_o"])
def test_gradients_match_central_differences(name: str, beta: float) -> None:
    cfg = TrainConfig(dx=6, dk=4, dv=3, memory=5, keys=9, values=4)
    task = make_task(cfg, seed=2)
    params = init_params(cfg, seed=2)
    # larger weights than at init so that the softmax is far from uniform
    for w in params.arrays().values():
        w *= 3.0
    batch = task.sample(np.random.default_rng(7), 11)
    _, grads = loss_and_grads(params, batch, beta)
    w = params.arrays()[name]
    rng = np.random.default_rng(3)
    # Central differences have truncation error O(h²)·f''' ≈ 1e-10 and rounding error
    # O(ε/h) ≈ 1e-10 at h = 1e-5, both far below the 1e-6 tolerance; a wrong term in the
    # hand-written gradient is an O(1) relative error.
    h = 1e-5
    for idx in [tuple(rng.integers(0, s) for s in w.shape) for _ in range(6)]:
        old = w[idx]
        w[idx] = old + h
        up, _ = loss_and_grads(params, batch, beta)
        w[idx] = old - h
        down, _ = loss_and_grads(params, batch, beta)
        w[idx] = old
        numeric = (up - down) / (2 * h)
        assert grads[name][idx] == pytest.approx(numeric, rel=1e-6, abs=1e-9)


def test_scheme_betas_at_lecun_init_are_near_one_over_sqrt_dk() -> None:
    cfg = TrainConfig()
    params = init_params(cfg, seed=0)
    fixed = scheme_beta("fixed", params, 1.0, cfg.dk)
    assert fixed == 0.25
    # lecun: d_x σ_W² = 1 up to the sampling of 512 entries (relative sd of σ̂² ≈ √(2/512))
    assert scheme_beta("paper", params, 1.0, cfg.dk) == pytest.approx(fixed, rel=0.15)
    with pytest.raises(VarcheckError, match="beta scheme"):
        scheme_beta("cosine", params, 1.0, cfg.dk)


@pytest.fixture(scope="module")
def seeded_run():
    """The default experiment (600 steps, 3 schemes) on seed 1, as the docs show it."""
    return train(TrainConfig(every=30), seed=1)


def test_runs_share_data_and_initial_weights(seeded_run) -> None:
    starts = [run.steps[0] for run in seeded_run.runs]
    assert len({(s.sigma_wq, s.sigma_wk, s.sigma_x) for s in starts}) == 1
    assert [s.step for s in seeded_run.run("fixed").steps] == list(range(0, 601, 30))


def test_the_task_is_learned(seeded_run) -> None:
    for run in seeded_run.runs:
        assert run.steps[0].accuracy < 0.25  # chance is 1/8
        assert run.final.accuracy > 0.95, run.scheme
        assert run.final.entropy < math.log(8) - 0.3  # attention moved off uniform


def test_fixed_beta_drifts_while_adaptive_beta_stays_near_one(seeded_run) -> None:
    fixed, paper, exact = (seeded_run.run(s) for s in ("fixed", "paper", "exact"))
    # Fixed β: the weights grow (σ_W × 1.6) and the measured logit variance grows with them,
    # from about 1 to above 6, as the σ-based formula predicts (β fixed, σ_Wq σ_Wk up).
    assert fixed.final.sigma_wq > 1.4 * fixed.steps[0].sigma_wq
    assert fixed.steps[0].measured_var < 1.5
    assert fixed.final.measured_var > 6.0
    measured = [s.measured_var for s in fixed.steps]
    predicted = [s.predicted_var_paper for s in fixed.steps]
    assert np.corrcoef(np.log(measured), np.log(predicted))[0, 1] > 0.95
    # Adaptive β: the weights grow even more (β cancels their scale, so nothing stops the
    # gradient from inflating it) but the logit variance stays within a factor 2 of 1 at
    # every recorded step; the exact variant within 25 %.
    assert paper.final.sigma_wq > 2 * fixed.final.sigma_wq
    assert all(0.5 < s.measured_var < 2.0 for s in paper.steps)
    assert all(0.75 < s.measured_var < 1.25 for s in exact.steps)
    assert all(s.predicted_var_paper == pytest.approx(1.0) for s in paper.steps)
    assert all(s.predicted_var_exact == pytest.approx(1.0) for s in exact.steps)
    # the price: pinned logit variance caps how peaked attention gets
    assert paper.final.match_weight < fixed.final.match_weight - 0.2


def test_paper_beta_takes_the_weights_rms() -> None:
    """Guards against train's paper scheme measuring σ_W as the mean-removed sd while beta and
    project take the RMS (issue #22, item 1): weights with a common mean tell them apart."""
    cfg = TrainConfig()
    p = init_params(cfg, seed=0)
    shifted = Params(p.w_q + 0.2, p.w_k + 0.2, p.w_v, p.w_o)
    rms_q, rms_k = (float(np.sqrt(np.mean(w**2))) for w in (shifted.w_q, shifted.w_k))
    expected = 1.0 / math.sqrt((cfg.dx * rms_q**2) * (cfg.dx * rms_k**2) * cfg.dk)
    assert scheme_beta("paper", shifted, 1.0, cfg.dk) == pytest.approx(expected, rel=1e-12)
    step = train(TrainConfig(steps=2, every=1, eval_size=16), seed=0).run("paper").steps[0]
    assert step.sigma_wq == pytest.approx(weight_sigma(p.w_q), rel=1e-15)


def test_measured_variance_comes_from_fresh_sequences_with_an_interval() -> None:
    """Guards against measuring on one fixed evaluation batch without an error (issue #22,
    item 6). With a learning rate of 1e-9 the weights stay put for 20 steps, so a fixed batch
    would read the same variance at steps 0, 10 and 20 (to ~1e-8); fresh sequences read
    values that differ by their sampling error, each inside its own interval."""
    cfg = TrainConfig(steps=20, every=10, lr=1e-9, eval_size=256)
    res = train(cfg, schemes=("fixed", "exact"), seed=3)
    for run in res.runs:
        values = [s.measured_var for s in run.steps]
        assert max(values) - min(values) > 1e-3 * values[0], run.scheme
        for s in run.steps:
            lo, hi = s.measured_var_ci
            assert lo < s.measured_var < hi
            # the half-width is a few per cent at 256 sequences, not zero and not all of it
            assert 0.005 < (hi - lo) / (2 * s.measured_var) < 0.5
    # both schemes are measured on the same sequences at a step (common random numbers):
    # at step 0 their weights agree, so the logits differ only by β, and so does the variance
    fixed0, exact0 = res.run("fixed").steps[0], res.run("exact").steps[0]
    ratio = (exact0.beta / fixed0.beta) ** 2
    assert exact0.measured_var == pytest.approx(ratio * fixed0.measured_var, rel=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_measured_variance_interval_covers_at_its_level(scale: float) -> None:
    """Guards against an interval that treats the logits of one sequence as independent (too
    narrow: they share the query) or is otherwise miscalibrated. 400 batches of 128 fresh
    sequences at fixed weights (W_k scaled for heavier tails); the truth is the estimate from
    400 · 128 further sequences, whose own error is 1/20 of one batch's. Coverage is checked
    against the binomial law of 400 trials at 95 % (two-sided p > 0.001)."""
    cfg = TrainConfig()
    task, p = make_task(cfg, seed=4), init_params(cfg, seed=4)
    w_k = p.w_k * scale + 0.5 * p.w_q  # partly aligned: structure a fixed batch would hide

    def logits(rng: np.random.Generator, n: int) -> np.ndarray:
        b = task.sample(rng, n)
        return 0.25 * np.einsum("bd,bmd->bm", b.query @ p.w_q, b.items @ w_k)

    rng = np.random.default_rng(int(scale * 7))
    truth, _ = logit_variance_interval(logits(rng, 400 * 128))
    hits = 0
    for _ in range(400):
        _, (lo, hi) = logit_variance_interval(logits(rng, 128))
        hits += lo <= truth <= hi
    assert binomtest(hits, 400, 0.95).pvalue > 1e-3, hits


def test_train_is_reproducible() -> None:
    cfg = TrainConfig(steps=20, every=10, eval_size=64)
    assert train(cfg, seed=5) == train(cfg, seed=5)
    assert train(cfg, seed=5) != train(cfg, seed=6)


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        (TrainConfig(steps=0), "steps"),
        (TrainConfig(lr=0.0), "lr"),
        (TrainConfig(memory=8, keys=4), "keys"),
        (TrainConfig(init="glorot"), "init"),
    ],
)
def test_train_validates(config: TrainConfig, fragment: str) -> None:
    with pytest.raises(VarcheckError, match=fragment):
        train(config, seed=0)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (TrainConfig(steps=0), "steps must be a whole number in 1..100000, got 0"),
        (TrainConfig(dx=1), "dx must be a whole number in 2..4096, got 1"),
        (TrainConfig(batch=True), "batch must be a whole number in 1..100000, got True"),
        (TrainConfig(every=2.0), "every must be a whole number in 1..100000, got 2.0"),
        (TrainConfig(eval_size=8), "eval_size must be a whole number in 16..1000000, got 8"),
        (
            TrainConfig(memory=8, keys=4),
            "keys must be a whole number >= memory (8) so that the keys of a sequence can be "
            "distinct, got 4",
        ),
        (TrainConfig(lr=2.0), "lr must be in (0, 1], got 2.0"),
    ],
)
def test_train_refusals_word_for_word(config: TrainConfig, message: str) -> None:
    with pytest.raises(VarcheckError, match=f"^{re.escape(message)}$"):
        train(config, seed=0)


def test_train_takes_numpy_whole_numbers_as_ints() -> None:
    cfg = TrainConfig(steps=np.int64(4), every=np.int64(2), eval_size=np.int64(32))
    res = train(cfg, schemes=("fixed",), seed=1)
    assert res == train(TrainConfig(steps=4, every=2, eval_size=32), schemes=("fixed",), seed=1)
    assert type(res.config.steps) is int


def test_train_refuses_unknown_schemes() -> None:
    with pytest.raises(VarcheckError, match="beta scheme"):
        train(TrainConfig(steps=2), schemes=("fixed", "cosine"), seed=0)


# --- the command -------------------------------------------------------------------------------

SMALL = ("train", "--steps", "40", "--every", "20", "--eval-size", "64", "--seed", "8")


def test_train_cli_json(run_cli) -> None:
    res = run_cli(*SMALL, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["command"] == "train" and doc["seed"] == 8 and doc["version"]
    assert doc["schemes"] == "fixed,paper,exact"
    assert [(r["scheme"], r["step"]) for r in doc["rows"][:3]] == [
        ("fixed", 0),
        ("fixed", 20),
        ("fixed", 40),
    ]
    keys = {"sigma_wq", "sigma_wk", "predicted_var_paper", "measured_var", "entropy", "loss"}
    assert keys <= set(doc["rows"][0]) and len(doc["summary"]) == 3
    assert run_cli(*SMALL, "--format", "json").output == res.output
    # issue #22: the measured variance carries its interval, and σ_W says which σ it is
    assert doc["sigma_w_kind"] == "rms" and doc["confidence"] == 0.95
    for r in doc["rows"]:
        assert r["measured_var_ci_low"] < r["measured_var"] < r["measured_var_ci_high"]
    wide = json.loads(run_cli(*SMALL, "--confidence", "0.99", "--format", "json").output)
    assert all(
        w["measured_var_ci_high"] - w["measured_var_ci_low"]
        > r["measured_var_ci_high"] - r["measured_var_ci_low"]
        for w, r in zip(wide["rows"], doc["rows"], strict=True)
    )


def test_train_cli_default_eval_size_is_the_api_default(run_cli) -> None:
    """The CLI states its default without importing numpy; it must be the API's."""
    from varcheck.cli.train import command

    option = next(p for p in command.params if p.name == "eval_size")
    assert option.default == TrainConfig().eval_size


def test_train_cli_table_csv_plot(run_cli, tmp_path) -> None:
    path = tmp_path / "train.png"
    res = run_cli(*SMALL, "--beta", "fixed,exact", "--plot", str(path))
    assert res.exit_code == 0, res.output
    assert (
        "seed 8" in res.output and "fixed β" in res.output and "paper (σ-based)" not in res.output
    )
    assert "σ_Wq (RMS)" in res.output and "Var meas. [95% CI]" in res.output
    assert "fresh sequences" in res.output
    assert path.stat().st_size > 1000
    csv_out = run_cli(*SMALL, "--format", "csv-meta").output
    assert csv_out.startswith("# command=train") and "scheme,step" in csv_out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--beta", "fixed,cosine"), "not accepted"),
        (("--beta", "fixed,fixed"), "distinct"),
        (("--lr", "0"), "out of range"),
        (("--init", "glorot"), "not accepted"),
        (("--memory", "8", "--keys", "4"), "keys"),
        (("--plot", "/nonexistent-dir/t.png"), "does not exist"),
        (("--every", "0"), "--every"),
        (("--format", "yaml"), "--format"),
    ],
)
def test_train_cli_bad_usage(run_cli, args, fragment: str) -> None:
    res = run_cli("train", "--steps", "2", *args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_train_outcome_is_done_or_interrupted(seeded_run) -> None:
    """train tests nothing (#18): its JSON's outcome says only whether it went to its end."""
    assert (seeded_run.outcome, seeded_run.exit_code) == ("done", 0)
    doc = seeded_run.to_dict()
    assert (doc["outcome"], doc["exit_code"]) == ("done", 0)
    stopped = dataclasses.replace(seeded_run, interrupted=True)
    assert (stopped.outcome, stopped.exit_code) == ("interrupted", 130)
    late = dataclasses.replace(seeded_run, time_limited=True)  # a time cap is not a failure
    assert (late.outcome, late.exit_code) == ("done", 0)
